#!/usr/bin/env bash
# build.sh [--no-smoke] — `make image`: builds the top-level Dockerfile with
# buildah, without a Docker daemon and without a container registry, writes
# build/runledger-<version>.oci.tar, then runs the smoke test
# (tests/image/smoke.sh) unless --no-smoke.
#
#   1. installs buildah (and, for the base images, debootstrap) from Debian
#      when missing
#   2. makes the Debian 12 base images locally, once (tests/image/base.sh:
#      debootstrap --variant=minbase, cached in buildah's storage)
#   3. buildah bud --pull=never --layers, vfs storage, chroot isolation
#      (the apt-get layers are cached between builds; the sources are
#      copied again only when they changed)
#   4. buildah push to an OCI archive, which `podman load`, `skopeo copy
#      oci-archive:...` and `docker load` (Docker >= 25) take
#
# Runs as root (re-runs itself through sudo otherwise): debootstrap and a
# rootful vfs storage need it. Environment: see lib.sh (storage location,
# image name and tag) and base.sh (Debian mirror); SOURCE_URL and LICENSES
# are passed to the Dockerfile when set.
set -euo pipefail

prog=build.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "needs root (debootstrap, buildah storage)"
    exec sudo --preserve-env=RL_IMAGE_STORAGE,RL_IMAGE_RUNROOT,RL_IMAGE_NAME,RL_IMAGE_TAG,RL_DEBIAN_MIRROR,RL_DEBIAN_SECURITY_MIRROR,SOURCE_URL,LICENSES,RL_SERVICES_ENV \
        "$0" "$@"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

smoke=1
case "${1:-}" in
'') ;;
--no-smoke) smoke=0 ;;
*)
    echo "usage: $prog [--no-smoke]" >&2
    exit 2
    ;;
esac
[ -n "$rl_version" ] || die "no project() VERSION in $rl_root/CMakeLists.txt"

t0=$SECONDS
rl_apt_ensure buildah
mkdir -p "$rl_storage" "$rl_runroot" "$rl_root/build"

"$here/base.sh"
t_base=$((SECONDS - t0))

# 3. The image, in two steps that share buildah's layer cache: the build
#    stage is tagged too (runledger-build:<tag>), so the apt-get layer with
#    the compilers and the last compile survive the pruning below; the final
#    stage then re-uses the build stage from the cache. Pruning removes what
#    a previous build left (old compile layers, the replaced image): vfs
#    keeps every layer as a full copy of its tree.
t1=$SECONDS
build_args=(--build-arg "VERSION=$rl_version")
[ -z "${SOURCE_URL:-}" ] || build_args+=(--build-arg "SOURCE_URL=$SOURCE_URL")
[ -z "${LICENSES:-}" ] || build_args+=(--build-arg "LICENSES=$LICENSES")
bud() {
    bh bud --pull=never --layers --force-rm --isolation chroot "${build_args[@]}" \
        -f "$rl_root/Dockerfile" "$@" "$rl_root"
}
bud --target build -t "$rl_image_name-build:$rl_image_tag"
echo "$prog: build stage ready after $((SECONDS - t1))s"
bud -t "$rl_image"
echo "$prog: image ready after $((SECONDS - t1))s"
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
    [ -n "$(bh images --quiet --filter dangling=true)" ] || break
    bh rmi --prune >/dev/null 2>&1 || break
done
echo "$prog: old layers pruned after $((SECONDS - t1))s"
new=$(bh inspect --type image --format '{{.FromImageID}}' "$rl_image")
t_build=$((SECONDS - t1))

# 4. The OCI archive, written beside and renamed, so a half-written file
#    never carries the final name.
t2=$SECONDS
rm -f "$rl_oci_archive.tmp"
bh push --quiet "$rl_image" "oci-archive:$rl_oci_archive.tmp:$rl_image"
mv -f "$rl_oci_archive.tmp" "$rl_oci_archive"
t_push=$((SECONDS - t2))

# Size as `docker images` counts it: the uncompressed layers.
size=$(bh images --format '{{.Size}}' "$rl_image" | head -n 1)
archive_bytes=$(stat -c %s "$rl_oci_archive")
echo "$prog: image $rl_image ${new:0:12}: $size uncompressed (as \`docker images\` counts)," \
    "OCI archive ${rl_oci_archive#"$rl_root"/} $((archive_bytes / 1024 / 1024)) MiB (gzip layers)"
echo "$prog: base ${t_base}s, build ${t_build}s, archive ${t_push}s"

if [ "$smoke" -eq 1 ]; then
    "$here/smoke.sh"
fi
