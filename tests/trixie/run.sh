#!/usr/bin/env bash
# run.sh — `make test-trixie`: builds Runledger and runs its ctest suite
# against Debian 13's libraries (librdkafka 2.8, libpq 17, curl 8.14, ...)
# on a Debian 12 machine:
#
#   1. the Debian 13 root (tests/trixie/root.sh: debootstrap once, cached
#      under $RL_CACHE_DIR/trixie/ by package list)
#   2. the test services on the host (tests/harness/services.sh up; those
#      already running are kept)
#   3. in a mount namespace of its own, the cached root bind-mounted at a
#      folder of this run: /proc, /dev, /sys, the repository (and its git
#      folder), the cache and the host's resolv.conf, hosts, CA bundle and
#      pip.conf bind-mounted into it at the same paths; a fresh /tmp,
#      /var/tmp and /root for this run, so the cached root stays as it was
#      made. The host's PID namespace: a test signals the services'
#      processes (a PostgreSQL backend it stops), which run on the host
#   4. chroot: tests/trixie/inside.sh builds in $TRIXIE_BUILD_DIR (default
#      build-trixie, a plain build), prints the library versions and runs
#      ctest; the root shares the host's network, so the services'
#      127.0.0.1 addresses work unchanged
#   5. stops what this run started: processes still running whose root
#      is this run's mount of the tree, and the services when this run
#      started them. Another run sharing the cached root (a second
#      checkout's `make test-trixie`) has a mount of its own: neither
#      stops the other's processes
#
# Inside the root RL_CACHE_DIR is $RL_CACHE_DIR/trixie/cache (what the tests
# build or install there, like the OTLP receiver's venv, is Debian 13's and
# must not replace the host's), with the host's Kafka jars linked into it.
#
# Environment: RL_CACHE_DIR (default .cache), TRIXIE_BUILD_DIR
# (build-trixie), JOBS (2), BUILD_DIR (where services.sh keeps the
# services: build), RL_SERVICES_DIR, RL_SERVICES_ENV, CTEST_ARGS (extra
# ctest arguments, e.g. "-L unit"), RL_TRIXIE_SKIP_LABELS (see inside.sh).
# Runs as root (re-runs itself through sudo otherwise).
set -euo pipefail

prog=run.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "needs root (debootstrap, chroot, mounts)"
    exec sudo --preserve-env=RL_CACHE_DIR,TRIXIE_BUILD_DIR,JOBS,BUILD_DIR,RL_SERVICES_DIR,RL_SERVICES_ENV,CTEST_ARGS,RL_TRIXIE_SKIP_LABELS,RL_TRIXIE_MAX_AGE_DAYS,RL_DEBIAN_MIRROR,RL_DEBIAN_SECURITY_MIRROR,KAFKA_VERSION \
        "$0" "$@"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=$(realpath -m -- "${RL_CACHE_DIR:-$repo/.cache}")
build=$(realpath -m -- "${BUILD_DIR:-$repo/build}")
export RL_SERVICES_DIR=${RL_SERVICES_DIR:-$build/services}
export RL_SERVICES_ENV=${RL_SERVICES_ENV:-$build/services.env}
trixie_build=$(realpath -m -- "${TRIXIE_BUILD_DIR:-$repo/build-trixie}")

# --- 3. and 4.: in the namespaces (run.sh re-runs itself there) -----------
if [ "${RL_TRIXIE_IN_NS:-}" = 1 ]; then
    run=$2
    # This run's view of the cached root: the processes whose root it is
    # are this run's, whoever else uses the cache.
    mkdir -p "$run/tree"
    mount --bind "$1" "$run/tree"
    tree=$run/tree
    mount -t proc proc "$tree/proc"
    mount --rbind /dev "$tree/dev"
    mount --make-rslave "$tree/dev"
    mount --rbind /sys "$tree/sys"
    mount --make-rslave "$tree/sys"
    for d in tmp var/tmp root; do
        mount --bind "$run/$d" "$tree/$d"
    done
    # The host's name resolution, trusted CAs (a TLS-inspecting proxy's CA
    # among them, when the host has one) and pip settings: what a test
    # downloads (the OTLP receiver's packages) goes the way it would on the
    # host.
    for f in /etc/resolv.conf /etc/hosts /etc/ssl/certs/ca-certificates.crt \
        /etc/pip.conf; do
        [ -f "$f" ] || continue
        [ -e "$tree$f" ] || : >"$tree$f"
        mount --bind "$f" "$tree$f"
    done
    # The repository, its git folder (a worktree's lives elsewhere; the
    # schema tests read the history), the root's cache and the Kafka jars
    # its links point to, at the same paths. Not the whole cache: the root
    # itself lives in it.
    gitdir=$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null) ||
        gitdir=
    # The services' folder and environment file too, when they are not in
    # the repository.
    for d in "$repo" "$gitdir" "$cache/trixie/cache" "$cache"/kafka-* \
        "$RL_SERVICES_DIR" "$RL_SERVICES_ENV"; do
        [ -n "$d" ] && [ -e "$d" ] || continue
        case "$d/" in "$repo/"?*) continue ;; esac
        if [ -d "$d" ]; then
            mkdir -p "$tree$d"
        else
            mkdir -p "$(dirname "$tree$d")"
            [ -e "$tree$d" ] || : >"$tree$d"
        fi
        mount --rbind "$d" "$tree$d"
    done
    rc=0
    # PYTHONDONTWRITEBYTECODE: no Debian 13 .pyc files in the repository.
    chroot "$tree" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
        PYTHONDONTWRITEBYTECODE=1 \
        RL_CACHE_DIR="$cache/trixie/cache" \
        RL_SERVICES_ENV="$RL_SERVICES_ENV" RL_SERVICES_DIR="$RL_SERVICES_DIR" \
        BUILD_DIR="$trixie_build" JOBS="${JOBS:-2}" CTEST_ARGS="${CTEST_ARGS:-}" \
        RL_TRIXIE_SKIP_LABELS="${RL_TRIXIE_SKIP_LABELS:-}" \
        KAFKA_VERSION="${KAFKA_VERSION:-}" \
        bash "$repo/tests/trixie/inside.sh" || rc=$?
    # What a test left running (a private broker or cluster of a test that
    # failed) stops cleanly: the processes whose root is this run's mount.
    for sig in TERM KILL; do
        left=()
        for p in /proc/[0-9]*; do
            [ "$(readlink "$p/root" 2>/dev/null)" = "$tree" ] && left+=("${p#/proc/}")
        done
        [ ${#left[@]} -gt 0 ] || break
        echo "$prog: stopping ${#left[@]} processes left in the root (SIG$sig): ${left[*]}"
        kill -"$sig" "${left[@]}" 2>/dev/null || true
        for _ in $(seq 1 50); do
            alive=0
            for p in "${left[@]}"; do [ -d "/proc/$p" ] && alive=1; done
            [ "$alive" -eq 1 ] || break
            sleep 0.1
        done
    done
    exit "$rc"
fi

t0=$SECONDS
echo "== Debian 13 root"
tree=$(RL_CACHE_DIR=$cache "$here/root.sh")
t_root=$((SECONDS - t0))
echo "root: $tree ($(cat "$tree/.complete"), ${t_root}s)"

run=
started=0
status=0
finish() {
    local rc=$?
    trap - EXIT INT TERM
    trap '' PIPE
    set +e
    if [ "$started" -eq 1 ]; then
        echo "== services down"
        "$repo/tests/harness/services.sh" down
    fi
    [ -z "$run" ] || rm -rf --one-file-system "$run"
    [ "$rc" -eq 0 ] || status=$rc
    echo "== test-trixie: root ${t_root}s, services ${t_services:-0}s, build and ctest ${t_inside:-0}s, total $((SECONDS - t0))s: $([ "$status" -eq 0 ] && echo ok || echo "FAILED (exit $status)")"
    exit "$status"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== services up"
t1=$SECONDS
# Services this run finds running stay up after it; those it starts stop.
if [ ! -f "$RL_SERVICES_ENV" ]; then
    started=1
fi
"$repo/tests/harness/services.sh" up
t_services=$((SECONDS - t1))

# The root's own cache: the host's Kafka jars linked in (read only by the
# brokers), everything else made there by the Debian 13 tools.
mkdir -p "$cache/trixie/cache"
for d in "$cache"/kafka-*; do
    [ -d "$d" ] || continue
    ln -sfn "../../$(basename "$d")" "$cache/trixie/cache/$(basename "$d")"
done

run=$(mktemp -d "$cache/trixie/run.XXXXXX")
mkdir -p "$run/tmp" "$run/var/tmp" "$run/root"
chmod 1777 "$run/tmp" "$run/var/tmp"
chmod 0700 "$run/root"

t2=$SECONDS
RL_TRIXIE_IN_NS=1 TRIXIE_BUILD_DIR=$trixie_build \
    unshare --mount --propagation private -- \
    "$0" "$tree" "$run" || status=$?
t_inside=$((SECONDS - t2))
