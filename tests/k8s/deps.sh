#!/usr/bin/env bash
# deps.sh — the Debian packages the Kubernetes test cluster runs on
# (cluster.sh): etcd, containerd, runc, the CNI plugins, iptables and
# conntrack for kube-proxy, ipset for kube-router's policy controller,
# buildah and debootstrap for `make image` and the pause image. Installs
# only what is missing; a second run installs nothing and runs no
# `apt-get update`. Runs as root, or through sudo otherwise.
set -euo pipefail

packages=(etcd-server containerd runc containernetworking-plugins iptables
    conntrack ipset buildah debootstrap)

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "k8s/deps.sh: must run as root or have sudo to run: $*" >&2
        exit 1
    fi
}

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null |
        grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "k8s/deps.sh: installing ${missing[*]}"
as_root apt-get update -qq
# The harness runs its own etcd and containerd with their own
# configuration and state; a service the packages start is not used.
as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
