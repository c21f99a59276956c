#!/usr/bin/env bash
# pg_replica.sh start|detach|failover|destroy|env DIR [sync|async] — a
# throwaway PostgreSQL 15 primary with one streaming standby, for failover
# tests.
#
#   start DIR [MODE] a primary in DIR/primary (pg.sh start) and a standby
#                   in DIR/standby cloned from it (pg_basebackup -R),
#                   streaming; MODE (default: $PG_REPLICA_MODE) sync makes
#                   the standby synchronous (synchronous_standby_names),
#                   async leaves it asynchronous. Waits until the standby
#                   streams, then prints DATABASE_URL, a multi-host URL
#                   naming the primary first and the standby second, with
#                   target_session_attrs=read-write
#   detach DIR      stops the standby (fast): what the primary commits from
#                   now on exists nowhere else, which makes the loss of an
#                   asynchronous failover deterministic (a sync primary
#                   would wait for the standby instead: refused)
#   failover DIR    kills the primary (immediate, no checkpoint), starts
#                   the standby when detached (it recovers what it had
#                   received) and promotes it (pg_ctl promote, waiting)
#   destroy DIR     pg.sh destroy of both (idempotent)
#   env DIR         prints DATABASE_URL=...
#
# Both clusters are pg.sh clusters (run folders, ports, logs), so pg.sh
# stop|kill|restart|destroy work on DIR/primary and DIR/standby as well.
set -euo pipefail

prog=pg_replica.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pg=$here/pg.sh
die() {
    echo "$prog: $*" >&2
    exit 1
}
usage() {
    echo "usage: $prog start DIR sync|async | detach|failover|destroy|env DIR" >&2
    exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2")
[ "$dir" != / ] || die "refusing to use / as the folder"
primary=$dir/primary
standby=$dir/standby
stream_timeout=${PG_START_TIMEOUT:-60}

if [ -n "${PG_BINDIR:-}" ]; then
    bindir=$PG_BINDIR
elif [ -x /usr/lib/postgresql/15/bin/pg_ctl ]; then
    bindir=/usr/lib/postgresql/15/bin
else
    bindir=$(dirname "$(command -v pg_ctl || die "pg_ctl not found: run tests/harness/deps.sh")")
fi

# As pg.sh runs the server: as the postgres user when root, from /.
as_pg() {
    if [ "$(id -u)" -ne 0 ]; then
        (cd / && "$@")
    else
        (cd / && runuser -u postgres -- "$@")
    fi
}

psql_at() {
    "$bindir/psql" -X -q -At -h 127.0.0.1 -p "$1" -U postgres -d postgres \
        -v ON_ERROR_STOP=1 -c "$2"
}

data_of() {
    echo "$(cat "$1/rundir")/data"
}

write_env() {
    echo "DATABASE_URL=postgresql://postgres@127.0.0.1:$(cat "$primary/port"),127.0.0.1:$(cat "$standby/port")/postgres?target_session_attrs=read-write" >"$dir/env"
}

start() {
    local mode=$1 pport sdata conf conninfo deadline state

    case "$mode" in sync | async) ;; *) usage ;; esac
    "$pg" destroy "$primary" >/dev/null 2>&1 || true
    "$pg" destroy "$standby" >/dev/null 2>&1 || true
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "$mode" >"$dir/mode"
    "$pg" start "$primary" >/dev/null
    pport=$(cat "$primary/port")
    # The standby's own cluster gives it a run folder, a port and a config
    # of its own; its data is then replaced by a copy of the primary's.
    PG_PORT_BASE=$((pport + 1)) "$pg" start "$standby" >/dev/null
    "$pg" stop "$standby" >/dev/null
    sdata=$(data_of "$standby")
    conf=$(mktemp)
    cat "$sdata/postgresql.auto.conf" >"$conf"
    as_pg find "$sdata" -mindepth 1 -delete
    as_pg "$bindir/pg_basebackup" -h 127.0.0.1 -p "$pport" -U postgres \
        -D "$sdata" -R -X stream -c fast --no-sync \
        >"$standby/log/basebackup.log" 2>&1 || {
        cat "$standby/log/basebackup.log" >&2
        die "pg_basebackup failed"
    }
    conninfo=$(grep '^primary_conninfo' "$sdata/postgresql.auto.conf")
    # application_name names the standby in synchronous_standby_names.
    conninfo=${conninfo%\'}" application_name=standby'"
    { cat "$conf"; echo "$conninfo"; echo "hot_standby = on"; } |
        as_pg tee "$sdata/postgresql.auto.conf" >/dev/null
    rm -f "$conf"
    if [ "$mode" = sync ]; then
        psql_at "$pport" "ALTER SYSTEM SET synchronous_standby_names = 'standby'" >/dev/null
        psql_at "$pport" "SELECT pg_reload_conf()" >/dev/null
    fi
    "$pg" restart "$standby" >/dev/null
    deadline=$((SECONDS + stream_timeout))
    until state=$(psql_at "$pport" "SELECT state || ' ' || sync_state FROM pg_stat_replication WHERE application_name = 'standby'") &&
        [ "$state" = "streaming $mode" ]; do
        ((SECONDS < deadline)) || die "the standby is not streaming ($mode) after ${stream_timeout}s (state: ${state:-none})"
        sleep 0.1
    done
    write_env
    cat "$dir/env"
}

case "$cmd" in
start)
    [ $# -le 3 ] || usage
    start "${3:-${PG_REPLICA_MODE:-}}"
    ;;
detach)
    [ "$(cat "$dir/mode")" = async ] || die "detach needs an asynchronous standby (a sync primary would wait for it)"
    "$pg" stop "$standby"
    ;;
failover)
    "$pg" kill "$primary"
    if ! as_pg "$bindir/pg_ctl" status -D "$(data_of "$standby")" >/dev/null 2>&1; then
        "$pg" restart "$standby" >/dev/null
    fi
    as_pg "$bindir/pg_ctl" promote -D "$(data_of "$standby")" -w -t "$stream_timeout" >/dev/null ||
        die "pg_ctl promote failed"
    echo "$prog: promoted $standby"
    ;;
destroy)
    "$pg" destroy "$primary" 2>/dev/null || true
    "$pg" destroy "$standby" 2>/dev/null || true
    ;;
env)
    [ -f "$dir/env" ] || die "no pair was started in $dir"
    cat "$dir/env"
    ;;
*)
    usage
    ;;
esac
