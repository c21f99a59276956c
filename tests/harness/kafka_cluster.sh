#!/usr/bin/env bash
# kafka_cluster.sh start|stop|env DIR
# kafka_cluster.sh kill|restart DIR NODE
#
# A three-node Kafka cluster (KRaft) in DIR, run from the same jars as
# kafka.sh ($RL_CACHE_DIR/kafka-<version>/, resolved by deps.sh). Every
# node is broker and controller in one JVM; the three form a static
# 3-voter controller quorum, so the cluster survives the loss of any one
# node. Topics get replication factor 3 and min.insync.replicas 2 by
# default (the internal offsets and transaction topics too): an acks=all
# write needs two live replicas, one node may be down.
#
#   start    format fresh storage for the three nodes with one random
#            cluster id (wiping an earlier one made by this script), start
#            them on free loopback ports, wait until every node answers
#            metadata and sees all three brokers; print
#            KAFKA_BOOTSTRAP_SERVERS=host:port,host:port,host:port
#   stop     SIGTERM every node (controlled shutdown), SIGKILL after 60 s
#   kill     SIGKILL node NODE (1, 2 or 3): it recovers its logs on restart
#   restart  start node NODE again, same ports and data, and wait until it
#            answers metadata and sees all three brokers
#   env      print KAFKA_BOOTSTRAP_SERVERS=...
#
# Environment: KAFKA_VERSION (default: kafka.version in kafka/pom.xml),
# KAFKA_LIBS_DIR (jar folder, default $RL_CACHE_DIR/kafka-<version>),
# KAFKA_HEAP_OPTS (per node, default -Xmx384m -Xms192m), KAFKA_PORT_BASE
# (first port tried, default 21092: below the ephemeral range, so no
# client connection takes a killed node's port before it restarts),
# KAFKA_START_TIMEOUT (seconds, default 120).
#
# Layout of DIR: env, version, node<N>/ each with server.properties, the
# logging configuration, data/, broker.log, stdout.log, broker.pid, ports.
set -euo pipefail

prog=kafka_cluster.sh
nodes=(1 2 3)
die() {
    echo "$prog: $*" >&2
    exit 1
}
usage() {
    echo "usage: $prog start|stop|env DIR" >&2
    echo "       $prog kill|restart DIR NODE" >&2
    exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2")
node_arg=${3:-}
[ "$dir" != / ] || die "refusing to use / as the data folder"
case "$cmd" in
kill | restart)
    [ $# -eq 3 ] || usage
    case "$node_arg" in 1 | 2 | 3) ;; *) die "NODE must be 1, 2 or 3" ;; esac
    ;;
*) [ $# -eq 2 ] || usage ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ -f "$dir/version" ] && [ "$cmd" != start ]; then
    kafka_version=$(cat "$dir/version")
elif [ -n "${KAFKA_VERSION:-}" ]; then
    kafka_version=$KAFKA_VERSION
else
    kafka_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' \
        "$root/tests/harness/kafka/pom.xml")
fi
[ -n "$kafka_version" ] || die "no kafka version: set KAFKA_VERSION"
libs=${KAFKA_LIBS_DIR:-${RL_CACHE_DIR:-$root/.cache}/kafka-$kafka_version}
heap=${KAFKA_HEAP_OPTS:--Xmx384m -Xms192m}
start_timeout=${KAFKA_START_TIMEOUT:-120}
port_base=${KAFKA_PORT_BASE:-21092}
marker=$dir/.runledger-kafka-cluster
# Three JVMs on two cores: the C1 compiler only, for a quicker start.
jvm_extra=-XX:TieredStopAtLevel=1
# shellcheck source=kafka_node.sh
. "$root/tests/harness/kafka_node.sh"

# Prints six free ports at or above $1 (a listener and a controller port
# per node).
pick_ports() {
    local port found=()
    for ((port = $1; port < $1 + 400 && ${#found[@]} < 6; port++)); do
        if port_is_free "$port"; then
            found+=("$port")
        fi
    done
    [ ${#found[@]} -eq 6 ] || die "no six free ports in $1..$(($1 + 399))"
    echo "${found[@]}"
}

node_dir() { echo "$dir/node$1"; }

node_pid() { node_dir_pid "$(node_dir "$1")"; }

# Writes node $1's configuration; $2.. are the six ports (p1 c1 p2 c2 p3 c3).
write_config() {
    local id=$1 nd port cport voters
    shift
    local ports=("$@")
    nd=$(node_dir "$id")
    port=${ports[$(((id - 1) * 2))]}
    cport=${ports[$(((id - 1) * 2 + 1))]}
    voters="1@127.0.0.1:${ports[1]},2@127.0.0.1:${ports[3]},3@127.0.0.1:${ports[5]}"
    cat >"$nd/server.properties" <<EOF
# Written by tests/harness/kafka_cluster.sh: node $id of three, broker and
# controller, a static 3-voter quorum.
process.roles=broker,controller
node.id=$id
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$nd/data
num.partitions=6
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=6
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
# The log cleaner allocates its dedupe buffer (128 MiB by default) as one
# array when the broker starts: in a test's small heap that can fail with
# OutOfMemoryError and the node exits during start. The compacted topics
# here (__consumer_offsets and the like) are tiny.
log.cleaner.dedupe.buffer.size=16777216
# A node killed with SIGKILL is fenced once its session lapses; until then
# it still leads its partitions. A short session moves the leadership (and
# the group coordinator) within seconds, and lets the restarted node
# register again quickly.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=4000
# A follower behind by this long leaves the ISR: with one node down the
# other two must stay in it for acks=all writes to go on.
replica.lag.time.max.ms=10000
num.network.threads=2
num.io.threads=4
EOF
    write_log_config "$nd"
    printf '%s %s\n' "$port" "$cport" >"$nd/ports"
}

# Formats node $1's storage with cluster id $2.
format_storage() { format_node "$(node_dir "$1")" "$2"; }

launch() { launch_node "$(node_dir "$1")"; }

# 1 when node $1 answers metadata and lists all three brokers.
node_sees_all() {
    local port
    read -r port _ <"$(node_dir "$1")/ports"
    kcat -L -b "127.0.0.1:$port" -t __probe -m 2 2>/dev/null |
        grep -q '^ *3 brokers:'
}

# Checks that node $1's JVM runs. Returns 3 when it exited because a port
# was taken (the caller may retry on other ports); dies on any other exit.
node_alive() {
    local nd
    nd=$(node_dir "$1")
    node_pid "$1" >/dev/null && return 0
    if grep -qs 'Address already in use' "$nd/broker.log" "$nd/stdout.log"; then
        return 3
    fi
    tail -n 30 "$nd/broker.log" "$nd/stdout.log" >&2 || true
    die "node $1 exited during start (log: $nd/broker.log)"
}

# Waits (bounded) until each of the nodes given answers metadata and sees
# all three brokers, watching every one of them: a node that died leaves
# the others waiting for it. Returns 3 when one exited because a port was
# taken.
wait_ready() {
    local deadline n ready
    deadline=$((SECONDS + start_timeout))
    while :; do
        ready=1
        for n in "$@"; do
            node_alive "$n" || return $?
        done
        for n in "$@"; do
            node_sees_all "$n" || {
                ready=0
                break
            }
        done
        [ "$ready" -eq 0 ] || return 0
        if ((SECONDS >= deadline)); then
            for n in "$@"; do
                tail -n 30 "$(node_dir "$n")/broker.log" >&2 || true
            done
            die "nodes $* do not all see three brokers after ${start_timeout}s (logs: $dir/node*/broker.log)"
        fi
        sleep 0.5
    done
}

write_env() {
    local list="" port n
    for n in "${nodes[@]}"; do
        read -r port _ <"$(node_dir "$n")/ports"
        list="${list:+$list,}127.0.0.1:$port"
    done
    echo "KAFKA_BOOTSTRAP_SERVERS=$list" >"$dir/env"
}

# Sends $2 to node $1 and waits up to $3 seconds for it to exit.
signal_and_wait() { signal_node "$(node_dir "$1")" "$2" "$3"; }

kill_all() {
    local n
    for n in "${nodes[@]}"; do
        signal_and_wait "$n" KILL 10 || die "could not kill node $n"
    done
}

start_fresh() {
    local from ports id rc n
    if [ -e "$dir" ] && [ ! -e "$marker" ] && [ -n "$(ls -A "$dir")" ]; then
        die "$dir exists and was not made by $prog: refusing to wipe it"
    fi
    java_cp >/dev/null
    from=$port_base
    for _ in 1 2 3 4 5; do
        rm -rf "$dir"
        mkdir -p "$dir"
        touch "$marker"
        echo "$kafka_version" >"$dir/version"
        # shellcheck disable=SC2207 # six numbers
        ports=($(pick_ports "$from"))
        id=$(cluster_id)
        for n in "${nodes[@]}"; do
            mkdir -p "$(node_dir "$n")/data"
            write_config "$n" "${ports[@]}"
        done
        # The three formats and JVMs start in parallel: on two cores each
        # takes seconds.
        for n in "${nodes[@]}"; do
            format_storage "$n" "$id" &
        done
        wait
        for n in "${nodes[@]}"; do
            [ -f "$(node_dir "$n")/data/meta.properties" ] ||
                die "could not format node $n"
        done
        for n in "${nodes[@]}"; do
            launch "$n"
        done
        rc=0
        wait_ready "${nodes[@]}" || rc=$?
        if [ "$rc" -eq 0 ]; then
            write_env
            return
        fi
        echo "$prog: a port was taken meanwhile, retrying" >&2
        kill_all
        from=$((ports[5] + 1 + RANDOM % 16))
    done
    die "the cluster could not bind its ports after 5 attempts"
}

case "$cmd" in
start)
    running=0
    for n in "${nodes[@]}"; do
        if node_pid "$n" >/dev/null; then running=$((running + 1)); fi
    done
    if [ "$running" -eq 3 ]; then
        [ "$(cat "$dir/version" 2>/dev/null)" = "$kafka_version" ] ||
            die "the cluster running in $dir is another kafka version: stop it first"
        wait_ready "${nodes[@]}" || die "the nodes in $dir are not answering"
        write_env
        echo "$prog: already running in $dir"
    else
        [ "$running" -eq 0 ] || kill_all
        start_fresh
    fi
    cat "$dir/env"
    ;;
restart)
    nd=$(node_dir "$node_arg")
    [ -f "$nd/server.properties" ] && [ -f "$nd/data/meta.properties" ] ||
        die "no formatted node $node_arg in $dir: use start"
    signal_and_wait "$node_arg" KILL 10 || die "could not stop node $node_arg"
    read -r port cport <"$nd/ports"
    ports_freed "$port" "$cport" || die "port $port or $cport is taken: cannot restart node $node_arg on them"
    launch "$node_arg"
    wait_ready "$node_arg" || die "node $node_arg could not bind its ports again"
    write_env
    cat "$dir/env"
    ;;
kill)
    if pid=$(node_pid "$node_arg"); then
        signal_and_wait "$node_arg" KILL 10 || die "node $node_arg ($pid) survived SIGKILL"
        echo "$prog: killed node $node_arg ($pid)"
    else
        echo "$prog: node $node_arg is not running in $dir"
    fi
    ;;
stop)
    for n in "${nodes[@]}"; do
        if node_pid "$n" >/dev/null; then
            # Each stops on its own; the last one's controlled shutdown
            # finds no quorum and waits, so they go in parallel.
            (signal_and_wait "$n" TERM 60 || signal_and_wait "$n" KILL 10) &
        fi
    done
    wait
    for n in "${nodes[@]}"; do
        ! node_pid "$n" >/dev/null || die "could not stop node $n"
    done
    echo "$prog: stopped $dir"
    ;;
env)
    [ -f "$dir/env" ] || die "no cluster was started in $dir"
    for n in "${nodes[@]}"; do
        node_pid "$n" >/dev/null || die "node $n in $dir is not running"
    done
    cat "$dir/env"
    ;;
*)
    usage
    ;;
esac
