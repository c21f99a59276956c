#!/usr/bin/env bash
# pg.sh start|stop|kill|restart|destroy|env DIR — a throwaway PostgreSQL 15
# for DIR.
#
#   start    initdb a fresh cluster (wiping an earlier one made by this
#            script for DIR), listen on 127.0.0.1 at a free port, wait until
#            it answers; a cluster already running for DIR is left as it is
#   stop     fast shutdown (idempotent)
#   kill     immediate shutdown: no checkpoint, crash recovery on restart
#   restart  start DIR's cluster again, same port and data (stops it first
#            when it runs)
#   destroy  fast shutdown, then remove the cluster's files; its server log
#            is kept in DIR/log (idempotent)
#   env      print DATABASE_URL=...
#
# Durability is production-like (fsync and synchronous_commit on), so timing
# seen in tests is honest. Trust authentication, loopback only, except for
# the role rl_password_required (which tests create), which must give its
# password (scram-sha-256), so a test can see a wrong password refused.
#
# As root the server runs as the postgres user, which may not enter DIR (a
# clone in a 0700 home or in a mktemp folder). So every file the server
# itself opens (data, server log, unix socket) lives in a run folder of its
# own, made with mktemp under PG_RUN_BASE (default /var/tmp, on disk where
# /tmp may be memory) and owned by the server's user; likewise when not
# root, so both ways take the same path.
#
# Layout of DIR: rundir (the run folder's path), port, env, sockdir,
# log/initdb.log, log/pg_ctl.log, and the links data and log/postgresql.log
# into the run folder. `destroy` removes the run folder and copies the
# server log into DIR/log. A run folder whose DIR no longer records it (a
# test removes DIR after `kill`) is removed by the next start or destroy.
set -euo pipefail

prog=pg.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
usage() {
    echo "usage: $prog start|stop|kill|restart|destroy|env DIR" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2")
[ "$dir" != / ] || die "refusing to use / as the data folder"

marker=$dir/.runledger-pg
run_base=${PG_RUN_BASE:-/var/tmp}
start_timeout=${PG_START_TIMEOUT:-60}
# A second address to listen on and the network trusted there (the
# Kubernetes tests give their bridge's, which pods reach); none by default.
extra_addr=${PG_EXTRA_LISTEN_ADDRESS:-}
extra_cidr=${PG_EXTRA_TRUST_CIDR:-${extra_addr:+$extra_addr/32}}
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

# The run folder DIR records; DIR itself for a cluster made before run
# folders existed, so that one can still be stopped.
set_run() {
    if [ -f "$dir/rundir" ]; then
        run=$(cat "$dir/rundir")
    else
        run=$dir
    fi
    data=$run/data
    logfile=$run/log/postgresql.log
}
set_run

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

# From /: the postgres user may not be allowed into the caller's folder.
as_pg() {
    local argv
    pg_argv "$@"
    (cd / && "${argv[@]}")
}

# In a session of its own the postmaster survives a Ctrl-C sent to the
# caller's process group (make, ctest): only `stop`/`kill` end it.
pg_ctl_detached() {
    local argv
    pg_argv "$bindir/pg_ctl" "$@"
    (cd / && setsid -w "${argv[@]}")
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
listen_addresses = '127.0.0.1${extra_addr:+,$extra_addr}'
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
# Written by tests/harness/pg.sh: trust on loopback only, but for one role
# that must give its password.
host    all          rl_password_required  127.0.0.1/32  scram-sha-256
local   all          all                  trust
host    all          all    127.0.0.1/32  trust
host    all          all    ::1/128       trust
local   replication  all                  trust
host    replication  all    127.0.0.1/32  trust
EOF
    if [ -n "$extra_cidr" ]; then
        echo "host    all          all    $extra_cidr  trust" >>"$data/pg_hba.conf"
    fi
    echo "$port" >"$dir/port"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres:postgres "$data/postgresql.auto.conf" "$data/pg_hba.conf"
    fi
}

# Removes a run folder this script made (its name says so), and a socket
# folder made beside it.
remove_run() {
    local r=$1 sock
    case "$r" in "$run_base"/rl-pg-run.*) ;; *) return 0 ;; esac
    if [ -f "$r/sockdir" ]; then
        sock=$(cat "$r/sockdir")
        case "$sock" in /tmp/rl-pg.*) rm -rf "$sock" ;; esac
    fi
    rm -rf "$r"
}

# Run folders whose DIR no longer records them: the DIR was removed or
# started afresh without a destroy (tests kill a private cluster, then
# remove its DIR). One whose postmaster still runs is left alone; a run
# folder not yet recorded has no owner file yet and is skipped too.
sweep_orphans() {
    local r owner pid
    for r in "$run_base"/rl-pg-run.*; do
        [ -r "$r/owner" ] || continue
        owner=$(cat "$r/owner")
        [ "$(cat "$owner/rundir" 2>/dev/null)" != "$r" ] || continue
        if pid=$(head -n 1 "$r/data/postmaster.pid" 2>/dev/null) &&
            [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            continue
        fi
        remove_run "$r" 2>/dev/null || true
    done
}

# A bind failure (another process took the port between the check and the
# start) is retried on the next free port; anything else fails at once.
start_fresh() {
    local port from sockdir

    if [ -e "$dir" ] && [ ! -e "$marker" ] && [ -n "$(ls -A "$dir")" ]; then
        die "$dir exists and was not made by $prog: refusing to wipe it"
    fi
    if [ -f "$dir/rundir" ]; then
        remove_run "$run"
    elif [ -f "$dir/sockdir" ]; then
        sockdir=$(cat "$dir/sockdir")
        case "$sockdir" in /tmp/rl-pg.*) rm -rf "$sockdir" ;; esac
    fi
    sweep_orphans
    rm -rf "$dir"
    mkdir -p "$dir/log"
    touch "$marker"
    [ -d "$run_base" ] || die "PG_RUN_BASE $run_base is not a folder"
    # Recorded before anything else can fail, so a failed start leaves
    # nothing that a later start or destroy cannot find.
    mktemp -d "$run_base/rl-pg-run.XXXXXX" >"$dir/rundir" ||
        die "could not make a run folder in $run_base"
    set_run
    echo "$dir" >"$run/owner"
    mkdir -p "$data" "$run/log"
    # The socket path must fit sockaddr_un (108 bytes with ".s.PGSQL.NNNNN").
    if [ ${#run} -le 88 ]; then
        echo "$run" >"$dir/sockdir"
    else
        mktemp -d /tmp/rl-pg.XXXXXX >"$dir/sockdir"
    fi
    cp "$dir/sockdir" "$run/sockdir"
    ln -s "$data" "$dir/data"
    ln -s "$logfile" "$dir/log/postgresql.log"
    if [ "$(id -u)" -eq 0 ]; then
        id postgres >/dev/null 2>&1 || die "user postgres missing: install postgresql-15"
        chown -R postgres:postgres "$run" "$(socket_dir)"
    fi
    # Says which folder is at fault instead of initdb's bare "Permission
    # denied" (a PG_RUN_BASE the postgres user cannot enter).
    as_pg test -w "$data" -a -w "$(socket_dir)" ||
        die "the server's user cannot write to $data or $(socket_dir): set PG_RUN_BASE to a folder every user can enter"

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
destroy)
    msg="not running in $dir"
    if is_running; then
        as_pg "$bindir/pg_ctl" stop -D "$data" -m fast -w -t 60 >/dev/null ||
            die "pg_ctl stop -m fast failed (log: $logfile)"
        msg="stopped (fast) $dir"
    fi
    if [ -f "$dir/rundir" ]; then
        # The server log outlives the cluster, for post-mortems.
        if [ -f "$logfile" ]; then
            rm -f "$dir/log/postgresql.log"
            cp "$logfile" "$dir/log/postgresql.log"
        fi
        rm -f "$dir/data"
        remove_run "$run"
        rm -f "$dir/rundir" "$dir/sockdir"
        msg="$msg; removed $run"
    fi
    sweep_orphans
    echo "$prog: $msg"
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
