# lib.sh — sourced by build.sh, base.sh and smoke.sh: where the image lives
# and how buildah is called here.
#
# Buildah runs with its own storage under $RL_CACHE_DIR/containers (vfs driver, chroot
# isolation: no daemon, no overlay mounts, no user namespaces), so `make
# image` neither needs nor disturbs a Podman or Docker set-up on the same
# machine. Look at what it made with the same flags, e.g.
#   buildah --root ~/.cache/runledger/containers/storage \
#       --runroot ~/.cache/runledger/containers/run \
#       --storage-driver vfs images
#
# Environment (all optional):
#   RL_IMAGE_STORAGE   storage root (default $RL_CACHE_DIR/containers/storage,
#                      RL_CACHE_DIR defaulting to <repo>/.cache; make sets
#                      it to ~/.cache/runledger)
#   RL_IMAGE_RUNROOT   storage state (default $RL_CACHE_DIR/containers/run)
#   RL_IMAGE_REGISTRY  registry part of the image's name (default
#                      localhost, as buildah names a local image)
#   RL_IMAGE_NAME      image name (default runledger)
#   RL_IMAGE_TAG       image tag (default: the project() VERSION in
#                      CMakeLists.txt, e.g. 0.1.0)
#
# The image is localhost/runledger:<VERSION>, in buildah's storage and in
# the OCI archive, which `ctr images import` (k3s, kind) and `podman load`
# take under that name. The chart's default image (image.registry
# localhost) is the same name, so an archive imported into a node's
# containerd is found as is; tests/helm/check.sh checks that they agree. A
# bare `runledger:0.1.0` would be imported as exactly that, while the
# kubelet looks for docker.io/library/runledger:0.1.0.

# shellcheck shell=bash disable=SC2034 # the variables are for the scripts sourcing this
rl_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Per-user cache (like the Kafka jars and helm): the Debian base images and
# unchanged layers survive a fresh clone, so a rebuild takes seconds.
rl_cache=${RL_CACHE_DIR:-$rl_root/.cache}
rl_storage=$(realpath -m -- "${RL_IMAGE_STORAGE:-$rl_cache/containers/storage}")
rl_runroot=$(realpath -m -- "${RL_IMAGE_RUNROOT:-$rl_cache/containers/run}")
rl_version=$(sed -n 's/^project(runledger VERSION \([0-9][0-9.]*\).*/\1/p' \
    "$rl_root/CMakeLists.txt")
rl_image_registry=${RL_IMAGE_REGISTRY-localhost}
rl_image_name=${RL_IMAGE_NAME:-runledger}
rl_image_tag=${RL_IMAGE_TAG:-$rl_version}
rl_image=${rl_image_registry:+$rl_image_registry/}$rl_image_name:$rl_image_tag
rl_oci_archive=$rl_root/build/$rl_image_name-$rl_image_tag.oci.tar

# The names the Dockerfile's FROM lines use, as buildah normalises them,
# and the Debian release base.sh makes them from.
rl_debian_version=13
rl_debian_suite=trixie
rl_base_full=docker.io/library/debian:$rl_debian_version
rl_base_slim=docker.io/library/debian:$rl_debian_version-slim

bh() {
    buildah --root "$rl_storage" --runroot "$rl_runroot" \
        --storage-driver vfs "$@"
}

rl_image_exists() {
    bh inspect --type image "$1" >/dev/null 2>&1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "must run as root or have sudo to run: $*" >&2
        return 1
    fi
}

# Installs the Debian packages named in $@ that are missing.
rl_apt_ensure() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f '${Status}' "$p" 2>/dev/null |
            grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "installing ${missing[*]}" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
