#!/usr/bin/env bash
# pgbouncer.sh start|stop|env DIR — Debian's PgBouncer on a free loopback
# port in front of the harness PostgreSQL, as most Kubernetes deployments
# put it (CloudNativePG's pooler, Bitnami's charts). docs/pgbouncer.md says
# what the service needs of it.
#
#   start  write the configuration and start one PgBouncer for DIR (a
#          running one is left as it is); its upstream is the PostgreSQL of
#          PGBOUNCER_UPSTREAM_URL, default DATABASE_URL (a
#          postgresql://user@127.0.0.1:PORT/db URL, as pg.sh writes it)
#   stop   shut it down and remove its run folder; its log is kept in
#          DIR/pgbouncer.log (idempotent)
#   env    print PGBOUNCER_URL_SESSION=... and PGBOUNCER_URL_TRANSACTION=...
#
# Two databases on the one listener, both the upstream's database:
# runledger_session (pool_mode=session) and runledger_transaction
# (pool_mode=transaction). Authentication is trust on loopback; PgBouncer
# still wants the user in its auth_file, which lists the upstream's user
# and the test logins of the database roles.
# ignore_startup_parameters is PgBouncer's default (empty), so a startup
# packet with `options` is refused as PgBouncer ships; with
# PGBOUNCER_IGNORE_OPTIONS=1 it lists options, which are then dropped
# without a word. Both are what the service must cope with.
#
# PgBouncer refuses to run as root: as root it runs as the postgres user,
# and, as for pg.sh, every file it opens lives in a run folder of its own
# under PG_RUN_BASE (default /var/tmp) that the user owns.
#
# Environment: PGBOUNCER_PORT_BASE (default 26432), PGBOUNCER_START_TIMEOUT
# (default 30), PGBOUNCER_BIN (default pgbouncer on PATH or
# /usr/sbin/pgbouncer).
set -euo pipefail

prog=pgbouncer.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
usage() {
    echo "usage: $prog start|stop|env DIR" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2")
[ "$dir" != / ] || die "refusing to use / as the folder"

run_base=${PG_RUN_BASE:-/var/tmp}
port_base=${PGBOUNCER_PORT_BASE:-26432}
start_timeout=${PGBOUNCER_START_TIMEOUT:-30}

find_bin() {
    if [ -n "${PGBOUNCER_BIN:-}" ]; then
        echo "$PGBOUNCER_BIN"
    elif command -v pgbouncer >/dev/null 2>&1; then
        command -v pgbouncer
    elif [ -x /usr/sbin/pgbouncer ]; then
        echo /usr/sbin/pgbouncer
    else
        die "pgbouncer not found: run tests/harness/deps.sh"
    fi
}

run_user() {
    if [ "$(id -u)" -eq 0 ]; then
        echo postgres
    else
        id -un
    fi
}

as_user() {
    if [ "$(id -u)" -ne 0 ]; then
        (cd / && "$@")
    elif command -v runuser >/dev/null 2>&1; then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && su postgres -s /bin/sh -c "$(printf '%q ' "$@")")
    fi
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

pick_port() {
    local port from=$1
    for ((port = from; port < from + 200; port++)); do
        if port_is_free "$port"; then
            echo "$port"
            return
        fi
    done
    die "no free port in $from..$((from + 199))"
}

# The pid of DIR's PgBouncer when it runs.
bouncer_pid() {
    local run pid
    [ -f "$dir/rundir" ] || return 1
    run=$(cat "$dir/rundir")
    pid=$(cat "$run/pgbouncer.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$run/pgbouncer.ini" || return 1
    echo "$pid"
}

write_env() {
    local port user
    port=$(cat "$dir/port")
    user=$(cat "$dir/user")
    {
        echo "PGBOUNCER_URL_SESSION=postgresql://$user@127.0.0.1:$port/runledger_session"
        echo "PGBOUNCER_URL_TRANSACTION=postgresql://$user@127.0.0.1:$port/runledger_transaction"
    } >"$dir/env"
}

# host, port, user and database of a postgresql:// URL, one per line.
parse_upstream() {
    python3 - "$1" <<'EOF'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
if u.scheme not in ("postgresql", "postgres") or not u.port:
    sys.exit(1)
print(u.hostname or "127.0.0.1")
print(u.port)
print(urllib.parse.unquote(u.username or "postgres"))
print(urllib.parse.unquote(u.path.lstrip("/")) or "postgres")
EOF
}

wait_ready() {
    local port deadline
    port=$(cat "$dir/port")
    deadline=$((SECONDS + start_timeout))
    until pg_isready -q -h 127.0.0.1 -p "$port" -d runledger_session -t 2 \
        -U "$(cat "$dir/user")"; do
        if ((SECONDS >= deadline)); then
            tail -n 20 "$run/pgbouncer.log" >&2 || true
            die "pgbouncer on port $port not answering after ${start_timeout}s"
        fi
        bouncer_pid >/dev/null || {
            tail -n 20 "$run/pgbouncer.log" >&2 || true
            die "pgbouncer exited during start"
        }
        sleep 0.2
    done
}

start() {
    local bin upstream up host pgport user db port ignore from
    bin=$(find_bin)
    upstream=${PGBOUNCER_UPSTREAM_URL:-${DATABASE_URL:-}}
    [ -n "$upstream" ] || die "no upstream: set PGBOUNCER_UPSTREAM_URL or DATABASE_URL"
    up=$(parse_upstream "$upstream") ||
        die "upstream is not a postgresql://user@host:port/db URL"
    {
        read -r host
        read -r pgport
        read -r user
        read -r db
    } <<<"$up"
    stop >/dev/null
    mkdir -p "$dir"
    [ -d "$run_base" ] || die "PG_RUN_BASE $run_base is not a folder"
    mktemp -d "$run_base/rl-pgb-run.XXXXXX" >"$dir/rundir" ||
        die "could not make a run folder in $run_base"
    run=$(cat "$dir/rundir")
    echo "$user" >"$dir/user"
    ignore=
    [ "${PGBOUNCER_IGNORE_OPTIONS:-0}" != 1 ] || ignore=options
    # The upstream's user, and the component logins RL_TEST_DB_ROLES=1
    # gives the processes under test (tests/support/rltest_roles.h).
    {
        printf '"%s" ""\n' "$user"
        for login in worker relay worker_relay console readonly; do
            printf '"rl_test_%s" ""\n' "$login"
        done
    } >"$run/userlist.txt"
    from=$port_base
    for _ in 1 2 3; do
        port=$(pick_port "$from")
        echo "$port" >"$dir/port"
        cat >"$run/pgbouncer.ini" <<EOF
; Written by tests/harness/pgbouncer.sh
[databases]
runledger_session = host=$host port=$pgport dbname=$db pool_mode=session
runledger_transaction = host=$host port=$pgport dbname=$db pool_mode=transaction

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $run/userlist.txt
admin_users = $user
pool_mode = session
max_client_conn = 1000
default_pool_size = 100
ignore_startup_parameters = $ignore
logfile = $run/pgbouncer.log
pidfile = $run/pgbouncer.pid
EOF
        if [ "$(id -u)" -eq 0 ]; then
            chown -R postgres:postgres "$run"
        fi
        # In a session of its own, as pg.sh does: a Ctrl-C to make or
        # ctest does not reach it.
        as_user setsid "$bin" -d -q "$run/pgbouncer.ini" \
            >"$dir/start.log" 2>&1 </dev/null || true
        for _ in $(seq 50); do
            bouncer_pid >/dev/null && break
            sleep 0.1
        done
        if bouncer_pid >/dev/null; then
            wait_ready
            write_env
            return
        fi
        if ! grep -qi 'address already in use' "$run/pgbouncer.log" "$dir/start.log" 2>/dev/null; then
            cat "$dir/start.log" >&2 || true
            tail -n 20 "$run/pgbouncer.log" >&2 || true
            die "pgbouncer did not start"
        fi
        echo "$prog: port $port was taken meanwhile, retrying" >&2
        from=$((port + 1 + RANDOM % 16))
    done
    die "pgbouncer could not bind a port after 3 attempts"
}

stop() {
    local pid deadline msg="not running in $dir"
    if pid=$(bouncer_pid); then
        # SIGINT: safe shutdown, after the clients are gone; SIGTERM is
        # immediate, which a throwaway harness wants.
        kill -TERM "$pid" 2>/dev/null || true
        deadline=$((SECONDS + 10))
        while [ -e "/proc/$pid" ]; do
            if ((SECONDS >= deadline)); then
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.1
        done
        msg="stopped $dir"
    fi
    if [ -f "$dir/rundir" ]; then
        run=$(cat "$dir/rundir")
        case "$run" in
        "$run_base"/rl-pgb-run.*)
            cp "$run/pgbouncer.log" "$dir/pgbouncer.log" 2>/dev/null || true
            rm -rf "$run"
            ;;
        esac
        rm -f "$dir/rundir" "$dir/env"
    fi
    echo "$prog: $msg"
}

case "$cmd" in
start)
    if bouncer_pid >/dev/null; then
        run=$(cat "$dir/rundir")
        wait_ready
        write_env
        echo "$prog: already running in $dir"
    else
        start
    fi
    cat "$dir/env"
    ;;
stop) stop ;;
env)
    [ -f "$dir/env" ] || die "no pgbouncer was started in $dir"
    bouncer_pid >/dev/null || die "pgbouncer in $dir is not running"
    cat "$dir/env"
    ;;
*) usage ;;
esac
