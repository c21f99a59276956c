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
# The one v2 the module proxy serves here. Security flaws are reported for
# it; it runs only as the test cluster's NetworkPolicy controller, on a
# bridge nothing outside this machine reaches. The SIG's own controller
# (sigs.k8s.io/kube-network-policies) needs nftables' queue statement,
# which kernels built without CONFIG_NFT_QUEUE (this one) lack.
kube_router_version=${KUBE_ROUTER_VERSION:-v2.1.0}
cache=${RL_CACHE_DIR:-$HOME/.cache/runledger}
out=$cache/k8s-$version
bin=$out/bin
tools=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
    coredns kube-router)

command -v go >/dev/null 2>&1 || die "go is not installed"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
# The compiler collects garbage less often: about a sixth less CPU for
# these builds (CoreDNS: 184 s instead of 224 s) for about 7 % more memory.
export GOGC=${GOGC:-400}

missing=()
for t in "${tools[@]}"; do
    [ -x "$bin/$t" ] || missing+=("$t")
done

if [ "${#missing[@]}" -gt 0 ]; then
    t0=$SECONDS
    mod=$out/mod
    mkdir -p "$mod" "$bin"
    staging_minor="v0.${version#v1.}"
    # The staging modules are whatever k8s.io/kubernetes's own go.mod
    # replaces with a path under ./staging.
    gomod=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$version" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
    [ -f "$gomod" ] || die "no go.mod for k8s.io/kubernetes@$version"
    # CoreDNS and kube-router join the same module: their k8s.io/* and
    # gRPC packages are then compiled once for all eight binaries, not
    # three times at three versions (about a third of the cold build).
    # They build against Kubernetes' client libraries of this release
    # instead of their own pins; the cluster's DNS and NetworkPolicy tests
    # (run.sh) are what shows they work.
    {
        echo "module runledger.test/k8sbuild"
        echo
        sed -n 's/^go \(.*\)/go \1/p' "$gomod" | head -n 1
        echo
        echo "require ("
        echo "	k8s.io/kubernetes $version"
        echo "	github.com/coredns/coredns $coredns_version"
        echo "	github.com/cloudnativelabs/kube-router/v2 $kube_router_version"
        echo ")"
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
	_ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
	_ "github.com/coredns/coredns"
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
        case $t in
        coredns) pkgs+=("github.com/coredns/coredns") ;;
        kube-router) pkgs+=("github.com/cloudnativelabs/kube-router/v2/cmd/kube-router") ;;
        *) pkgs+=("k8s.io/kubernetes/cmd/$t") ;;
        esac
    done
    echo "k8s/build.sh: building ${missing[*]} (Kubernetes $version, CoreDNS" \
        "$coredns_version, kube-router $kube_router_version; about 6 minutes on 2 cores)" >&2
    (cd "$mod" && go build -trimpath -ldflags "$ldflags" -o "$bin/" "${pkgs[@]}")
    # kube-router's own --version is empty when built outside its release.
    echo "$kube_router_version" >"$bin/kube-router.version"
    echo "k8s/build.sh: built in $((SECONDS - t0))s" >&2
fi

for t in "${tools[@]}"; do
    [ -x "$bin/$t" ] || die "$t was not built"
done
echo "$bin"
