#!/usr/bin/env bash
# kafka.sh start|stop|kill|restart|reformat|env DIR — a single-node Kafka (KRaft,
# broker and controller in one JVM) in DIR, run from the jars deps.sh
# resolved into $RL_CACHE_DIR/kafka-<version>/ (default .cache/).
#
#   start    format fresh storage with a random cluster id (wiping an
#            earlier one made by this script), start the broker on free
#            loopback ports, wait until it answers metadata, create the
#            default topics; a broker already running in DIR is kept
#   stop     SIGTERM (controlled shutdown), SIGKILL after 60 s (idempotent)
#   kill     SIGKILL: the broker recovers its logs on restart
#   restart  start DIR's broker again, same version, ports and data, no
#            reformat (stops it first when it runs)
#   reformat stop DIR's broker, wipe its data and start a new cluster (a
#            fresh random cluster id, empty topics but the defaults) on the
#            same ports: a client sees its broker come back as another
#            cluster
#   env      print KAFKA_BOOTSTRAP_SERVERS=...
#
# Environment: KAFKA_VERSION (default: kafka.version in kafka/pom.xml; its
# jars must be resolved: `KAFKA_VERSION=... tests/harness/deps.sh`),
# KAFKA_LIBS_DIR (jar folder, default $RL_CACHE_DIR/kafka-<version>),
# KAFKA_HEAP_OPTS (default -Xmx512m -Xms256m), KAFKA_START_TIMEOUT
# (seconds, default 90), KAFKA_LISTEN_ADDRESS (the address the broker
# listens on and advertises, default 127.0.0.1; the Kubernetes tests give
# their bridge's, which pods reach; kept in DIR/address for a restart).
#
# Layout of DIR: server.properties, the logging configuration
# (log4j.properties up to 3.x, log4j2.xml from 4.0 on), data/ (log.dirs),
# broker.log, stdout.log, broker.pid, version, ports, env, bin/rl_topics.
# The topic tool (rl_topics.c) is compiled into $RL_CACHE_DIR/harness/
# (default .cache/harness/) and linked as bin/rl_topics.
set -euo pipefail

prog=kafka.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
usage() {
    echo "usage: $prog start|stop|kill|restart|reformat|env DIR" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2")
[ "$dir" != / ] || die "refusing to use / as the data folder"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# A restart runs the version DIR's storage was formatted by; anything else
# runs the version asked for.
if [ "$cmd" = restart ] && [ -f "$dir/version" ]; then
    kafka_version=$(cat "$dir/version")
elif [ -n "${KAFKA_VERSION:-}" ]; then
    kafka_version=$KAFKA_VERSION
else
    kafka_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' \
        "$root/tests/harness/kafka/pom.xml")
fi
[ -n "$kafka_version" ] || die "no kafka version: set KAFKA_VERSION"
libs=${KAFKA_LIBS_DIR:-${RL_CACHE_DIR:-$root/.cache}/kafka-$kafka_version}
heap=${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}
start_timeout=${KAFKA_START_TIMEOUT:-90}
port_base=${KAFKA_PORT_BASE:-29092}
if [ "$cmd" != start ] && [ "$cmd" != reformat ] && [ -f "$dir/address" ]; then
    addr=$(cat "$dir/address")
else
    addr=${KAFKA_LISTEN_ADDRESS:-127.0.0.1}
fi
marker=$dir/.runledger-kafka
# shellcheck source=kafka_node.sh
. "$root/tests/harness/kafka_node.sh"
# The topics every Runledger test and the demo expect (name:partitions).
default_topics=(runledger.schedules:4 runledger.notifications:4 runledger.dlq:1)

# Brokers of tests running at once claim their ports here, so that a
# broker killed to be restarted (or reformatted) on its ports does not
# find them taken by another test's new broker meanwhile: a claim names
# its broker's folder and holds while that folder does (tests remove it).
claims=${TMPDIR:-/tmp}/rl-test-ports

# Whether port $1 is claimed by a broker folder other than this one.
port_claimed() {
    local owner
    owner=$(readlink "$claims/kafka-$1" 2>/dev/null) || return 1
    [ "$owner" != "$dir" ] && [ -f "$owner/ports" ] &&
        grep -qw -- "$1" "$owner/ports"
}

claim_ports() {
    local p
    mkdir -p "$claims" 2>/dev/null && chmod 1777 "$claims" 2>/dev/null || true
    for p in "$@"; do
        ln -sfn "$dir" "$claims/kafka-$p" 2>/dev/null || true
    done
}

# Prints the first free port at or above $1 that is not $2.
pick_port() {
    local port
    for ((port = $1; port < $1 + 200; port++)); do
        [ "$port" != "${2:-}" ] || continue
        if ! port_claimed "$port" && port_is_free "$port"; then
            echo "$port"
            return
        fi
    done
    die "no free port in $1..$(($1 + 199))"
}

broker_pid() { node_dir_pid "$dir"; }

write_config() {
    local port=$1 cport=$2
    cat >"$dir/server.properties" <<EOF
# Written by tests/harness/kafka.sh: one node, broker and controller.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$addr:$cport
listeners=PLAINTEXT://$addr:$port,CONTROLLER://$addr:$cport
advertised.listeners=PLAINTEXT://$addr:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=4
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
# The log cleaner allocates its dedupe buffer (128 MiB by default) as one
# array when the broker starts: in a test's small heap that can fail with
# OutOfMemoryError and the node exits during start. The compacted topics
# here (__consumer_offsets and the like) are tiny.
log.cleaner.dedupe.buffer.size=16777216
# After a SIGKILL the restarted broker cannot register until the controller
# drops its old session: a short session keeps restart in fault tests quick.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=4000
num.network.threads=2
num.io.threads=4
EOF
    write_log_config "$dir"
    printf '%s %s\n' "$port" "$cport" >"$dir/ports"
    echo "$addr" >"$dir/address"
}

format_storage() { format_node "$dir" "$(cluster_id)"; }

launch() { launch_node "$dir"; }

# Compiled once per source version into the repository's cache (every
# fresh start wipes DIR; fault tests start many brokers).
rl_topics_bin() {
    local src=$root/tests/harness/rl_topics.c bin tmp
    bin=${RL_CACHE_DIR:-$root/.cache}/harness/rl_topics-$(sha256sum "$src" | cut -c1-12)
    if [ ! -x "$bin" ]; then
        mkdir -p "$(dirname "$bin")"
        tmp=$(mktemp "$bin.XXXXXX")
        # shellcheck disable=SC2046 # pkg-config prints several flags
        cc -std=c11 -O1 -Wall -Wextra -o "$tmp" "$src" \
            $(pkg-config --cflags --libs rdkafka) || {
            rm -f "$tmp"
            die "could not compile $src (is librdkafka-dev installed?)"
        }
        mv -f "$tmp" "$bin"
    fi
    echo "$bin"
}

# Waits (bounded) until the broker answers a metadata request; fails early
# when the JVM has exited. Returns 3 when it exited because a port was taken
# (the caller may retry on other ports).
wait_ready() {
    local port deadline
    read -r port _ <"$dir/ports"
    deadline=$((SECONDS + start_timeout))
    until kcat -L -b "$addr:$port" -t __probe -m 2 >/dev/null 2>&1; do
        if ! broker_pid >/dev/null; then
            if grep -qs 'Address already in use' "$dir/broker.log" "$dir/stdout.log"; then
                return 3
            fi
            tail -n 30 "$dir/broker.log" "$dir/stdout.log" >&2 || true
            die "kafka broker exited during start (log: $dir/broker.log)"
        fi
        if ((SECONDS >= deadline)); then
            tail -n 30 "$dir/broker.log" >&2 || true
            die "kafka broker on port $port not ready after ${start_timeout}s (log: $dir/broker.log)"
        fi
        sleep 0.5
    done
}

# The cluster id kafka.sh formatted DIR's storage with.
our_cluster_id() {
    sed -n 's/^cluster\.id=//p' "$dir/data/meta.properties"
}

# Checks that the broker on our port is ours (returns 3 when another
# harness's broker holds it), then creates the default topics.
create_topics() {
    local port bin rc=0
    read -r port _ <"$dir/ports"
    bin=$(rl_topics_bin)
    # Other scripts (the image smoke test) create their topics with it.
    mkdir -p "$dir/bin"
    ln -sf "$bin" "$dir/bin/rl_topics"
    "$bin" --cluster-id="$(our_cluster_id)" "$addr:$port" 60000 \
        "${default_topics[@]}" || rc=$?
    case "$rc" in
    0) ;;
    3) return 3 ;;
    *) die "could not create the default topics (log: $dir/broker.log)" ;;
    esac
}

write_env() {
    local port
    read -r port _ <"$dir/ports"
    echo "KAFKA_BOOTSTRAP_SERVERS=$addr:$port" >"$dir/env"
}

# Sends $1 to the broker and waits up to $2 seconds for it to exit.
signal_and_wait() { signal_node "$dir" "$1" "$2"; }

stop_broker() {
    if ! broker_pid >/dev/null; then
        echo "$prog: not running in $dir"
        return
    fi
    if ! signal_and_wait TERM 60; then
        echo "$prog: broker ignored SIGTERM for 60s, killing it" >&2
        signal_and_wait KILL 10 || die "could not kill the broker"
    fi
    echo "$prog: stopped $dir"
}

start_fresh() {
    local port cport rc from

    if [ -e "$dir" ] && [ ! -e "$marker" ] && [ -n "$(ls -A "$dir")" ]; then
        die "$dir exists and was not made by $prog: refusing to wipe it"
    fi
    java_cp >/dev/null
    rl_topics_bin >/dev/null
    from=$port_base
    for _ in 1 2 3 4 5; do
        rm -rf "$dir"
        mkdir -p "$dir/data"
        touch "$marker"
        port=$(pick_port "$from")
        cport=$(pick_port $((port + 1)) "$port")
        write_config "$port" "$cport"
        claim_ports "$port" "$cport"
        echo "$kafka_version" >"$dir/version"
        format_storage
        launch
        rc=0
        wait_ready || rc=$?
        [ "$rc" -ne 0 ] || create_topics || rc=$?
        if [ "$rc" -eq 0 ]; then
            write_env
            return
        fi
        # Another process bound a port between the check and our bind: our
        # JVM dies (or is about to); try again on other ports.
        echo "$prog: port $port or $cport was taken meanwhile, retrying" >&2
        signal_and_wait KILL 10 || die "could not kill the broker"
        # Harnesses that collided once would collide again in lockstep.
        from=$((cport + 1 + RANDOM % 16))
    done
    die "kafka could not bind its ports after 5 attempts"
}

case "$cmd" in
start)
    if broker_pid >/dev/null; then
        # Tests of one version must not pass against a broker of another.
        running=$(cat "$dir/version" 2>/dev/null || echo unknown)
        [ "$running" = "$kafka_version" ] ||
            die "the broker running in $dir is kafka $running, not $kafka_version: stop it first"
        wait_ready || die "kafka broker in $dir is not answering"
        create_topics || die "another broker answers on this broker's port"
        write_env
        echo "$prog: already running in $dir"
    else
        start_fresh
    fi
    cat "$dir/env"
    ;;
restart)
    if [ ! -f "$dir/server.properties" ] || [ ! -f "$dir/data/meta.properties" ]; then
        die "no formatted broker in $dir: use start"
    fi
    stop_broker >/dev/null
    read -r port cport <"$dir/ports"
    ports_freed "$port" "$cport" || die "port $port or $cport is taken: cannot restart on the same ports"
    launch
    wait_ready || die "kafka broker could not bind its ports again"
    create_topics || die "another broker took this broker's port"
    write_env
    cat "$dir/env"
    ;;
reformat)
    if [ ! -f "$dir/server.properties" ] || [ ! -f "$dir/ports" ]; then
        die "no broker was started in $dir: use start"
    fi
    stop_broker >/dev/null
    read -r port cport <"$dir/ports"
    ports_freed "$port" "$cport" || die "port $port or $cport is taken: cannot reformat on the same ports"
    rm -rf "$dir/data"
    mkdir -p "$dir/data"
    format_storage
    launch
    wait_ready || die "kafka broker could not bind its ports again"
    create_topics || die "another broker took this broker's port"
    write_env
    cat "$dir/env"
    ;;
stop)
    stop_broker
    ;;
kill)
    if pid=$(broker_pid); then
        signal_and_wait KILL 10 || die "broker $pid survived SIGKILL"
        echo "$prog: killed broker $pid"
    else
        echo "$prog: not running in $dir"
    fi
    ;;
env)
    [ -f "$dir/env" ] || die "no broker was started in $dir"
    broker_pid >/dev/null || die "kafka broker in $dir is not running"
    cat "$dir/env"
    ;;
*)
    usage
    ;;
esac
