#!/usr/bin/env bash
# pg.sh start|stop|kill|restart|env DIR — a throwaway PostgreSQL 15 in DIR.
#
#   start    initdb a fresh cluster in DIR (wiping an earlier one made by this
#            script), listen on 127.0.0.1 at a free port, wait until it
#            answers; a cluster already running in DIR is left as it is
#   stop     fast shutdown (idempotent)
#   kill     immediate shutdown: no checkpoint, crash recovery on restart
#   restart  start DIR's cluster again, same port and data (stops it first
#            when it runs)
#   env      print DATABASE_URL=...
#
# Durability is production-like (fsync and synchronous_commit on), so timing
# seen in tests is honest. Trust authentication, loopback only.
#
# Layout of DIR: data/ (PGDATA), log/postgresql.log, port, env, and the
# unix socket (in /tmp when DIR's path is too long for one).
set -euo pipefail

prog=pg.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
usage() {
    echo "usage: $prog start|stop|kill|restart|env DIR" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2")
[ "$dir" != / ] || die "refusing to use / as the data folder"

data=$dir/data
logfile=$dir/log/postgresql.log
marker=$dir/.runledger-pg
start_timeout=${PG_START_TIMEOUT:-60}
port_base=${PG_PORT_BASE:-25432}
# Ports other engineers' services hold on this machine; never picked.
port_avoid=" ${PG_PORT_AVOID:-55440} "

if [ -n "${PG_BINDIR:-}" ]; then
    bindir=$PG_BINDIR
elif [ -x /usr/lib/postgresql/15/bin/pg_ctl ]; then
    bindir=/usr/lib/postgresql/15/bin
else
    bindir=$(dirname "$(command -v pg_ctl || die "pg_ctl not found: run tests/harness/deps.sh")")
fi

# PostgreSQL refuses to run as root: as root, run it as the postgres user.
pg_argv() {
    if [ "$(id -u)" -ne 0 ]; then
        argv=("$@")
    elif command -v runuser >/dev/null 2>&1; then
        argv=(runuser -u postgres -- "$@")
    else
        argv=(su postgres -s /bin/sh -c "$(printf '%q ' "$@")")
    fi
}

as_pg() {
    local argv
    pg_argv "$@"
    "${argv[@]}"
}

# In a session of its own the postmaster survives a Ctrl-C sent to the
# caller's process group (make, ctest): only `stop`/`kill` end it.
pg_ctl_detached() {
    local argv
    pg_argv "$bindir/pg_ctl" "$@"
    setsid -w "${argv[@]}"
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

# Prints the first free port at or above $1 (default: the base).
pick_port() {
    local port from=${1:-$port_base}
    for ((port = from; port < from + 200; port++)); do
        case "$port_avoid" in *" $port "*) continue ;; esac
        if port_is_free "$port"; then
            echo "$port"
            return
        fi
    done
    die "no free port in $from..$((from + 199))"
}

is_running() {
    [ -f "$data/PG_VERSION" ] && as_pg "$bindir/pg_ctl" status -D "$data" >/dev/null 2>&1
}

socket_dir() {
    cat "$dir/sockdir"
}

wait_ready() {
    local port deadline
    port=$(cat "$dir/port")
    deadline=$((SECONDS + start_timeout))
    until "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres -t 2; do
        if ((SECONDS >= deadline)); then
            tail -n 20 "$logfile" >&2 || true
            die "postgresql on port $port not ready after ${start_timeout}s (log: $logfile)"
        fi
        is_running || {
            tail -n 20 "$logfile" >&2 || true
            die "postgresql exited during start (log: $logfile)"
        }
        sleep 0.2
    done
}

write_env() {
    echo "DATABASE_URL=postgresql://postgres@127.0.0.1:$(cat "$dir/port")/postgres" >"$dir/env"
}

write_config() {
    local port=$1
    cat >"$data/postgresql.auto.conf" <<EOF
# Written by tests/harness/pg.sh
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$(socket_dir)'
max_connections = 200
fsync = on
synchronous_commit = on
full_page_writes = on
shared_buffers = 128MB
log_line_prefix = '%m [%p] %q%u@%d '
log_min_messages = warning
EOF
    cat >"$data/pg_hba.conf" <<'EOF'
# Written by tests/harness/pg.sh: trust on loopback only.
local   all          all                  trust
host    all          all    127.0.0.1/32  trust
host    all          all    ::1/128       trust
local   replication  all                  trust
host    replication  all    127.0.0.1/32  trust
EOF
    echo "$port" >"$dir/port"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres:postgres "$data/postgresql.auto.conf" "$data/pg_hba.conf"
    fi
}

# A bind failure (another process took the port between the check and the
# start) is retried on the next free port; anything else fails at once.
start_fresh() {
    local port sockdir from

    if [ -e "$dir" ] && [ ! -e "$marker" ] && [ -n "$(ls -A "$dir")" ]; then
        die "$dir exists and was not made by $prog: refusing to wipe it"
    fi
    if [ -f "$dir/sockdir" ]; then
        sockdir=$(cat "$dir/sockdir")
        case "$sockdir" in /tmp/rl-pg.*) rm -rf "$sockdir" ;; esac
    fi
    rm -rf "$dir"
    mkdir -p "$dir/log"
    touch "$marker"
    # The socket path must fit sockaddr_un (108 bytes with ".s.PGSQL.NNNNN").
    if [ ${#dir} -le 88 ]; then
        echo "$dir" >"$dir/sockdir"
    else
        mktemp -d /tmp/rl-pg.XXXXXX >"$dir/sockdir"
    fi
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || die "user postgres missing: install postgresql-15"
        chown -R postgres:postgres "$dir" "$(socket_dir)"
    fi

    as_pg "$bindir/initdb" -D "$data" -U postgres -A trust -E UTF8 \
        --no-locale --no-sync >"$dir/log/initdb.log" 2>&1 || {
        cat "$dir/log/initdb.log" >&2
        die "initdb failed in $data"
    }

    from=$port_base
    for _ in 1 2 3 4 5; do
        port=$(pick_port "$from")
        write_config "$port"
        if pg_ctl_detached start -D "$data" -l "$logfile" -w -t "$start_timeout" \
            >"$dir/log/pg_ctl.log" 2>&1; then
            wait_ready
            write_env
            return
        fi
        if ! grep -q 'could not bind\|could not create any TCP/IP sockets' "$logfile"; then
            cat "$dir/log/pg_ctl.log" >&2 || true
            tail -n 20 "$logfile" >&2 || true
            die "postgresql did not start (log: $logfile)"
        fi
        echo "$prog: port $port was taken meanwhile, retrying" >&2
        # Harnesses that collided once would collide again in lockstep.
        from=$((port + 1 + RANDOM % 16))
    done
    die "postgresql could not bind a port after 5 attempts (log: $logfile)"
}

case "$cmd" in
start)
    if is_running; then
        wait_ready
        write_env
        echo "$prog: already running in $dir"
    else
        start_fresh
    fi
    cat "$dir/env"
    ;;
restart)
    [ -f "$data/PG_VERSION" ] || die "no cluster in $dir: use start"
    if is_running; then
        as_pg "$bindir/pg_ctl" stop -D "$data" -m fast -w -t 60 >/dev/null
    fi
    port=$(cat "$dir/port")
    port_is_free "$port" || die "port $port is taken: cannot restart on the same port"
    pg_ctl_detached start -D "$data" -l "$logfile" -w -t "$start_timeout" >/dev/null || {
        tail -n 20 "$logfile" >&2 || true
        die "postgresql did not restart (log: $logfile)"
    }
    wait_ready
    write_env
    cat "$dir/env"
    ;;
stop | kill)
    mode=fast
    [ "$cmd" = kill ] && mode=immediate
    if is_running; then
        as_pg "$bindir/pg_ctl" stop -D "$data" -m "$mode" -w -t 60 >/dev/null ||
            die "pg_ctl stop -m $mode failed (log: $logfile)"
        echo "$prog: stopped ($mode) $dir"
    else
        echo "$prog: not running in $dir"
    fi
    ;;
env)
    [ -f "$dir/env" ] || die "no cluster was started in $dir"
    is_running || die "postgresql in $dir is not running"
    cat "$dir/env"
    ;;
*)
    usage
    ;;
esac
