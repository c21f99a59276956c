#!/usr/bin/env bash
# root.sh [--refresh] — prints the path of a Debian 13 (trixie) root tree
# holding what building and testing Runledger needs (the -dev packages of
# the libraries it links, the compiler, and the tools the tests run:
# PostgreSQL for the private clusters of the fault tests, PgBouncer, a JRE
# for their private Kafka brokers, kcat, python3, git), making it first
# when there is none. tests/trixie/run.sh (`make test-trixie`) builds and
# tests inside it.
#
# The root is cached in $RL_CACHE_DIR/trixie/root-<key>/, the key a hash of
# the suite and the package list below, so a second run finds it at once;
# a changed list makes a new root and removes the old ones. A root older
# than RL_TRIXIE_MAX_AGE_DAYS (default 30) is made again, so point
# releases and security updates reach the tests; --refresh remakes it now.
# It is made aside and renamed into place when complete: an interrupted
# run never leaves a root that looks usable.
#
# The packages come from the Debian mirror this host's apt already uses
# (tests/harness/apt_mirror.sh; RL_DEBIAN_MIRROR and
# RL_DEBIAN_SECURITY_MIRROR override it). Runs as root (debootstrap,
# chroot); installs debootstrap on the host when missing. The progress goes
# to stderr, the path alone to stdout.
set -euo pipefail

prog=root.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
say() { echo "$prog: $*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../harness/apt_mirror.sh
. "$repo/tests/harness/apt_mirror.sh"

refresh=0
case "${1:-}" in
'') ;;
--refresh) refresh=1 ;;
*)
    echo "usage: $prog [--refresh]" >&2
    exit 2
    ;;
esac

suite=trixie
# Debian 13's names: the runtime libraries under the -dev packages carry
# the t64 suffix there (libcurl4t64, libssl3t64, libmicrohttpd12t64), which
# apt resolves itself. postgresql-17 and openjdk-21 are trixie's only
# PostgreSQL and default JRE.
packages=(
    build-essential cmake pkg-config
    librdkafka-dev libpq-dev libcurl4-openssl-dev libcjson-dev libssl-dev
    libmicrohttpd-dev
    postgresql-17 postgresql-client-17 pgbouncer openjdk-21-jre-headless
    kcat python3 python3-venv git curl procps iproute2 ca-certificates
)
# Bump when the way the root is made changes, so cached roots are remade.
format=1
max_age_days=${RL_TRIXIE_MAX_AGE_DAYS:-30}

cache=$(realpath -m -- "${RL_CACHE_DIR:-$repo/.cache}/trixie")
key=$({
    echo "$suite format $format"
    printf '%s\n' "${packages[@]}" | LC_ALL=C sort
} | sha256sum | cut -c1-12)
dir=$cache/root-$key

usable() {
    [ -f "$dir/.complete" ] &&
        [ -z "$(find "$dir/.complete" -mtime +"$max_age_days" 2>/dev/null)" ]
}

if [ "$refresh" -eq 0 ] && usable; then
    echo "$dir"
    exit 0
fi
[ "$(id -u)" -eq 0 ] || die "debootstrap and chroot need root: run as root or through sudo"

mkdir -p "$cache"
exec 9>"$cache/root.lock"
flock -w 1800 9 || die "another root.sh holds $cache/root.lock"
# Another run may have made it while this one waited for the lock.
if [ "$refresh" -eq 0 ] && usable; then
    echo "$dir"
    exit 0
fi

missing=()
for p in debootstrap debian-archive-keyring; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 ||
        die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >&2 || die "apt-get install failed for: ${missing[*]}"
fi
# Debian 12's debootstrap knows trixie; an older one would not.
[ -e "/usr/share/debootstrap/scripts/$suite" ] ||
    die "this debootstrap has no script for $suite: upgrade debootstrap"

rl_apt_mirrors || die "no Debian mirror found"
say "Debian $suite from $rl_mirror${rl_security_mirror:+, security $rl_security_mirror}"

work=$(mktemp -d "$cache/root-$key.tmp.XXXXXX")
cleanup() { rm -rf --one-file-system "$work"; }
trap cleanup EXIT
tree=$work/root
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

t0=$SECONDS
debootstrap --variant=minbase --arch="$(dpkg --print-architecture)" \
    --keyring="$keyring" "$suite" "$tree" "$rl_mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2
    die "debootstrap failed (log above)"
}
say "debootstrap $suite done in $((SECONDS - t0))s"

rm -f "$tree/etc/apt/sources.list"
{
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\n' "$rl_mirror" "$suite" "$suite"
    printf 'Components: main\nSigned-By: %s\n' "$keyring"
    if [ -n "$rl_security_mirror" ]; then
        printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\n' "$rl_security_mirror" "$suite"
        printf 'Components: main\nSigned-By: %s\n' "$keyring"
    fi
} >"$tree/etc/apt/sources.list.d/debian.sources"
# No daemon started by a package script (PostgreSQL's would), and no
# "main" cluster made: the tests make their own with pg.sh.
printf '#!/bin/sh\nexit 101\n' >"$tree/usr/sbin/policy-rc.d"
chmod 0755 "$tree/usr/sbin/policy-rc.d"
mkdir -p "$tree/etc/postgresql-common/createcluster.d"
echo 'create_main_cluster = false' >"$tree/etc/postgresql-common/createcluster.d/runledger.conf"
cp /etc/resolv.conf "$tree/etc/resolv.conf"

t1=$SECONDS
# A mount namespace of its own: /proc and /dev for the package scripts
# (the JRE's need /proc), gone with the namespace whatever happens here.
unshare --mount --propagation private -- sh -c '
    set -e
    mount -t proc proc "$1/proc"
    mount --rbind /dev "$1/dev"
    shift
    tree=$1
    shift
    exec chroot "$tree" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive sh -c "
        set -e
        apt-get update -q
        apt-get -y -q -o Dpkg::Options::=--force-confold upgrade
        apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold \"\$@\"
        apt-get clean
        rm -rf /var/lib/apt/lists/*
    " sh "$@"
' sh "$tree" "$tree" "${packages[@]}" >"$work/apt.log" 2>&1 || {
    tail -n 30 "$work/apt.log" >&2
    die "installing the packages in the $suite root failed (log above)"
}
rm -f "$tree/etc/resolv.conf"
: >"$tree/etc/resolv.conf"
say "packages installed in $((SECONDS - t1))s"

chroot "$tree" dpkg-query -W -f '${Package} ${Version}\n' "${packages[@]}" \
    librdkafka1 libpq5 libcurl4t64 libcjson1 libssl3t64 libmicrohttpd12t64 \
    >"$tree/.packages" 2>/dev/null || true
date -u +%Y-%m-%dT%H:%M:%SZ >"$tree/.complete"
# Older roots (another package list, or this one before --refresh) go.
for old in "$cache"/root-*; do
    [ -d "$old" ] && [ "$old" != "$work" ] || continue
    rm -rf --one-file-system "$old"
done
mv "$tree" "$dir"
say "$dir ready in $((SECONDS - t0))s"
echo "$dir"
