#!/usr/bin/env bash
# base.sh [--force] — makes the two Debian 13 base images the Dockerfile's
# FROM lines name, without a container registry (the release is
# rl_debian_version and rl_debian_suite in lib.sh):
#
#   docker.io/library/debian:13        debootstrap --variant=minbase trixie
#                                      from Debian's packages, then every
#                                      update from trixie-updates and
#                                      trixie-security (the build stage)
#   docker.io/library/debian:13-slim   the same tree with the documentation,
#                                      man pages and translations removed and
#                                      dpkg told to keep leaving them out, as
#                                      Debian's official -slim images do (the
#                                      runtime stage)
#
# Both live in buildah's local storage under the names `FROM debian:13` and
# `FROM debian:13-slim` resolve to, so `buildah bud --pull=never` finds them;
# both are also tagged localhost/debian:13[-slim]. An image that already
# exists is kept (the cache); --force makes both again.
#
# The Debian mirror is the one this host's apt uses, read at run time from
# /etc/apt/sources.list.d/*.sources and /etc/apt/sources.list
# (tests/harness/apt_mirror.sh; the host may run another release, the
# mirror serves them all); the images' own apt sources point at the same
# mirror. RL_DEBIAN_MIRROR and RL_DEBIAN_SECURITY_MIRROR override what is
# found there.
set -euo pipefail

prog=base.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../harness/apt_mirror.sh
. "$rl_root/tests/harness/apt_mirror.sh"
suite=$rl_debian_suite

force=0
case "${1:-}" in
'') ;;
--force) force=1 ;;
*)
    echo "usage: $prog [--force]" >&2
    exit 2
    ;;
esac

if [ "$force" -eq 0 ] && rl_image_exists "$rl_base_full" &&
    rl_image_exists "$rl_base_slim"; then
    echo "$prog: $rl_base_full and $rl_base_slim already in storage (--force remakes them)"
    exit 0
fi
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root: run as root or through sudo"

rl_apt_mirrors || die "no Debian mirror found"
mirror=$rl_mirror
security=$rl_security_mirror
echo "$prog: Debian $suite from $mirror${security:+, security $security}"

rl_apt_ensure buildah debootstrap debian-archive-keyring
mkdir -p "$rl_storage" "$rl_runroot"

work=$(mktemp -d "${TMPDIR:-/tmp}/rl-base.XXXXXX")
ctr=
cleanup() {
    [ -z "$ctr" ] || bh rm "$ctr" >/dev/null 2>&1 || true
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT

t0=$SECONDS
rootfs=$work/rootfs
debootstrap --variant=minbase --arch="$(dpkg --print-architecture)" \
    --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2
    die "debootstrap failed (log above)"
}
echo "$prog: debootstrap done in $((SECONDS - t0))s"

# apt sources as in Debian's own images: the release, its updates and
# security, one deb822 file, the mirror this host uses.
rm -f "$rootfs/etc/apt/sources.list"
{
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\n' "$mirror" "$suite" "$suite"
    printf 'Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    if [ -n "$security" ]; then
        printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\n' "$security" "$suite"
        printf 'Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    fi
} >"$rootfs/etc/apt/sources.list.d/debian.sources"

# Container conventions of Debian's official images: no daemons started by
# package scripts, no translations, no suggested packages kept installed,
# no downloaded .debs left in layers.
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
echo 'Apt::AutoRemove::SuggestsImportant "false";' \
    >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"

# Host-specific files a container runtime provides itself.
: >"$rootfs/etc/machine-id"
rm -f "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf" "$rootfs/etc/hosts"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    >"$rootfs/etc/hosts"

# Imports a root tree as image $2 (and localhost/<name>) from tarball $1.
import_rootfs() {
    local tarball=$1 name=$2 c img
    c=$(bh from --pull=never scratch)
    ctr=$c
    bh add "$c" "$tarball" / >/dev/null
    bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --cmd '["bash"]' --os linux --arch "$(dpkg --print-architecture)" "$c"
    img=$(bh commit --rm --quiet "$c" "$name")
    ctr=
    echo "$img"
}

tar_rootfs() {
    tar --numeric-owner --xattrs --acls -C "$1" -cf "$2" .
}

clean_tree() {
    local r=$1
    rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin \
        "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/debconf/*-old \
        "$r"/var/lib/dpkg/*-old "$r"/var/log/apt/* "$r"/tmp/* "$r"/var/tmp/*
    find "$r/var/log" -type f -exec truncate -s 0 {} +
}

# 1. The minbase tree, updated inside buildah (chroot isolation gives apt
#    the host network and a sane /proc, /dev).
t1=$SECONDS
clean_tree "$rootfs"
tar_rootfs "$rootfs" "$work/minbase.tar"
rm -rf --one-file-system "$rootfs"
import_rootfs "$work/minbase.tar" "localhost/rl-debian-minbase:$rl_debian_version" >/dev/null
rm -f "$work/minbase.tar"
ctr=$(bh from --pull=never "localhost/rl-debian-minbase:$rl_debian_version")
bh run --isolation chroot "$ctr" -- sh -c '
    set -e
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get -y -qq -o Dpkg::Options::=--force-confold upgrade
    apt-get clean
    rm -rf /var/lib/apt/lists/* /var/log/apt/* /var/cache/debconf/*-old \
        /var/lib/dpkg/*-old
    find /var/log -type f -exec truncate -s 0 {} +
' >"$work/upgrade.log" 2>&1 || {
    tail -n 30 "$work/upgrade.log" >&2
    die "apt-get upgrade in the base image failed (log above)"
}
bh config --created-by "tests/image/base.sh: debootstrap --variant=minbase $suite + updates" "$ctr"
bh commit --rm --quiet --squash "$ctr" "$rl_base_full" >/dev/null
ctr=
bh rmi "localhost/rl-debian-minbase:$rl_debian_version" >/dev/null
bh tag "$rl_base_full" "localhost/debian:$rl_debian_version"
echo "$prog: $rl_base_full made in $((SECONDS - t1))s"

# 2. The slim variant: the same packages without documentation, man pages
#    and translations, and dpkg keeps leaving them out of later installs.
t2=$SECONDS
ctr=$(bh from --pull=never "$rl_base_full")
bh run --isolation chroot "$ctr" -- sh -c '
    set -e
    cat >/etc/dpkg/dpkg.cfg.d/docker <<EOF
# Leave documentation, man pages and translations out (as debian:13-slim).
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    find /usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
    find /usr/share/doc -mindepth 1 -type d -empty -delete
    rm -rf /usr/share/man/* /usr/share/groff/* /usr/share/info/* \
        /usr/share/lintian/* /usr/share/linda/*
    find /usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias \
        -exec rm -rf {} +
' >"$work/slim.log" 2>&1 || {
    tail -n 30 "$work/slim.log" >&2
    die "making the slim variant failed (log above)"
}
bh config --created-by "tests/image/base.sh: debian:$rl_debian_version without docs, man pages, translations" "$ctr"
bh commit --rm --quiet --squash "$ctr" "$rl_base_slim" >/dev/null
ctr=
bh tag "$rl_base_slim" "localhost/debian:$rl_debian_version-slim"
echo "$prog: $rl_base_slim made in $((SECONDS - t2))s"

bh images --filter reference='*debian*'
echo "$prog: base images ready in $((SECONDS - t0))s"
