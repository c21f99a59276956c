#!/usr/bin/env bash
# build.sh [--no-smoke] [--rebuild] — `make image`: builds the top-level
# Dockerfile with buildah, without a Docker daemon and without a container
# registry, writes build/runledger-<version>.oci.tar, then runs the smoke
# test (tests/image/smoke.sh) unless --no-smoke.
#
#   1. installs buildah (and, for the base images, debootstrap) from Debian
#      when missing
#   2. makes the Debian 13 base images locally, once (tests/image/base.sh:
#      debootstrap --variant=minbase, cached in buildah's storage)
#   3. buildah bud --pull=never --layers, vfs storage, chroot isolation
#      (the apt-get layers are cached between builds; the sources are
#      copied again only when they changed; no build at all when nothing
#      the image is made from changed, unless --rebuild)
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
    exec sudo --preserve-env=RL_IMAGE_STORAGE,RL_IMAGE_RUNROOT,RL_IMAGE_REGISTRY,RL_IMAGE_NAME,RL_IMAGE_TAG,RL_DEBIAN_MIRROR,RL_DEBIAN_SECURITY_MIRROR,SOURCE_URL,LICENSES,RL_SERVICES_ENV \
        "$0" "$@"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$here/lib.sh"

smoke=1
rebuild=0
for arg in "$@"; do
    case "$arg" in
    --no-smoke) smoke=0 ;;
    --rebuild) rebuild=1 ;;
    *)
        echo "usage: $prog [--no-smoke] [--rebuild]" >&2
        exit 2
        ;;
    esac
done
[ -n "$rl_version" ] || die "no project() VERSION in $rl_root/CMakeLists.txt"

t0=$SECONDS
rl_apt_ensure buildah
mkdir -p "$rl_storage" "$rl_runroot" "$rl_root/build"
# One build at a time per storage (`make image` beside `ctest -L image`).
exec 8>"$(dirname "$rl_storage")/build.lock"
flock -w 1800 8 || die "another build.sh holds $(dirname "$rl_storage")/build.lock"

"$here/base.sh"
t_base=$((SECONDS - t0))

# 3. The image. Skipped when nothing it is made from changed since the last
#    build (the files .dockerignore lets through, the Dockerfile, the build
#    arguments, the base images), so `make test` re-runs the smoke test
#    without a rebuild; --rebuild forces one. Otherwise buildah's layer cache
#    keeps the apt-get layers and an unchanged compile, and what a previous
#    build left and this one did not re-use is removed afterwards (vfs keeps
#    every layer as a full copy of its tree: without this each build would
#    add gigabytes).
build_args=(--build-arg "VERSION=$rl_version")
[ -z "${SOURCE_URL:-}" ] || build_args+=(--build-arg "SOURCE_URL=$SOURCE_URL")
[ -z "${LICENSES:-}" ] || build_args+=(--build-arg "LICENSES=$LICENSES")

inputs_digest() {
    local paths
    # The `!path` lines of .dockerignore are the build context.
    mapfile -t paths < <(sed -n 's|^!\(.*\)$|\1|p' "$rl_root/.dockerignore" | sed 's|/$||')
    {
        printf '%s\n' "${build_args[@]}"
        bh inspect --type image --format '{{.FromImageID}}' "$rl_base_full"
        bh inspect --type image --format '{{.FromImageID}}' "$rl_base_slim"
        cd "$rl_root" &&
            find Dockerfile .dockerignore "${paths[@]}" -type f -print0 |
            LC_ALL=C sort -z | xargs -0 sha256sum
    } | sha256sum | cut -d' ' -f1
}
stamp=$(dirname "$rl_storage")/$rl_image_name-$rl_image_tag.inputs
digest=$(inputs_digest)

t1=$SECONDS
if [ "$rebuild" -eq 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ] &&
    [ -f "$rl_oci_archive" ] && rl_image_exists "$rl_image"; then
    echo "$prog: $rl_image is up to date with the sources (--rebuild forces a build)"
    new=$(bh inspect --type image --format '{{.FromImageID}}' "$rl_image")
    t_build=0
    t_push=0
else
    rm -f "$stamp"
    before=$(bh images -a --quiet --no-trunc | sed 's/^sha256://' | sort -u)
    budlog=$(mktemp "${TMPDIR:-/tmp}/rl-bud.XXXXXX")
    trap 'rm -f "$budlog"' EXIT
    bh bud --pull=never --layers --force-rm --isolation chroot "${build_args[@]}" \
        -f "$rl_root/Dockerfile" -t "$rl_image" "$rl_root" 2>&1 | tee "$budlog"
    used=$({ grep -o 'Using cache [0-9a-f]\{64\}' "$budlog" || true; } | awk '{print $3}' | sort -u)
    new=$(bh inspect --type image --format '{{.FromImageID}}' "$rl_image")
    t_build=$((SECONDS - t1))
    # Remove leftovers: dangling (untagged, no children) images that existed
    # before this build and that it did not use; their parents follow in the
    # next round.
    # An image a container still uses (a smoke test running now) stays.
    for _ in $(seq 1 32); do
        removed=0
        for id in $(comm -12 <(echo "$before") \
            <(bh images --quiet --no-trunc --filter dangling=true | sed 's/^sha256://' | sort -u) |
            comm -23 - <(echo "$used")); do
            bh rmi "$id" >/dev/null 2>&1 && removed=$((removed + 1))
        done
        [ "$removed" -gt 0 ] || break
    done
    echo "$prog: leftovers of earlier builds removed in $((SECONDS - t1 - t_build))s"

    # 4. The OCI archive, written beside and renamed, so a half-written
    #    file never carries the final name.
    t2=$SECONDS
    rm -f "$rl_oci_archive.tmp"
    bh push --quiet "$rl_image" "oci-archive:$rl_oci_archive.tmp:$rl_image"
    mv -f "$rl_oci_archive.tmp" "$rl_oci_archive"
    t_push=$((SECONDS - t2))
    echo "$digest" >"$stamp"
fi

# Size as `docker images` counts it: the uncompressed layers.
size=$(bh images --format '{{.Size}}' "$rl_image" | head -n 1)
archive_bytes=$(stat -c %s "$rl_oci_archive")
echo "$prog: image $rl_image ${new:0:12}: $size uncompressed (as \`docker images\` counts)," \
    "OCI archive ${rl_oci_archive#"$rl_root"/} $((archive_bytes / 1024 / 1024)) MiB (gzip layers)"
echo "$prog: base ${t_base}s, build ${t_build}s, archive ${t_push}s"

exec 8>&-
if [ "$smoke" -eq 1 ]; then
    "$here/smoke.sh"
fi
