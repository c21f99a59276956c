#!/usr/bin/env bash
# oauth2_proxy.sh — the oauth2-proxy the console's proxy-mode test runs in
# front of `runledger console`: pinned, built once from the Go module proxy
# into $RL_CACHE_DIR/bin/oauth2-proxy (default <repo>/.cache), as
# tests/helm/check.sh builds helm. `make deps` runs `install`; the test
# only asks for the `path` and fails (under RL_REQUIRE_SERVICES=1) when it
# is missing, so the build's minutes are never in its budget.
#
# Usage:
#   oauth2_proxy.sh install   build it unless the cached binary is this version
#   oauth2_proxy.sh path      print the cached binary's path; exit 1 when it is
#                             missing or another version
#
# Go: the `go` on PATH. oauth2-proxy's go.mod asks for a newer Go than
# Debian 12's golang (1.19); a go of 1.21 or later fetches the toolchain
# the module asks for from the module proxy by itself (GOTOOLCHAIN=auto);
# an older one downloads that toolchain as the module golang.org/toolchain
# into $RL_CACHE_DIR/go-<version> and builds with it.
#
# Environment: RL_CACHE_DIR; GOMODCACHE, GOCACHE, GOPROXY as the go command
# uses them; RL_GO_FETCH_TOOLCHAIN=1 takes the older go's path with any go
# (to check that path on a machine with a new one).
set -euo pipefail

OAUTH2_PROXY_VERSION=v7.15.6
OAUTH2_PROXY_MODULE=github.com/oauth2-proxy/oauth2-proxy/v7

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${RL_CACHE_DIR:-$root/.cache}
bin=$cache/bin/oauth2-proxy

die() {
    echo "oauth2_proxy.sh: $*" >&2
    exit 1
}
log() { echo "oauth2_proxy.sh: $*" >&2; }

# The version the cached binary reports ("oauth2-proxy v7.15.6 (built
# with go1.26.0)"), or nothing.
cached_version() {
    [ -x "$bin" ] || return 0
    "$bin" --version 2>/dev/null | sed -n 's/^oauth2-proxy \(v[^ ]*\).*/\1/p'
}

# Minor of a "go1.N..." version string (0 when unreadable).
go_minor() {
    local v=${1#go1.}
    v=${v%%[!0-9]*}
    echo "${v:-0}"
}

# A Go toolchain of the version the module's go.mod names, downloaded as
# the module golang.org/toolchain by a go too old to switch by itself.
# Module zips keep no file modes, so the copy gets its executables back.
fetched_go() { # <go version, e.g. 1.26.0>
    local want=$1 dir=$cache/go-$1 arch src tmp
    if [ -x "$dir/bin/go" ]; then
        echo "$dir/bin/go"
        return
    fi
    case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64) arch=arm64 ;;
    *) die "no Go toolchain module for $(uname -m)" ;;
    esac
    log "downloading the Go $want toolchain from the Go module proxy"
    src=$(GOFLAGS=-mod=mod go mod download -json \
        "golang.org/toolchain@v0.0.1-go$want.linux-$arch" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    [ -n "$src" ] && [ -d "$src/bin" ] ||
        die "could not download golang.org/toolchain@v0.0.1-go$want.linux-$arch"
    mkdir -p "$cache"
    tmp=$(mktemp -d "$dir.tmp.XXXXXX")
    cp -R "$src/." "$tmp/"
    chmod -R u+w "$tmp"
    find "$tmp/bin" "$tmp/pkg/tool" -type f -exec chmod +x {} +
    rm -rf "$dir"
    mv "$tmp" "$dir"
    echo "$dir/bin/go"
}

install() {
    local have go gomod want ver
    have=$(cached_version)
    if [ "$have" = "$OAUTH2_PROXY_VERSION" ]; then
        log "oauth2-proxy $OAUTH2_PROXY_VERSION present in $bin"
        return
    fi
    command -v go >/dev/null 2>&1 ||
        die "no oauth2-proxy $OAUTH2_PROXY_VERSION in $bin and no Go toolchain to build it (install golang)"
    gomod=$(GOFLAGS=-mod=mod go mod download -json \
        "$OAUTH2_PROXY_MODULE@$OAUTH2_PROXY_VERSION" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
    [ -n "$gomod" ] && [ -f "$gomod" ] ||
        die "could not download $OAUTH2_PROXY_MODULE@$OAUTH2_PROXY_VERSION from the Go module proxy"
    want=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$gomod" | head -n 1)
    [ -n "$want" ] || die "no go version in $gomod"
    ver=$(go env GOVERSION)
    go=go
    if [ "$(go_minor "$ver")" -lt 21 ] || [ "${RL_GO_FETCH_TOOLCHAIN:-0}" = 1 ]; then
        go=$(fetched_go "$want")
    fi
    log "building oauth2-proxy $OAUTH2_PROXY_VERSION (first run only; a minute or two)"
    mkdir -p "$(dirname "$bin")"
    # GOGC=400: the compiler collects garbage less often (less CPU, a
    # little more memory).
    GOBIN=$(dirname "$bin") GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=auto GOGC=${GOGC:-400} \
        "$go" install -trimpath \
        -ldflags "-w -s -X $OAUTH2_PROXY_MODULE/pkg/version.VERSION=$OAUTH2_PROXY_VERSION" \
        "$OAUTH2_PROXY_MODULE@$OAUTH2_PROXY_VERSION" ||
        die "could not build $OAUTH2_PROXY_MODULE@$OAUTH2_PROXY_VERSION"
    have=$(cached_version)
    [ "$have" = "$OAUTH2_PROXY_VERSION" ] ||
        die "the built oauth2-proxy reports \"$have\", not $OAUTH2_PROXY_VERSION"
    log "oauth2-proxy $OAUTH2_PROXY_VERSION built into $bin"
}

case "${1:-}" in
install) install ;;
path)
    have=$(cached_version)
    [ "$have" = "$OAUTH2_PROXY_VERSION" ] ||
        die "no oauth2-proxy $OAUTH2_PROXY_VERSION in $bin${have:+ (found $have)}: run \`make deps\` (or $0 install)"
    echo "$bin"
    ;;
*) die "usage: $0 install|path" ;;
esac
