#!/usr/bin/env bash
# services.sh up|down|status [--only pg|pgbouncer|kafka|stub] — the real
# services the pg, kafka and e2e tests need, all on loopback, all throwaway:
#
#   pg     PostgreSQL 15 (tests/harness/pg.sh)        -> DATABASE_URL
#   pgbouncer  PgBouncer in front of it (pgbouncer.sh) -> PGBOUNCER_URL_SESSION,
#                                                  PGBOUNCER_URL_TRANSACTION
#   kafka  single-node KRaft broker (kafka.sh)        -> KAFKA_BOOTSTRAP_SERVERS
#   stub   the stub model server, when tests/stub/stub_model.py exists
#                                                     -> MODEL_BASE_URL
#
# `up` starts what is not running yet (a second `up` is a no-op) and writes
# the environment file as `export NAME=value` lines, for `. build/services.env`.
# When any start fails, `up` stops everything this run started and exits 1.
# `down` stops everything (idempotent), removes PostgreSQL's files (they
# live outside the services folder, see pg.sh; its log stays in pg/log) and
# removes the environment file.
#
# Environment: RL_SERVICES_DIR (default build/services), RL_SERVICES_ENV
# (default build/services.env), STUB_PORT_BASE, STUB_START_TIMEOUT.
set -euo pipefail

prog=services.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
usage() {
    echo "usage: $prog up|down|status [--only pg|pgbouncer|kafka|stub]" >&2
    exit 2
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
harness=$root/tests/harness
sdir=$(realpath -m -- "${RL_SERVICES_DIR:-$root/build/services}")
envfile=$(realpath -m -- "${RL_SERVICES_ENV:-$root/build/services.env}")
stub_script=$root/tests/stub/stub_model.py
stub_dir=$sdir/stub
stub_port_base=${STUB_PORT_BASE:-28080}
stub_timeout=${STUB_START_TIMEOUT:-30}

[ $# -ge 1 ] || usage
cmd=$1
shift
only=
while [ $# -gt 0 ]; do
    case "$1" in
    --only)
        [ $# -ge 2 ] || usage
        only=$2
        shift 2
        ;;
    --only=*)
        only=${1#--only=}
        shift
        ;;
    *) usage ;;
    esac
done
case "$only" in
'' | pg | pgbouncer | kafka | stub) ;;
*) die "unknown service \"$only\" (pg, pgbouncer, kafka or stub)" ;;
esac

wanted() {
    [ -z "$only" ] || [ "$only" = "$1" ]
}

# --- the stub model server ------------------------------------------------

stub_pid() {
    local pid
    [ -f "$stub_dir/pid" ] || return 1
    pid=$(cat "$stub_dir/pid")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$stub_script" || return 1
    echo "$pid"
}

http_ok() {
    python3 - "$1" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}

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

# The stub writes --port-file once it has bound the port: only then is the
# answer on that port known to be ours and not another harness's stub.
stub_start() {
    local port deadline
    if stub_pid >/dev/null && http_ok "http://127.0.0.1:$(cat "$stub_dir/port")/stats"; then
        echo "$prog: stub model already running"
        return
    fi
    stub_stop >/dev/null
    mkdir -p "$stub_dir"
    port=$stub_port_base
    for _ in 1 2 3; do
        while ! port_is_free "$port"; do
            port=$((port + 1))
            ((port < stub_port_base + 200)) || die "no free port for the stub model"
        done
        echo "$port" >"$stub_dir/port"
        rm -f "$stub_dir/pid" "$stub_dir/bound"
        # Own session: a Ctrl-C to make or ctest does not reach it.
        # shellcheck disable=SC2016 # $$ is for the inner shell
        setsid bash -c 'echo $$ >"$0" && exec "$@"' "$stub_dir/pid" \
            python3 "$stub_script" --port "$port" --port-file "$stub_dir/bound" \
            >"$stub_dir/stub.log" 2>&1 </dev/null 9>&- &
        deadline=$((SECONDS + stub_timeout))
        until [ -s "$stub_dir/bound" ] && http_ok "http://127.0.0.1:$port/stats"; do
            if [ -s "$stub_dir/pid" ] && ! stub_pid >/dev/null; then
                break
            fi
            if ((SECONDS >= deadline)); then
                tail -n 20 "$stub_dir/stub.log" >&2 || true
                die "stub model not answering GET /stats after ${stub_timeout}s (log: $stub_dir/stub.log)"
            fi
            sleep 0.2
        done
        if stub_pid >/dev/null; then
            echo "MODEL_BASE_URL=http://127.0.0.1:$port/v1" >"$stub_dir/env"
            cat "$stub_dir/env"
            return
        fi
        if ! grep -qi 'address already in use' "$stub_dir/stub.log"; then
            tail -n 20 "$stub_dir/stub.log" >&2 || true
            die "stub model exited during start (log: $stub_dir/stub.log)"
        fi
        echo "$prog: port $port was taken meanwhile, retrying" >&2
        port=$((port + 1))
    done
    die "stub model could not bind a port after 3 attempts"
}

stub_stop() {
    local pid deadline
    if ! pid=$(stub_pid); then
        echo "$prog: stub model not running"
        return
    fi
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while [ -e "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
        if ((SECONDS >= deadline)); then
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
    done
    rm -f "$stub_dir/pid"
    echo "$prog: stopped stub model"
}

# --- all of them ---------------------------------------------------------

# Writes the environment file from every service that is running now, so
# `up --only kafka` next to a running PostgreSQL keeps DATABASE_URL.
write_envfile() {
    local tmp line
    mkdir -p "$(dirname "$envfile")"
    tmp=$envfile.tmp
    {
        echo "# Written by tests/harness/services.sh; source it: . $envfile"
        for line in $("$harness/pg.sh" env "$sdir/pg" 9>&- 2>/dev/null) \
            $("$harness/pgbouncer.sh" env "$sdir/pgbouncer" 9>&- 2>/dev/null) \
            $("$harness/kafka.sh" env "$sdir/kafka" 9>&- 2>/dev/null) \
            $(stub_pid >/dev/null && cat "$stub_dir/env"); do
            printf 'export %s=%q\n' "${line%%=*}" "${line#*=}"
        done
        printf 'export RL_SERVICES_DIR=%q\n' "$sdir"
    } >"$tmp"
    mv "$tmp" "$envfile"
}

started=()
rollback() {
    local rc=$?
    [ "$rc" -ne 0 ] || return 0
    [ ${#started[@]} -gt 0 ] || return 0
    echo "$prog: start failed, stopping what this run started: ${started[*]}" >&2
    for svc in "${started[@]}"; do
        case "$svc" in
        pg) "$harness/pg.sh" destroy "$sdir/pg" 9>&- >&2 || true ;;
        pgbouncer) "$harness/pgbouncer.sh" stop "$sdir/pgbouncer" 9>&- >&2 || true ;;
        kafka) "$harness/kafka.sh" stop "$sdir/kafka" 9>&- >&2 || true ;;
        stub) stub_stop >&2 || true ;;
        esac
    done
    rm -f "$envfile"
}

up() {
    local t0=$SECONDS
    trap rollback EXIT
    mkdir -p "$sdir"
    # `started` lists a service before its start completes, so a start that
    # fails half-way (the JVM launched, the wait ran out) is stopped too;
    # a service that was already running is left alone.
    if wanted pg; then
        "$harness/pg.sh" env "$sdir/pg" 9>&- >/dev/null 2>&1 || started+=(pg)
        "$harness/pg.sh" start "$sdir/pg" 9>&-
    fi
    # In front of the PostgreSQL above, whose URL pg.sh prints.
    if wanted pgbouncer; then
        "$harness/pgbouncer.sh" env "$sdir/pgbouncer" 9>&- >/dev/null 2>&1 ||
            started+=(pgbouncer)
        PGBOUNCER_UPSTREAM_URL=$("$harness/pg.sh" env "$sdir/pg" 9>&- | sed -n 's/^DATABASE_URL=//p') ||
            die "pgbouncer needs the harness PostgreSQL: start it first"
        PGBOUNCER_UPSTREAM_URL=$PGBOUNCER_UPSTREAM_URL \
            "$harness/pgbouncer.sh" start "$sdir/pgbouncer" 9>&-
    fi
    if wanted kafka; then
        "$harness/kafka.sh" env "$sdir/kafka" 9>&- >/dev/null 2>&1 || started+=(kafka)
        "$harness/kafka.sh" start "$sdir/kafka" 9>&-
    fi
    if wanted stub; then
        if [ -f "$stub_script" ]; then
            stub_pid >/dev/null || started+=(stub)
            stub_start
        elif [ "$only" = stub ]; then
            die "$stub_script does not exist"
        fi
    fi
    write_envfile
    trap - EXIT
    echo "$prog: services up in $((SECONDS - t0))s; environment in ${envfile#"$root"/}"
}

down() {
    local failed=0
    if wanted stub; then stub_stop || failed=1; fi
    if wanted pgbouncer && [ -d "$sdir/pgbouncer" ]; then
        "$harness/pgbouncer.sh" stop "$sdir/pgbouncer" 9>&- || failed=1
    fi
    if wanted kafka && [ -d "$sdir/kafka" ]; then
        "$harness/kafka.sh" stop "$sdir/kafka" 9>&- || failed=1
    fi
    if wanted pg && [ -d "$sdir/pg" ]; then
        "$harness/pg.sh" destroy "$sdir/pg" 9>&- || failed=1
    fi
    if [ -z "$only" ]; then
        rm -f "$envfile"
    elif [ -f "$envfile" ]; then
        write_envfile
    fi
    [ "$failed" -eq 0 ] || die "some services did not stop cleanly"
    echo "$prog: services down"
}

# One `up` or `down` at a time per services folder: two engineers (or two
# make targets) sharing a tree must not interleave starts and stops.
mkdir -p "$(dirname "$sdir")"
exec 9>"$sdir.lock"
if ! flock -n 9; then
    echo "$prog: waiting for another services.sh ($sdir.lock)" >&2
    flock -w 300 9 || die "another services.sh held $sdir.lock for 300s"
fi

case "$cmd" in
up) up ;;
down) down ;;
status)
    "$harness/pg.sh" env "$sdir/pg" 9>&- 2>/dev/null || echo "pg: not running"
    "$harness/pgbouncer.sh" env "$sdir/pgbouncer" 9>&- 2>/dev/null || echo "pgbouncer: not running"
    "$harness/kafka.sh" env "$sdir/kafka" 9>&- 2>/dev/null || echo "kafka: not running"
    if stub_pid >/dev/null; then cat "$stub_dir/env"; else echo "stub: not running"; fi
    ;;
*) usage ;;
esac
