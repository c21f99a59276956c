#!/usr/bin/env bash
# cluster.sh up|policy|down|env DIR — a real single-node Kubernetes for the
# chart's tests (tests/k8s/run.sh), everything under DIR and on a bridge of
# its own.
#
#   up      starts etcd, kube-apiserver, kube-controller-manager,
#           kube-scheduler, containerd, kubelet, kube-proxy and CoreDNS, and
#           waits until the node is Ready
#   policy  starts kube-router's NetworkPolicy controller (firewall only:
#           no routing, no service proxy) beside the kubelet, so that the
#           cluster enforces NetworkPolicies from then on; the bridge
#           plugin alone does not
#   down    stops all of it and restores the machine (idempotent; also after
#           a half-done `up`)
#   env     prints KUBECONFIG=... and the addresses the tests use
#
# The network: the bridge rlk8s0 with 198.18.0.1/16 (RFC 2544's range for
# tests, which no other host uses). Pods get 198.18.1.x from the bridge CNI
# plugin, Services 198.19.0.0/24. The host's end of the bridge is where
# everything outside the cluster listens: the apiserver, the kubelet,
# CoreDNS, and the harness's PostgreSQL, Kafka and stub model. A policy
# rule sends whatever arrives from the bridge to a table whose only other
# route is `unreachable`, so a pod reaches the machine's own addresses and
# other pods, and nothing beyond the machine.
#
# What the parts change on the machine and `down` puts back:
#   - sysctls: the kubelet sets kernel.panic, kernel.panic_on_oops,
#     vm.overcommit_memory (and friends), the bridge plugin ip_forward; the
#     values found before `up` are written back (DIR/sysctl.saved)
#   - iptables: kube-proxy's, kube-router's and the CNI plugins' rules;
#     `down` runs kube-proxy --cleanup and restores the tables saved before
#     `up`
#   - ipsets: kube-router's; `down` destroys the sets that did not exist
#     before `up` (after the iptables rules that name them are gone)
#   - the bridge, the policy rule and its table
#   - mounts: the kubelet's volumes, containerd's snapshots and the pods'
#     network namespaces, all under DIR; `down` unmounts what is left
#   - cgroups: the kubelet's kubepods hierarchy, removed once empty
# Every process is started by this script, its PID recorded in DIR/pids/,
# and stopped by that PID; the containers' processes are found through
# containerd and the kubepods cgroups and stopped by PID too.
#
# Facts of this kind of machine the configuration answers:
#   - no CAP_SYS_RESOURCE: containerd's restrict_oom_score_adj
#   - cgroup v1: kubelet 1.34 with failCgroupV1: false
#   - no registry: the pause image is tests/k8s/pause.c in a scratch image
#     built here and imported
#
# Environment: K8S_BIN (the binaries, default what build.sh made),
# K8S_READY_TIMEOUT (seconds, default 180).
set -euo pipefail

prog=cluster.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
log() { echo "$prog: $*" >&2; }
usage() {
    echo "usage: $prog up|policy|down|env DIR" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2")
case "$dir" in / | /usr* | /etc* | /var | /run*) die "refusing to use $dir" ;; esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${RL_CACHE_DIR:-$HOME/.cache/runledger}
k8s_version=${K8S_VERSION:-v1.34.4}
bin=${K8S_BIN:-$cache/k8s-$k8s_version/bin}
ready_timeout=${K8S_READY_TIMEOUT:-180}

bridge=rlk8s0
host_ip=198.18.0.1
host_cidr=198.18.0.0/16
pod_first=198.18.1.2
pod_last=198.18.1.254
svc_cidr=198.19.0.0/24
svc_api_ip=198.19.0.1
node=rl-node
rt_table=1918
rt_prio=1918
pause_image=localhost/rl-pause:1
ctr_sock=$dir/containerd/containerd.sock
# Sysctls the parts write (kubelet: kernel.*, vm.*; kube-proxy and the
# bridge plugin: net.*).
sysctls=(kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
    net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables
    net.bridge.bridge-nf-call-ip6tables net.ipv6.conf.all.forwarding)
outside=(/var/lib/cni /var/log/containers /var/log/pods)

# --- processes -----------------------------------------------------------

# start NAME CMD...: runs CMD in a session of its own, log DIR/log/NAME.log,
# PID in DIR/pids/NAME.
start() {
    local name=$1
    shift
    mkdir -p "$dir/pids" "$dir/log"
    setsid "$@" >"$dir/log/$name.log" 2>&1 </dev/null &
    echo $! >"$dir/pids/$name"
}

alive() {
    local pid
    pid=$(cat "$dir/pids/$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ -e "/proc/$pid" ] &&
        [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]
}

# stop_pid PID [SECONDS]: TERM, then KILL after SECONDS (default 20).
stop_pid() {
    local pid=$1 wait=${2:-20} deadline
    [ -e "/proc/$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    deadline=$((SECONDS + wait))
    while [ -e "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
        if ((SECONDS >= deadline)); then
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
}

stop() {
    local pid
    pid=$(cat "$dir/pids/$1" 2>/dev/null) || return 0
    if [ -n "$pid" ]; then
        stop_pid "$pid" "${2:-20}"
        log "stopped $1 (pid $pid)"
    fi
    rm -f "$dir/pids/$1"
}

# Waits up to $1 seconds for the command after it to succeed; NAME for the
# message is $2.
await() {
    local limit=$1 what=$2 deadline
    shift 2
    deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "$what not ready after ${limit}s (logs: $dir/log)"
        sleep 0.2
    done
}

free_port() {
    python3 - "$1" <<'EOF'
import socket, sys
for port in range(int(sys.argv[1]), int(sys.argv[1]) + 500):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit(1)
EOF
}

kc() { "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" "$@"; }
ctrc() { ctr --address "$ctr_sock" -n k8s.io "$@"; }

# --- certificates ---------------------------------------------------------

make_pki() {
    local p=$dir/pki
    mkdir -p "$p"
    [ -f "$p/admin.crt" ] && return 0
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=rl-k8s-ca \
        -keyout "$p/ca.key" -out "$p/ca.crt" 2>/dev/null
    cat >"$p/apiserver.ext" <<EOF
subjectAltName=IP:$host_ip,IP:$svc_api_ip,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:$node
extendedKeyUsage=serverAuth,clientAuth
EOF
    # Also the client the apiserver shows the kubelet (exec, logs,
    # port-forward), which the kubelet authorises through the apiserver.
    sign apiserver /CN=kube-apiserver/O=system:masters "$p/apiserver.ext"
    echo "extendedKeyUsage=serverAuth" >"$p/kubelet.ext"
    echo "subjectAltName=IP:$host_ip,DNS:$node" >>"$p/kubelet.ext"
    sign kubelet "/CN=system:node:$node/O=system:nodes" "$p/kubelet.ext"
    echo "extendedKeyUsage=clientAuth" >"$p/client.ext"
    # One cluster-admin identity for the control plane's parts, the node,
    # kube-proxy, CoreDNS and the tests: the chart's RBAC is what is under
    # test, not the cluster's own.
    sign admin /CN=rl-admin/O=system:masters "$p/client.ext"
    openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
    openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
}

sign() {
    local p=$dir/pki name=$1 subj=$2 ext=$3
    openssl req -newkey rsa:2048 -nodes -subj "$subj" -keyout "$p/$name.key" \
        -out "$p/$name.csr" 2>/dev/null
    openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" \
        -CAcreateserial -days 2 -extfile "$ext" -out "$p/$name.crt" 2>/dev/null
}

write_kubeconfig() {
    local p=$dir/pki
    cat >"$dir/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: rl
  cluster:
    server: https://$host_ip:$(cat "$dir/ports/apiserver")
    certificate-authority: $p/ca.crt
users:
- name: rl-admin
  user:
    client-certificate: $p/admin.crt
    client-key: $p/admin.key
contexts:
- name: rl
  context: {cluster: rl, user: rl-admin}
current-context: rl
EOF
}

# --- the machine: sysctls, iptables, network ------------------------------

save_machine() {
    local k v
    [ -f "$dir/sysctl.saved" ] && return 0
    for k in "${sysctls[@]}"; do
        v=$(sysctl -n "$k" 2>/dev/null) || continue
        printf '%s=%s\n' "$k" "$v"
    done >"$dir/sysctl.saved.tmp"
    iptables-save >"$dir/iptables.saved"
    if command -v ipset >/dev/null 2>&1; then
        ipset list -n >"$dir/ipset.saved" 2>/dev/null || : >"$dir/ipset.saved"
    fi
    ip6tables-save >"$dir/ip6tables.saved" 2>/dev/null || : >"$dir/ip6tables.saved"
    # Folders outside DIR the parts write to whatever their configuration
    # says: the CNI plugins' result cache and the kubelet's log links.
    for k in "${outside[@]}"; do
        [ -e "$k" ] && echo "$k"
    done >"$dir/outside.saved"
    mv "$dir/sysctl.saved.tmp" "$dir/sysctl.saved"
}

restore_machine() {
    local line k v now
    if [ -f "$dir/sysctl.saved" ]; then
        while IFS= read -r line; do
            k=${line%%=*}
            v=${line#*=}
            now=$(sysctl -n "$k" 2>/dev/null) || continue
            if [ "$now" != "$v" ]; then
                sysctl -q -w "$k=$v" >/dev/null && log "restored $k=$v (was $now)"
            fi
        done <"$dir/sysctl.saved"
    fi
    if [ -f "$dir/iptables.saved" ]; then
        [ -x "$bin/kube-proxy" ] && "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
        # Tables the parts created that did not exist before are emptied;
        # the ones that did get their saved contents back.
        local t
        for t in filter nat mangle raw security; do
            grep -q "^\*$t\$" "$dir/iptables.saved" && continue
            iptables -t "$t" -F 2>/dev/null || true
            iptables -t "$t" -X 2>/dev/null || true
        done
        iptables-restore <"$dir/iptables.saved" && log "restored iptables"
        for t in filter nat mangle raw security; do
            grep -q "^\*$t\$" "$dir/ip6tables.saved" && continue
            ip6tables -t "$t" -F 2>/dev/null || true
            ip6tables -t "$t" -X 2>/dev/null || true
        done
        [ -s "$dir/ip6tables.saved" ] && ip6tables-restore <"$dir/ip6tables.saved"
        rm -f "$dir/iptables.saved" "$dir/ip6tables.saved"
    fi
    # kube-router's sets, now that no rule names them.
    if [ -f "$dir/ipset.saved" ]; then
        local set n=0
        for set in $(ipset list -n 2>/dev/null); do
            grep -qxF "$set" "$dir/ipset.saved" && continue
            ipset destroy "$set" 2>/dev/null && n=$((n + 1))
        done
        [ "$n" -eq 0 ] || log "destroyed $n ipsets"
        rm -f "$dir/ipset.saved"
    fi
    # What the parts left outside DIR: entries made since `up` began in
    # folders that existed, and the folders that did not.
    if [ -f "$dir/outside.saved" ]; then
        for k in "${outside[@]}"; do
            if grep -qxF "$k" "$dir/outside.saved"; then
                find "$k" -mindepth 1 -newer "$dir/outside.saved" \( -type f -o -type l \) \
                    -delete 2>/dev/null
            elif [ -e "$k" ]; then
                rm -rf "$k" && log "removed $k"
            fi
        done
        rm -f "$dir/outside.saved"
    fi
    rm -f "$dir/sysctl.saved"
}

net_up() {
    ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
    ip addr replace "$host_ip/16" dev "$bridge"
    ip link set "$bridge" up
    ip route replace "$host_cidr" dev "$bridge" table "$rt_table"
    ip route replace "$svc_cidr" dev "$bridge" table "$rt_table"
    ip route replace unreachable default table "$rt_table"
    ip rule show | grep -q "lookup $rt_table" ||
        ip rule add iif "$bridge" lookup "$rt_table" priority "$rt_prio"
    # Pod to a Service backed by a pod on the same bridge: the reply must
    # pass iptables to be un-NATed.
    sysctl -q -w net.bridge.bridge-nf-call-iptables=1 >/dev/null
}

net_down() {
    while ip rule show | grep -q "lookup $rt_table"; do
        ip rule del priority "$rt_prio" 2>/dev/null || break
    done
    ip route flush table "$rt_table" 2>/dev/null || true
    if ip link show "$bridge" >/dev/null 2>&1; then
        ip link del "$bridge" && log "removed bridge $bridge"
    fi
}

# --- containerd, the pause image ------------------------------------------

write_containerd_config() {
    mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam"
    cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$ctr_sock"
[ttrpc]
  address = "$ctr_sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
EOF
    cat >"$dir/cni/net.d/10-rl-k8s.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "rl-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni/ipam",
        "ranges": [[{"subnet": "$host_cidr", "rangeStart": "$pod_first",
                     "rangeEnd": "$pod_last", "gateway": "$host_ip"}]]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

# The sandbox image: tests/k8s/pause.c, static, alone in a scratch image.
pause_archive() {
    local out=$cache/k8s-$k8s_version/pause.tar src=$here/pause.c
    if [ -f "$out" ] && [ "$out" -nt "$src" ]; then
        echo "$out"
        return
    fi
    local work c
    work=$(mktemp -d)
    gcc -static -O2 -o "$work/pause" "$src" >&2
    c=$(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs from scratch)
    buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs \
        copy "$c" "$work/pause" /pause >/dev/null
    buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs \
        config --entrypoint '["/pause"]' --user 65535:65535 "$c"
    buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs \
        commit --quiet "$c" "$pause_image" >/dev/null
    buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs \
        push --quiet "$pause_image" "docker-archive:$out.tmp:$pause_image" >&2
    mv "$out.tmp" "$out"
    buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs \
        rm -a >/dev/null 2>&1 || true
    umount -R "$work/storage" 2>/dev/null || true
    rm -rf "$work"
    echo "$out"
}

# --- up -------------------------------------------------------------------

up() {
    local t0=$SECONDS p pp t
    for t in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl coredns; do
        [ -x "$bin/$t" ] || die "$bin/$t missing: run tests/k8s/build.sh"
    done
    mkdir -p "$dir/ports" "$dir/log"
    if alive kubelet && kc get node "$node" >/dev/null 2>&1; then
        log "cluster already up in $dir"
        return
    fi
    save_machine
    make_pki
    net_up

    p=$(free_port 23790)
    pp=$(free_port $((p + 1)))
    echo "$p" >"$dir/ports/etcd"
    start etcd etcd --name rl --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$p" \
        --advertise-client-urls "http://127.0.0.1:$p" \
        --listen-peer-urls "http://127.0.0.1:$pp" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
        --initial-cluster "rl=http://127.0.0.1:$pp" \
        --quota-backend-bytes 1073741824
    await 30 etcd curl -sf "http://127.0.0.1:$p/health"

    p=$(free_port 26443)
    echo "$p" >"$dir/ports/apiserver"
    write_kubeconfig
    start kube-apiserver "$bin/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$(cat "$dir/ports/etcd")" \
        --bind-address "$host_ip" --advertise-address "$host_ip" --secure-port "$p" \
        --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
        --client-ca-file "$dir/pki/ca.crt" \
        --kubelet-client-certificate "$dir/pki/apiserver.crt" \
        --kubelet-client-key "$dir/pki/apiserver.key" \
        --kubelet-certificate-authority "$dir/pki/ca.crt" \
        --kubelet-preferred-address-types InternalIP \
        --service-cluster-ip-range "$svc_cidr" \
        --service-account-issuer https://kubernetes.default.svc \
        --service-account-key-file "$dir/pki/sa.pub" \
        --service-account-signing-key-file "$dir/pki/sa.key" \
        --authorization-mode Node,RBAC \
        --profiling=false --cert-dir "$dir/pki/apiserver-generated"
    await 90 kube-apiserver kc get --raw /readyz

    start kube-controller-manager "$bin/kube-controller-manager" \
        --kubeconfig "$dir/admin.kubeconfig" --leader-elect=false \
        --bind-address 127.0.0.1 --secure-port 0 \
        --root-ca-file "$dir/pki/ca.crt" \
        --service-account-private-key-file "$dir/pki/sa.key" \
        --cluster-signing-cert-file "$dir/pki/ca.crt" \
        --cluster-signing-key-file "$dir/pki/ca.key" \
        --use-service-account-credentials=false \
        --service-cluster-ip-range "$svc_cidr"
    start kube-scheduler "$bin/kube-scheduler" \
        --kubeconfig "$dir/admin.kubeconfig" --leader-elect=false \
        --bind-address 127.0.0.1 --secure-port "$(free_port 27259)"

    write_containerd_config
    start containerd containerd --config "$dir/containerd/config.toml"
    await 30 containerd ctrc version
    ctrc images import --no-unpack "$(pause_archive)" >/dev/null
    ctrc images ls -q | grep -x "$pause_image" >/dev/null ||
        die "the pause image is not in containerd after the import"

    cat >"$dir/resolv.conf" <<EOF
nameserver $host_ip
EOF
    p=$(free_port 20250)
    echo "$p" >"$dir/ports/kubelet"
    mkdir -p "$dir/kubelet" "$dir/pod-logs"
    cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $host_ip
port: $p
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $dir/pki/kubelet.crt
tlsPrivateKeyFile: $dir/pki/kubelet.key
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$ctr_sock
clusterDNS: [$host_ip]
clusterDomain: cluster.local
resolvConf: $dir/resolv.conf
podLogsDir: $dir/pod-logs
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
protectKernelDefaults: false
maxPods: 60
EOF
    start kubelet "$bin/kubelet" --config "$dir/kubelet.yaml" \
        --kubeconfig "$dir/admin.kubeconfig" --root-dir "$dir/kubelet" \
        --cert-dir "$dir/pki/kubelet-generated" \
        --hostname-override "$node" --node-ip "$host_ip"

    start kube-proxy "$bin/kube-proxy" --kubeconfig "$dir/admin.kubeconfig" \
        --proxy-mode iptables --hostname-override "$node" \
        --cluster-cidr "$host_cidr" \
        --bind-address "$host_ip" \
        --metrics-bind-address "127.0.0.1:$(free_port 20249)" \
        --healthz-bind-address "127.0.0.1:$(free_port 20256)" \
        --iptables-localhost-nodeports=false \
        --conntrack-max-per-core 0 \
        --conntrack-tcp-timeout-established 0 \
        --conntrack-tcp-timeout-close-wait 0

    cat >"$dir/Corefile" <<EOF
.:53 {
    bind $host_ip
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $dir/admin.kubeconfig rl
        pods insecure
    }
    # Nothing leaves the machine: other names are not resolved.
}
EOF
    start coredns "$bin/coredns" -conf "$dir/Corefile"

    await "$ready_timeout" "node $node" \
        kc wait --for=condition=Ready "node/$node" --timeout=2s
    for svc in kube-controller-manager kube-scheduler kube-proxy coredns containerd; do
        alive "$svc" || die "$svc exited (log: $dir/log/$svc.log)"
    done
    # The default ServiceAccount exists once the controller manager runs;
    # pods cannot be created in a namespace before it.
    await 60 "the default ServiceAccount" kc -n default get serviceaccount default
    echo "$((SECONDS - t0))" >"$dir/up-seconds"
    log "node $node Ready in $((SECONDS - t0))s ($k8s_version; KUBECONFIG=$dir/admin.kubeconfig)"
}

# --- policy ---------------------------------------------------------------

# kube-router v2's NetworkPolicy controller as a process on the node, as its
# DaemonSet would run it with hostNetwork: iptables chains per pod and per
# policy in the filter table, the peers in ipsets. With the bridge plugin,
# pod-to-pod traffic on rlk8s0 passes iptables' FORWARD chain through
# br_netfilter (net.bridge.bridge-nf-call-iptables=1, set by net_up).
policy() {
    local hp
    [ -x "$bin/kube-router" ] || die "$bin/kube-router missing: run tests/k8s/build.sh"
    command -v ipset >/dev/null 2>&1 || die "ipset is not installed (tests/k8s/deps.sh)"
    alive kubelet || die "no cluster in $dir"
    [ -f "$dir/ipset.saved" ] || die "no ipset list saved by up in $dir"
    if alive kube-router; then
        log "kube-router already runs"
        return
    fi
    # Its controller reads the node's pod CIDR, which no controller
    # allocates here (the bridge plugin's host-local IPAM has the range).
    if [ -z "$(kc get node "$node" -o jsonpath='{.spec.podCIDR}')" ]; then
        kc patch node "$node" --type merge \
            -p "{\"spec\":{\"podCIDR\":\"$host_cidr\",\"podCIDRs\":[\"$host_cidr\"]}}" >/dev/null
    fi
    hp=$(free_port 20244)
    start kube-router "$bin/kube-router" --kubeconfig "$dir/admin.kubeconfig" \
        --hostname-override "$node" \
        --run-firewall=true --run-router=false --run-service-proxy=false \
        --enable-cni=false \
        --service-cluster-ip-range "$svc_cidr" \
        --health-port "$hp" --metrics-port 0
    await 60 kube-router curl -sf "http://127.0.0.1:$hp/healthz"
    alive kube-router || die "kube-router exited (log: $dir/log/kube-router.log)"
    log "kube-router's NetworkPolicy controller runs (log: $dir/log/kube-router.log)"
}

# --- down -----------------------------------------------------------------

# Processes in the kubelet's cgroups, in any hierarchy.
pod_pids() {
    find /sys/fs/cgroup/*/kubepods* -name cgroup.procs 2>/dev/null |
        xargs -r cat 2>/dev/null | sort -u
}

# containerd's shims for our socket.
shim_pids() {
    local f pid
    for f in /proc/[0-9]*/cmdline; do
        pid=${f#/proc/}
        pid=${pid%/cmdline}
        tr '\0' ' ' 2>/dev/null <"$f" | grep -q "containerd-shim.*$ctr_sock" &&
            echo "$pid"
    done
    return 0
}

down() {
    local pid id m
    set +e
    stop kube-router 10
    stop coredns 5
    stop kube-proxy 10
    stop kubelet 20
    stop kube-scheduler 10
    stop kube-controller-manager 10
    if alive containerd; then
        for id in $(ctrc tasks ls -q 2>/dev/null); do
            ctrc tasks kill -s SIGKILL "$id" >/dev/null 2>&1
        done
        for pid in $(pod_pids); do stop_pid "$pid" 5; done
        for id in $(ctrc tasks ls -q 2>/dev/null); do
            ctrc tasks delete -f "$id" >/dev/null 2>&1
        done
    fi
    stop containerd 20
    for pid in $(pod_pids) $(shim_pids); do
        kill -KILL "$pid" 2>/dev/null && log "killed left-over pid $pid"
    done
    stop kube-apiserver 20
    stop etcd 20

    # Mounts under DIR (volumes, snapshots, network namespaces), deepest
    # first.
    for m in $(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done
    m=$(awk -v d="$dir/" 'index($5, d) == 1' /proc/self/mountinfo | wc -l)
    [ "$m" -eq 0 ] || log "warning: $m mounts under $dir remain"
    # The kubelet's cgroups, leaves first.
    find /sys/fs/cgroup/*/kubepods* -depth -type d 2>/dev/null | xargs -r rmdir 2>/dev/null
    m=$(find /sys/fs/cgroup/*/kubepods* -maxdepth 0 -type d 2>/dev/null | wc -l)
    [ "$m" -eq 0 ] || log "warning: $m kubepods cgroups remain"

    net_down
    restore_machine
    rm -f "$dir/pids/"* "$dir/up-seconds"
    rm -rf "$dir/containerd/state" "$dir/kubelet" "$dir/etcd" "$dir/cni/ipam"
    log "down"
    set -e
}

case "$cmd" in
up) up ;;
policy) policy ;;
down) down ;;
env)
    [ -f "$dir/admin.kubeconfig" ] || die "no cluster in $dir"
    echo "KUBECONFIG=$dir/admin.kubeconfig"
    echo "K8S_HOST_IP=$host_ip"
    echo "K8S_BIN=$bin"
    echo "K8S_CONTAINERD_SOCK=$ctr_sock"
    echo "K8S_PAUSE_IMAGE=$pause_image"
    ;;
*) usage ;;
esac
