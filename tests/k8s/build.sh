#!/usr/bin/env bash
# build.sh — builds the Kubernetes binaries the cluster in cluster.sh runs
# (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy, kubectl) from the k8s.io/kubernetes module with the installed
# Go, CoreDNS and kube-router (for its NetworkPolicy controller), into
# $RL_CACHE_DIR/k8s-<version>/bin. A second run finds them there and builds
# nothing.
#
# k8s.io/kubernetes names its staging modules (k8s.io/api, k8s.io/client-go,
# ...) as v0.0.0 and replaces them with ./staging/src/..., which only works
# inside its own repository. A small module of our own requires it and
# replaces each staging module with its published v0.<minor>.<patch>, which
# is the same source.
#
# Environment:
#   K8S_VERSION      default v1.34.4 (cgroup v1 machines need 1.34.x: newer
#                    kubelets refuse cgroup v1 unless told otherwise)
#   COREDNS_VERSION  default v1.12.4
#   KUBE_ROUTER_VERSION  default v2.1.0
#   RL_CACHE_DIR     default ~/.cache/runledger
set -euo pipefail

die() {
    echo "k8s/build.sh: $*" >&2
    exit 1
}

version=${K8S_VERSION:-v1.34.4}
coredns_version=${COREDNS_VERSION:-v1.12.4}
# The one v2 the module proxy serves here.
kube_router_version=${KUBE_ROUTER_VERSION:-v2.1.0}
cache=${RL_CACHE_DIR:-$HOME/.cache/runledger}
out=$cache/k8s-$version
bin=$out/bin
tools=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

command -v go >/dev/null 2>&1 || die "go is not installed"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

missing=()
for t in "${tools[@]}"; do
    [ -x "$bin/$t" ] || missing+=("$t")
done

if [ "${#missing[@]}" -gt 0 ]; then
    mod=$out/mod
    mkdir -p "$mod" "$bin"
    staging_minor="v0.${version#v1.}"
    # The staging modules are whatever k8s.io/kubernetes's own go.mod
    # replaces with a path under ./staging.
    gomod=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$version" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
    [ -f "$gomod" ] || die "no go.mod for k8s.io/kubernetes@$version"
    {
        echo "module runledger.test/k8sbuild"
        echo
        sed -n 's/^go \(.*\)/go \1/p' "$gomod" | head -n 1
        echo
        echo "require k8s.io/kubernetes $version"
        echo
        sed -n 's:^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/src/.*:\1:p' "$gomod" |
            sort -u | while read -r m; do
            echo "replace $m => $m $staging_minor"
        done
    } >"$mod/go.mod"
    cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubectl/pkg/cmd"
)
GO
    (cd "$mod" && go mod tidy -e >/dev/null 2>"$mod/tidy.log") ||
        { cat "$mod/tidy.log" >&2; die "go mod tidy failed"; }
    # The version the binaries report (kubectl version, the node's
    # kubeletVersion, helm's kubeVersion checks).
    minor=${version#v1.}
    minor=${minor%%.*}
    ldflags="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
        ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    pkgs=()
    for t in "${missing[@]}"; do
        pkgs+=("k8s.io/kubernetes/cmd/$t")
    done
    echo "k8s/build.sh: building ${missing[*]} $version (about 5 minutes on 2 cores)"
    (cd "$mod" && go build -trimpath -ldflags "$ldflags" -o "$bin/" "${pkgs[@]}")
fi

if [ ! -x "$bin/coredns" ]; then
    cmod=$out/coredns-mod
    mkdir -p "$cmod"
    echo "k8s/build.sh: building coredns $coredns_version"
    (cd "$cmod" && GOBIN=$bin go install -trimpath -ldflags "-s -w" \
        "github.com/coredns/coredns@$coredns_version")
fi

# kube-router, for its NetworkPolicy controller only (cluster.sh policy):
# the bridge plugin enforces no policy. Its go.mod has no replace
# directive, so `go install` builds it as published.
if [ ! -x "$bin/kube-router" ]; then
    kmod=$out/kube-router-mod
    mkdir -p "$kmod"
    echo "k8s/build.sh: building kube-router $kube_router_version (about 2 minutes on 2 cores)"
    (cd "$kmod" && GOBIN=$bin go install -trimpath -ldflags "-s -w" \
        "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$kube_router_version")
    # Its own --version is empty when built with `go install`.
    echo "$kube_router_version" >"$bin/kube-router.version"
fi

for t in "${tools[@]}" coredns kube-router; do
    [ -x "$bin/$t" ] || die "$t was not built"
done
echo "$bin"
