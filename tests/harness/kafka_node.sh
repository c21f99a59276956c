# kafka_node.sh — sourced by kafka.sh and kafka_cluster.sh: what one Kafka
# node (a KRaft broker and controller in one JVM, in a folder of its own)
# needs, whichever script lays the nodes out. Expects die(), $kafka_version,
# $libs (the jar folder) and $heap (the JVM's heap options); $jvm_extra,
# when set, adds JVM options.

port_is_free() {
    python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
EOF
}

# Whether ports $@ are free within 10 s: a broker just stopped frees its
# own when the kernel has closed the last of its sockets.
ports_freed() {
    local p deadline=$((SECONDS + 10))
    for p in "$@"; do
        until port_is_free "$p"; do
            ((SECONDS < deadline)) || return 1
            sleep 0.2
        done
    done
}

java_cp() {
    [ -f "$libs/.complete" ] ||
        die "kafka $kafka_version jars missing in $libs: run KAFKA_VERSION=$kafka_version tests/harness/deps.sh"
    command -v java >/dev/null 2>&1 || die "java not found: run tests/harness/deps.sh"
    echo "$libs/*"
}

# The pid of node folder $1's JVM, if its pid file names a live process
# that runs that folder's configuration (a pid can be reused after a
# crash; never signal a stranger).
node_dir_pid() {
    local pid
    [ -f "$1/broker.pid" ] || return 1
    pid=$(cat "$1/broker.pid")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$1/server.properties" || return 1
    echo "$pid"
}

# Up to 3.x the broker logs through log4j 1 (reload4j), from 4.0 on through
# log4j2, which without a configuration of its own prints an error on every
# start. Either way: everything to node folder $1's broker.log, nothing on
# the console.
log_jvm_opt() {
    case "$kafka_version" in
    [0-3].*) echo "-Dlog4j.configuration=file:$1/log4j.properties" ;;
    *) echo "-Dlog4j2.configurationFile=$1/log4j2.xml" ;;
    esac
}

xml_escape() {
    sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<<"$1"
}

write_log_config() {
    local nd=$1
    case "$kafka_version" in
    [0-3].*)
        cat >"$nd/log4j.properties" <<EOF
# Written by the test harness: everything to broker.log, nothing on the
# console.
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$nd/broker.log
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.kafka.log.LogCleaner=WARN
EOF
        ;;
    *)
        cat >"$nd/log4j2.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by the test harness: everything to broker.log, nothing on
     the console; log4j2's own warnings go to stdout.log. -->
<Configuration status="warn">
  <Appenders>
    <File name="file" fileName="$(xml_escape "$nd/broker.log")" append="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="file"/></Root>
    <Logger name="kafka.request.logger" level="warn"/>
    <Logger name="state.change.logger" level="warn"/>
    <Logger name="org.apache.kafka.clients" level="warn"/>
    <Logger name="kafka.log.LogCleaner" level="warn"/>
  </Loggers>
</Configuration>
EOF
        ;;
    esac
}

# Kafka's Uuid text form: 16 random bytes, URL-safe base64 without padding,
# never starting with '-' (Uuid.randomUuid() rejects those too).
cluster_id() {
    python3 -c '
import base64, uuid
while True:
    s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not s.startswith("-"):
        print(s)
        break'
}

# Formats node folder $1's storage with cluster id $2.
format_node() {
    local nd=$1 cp
    cp=$(java_cp)
    java -Xmx256m "$(log_jvm_opt "$nd")" \
        -cp "$cp" kafka.tools.StorageTool format -t "$2" \
        -c "$nd/server.properties" >"$nd/format.log" 2>&1 || {
        cat "$nd/format.log" >&2
        die "could not format kafka storage in $nd/data"
    }
}

# Starts node folder $1's JVM in a session of its own (a Ctrl-C to make or
# ctest does not reach it) and records its pid before anything can fail.
# The shell writes its own pid and execs java, so the pid is the JVM's even
# if setsid forks.
launch_node() {
    local nd=$1 cp deadline pidfile=$1/broker.pid
    cp=$(java_cp)
    rm -f "$pidfile"
    # shellcheck disable=SC2016,SC2086 # $$ is for the inner shell; heap
    # and jvm_extra hold several options
    setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' \
        "$pidfile" java $heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        ${jvm_extra:-} -Djava.awt.headless=true \
        "$(log_jvm_opt "$nd")" -Dkafka.logs.dir="$nd" \
        -cp "$cp" kafka.Kafka "$nd/server.properties" \
        >>"$nd/stdout.log" 2>&1 </dev/null &
    # Not a job of this shell: a later `kill` needs no "Killed" notice.
    disown
    deadline=$((SECONDS + 10))
    until [ -s "$pidfile" ]; do
        ((SECONDS < deadline)) || die "the Kafka process in $nd did not start"
        sleep 0.05
    done
}

# Sends signal $2 to node folder $1's JVM and waits up to $3 seconds for
# it to exit.
signal_node() {
    local nd=$1 sig=$2 wait_s=$3 pid deadline
    pid=$(node_dir_pid "$nd") || return 0
    kill "-$sig" "$pid" 2>/dev/null || true
    deadline=$((SECONDS + wait_s))
    while [ -e "/proc/$pid" ]; do
        # A zombie has exited; only its parent can reap it. A JVM's main
        # thread is a zombie too while its other threads still tear down,
        # holding the process's sockets (and ports) until the last one
        # goes: done when the zombie is alone.
        if [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] &&
            [ "$(find "/proc/$pid/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)" -le 1 ]; then
            break
        fi
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
    rm -f "$nd/broker.pid"
}
