#!/usr/bin/env bash
# inside.sh — the part of `make test-trixie` that runs inside the Debian 13
# root (tests/trixie/run.sh enters it and calls this; not meant to be run
# on the host): configures and builds the project in $BUILD_DIR (default
# build-trixie, a plain build with warnings as errors, as `make build`),
# prints the versions of the libraries it runs against, then runs the ctest
# suite against the services of $RL_SERVICES_ENV with RL_REQUIRE_SERVICES=1.
#
# Labels not run here, and why:
#   image  builds the container image with buildah, which is not in the
#          root; the image is Debian 13 itself and `make image` tests it
#   helm   renders the chart with the cached helm and kubeconform, Go
#          binaries that use none of Debian's libraries: nothing in it
#          differs between Debian 12 and 13
#   fuzz   compiles its own targets with clang's libFuzzer (not the gcc
#          build under test), which would add clang to the root; the
#          hostile-input table (test_hostile_events) runs here
#   browser  drives Debian's chromium over WebDriver, which would more than
#          double the root; the console server it talks to is tested here
#          by the other console tests (label console)
#   oauth2proxy  puts the cached oauth2-proxy, a static Go binary built on
#          the host, in front of the console: the console's proxy mode is
#          tested here by console_proxy_header_only_from_trusted_proxy
#   chaos, explore  the chaos soak and the fault explorer's seeds (about 4
#          minutes of the 2 cores together) exercise our code under kills
#          and restarts, not the libraries: every call they make into
#          librdkafka, libpq and libcurl, the e2e, fault and failover
#          tests make here too; the Debian 12 pass runs both
#
# Exit status: ctest's (non-zero when a test failed), or 1 when the build
# or the library check failed.
set -euo pipefail

prog=inside.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
build_dir=$(realpath -m -- "${BUILD_DIR:-build-trixie}")
jobs=${JOBS:-2}
# shellcheck disable=SC2206 # word splitting is the point
ctest_args=(${CTEST_ARGS:-})
skip_labels=${RL_TRIXIE_SKIP_LABELS:-image|helm|fuzz|browser|oauth2proxy|chaos|explore}

[ -f /etc/debian_version ] || die "not in a Debian root"
case "$(cat /etc/debian_version)" in
13.* | trixie*) ;;
*) die "expected Debian 13, found $(cat /etc/debian_version): run through tests/trixie/run.sh" ;;
esac
[ -n "${RL_SERVICES_ENV:-}" ] && [ -f "$RL_SERVICES_ENV" ] ||
    die "no services environment file (${RL_SERVICES_ENV:-RL_SERVICES_ENV unset})"
# shellcheck disable=SC1090 # written by services.sh
. "$RL_SERVICES_ENV"
export RL_REQUIRE_SERVICES=1
# The private clusters of the fault tests: Debian 13's only PostgreSQL.
export PG_BINDIR=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)}

t0=$SECONDS
echo "== build: ${build_dir#"$repo"/} (Debian $(cat /etc/debian_version), $(cc --version | head -n 1))"
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build_dir/configure.log" 2>&1 || {
    cat "$build_dir/configure.log"
    die "cmake configure failed"
}
cmake --build "$build_dir" -j "$jobs" >"$build_dir/build.log" 2>&1 || {
    grep -E 'error|warning' "$build_dir/build.log" | head -n 40
    die "build failed (log ${build_dir#"$repo"/}/build.log)"
}
echo "build: done in $((SECONDS - t0))s"

echo "== libraries"
# shellcheck disable=SC2046 # pkg-config prints several flags
cc -std=c11 -O1 -Wall -Wextra -Werror -o "$build_dir/libversions" \
    tests/trixie/libversions.c \
    $(pkg-config --cflags --libs rdkafka libpq libcurl libcjson libmicrohttpd libcrypto) ||
    die "could not compile tests/trixie/libversions.c"
"$build_dir/libversions" --min-rdkafka 020601 || die "library check failed"
# The files the consumer itself loads, so the log shows they are Debian 13's.
ldd "$build_dir/consumer/runledger" |
    grep -E 'rdkafka|libpq|libcurl|cjson|microhttpd|libssl|libcrypto' |
    sed 's/^[[:space:]]*/runledger loads /'

echo "== ctest (labels not run here: $skip_labels; tests/trixie/inside.sh says why)"
t1=$SECONDS
mkdir -p "$build_dir/test-logs"
rc=0
ctest --test-dir "$build_dir" --output-on-failure -j"$jobs" \
    -LE "^($skip_labels)\$" "${ctest_args[@]}" 2>&1 |
    tee "$build_dir/test-logs/ctest.log" || rc=$?
echo "ctest: done in $((SECONDS - t1))s (exit $rc)"
exit "$rc"
