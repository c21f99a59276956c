#!/usr/bin/env bash
# tests/bench/bench.sh — `make bench`: Runledger's throughput, overhead and
# footprint against the PostgreSQL ceiling and against peers, on services
# of its own (never the ones `make test` uses).
#
# Prints the machine facts and a commit probe (pgbench, one single-row
# INSERT per transaction, 16 clients), then one line of key=value figures per
# scenario on stdout (progress goes to stderr):
#
#   zero     BENCH_EVENTS events, stub answering at once, one consumer
#            process: end-to-end runs/s (first event produced -> last
#            notification delivered), p50/p99 per-run overhead excluding
#            model time, statements, round trips and write commits per
#            run, peak RSS
#   slow     the same with the stub at 500 ms: largest in-flight count,
#            runs/s, peak RSS, runs/s / (in_flight / latency)
#   slow5s   the stub at 5 s, fewer events, a larger in-flight cap
#   paced    events at a steady BENCH_PACED_RATE per second (default half
#            the zero rate) for BENCH_PACED_SECONDS (60): the per-run
#            overhead when the service is not saturated
#   trickle  the same at BENCH_TRICKLE_RATE (50) for BENCH_TRICKLE_SECONDS
#            (30): the overhead of runs that arrive one by one, a run or
#            two a statement, nothing queued
#   soak     the same at BENCH_SOAK_RATE (default the zero rate) for
#            BENCH_SOAK_SECONDS (600): outbox backlog p50/p99/max sampled
#            every second, notification latency p99, the relay's mean
#            batch latency per minute (flat or not)
#   console  BENCH_CONSOLE_RUNS (1,000,000) runs in a ledger, then the web
#            console's pages: p95 of the runs page (first, by cursor, of a
#            tenant, of a tenant and job), a run page, the approvals queue
#            and an approval page, 200 requests each, against 50 ms
#   ceiling  pgbench running the service's per-run statements one run at a
#            time (tests/bench/pgbench/per_run.sql) and the single-run
#            forms of them (per_run_single.sql) at 16 and 64 clients;
#            ratio = zero runs/s / the best ceiling runs/s;
#            ceiling_plain: the same runs as plain statements on the same
#            tables, no functions (per_run_plain.sql), what a minimal
#            exactly-once ledger must do per run, at the same clients;
#            ratio_plain = zero runs/s / the best ceiling_plain runs/s
#   floor    pgbench running the same plain statements with 64 runs each
#            (per_batch_plain.sql), on the ledger's schema and on a
#            minimal one (minimal_schema.sql), the outbox rows moved by
#            the relay or only read, and the service's own statements
#            with 64 runs each (per_batch.sql): PostgreSQL's CPU a run,
#            the floor under zero's (zero_vs_floor)
#   ratelimit  three consumer processes of one group, BENCH_RATELIMIT_RUNS
#            runs (3000, about 5 min) through a stub that answers 429
#            beyond --rpm 600 --tpm 60000 per minute, with the same limit
#            set for the group (`runledger model-limits set`): goodput_pct
#            (200s per minute / the limit), http_429_pct, failed_attempts
#            (not in the default list: it paces itself for minutes)
#   fairness one consumer, 64 slots, stub at 200 ms: tenant A publishes
#            BENCH_FAIRNESS_A_RUNS (10000) runs at once while tenant B
#            publishes one a second for BENCH_FAIRNESS_SECONDS (60): B's
#            wait from publish to dispatch (p50/p99), A's share of the
#            slots B leaves idle
#   grown    the zero burst on a ledger already holding BENCH_GROWN_RUNS
#            finished runs (grown_prefill.sql: an attempt and two
#            delivered notifications each): runs/s and vs_empty = that /
#            the zero line's, the prefill's seconds and size (not in the
#            default list: 10M runs take long to prefill; run it as
#            BENCH_SCENARIOS="zero grown")
#   peer     the same jobs through a plain Python worker (1 and 4
#            processes), through Graphile Worker (Node.js, from npm) and
#            through River (Go, built from peer_river/ on first use)
#
# Private services: PostgreSQL (tests/harness/pg.sh, pg_stat_statements
# preloaded), a Kafka broker (kafka.sh) and one stub model per scenario,
# all under BENCH_DIR and all stopped on exit, also on failure or Ctrl-C.
#
# Environment (all optional):
#   RUNLEDGER_BIN            the binary to measure (default: build-bench/,
#                            RelWithDebInfo, failpoints off, warnings not
#                            fatal, brought up to date incrementally)
#   BENCH_DIR                scratch folder (default build-bench/run)
#   BENCH_SCENARIOS          default "zero slow slow5s paced trickle ceiling
#                            fairness peer soak"
#   BENCH_PEERS              default "python1 python4 graphile river"
#   BENCH_EVENTS             default 20000 (zero and slow)
#   BENCH_ANSWER_BYTES       the stub's answers to gen_events.py's events,
#                            in bytes (default: about 60, the stub's own)
#   BENCH_INPUT_BYTES        a text of that many bytes in each event's input,
#                            which the prompt carries (default: none)
#   BENCH_SLOW_EVENTS        default BENCH_EVENTS
#   BENCH_SLOW5_EVENTS       default 40000
#   BENCH_PEER_EVENTS        default BENCH_EVENTS
#   BENCH_MAX_IN_FLIGHT      RUNLEDGER_MAX_IN_FLIGHT for zero/slow (2048)
#   BENCH_SLOW5_MAX_IN_FLIGHT  for slow5s (5000, the target)
#   BENCH_RATELIMIT_RUNS     default 3000 (ratelimit)
#   BENCH_FAIRNESS_A_RUNS, BENCH_FAIRNESS_SECONDS, BENCH_FAIRNESS_SLOTS
#                            fairness: A's burst (10000), B's seconds at
#                            one run a second (60), in-flight cap (64)
#   BENCH_RATELIMIT_RPM, BENCH_RATELIMIT_TPM, BENCH_RATELIMIT_WINDOW_SECONDS
#                            the stub's and the group's limit (600, 60000,
#                            60)
#   BENCH_GROWN_RUNS         finished runs prefilled for grown (10000000)
#   BENCH_GROWN_PREWARM      1: grown reads the tables' indexes into
#                            shared_buffers before it starts (pg_prewarm)
#   BENCH_CEILING_CLIENTS    default "16 64"
#   BENCH_CEILING_SECONDS    default 15
#   BENCH_WAIT_SECONDS       cap on one scenario's drain (default 75): on
#                            expiry the line says timeout=1 and the rate is
#                            computed from what completed
#   BENCH_GRAPHILE_CONCURRENCY  default 32
#   BENCH_RIVER_CONCURRENCY  River's MaxWorkers (default 100)
#   BENCH_AUTO_EXPLAIN_MS    log the plans of statements slower than that
#                            (PostgreSQL's log; diagnosis, not figures)
#   BENCH_WAL_BREAKDOWN      set: zero/slow/slow5s also write where their
#                            WAL went, by relation, to BENCH_DIR/DB.wal.txt
#   BENCH_TIMELINE           set: zero/slow/slow5s also write, per 250 ms
#                            since the first event, the runs claimed,
#                            dispatched, completed and notifications
#                            delivered, to BENCH_DIR/NAME.timeline.txt
#   BENCH_DB_LOCALE          the collation of every database the bench
#                            makes: a libc locale the system has (`locale
#                            -a`; en_US.utf8 needs Debian's locales
#                            package or localedef), or icu:LOCALE (e.g.
#                            icu:en-US). Default: the cluster's, C
#   BENCH_SCHED_GROUPS       per_process (default): the service, the peers,
#                            the stub and the publisher each in a session
#                            (a scheduling group) of its own; shared: all
#                            in the bench's own, as before 2026-12-02
# Any RUNLEDGER_* variable set by the caller reaches the consumer.
set -euo pipefail

prog=bench.sh
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bench=$root/tests/bench
harness=$root/tests/harness
work=$(realpath -m -- "${BENCH_DIR:-$root/build-bench/run}")

events=${BENCH_EVENTS:-20000}
slow_events=${BENCH_SLOW_EVENTS:-$events}
slow5_events=${BENCH_SLOW5_EVENTS:-40000}
peer_events=${BENCH_PEER_EVENTS:-$events}
max_in_flight=${BENCH_MAX_IN_FLIGHT:-2048}
slow5_in_flight=${BENCH_SLOW5_MAX_IN_FLIGHT:-5000}
scenarios=${BENCH_SCENARIOS:-zero slow slow5s paced trickle ceiling floor fairness peer soak console}
paced_seconds=${BENCH_PACED_SECONDS:-60}
trickle_rate=${BENCH_TRICKLE_RATE:-50}
trickle_seconds=${BENCH_TRICKLE_SECONDS:-30}
soak_seconds=${BENCH_SOAK_SECONDS:-600}
peers=${BENCH_PEERS:-python1 python4 graphile river}
ceiling_clients=${BENCH_CEILING_CLIENTS:-16 64}
# CREATE DATABASE's collation clause for BENCH_DB_LOCALE (empty: the
# cluster's own, C). The value goes into SQL text, so a quote is refused.
case ${BENCH_DB_LOCALE:-} in
*"'"*) echo "bench.sh: BENCH_DB_LOCALE may not contain a quote" >&2 && exit 2 ;;
'') db_locale_clause= ;;
icu:*) db_locale_clause="TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '${BENCH_DB_LOCALE#icu:}' LOCALE 'C'" ;;
*) db_locale_clause="TEMPLATE template0 LOCALE '$BENCH_DB_LOCALE'" ;;
esac
ceiling_seconds=${BENCH_CEILING_SECONDS:-15}
floor_clients=${BENCH_FLOOR_CLIENTS:-4}
wait_seconds=${BENCH_WAIT_SECONDS:-75}
graphile_concurrency=${BENCH_GRAPHILE_CONCURRENCY:-32}
river_concurrency=${BENCH_RIVER_CONCURRENCY:-100}
ratelimit_runs=${BENCH_RATELIMIT_RUNS:-3000}
ratelimit_rpm=${BENCH_RATELIMIT_RPM:-600}
ratelimit_tpm=${BENCH_RATELIMIT_TPM:-60000}
ratelimit_window=${BENCH_RATELIMIT_WINDOW_SECONDS:-60}
fairness_a_runs=${BENCH_FAIRNESS_A_RUNS:-10000}
fairness_seconds=${BENCH_FAIRNESS_SECONDS:-60}
fairness_slots=${BENCH_FAIRNESS_SLOTS:-64}
grown_runs=${BENCH_GROWN_RUNS:-10000000}
# The token estimate of a request without max_tokens assumes this many
# completion tokens (RUNLEDGER_BUDGET_DEFAULT_MAX_TOKENS, 1024 by default):
# at 1024 a run is estimated at ~1,050 tokens and --tpm 60000 admits ~57
# runs a minute, the rpm limit never binds. The bench's events set no
# max_tokens and the stub counts none, so the scenario assumes 64.
ratelimit_max_tokens=${BENCH_RATELIMIT_MAX_TOKENS:-64}
venv=$root/.cache/bench-venv
node_dir=$root/.cache/bench-node
river_bin=$root/.cache/bench-river/peer_river
role=rl_bench

t_start=$(date +%s)
log() { echo "$prog: [$(($(date +%s) - t_start))s] $*" >&2; }
# A result line: on stdout and appended to BENCH_DIR/results.txt.
out() {
    echo "$*"
    echo "$*" >>"$work/results.txt"
}
die() {
    log "$*"
    exit 1
}
has() { case " $scenarios " in *" $1 "*) return 0 ;; esac; return 1; }
has_peer() { case " $peers " in *" $1 "*) return 0 ;; esac; return 1; }

# ---- cleanup: everything this script started, by pid --------------------

pids=()
cleanup() {
    local rc=$? pid
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ -d "$work/kafka" ]; then "$harness/kafka.sh" stop "$work/kafka" >&2 || true; fi
    if [ -d "$work/pg" ]; then "$harness/pg.sh" stop "$work/pg" >&2 || true; fi
    [ "$rc" -eq 0 ] || log "failed (exit $rc); logs in $work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

forget_pid() {
    local keep=() p
    for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    pids=("${keep[@]}")
}

# Sends SIGTERM to pid and waits up to $2 seconds (then SIGKILL).
stop_pid() {
    local pid=$1 grace=${2:-30} i
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    forget_pid "$pid"
}

# ---- small helpers --------------------------------------------------------

now() { date +%s.%N; }
calc() { python3 -c "import sys; print($1)"; }
# kv_value KEY LINE: the number after " KEY=" in a line of key=value fields.
kv_value() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<" $2"; }
# pgbench_counts LOG: sets tps and nrun (transactions done) from a pgbench
# log ("" when missing).
pgbench_counts() {
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$1" | tail -1)
    nrun=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$1")
}
fmt() { printf '%.*f' "${2:-1}" "$1"; }
# quantiles: "count p50 p99 max" of the numbers on stdin, one a line
# ("0 0 0 0" for none); fractions kept to two places.
quantiles() {
    python3 -c '
import sys
v = sorted(float(x) for x in sys.stdin if x.strip())
num = lambda x: int(x) if x == int(x) else round(x, 2)
pick = lambda q: v[min(len(v) - 1, int(q * len(v)))]
print(len(v), num(pick(0.5)), num(pick(0.99)), num(v[-1])) if v else print(0, 0, 0, 0)'
}
load1() { cut -d' ' -f1 /proc/loadavg; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# psql as the superuser on database $DB (default postgres).
q() {
    PGOPTIONS="-c client_min_messages=warning" \
        psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pgport" -U postgres \
        -d "${DB:-postgres}" -c "$1"
}

url_of() { echo "postgresql://$role@127.0.0.1:$pgport/$1"; }

# Creates database $1 owned by the bench role, dropping an earlier one.
fresh_db() {
    q "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null
    q "CREATE DATABASE $1 OWNER $role $db_locale_clause" >/dev/null
}

# Creates topics NAME:PARTITIONS with the harness's rl_topics, compiled
# here from tests/harness/rl_topics.c (its usage: BOOTSTRAP TIMEOUT_MS
# NAME:PARTS...), so this does not depend on where kafka.sh keeps its copy.
topics() {
    local src=$harness/rl_topics.c tool=$work/bin/rl_topics
    if [ ! -x "$tool" ] || [ "$src" -nt "$tool" ]; then
        mkdir -p "$work/bin"
        # shellcheck disable=SC2046 # pkg-config prints several flags
        cc -std=c11 -O1 -o "$tool" "$src" $(pkg-config --cflags --libs rdkafka) >&2 ||
            die "could not compile $src"
    fi
    "$tool" "$bootstrap" 60000 "$@" >&2 || die "could not create topics $*"
}

# stub_start NAME LATENCY_MS: a stub model of this scenario's own; sets
# stub_pid and stub_base (http://127.0.0.1:PORT).
stub_start() {
    local name=$1 latency=$2 portfile=$work/$1.stub.port i
    rm -f "$portfile"
    STUB_LATENCY_MS=$latency $own_group python3 "$root/tests/stub/stub_model.py" \
        --port 0 --port-file "$portfile" >/dev/null 2>"$work/$name.stub.log" &
    stub_pid=$!
    pids+=("$stub_pid")
    for ((i = 0; i < 200; i++)); do
        [ -s "$portfile" ] && break
        kill -0 "$stub_pid" 2>/dev/null || die "stub model exited (log: $work/$name.stub.log)"
        sleep 0.05
    done
    [ -s "$portfile" ] || die "stub model did not start (log: $work/$name.stub.log)"
    stub_base=http://127.0.0.1:$(cat "$portfile")
}

stub_stat() {
    python3 - "$stub_base/stats" "$1" <<'EOF'
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    print(json.load(r).get(sys.argv[2], 0))
EOF
}

stub_reset() {
    python3 - "$stub_base/admin/reset" <<'EOF'
import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b"{}", method="POST"), timeout=10).read()
EOF
}

# gen JOB COUNT FILE
gen() {
    python3 "$bench/gen_events.py" --job "$1" --count "$2" \
        --answer-bytes "${BENCH_ANSWER_BYTES:-0}" \
        --input-bytes "${BENCH_INPUT_BYTES:-0}" >"$3"
}

# produce TOPIC FILE: every line `tenant<TAB>json` as one message keyed by
# tenant; returns when the broker acknowledged all of them.
produce() {
    kcat -P -b "$bootstrap" -t "$1" -K $'\t' -X linger.ms=5 \
        -X queue.buffering.max.messages=1000000 <"$2" ||
        die "kcat could not produce $2 to $1"
}

# stream_producer: tests/bench/rl_stream_produce.c, compiled once per
# source version into .cache/bench-tools/. The paced scenarios pipe their
# events through it: it produces each line as it arrives, where `kcat -P`
# reads a pipe in blocks and sends a block's lines together.
stream_producer() {
    local src=$bench/rl_stream_produce.c bin tmp
    bin=$root/.cache/bench-tools/rl_stream_produce-$(sha256sum "$src" | cut -c1-12)
    if [ ! -x "$bin" ]; then
        mkdir -p "$(dirname "$bin")"
        tmp=$(mktemp "$bin.XXXXXX")
        # shellcheck disable=SC2046 # pkg-config prints several flags
        cc -std=c11 -O2 -Wall -Wextra -Werror -o "$tmp" "$src" \
            $(pkg-config --cflags --libs rdkafka) || {
            rm -f "$tmp"
            die "could not compile $src (is librdkafka-dev installed?)"
        }
        mv -f "$tmp" "$bin"
    fi
    echo "$bin"
}

# wait_count DB SQL WANT SECONDS: polls SQL (one integer) until it reaches
# WANT; returns 1 on timeout. Sets waited_value.
# One psql session for all the polls of a wait: a psql started for each
# (Debian's Perl wrapper, then a backend forked, authenticated and its
# caches filled) cost PostgreSQL a backend's start-up five times a
# second, inside the window whose CPU the burst lines report. And the
# polls are spaced by the progress so far (0.8 of the time the rest would
# take at the rate seen, 0.05-2 s; 0.2 s before any progress): a count of
# outbox_delivered reads every row delivered, so polling it every 0.2 s
# spent PostgreSQL about 4 % of its CPU in zero. The scenarios' end times
# come from the ledger's rows (run_figures), not from these polls.
wait_count() {
    local db=$1 sql=$2 want=$3 secs=$4 deadline rc=0 t0 nap
    deadline=$(($(date +%s) + secs))
    t0=$EPOCHREALTIME
    coproc WAITQ {
        PGOPTIONS="-c client_min_messages=warning" \
            psql -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pgport" -U postgres -d "$db" 2>&1
    }
    while :; do
        printf '%s;\n' "$sql" >&"${WAITQ[1]}"
        if ! read -r -t 60 waited_value <&"${WAITQ[0]}" || ! [[ $waited_value =~ ^[0-9]+$ ]]; then
            die "wait_count: \"$sql\" on $db gave \"${waited_value:-nothing in 60 s}\""
        fi
        [ "$waited_value" -ge "$want" ] && break
        [ "$(date +%s)" -lt "$deadline" ] || { rc=1; break; }
        nap=0.2
        if [ "$waited_value" -gt 0 ]; then
            nap=$(awk -v t0="$t0" -v t1="$EPOCHREALTIME" -v v="$waited_value" -v w="$want" \
                'BEGIN { n = 0.8 * (w - v) * (t1 - t0) / v;
                         if (n < 0.05) n = 0.05; if (n > 2) n = 2; printf "%.3f", n }')
        fi
        sleep "$nap"
    done
    local qpid=$WAITQ_PID
    eval "exec ${WAITQ[1]}>&-"
    wait "$qpid" 2>/dev/null || true
    return "$rc"
}

# The bench cluster's PostgreSQL processes (postmaster and its children).
pg_pids() {
    local pm
    pm=$(head -1 "$work/pg/data/postmaster.pid" 2>/dev/null) || return 0
    echo "$pm" $(pgrep -P "$pm")
}

kafka_pid() { cat "$work/kafka/broker.pid" 2>/dev/null || true; }

# cpu_groups PIDS...: the process groups tests/bench/cpu.py measures: the
# processes measured (ours), PostgreSQL, Kafka and the stub.
cpu_groups() {
    echo "ours=$(echo "$@" | tr ' ' ,)" "postgres=$(pg_pids | tr ' ' ,)" \
        "kafka=$(kafka_pid)" "stub=${stub_pid:-}"
}

# cpu_begin PIDS... / cpu_end PIDS...: CPU seconds each group used in
# between (cpu_s_ours, cpu_s_postgres, cpu_s_kafka, cpu_s_stub, and
# cpu_s_all: the whole machine) and the wall time.
cpu_begin() {
    # shellcheck disable=SC2046 # one word per group
    python3 "$bench/cpu.py" snap "$work/cpu.snap" $(cpu_groups "$@")
    cpu_t0=$(now)
}

cpu_end() {
    # shellcheck disable=SC2046 # one word per group
    printf '%s cpu_wall_s=%s' "$(python3 "$bench/cpu.py" delta "$work/cpu.snap" $(cpu_groups "$@"))" \
        "$(fmt "$(calc "$(now) - $cpu_t0")" 2)"
}

# Measurement window on the ledger: statements (pg_stat_statements, top
# level, the bench role's only) and write transactions (the xid counter:
# only transactions that wrote get one; read-only ones cost no commit flush).
measure_begin() {
    q "SELECT pg_stat_statements_reset()" >/dev/null
    xid0=$(q "SELECT pg_snapshot_xmax(pg_current_snapshot())")
    xact0=$(q "SELECT xact_commit FROM pg_stat_database WHERE datname = '$1'")
    read -r wal0 fpi0 ckpt0 lsn0 < <(wal_now)
}

# wal_now: WAL bytes and full-page images written so far (pg_stat_wal,
# the whole server: one scenario runs at a time), checkpoints so far, and
# the current WAL position.
wal_now() {
    q "SELECT w.wal_bytes, w.wal_fpi, b.checkpoints_timed + b.checkpoints_req,
              pg_current_wal_lsn()
         FROM pg_stat_wal w, pg_stat_bgwriter b" | tr '|' ' '
}

# wal_fields RUNS: WAL kilobytes and full-page images per run, and the
# checkpoints in the window (set by measure_end).
wal_fields() {
    local runs=$1
    [ "$runs" -gt 0 ] || runs=1
    printf 'wal_kb_per_run=%s fpi_per_run=%s checkpoints=%s' \
        "$(fmt "$(calc "$wal_bytes / 1024 / $runs")" 2)" \
        "$(fmt "$(calc "$wal_fpi / $runs")" 2)" "$wal_ckpts"
}

# wal_breakdown DB: where the window's WAL went (pg_walinspect), into
# DB.wal.txt: block references and full-page images (counted 8 kB each, an
# upper bound: a page's hole is left out) by relation, then records,
# record bytes and image bytes by record type.
# Only while the window's WAL is still on disk (checkpoints recycle it),
# so it is tried and may leave a note in the file instead.
wal_breakdown() {
    local lsn1
    lsn1=$(q "SELECT pg_current_wal_flush_lsn()")
    DB=$1 q "CREATE EXTENSION IF NOT EXISTS pg_walinspect" >/dev/null 2>&1 || true
    DB=$1 q "SELECT coalesce(c.relname, r.node) AS rel, count(*) AS blocks,
                    pg_size_pretty(sum(r.fpi)) AS fpi_bytes
               FROM (SELECT substring(b FROM 'rel [0-9]+/[0-9]+/([0-9]+)') AS node,
                            CASE WHEN b ~ 'FPW' THEN 8192 ELSE 0 END AS fpi
                       FROM pg_get_wal_records_info('$lsn0', '$lsn1') w,
                            regexp_split_to_table(w.block_ref, 'blkref') AS b
                      WHERE b ~ 'rel ') r
               LEFT JOIN pg_class c ON c.relfilenode::text = r.node
              GROUP BY 1 ORDER BY sum(r.fpi) DESC, count(*) DESC LIMIT 30" \
        >"$work/$1.wal.txt" 2>&1 || true
    DB=$1 q "SELECT \"resource_manager/record_type\", count, round(record_size / 1024.0 / 1024, 1) AS mb,
                    round(fpi_size / 1024.0 / 1024, 1) AS fpi_mb
               FROM pg_get_wal_stats('$lsn0', '$lsn1', true)
              WHERE count > 0 ORDER BY record_size + fpi_size DESC LIMIT 20" \
        >>"$work/$1.wal.txt" 2>&1 || true
}

# measure_end DB: sets stmts (statements other than transaction control),
# txctl (BEGIN, COMMIT, ...) and wxacts, totals in the window.
txctl_re='^\s*(BEGIN|COMMIT|END|ROLLBACK|START|SAVEPOINT|RELEASE)\M'

measure_end() {
    local xid1
    xid1=$(q "SELECT pg_snapshot_xmax(pg_current_snapshot())")
    wxacts=$(calc "$xid1 - $xid0")
    DB=$1 q "SELECT s.relname, s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del,
                    s.autovacuum_count, s.autoanalyze_count,
                    pg_size_pretty(pg_table_size(s.relid)) AS heap,
                    pg_size_pretty(pg_indexes_size(s.relid)) AS indexes
               FROM pg_stat_user_tables s ORDER BY pg_total_relation_size(s.relid) DESC" \
        >"$work/$1.tables.txt" 2>&1 || true
    local wal1 fpi1 ckpt1 lsn1
    read -r wal1 fpi1 ckpt1 lsn1 < <(wal_now)
    wal_bytes=$(calc "$wal1 - $wal0") wal_fpi=$(calc "$fpi1 - $fpi0") wal_ckpts=$((ckpt1 - ckpt0))
    read -r stmts txctl < <(q "SELECT coalesce(sum(s.calls) FILTER (WHERE NOT s.query ~* '$txctl_re'), 0),
                                      coalesce(sum(s.calls) FILTER (WHERE s.query ~* '$txctl_re'), 0)
                                 FROM pg_stat_statements s
                                 JOIN pg_database d ON d.oid = s.dbid
                                 JOIN pg_roles r ON r.oid = s.userid
                                WHERE d.datname = '$1' AND r.rolname = '$role'
                                  AND s.toplevel" | tr '|' ' ')
    q "SELECT s.calls, round(s.total_exec_time::numeric, 1) AS ms,
              CASE WHEN s.toplevel THEN 'top' ELSE 'nested' END,
              regexp_replace(left(s.query, 110), '\s+', ' ', 'g')
         FROM pg_stat_statements s
         JOIN pg_database d ON d.oid = s.dbid
         JOIN pg_roles r ON r.oid = s.userid
        WHERE d.datname = '$1' AND r.rolname = '$role'
        ORDER BY s.total_exec_time DESC LIMIT 40" >"$work/$1.statements.txt" || true
    # calls and total ms of the three batch statements every run goes
    # through: claim, dispatch, completion (top level, the service's role)
    local cols=() f
    for f in rl_claim_runs rl_dispatch_runs rl_complete_runs; do
        cols+=("coalesce(sum(s.calls) FILTER (WHERE s.query LIKE '%$f(%'), 0)")
        cols+=("coalesce(round(sum(s.total_exec_time) FILTER (WHERE s.query LIKE '%$f(%')::numeric, 3), 0)")
    done
    read -r claim_c claim_t disp_c disp_t comp_c comp_t < <(q "
        SELECT $(IFS=,; echo "${cols[*]}")
          FROM pg_stat_statements s
          JOIN pg_database d ON d.oid = s.dbid
          JOIN pg_roles r ON r.oid = s.userid
         WHERE d.datname = '$1' AND r.rolname = '$role' AND s.toplevel" |
        tr '|' ' ')
}

# stmt_fields RUNS: the mean execution time of the claim, dispatch and
# completion statements, runs per claim and per completion, and floor_ms,
# the mean claim + dispatch time: a run's overhead contains the whole of
# its claim statement (created_at is its start) and of its dispatch
# statement (the call is sent once it committed), whatever else it waits
# for.
stmt_fields() {
    local runs=$1 claim_ms disp_ms
    [ "$runs" -gt 0 ] || runs=1
    claim_ms=$(calc "$claim_t / max($claim_c, 1)")
    disp_ms=$(calc "$disp_t / max($disp_c, 1)")
    printf 'claim_stmt_ms=%s dispatch_stmt_ms=%s complete_stmt_ms=%s runs_per_claim=%s runs_per_complete=%s floor_ms=%s' \
        "$(fmt "$claim_ms" 2)" "$(fmt "$disp_ms" 2)" \
        "$(fmt "$(calc "$comp_t / max($comp_c, 1)")" 2)" \
        "$(fmt "$(calc "$runs / max($claim_c, 1)")" 1)" \
        "$(fmt "$(calc "$runs / max($comp_c, 1)")" 1)" \
        "$(fmt "$(calc "$claim_ms + $disp_ms")" 2)"
}

# All transactions committed in DB since measure_begin (read-only ones
# too); call after the clients disconnected, which flushes their stats.
xacts_since() {
    calc "$(q "SELECT xact_commit FROM pg_stat_database WHERE datname = '$1'") - $xact0"
}

# The statement fields of a result line for $1 runs: statements without
# transaction control, round trips (every top-level statement is one when
# no pipelining is used, BEGIN and COMMIT included), write commits.
db_fields() {
    local runs=$1 extra_txctl=${2:-0}
    [ "$runs" -gt 0 ] || runs=1
    printf 'stmts_per_run=%s roundtrips_per_run=%s write_commits_per_run=%s' \
        "$(fmt "$(calc "$stmts / $runs")" 2)" \
        "$(fmt "$(calc "($stmts + $txctl) / $runs + $extra_txctl")" 2)" \
        "$(fmt "$(calc "$wxacts / $runs")" 3)"
}

# ---- setup --------------------------------------------------------------

mkdir -p "$work"
rm -f "$work/results.txt"
for tool in psql pgbench kcat python3 java; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (run tests/harness/deps.sh)"
done
streamer=$(stream_producer)
# Each process the bench measures or stands in for (the service, the peers,
# the stub model, the publisher) runs in a session, and so a scheduling
# group, of its own, as a container of its own would: with the kernel's
# autogroup on, everything started from this script otherwise shares one
# group, and the scheduler splits the cores between that group and
# PostgreSQL's and the broker's (each a session of its own), so the
# service's threads queued behind the stub and the publisher (perf sched
# in trickle: 0.38 ms a wake-up on average, PostgreSQL's 0.08).
own_group= sched_groups=shared
if [ "${BENCH_SCHED_GROUPS:-per_process}" = per_process ] &&
    [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ] && command -v setsid >/dev/null; then
    own_group=setsid sched_groups=per_process
fi

# The binary: RUNLEDGER_BIN as given, or build-bench/ brought up to date
# (an incremental build; when it fails and an older binary exists, that one
# is measured and the machine line says build=stale).
bin=${RUNLEDGER_BIN:-}
build_state=given
if [ -z "$bin" ]; then
    bin=$root/build-bench/consumer/runledger
    build_state=fresh
    log "building $bin (RelWithDebInfo, failpoints off)"
    if ! { [ -f "$root/build-bench/CMakeCache.txt" ] ||
        cmake -S "$root" -B "$root/build-bench" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DRL_BUILD_TESTS=OFF -DRL_FAILPOINTS=OFF -DRL_WERROR=OFF >"$work/build.log" 2>&1; } ||
        ! cmake --build "$root/build-bench" -j"$(nproc)" --target runledger >>"$work/build.log" 2>&1; then
        [ -x "$bin" ] || die "could not build runledger (log: $work/build.log)"
        log "the build failed (log: $work/build.log); measuring the older $bin"
        build_state=stale
    fi
fi
[ -x "$bin" ] || die "no runledger binary at $bin"

# The peers' packages; a peer whose install fails prints an error line
# instead of figures, the rest of the bench goes on.
py_ok=1 node_ok=1
if has peer && { has_peer python1 || has_peer python4; }; then
    if ! "$venv/bin/python" -c 'import confluent_kafka, psycopg, httpx' 2>/dev/null; then
        log "installing the Python peer's packages into ${venv#"$root"/}"
        { python3 -m venv "$venv" &&
            "$venv/bin/pip" install -q confluent-kafka 'psycopg[binary]' httpx; } >&2 ||
            { py_ok=0; log "could not install the Python peer's packages"; }
    fi
fi
if has peer && has_peer graphile; then
    if ! cmp -s "$bench/peer_graphile/package.json" "$node_dir/package.json" ||
        [ ! -d "$node_dir/node_modules/graphile-worker" ]; then
        log "installing Graphile Worker and kafkajs into ${node_dir#"$root"/}"
        mkdir -p "$node_dir"
        rm -f "$node_dir/package.json"
        (cd "$node_dir" && cp "$bench/peer_graphile/package.json" package.tmp.json &&
            mv package.tmp.json package.json &&
            npm install --no-audit --no-fund --loglevel=error) >&2 ||
            { node_ok=0; rm -f "$node_dir/package.json"; log "could not install Graphile Worker"; }
    fi
fi

# River's peer: built from peer_river/ (versions pinned in its go.mod and
# go.sum, fetched through whatever module proxy `go env` names) whenever
# a source is newer than the binary.
river_ok=1
if has peer && has_peer river; then
    if [ ! -x "$river_bin" ] || [ -n "$(find "$bench/peer_river" -newer "$river_bin" -type f)" ]; then
        log "building the River peer into ${river_bin#"$root"/}"
        mkdir -p "$(dirname "$river_bin")"
        (cd "$bench/peer_river" && GOFLAGS=-mod=mod go build -trimpath -o "$river_bin.tmp" . &&
            mv "$river_bin.tmp" "$river_bin") >&2 ||
            { river_ok=0; rm -f "$river_bin.tmp"; log "could not build the River peer"; }
    fi
fi

log "starting PostgreSQL (and Kafka) in $work"
"$harness/pg.sh" start "$work/pg" >&2
pgport=$(cat "$work/pg/port")
if [ "$(q "SHOW shared_preload_libraries")" != pg_stat_statements ]; then
    q "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" >/dev/null
    "$harness/pg.sh" restart "$work/pg" >&2
fi
# BENCH_PG_SETTINGS ("name=value name=value"): server settings for this
# run, e.g. "max_wal_size=8GB wal_compression=lz4" for a grown ledger
# (the cluster is made afresh at every run, so a run without them
# measures the defaults). Reloaded after each, so that one loading a
# library ("session_preload_libraries=auto_explain") lets the next ones
# name its parameters.
for kv in ${BENCH_PG_SETTINGS:-}; do
    q "ALTER SYSTEM SET ${kv%%=*} = '${kv#*=}'" >/dev/null
    q "SELECT pg_reload_conf()" >/dev/null
done
q "SELECT pg_reload_conf()" >/dev/null
if [ "$(q "SELECT count(*) FROM pg_settings WHERE pending_restart")" -gt 0 ]; then
    "$harness/pg.sh" restart "$work/pg" >&2
fi
q "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
# Statements inside the plpgsql functions too (the breakdown files show
# where a batch spends its time); the per-run counts use top level only.
q "ALTER SYSTEM SET pg_stat_statements.track = 'all'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
q "DO \$\$ BEGIN
     IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$role') THEN
       CREATE ROLE $role LOGIN;
     END IF;
   END \$\$" >/dev/null
# The bench's login migrates as on a managed database (docs/deploying.md,
# Database roles): it may not create roles, so the component roles exist
# beforehand and it is granted the owner's.
q "DO \$\$ DECLARE r text; BEGIN
     FOREACH r IN ARRAY ARRAY['runledger_owner', 'runledger_worker',
                              'runledger_console', 'runledger_relay',
                              'runledger_readonly'] LOOP
       IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
         EXECUTE format('CREATE ROLE %I NOLOGIN', r);
       END IF;
     END LOOP;
   END \$\$" >/dev/null
q "GRANT runledger_owner TO $role" >/dev/null
# BENCH_AUTO_EXPLAIN_MS: the plans (with row counts and buffers) of the
# bench role's statements slower than that, nested ones included, and its
# lock waits longer than deadlock_timeout (1 s) go to PostgreSQL's log
# (build-bench/run/pg/log). Costs CPU: not for figures.
q "ALTER ROLE $role RESET ALL" >/dev/null
if [ -n "${BENCH_AUTO_EXPLAIN_MS:-}" ]; then
    for kv in "session_preload_libraries=auto_explain" \
        "auto_explain.log_min_duration=${BENCH_AUTO_EXPLAIN_MS}ms" \
        auto_explain.log_analyze=on auto_explain.log_buffers=on \
        auto_explain.log_timing=off auto_explain.log_nested_statements=on \
        log_lock_waits=on; do
        q "ALTER ROLE $role SET ${kv%%=*} = '${kv#*=}'" >/dev/null
    done
fi
bootstrap=
if has zero || has slow || has slow5s || has paced || has trickle || has soak || has peer ||
    has ratelimit || has fairness || has grown; then
    "$harness/kafka.sh" start "$work/kafka" >&2
    bootstrap=$(sed -n 's/^KAFKA_BOOTSTRAP_SERVERS=//p' "$work/kafka/env")
fi

# ---- machine facts ---------------------------------------------------------

pgver=$(q "SHOW server_version" | cut -d' ' -f1)
setting() { q "SHOW $1"; }
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 | tr -s ' ' | tr ' ' '_')
mem_mb=$(awk '/^MemTotal:/ {printf "%d", $2 / 1024}' /proc/meminfo)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
out "machine cores=$(nproc) mem_mb=$mem_mb cpu=$cpu kernel=$(uname -r) load1=$(load1) commit=$commit binary=${bin#"$root"/} build=$build_state binary_mtime=$(date -u -r "$bin" +%Y-%m-%dT%H:%M:%SZ) sched_groups=$sched_groups"
out "postgres version=$pgver synchronous_commit=$(setting synchronous_commit) fsync=$(setting fsync) full_page_writes=$(setting full_page_writes) shared_buffers=$(setting shared_buffers) max_wal_size=$(setting max_wal_size) wal_compression=$(setting wal_compression) max_connections=$(setting max_connections) wal_sync_method=$(setting wal_sync_method) settings=${BENCH_PG_SETTINGS:-defaults} db_locale=${BENCH_DB_LOCALE:-C}"

# Single-row commits/s at 16 clients for 5 s: the disk's and CPU's
# commit budget that every line below shares.
fresh_db bench_probe
DB=bench_probe q "CREATE TABLE probe (client int, at timestamptz); ALTER TABLE probe OWNER TO $role" >/dev/null
pgbench -h 127.0.0.1 -p "$pgport" -U "$role" -n -M prepared -f "$bench/pgbench/commit_probe.sql" \
    -c 16 -j "$(nproc)" -T 5 bench_probe >"$work/commit_probe.log" 2>&1 ||
    die "pgbench commit probe failed (log: $work/commit_probe.log)"
probe=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/commit_probe.log" | tail -1)
q "DROP DATABASE bench_probe WITH (FORCE)" >/dev/null
out "commit_probe clients=16 seconds=5 single_row_commits_per_s=$(fmt "$probe" 0) load1=$(load1)"

zero_rps=
zero_rss_mb=
zero_pg_ms=

# ---- Runledger scenarios ----------------------------------------------------

# ledger_db DB: a fresh database with the ledger's schema.
ledger_db() {
    fresh_db "$1"
    "$bin" migrate --database-url "$(url_of "$1")" >/dev/null 2>"$work/$1.migrate.log" ||
        die "migrate failed (log: $work/$1.migrate.log)"
}

# consumer_start NAME EVENTS LATENCY_MS MAX_IN_FLIGHT HTTP_PORT: database
# bench_NAME, topics, a stub at LATENCY_MS, EVENTS events in
# NAME.events.tsv, and one `runledger consume` (pid) that has taken a
# warm-up run end to end (group joined, statements prepared) before the
# clock starts; the stub's counters are reset after it.
consumer_start() {
    local name=$1 n=$2 latency=$3 cap=$4 port=$5
    local db=bench_$name topic=bench.$name.schedules notify=bench.$name.notifications

    ledger_db "$db"
    topics "$topic:4" "$notify:4" "bench.$name.dlq:1"
    stub_start "$name" "$latency"
    gen "bench-$name-warmup" 1 "$work/$name.warmup.tsv"
    gen "bench-$name" "$n" "$work/$name.events.tsv"
    env DATABASE_URL="$(url_of "$db")" KAFKA_BOOTSTRAP_SERVERS="$bootstrap" \
        MODEL_BASE_URL="$stub_base/v1" RUNLEDGER_TOPIC="$topic" \
        RUNLEDGER_NOTIFY_TOPIC="$notify" RUNLEDGER_DLQ_TOPIC="bench.$name.dlq" \
        RUNLEDGER_GROUP_ID="bench-$name" RUNLEDGER_WORKER_ID="bench-$name-w0" \
        RUNLEDGER_HTTP_PORT="$port" RUNLEDGER_MAX_IN_FLIGHT="$cap" \
        $own_group "$bin" consume >/dev/null 2>"$work/$name.consumer.log" &
    pid=$!
    pids+=("$pid")
    produce "$topic" "$work/$name.warmup.tsv"
    wait_count "$db" "SELECT count(*) FROM outbox_delivered" 2 120 ||
        die "$name: the warm-up run was not delivered in 120 s (log: $work/$name.consumer.log)"
    stub_reset
}

# run_figures NAME T0: after a scenario, sets done_runs, rps (completed
# runs / (last delivery - T0)), t1 and ov ("p50 p99" per-run overhead in
# ms: completed_at - created_at - the model's latency) and split (its two
# parts, see below).
run_figures() {
    local name=$1 t0=$2 db=bench_$1
    t1=$(DB=$db q "SELECT extract(epoch FROM max(delivered_at)) FROM outbox_delivered")
    done_runs=$(DB=$db q "SELECT count(*) FROM runs WHERE status = 'completed' AND job = 'bench-$name'")
    rps=$(calc "$done_runs / ($t1 - $t0)")
    # ov, and the overhead in two parts (split), for runs done in one
    # attempt: claim start -> dispatch recorded (dispatched_at is the
    # dispatch statement's now()), and dispatch recorded -> completion start
    # minus the call (the dispatch's commit, the hand-overs to the model
    # thread and back, the wait for the completer)
    local o50 o99 a50 a99 b50 b99
    IFS='|' read -r o50 o99 a50 a99 b50 b99 < <(DB=$db q "
        SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ov)::numeric, 2),
               round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ov)::numeric, 2),
               round((percentile_cont(0.5) WITHIN GROUP (ORDER BY a) FILTER (WHERE one))::numeric, 2),
               round((percentile_cont(0.99) WITHIN GROUP (ORDER BY a) FILTER (WHERE one))::numeric, 2),
               round((percentile_cont(0.5) WITHIN GROUP (ORDER BY b) FILTER (WHERE one))::numeric, 2),
               round((percentile_cont(0.99) WITHIN GROUP (ORDER BY b) FILTER (WHERE one))::numeric, 2)
          FROM (SELECT extract(epoch FROM r.completed_at - r.created_at) * 1000
                       - coalesce(sum(a.latency_ms), 0) AS ov,
                       extract(epoch FROM min(a.dispatched_at) - r.created_at) * 1000 AS a,
                       extract(epoch FROM r.completed_at - min(a.dispatched_at)) * 1000
                       - coalesce(sum(a.latency_ms), 0) AS b,
                       r.attempts = 1 AS one
                  FROM runs r JOIN attempts a USING (run_id)
                 WHERE r.status = 'completed' AND r.job = 'bench-$name'
                 GROUP BY r.run_id, r.completed_at, r.created_at, r.attempts) s")
    ov="$o50 $o99"
    split="$a50 $a99 $b50 $b99"
}

# split_fields: the overhead's two parts from run_figures, as key=value.
split_fields() {
    set -- $split
    echo "to_dispatch_p50_ms=$1 to_dispatch_p99_ms=$2 after_dispatch_p50_ms=$3 after_dispatch_p99_ms=$4"
}

# timeline NAME T0: per 250 ms since T0 (epoch seconds), how many runs were
# claimed (created_at), dispatched, completed and notifications delivered:
# where a burst's seconds went (diagnosis, not figures).
timeline() {
    local name=$1 t0=$2 db=bench_$1
    DB=$db q "WITH e AS (
                SELECT 'claimed' AS what, created_at AS at FROM runs WHERE job = 'bench-$name'
                UNION ALL SELECT 'dispatched', a.dispatched_at FROM attempts a
                UNION ALL SELECT 'completed', completed_at FROM runs
                           WHERE job = 'bench-$name' AND completed_at IS NOT NULL
                UNION ALL SELECT 'delivered', delivered_at FROM outbox_delivered)
              SELECT floor((extract(epoch FROM at) - $t0) * 4) / 4 AS s,
                     count(*) FILTER (WHERE what = 'claimed') AS claimed,
                     count(*) FILTER (WHERE what = 'dispatched') AS dispatched,
                     count(*) FILTER (WHERE what = 'completed') AS completed,
                     count(*) FILTER (WHERE what = 'delivered') AS delivered
                FROM e GROUP BY 1 ORDER BY 1" | tr '|' ' ' >"$work/$name.timeline.txt"
}

# ours NAME LATENCY_MS EVENTS MAX_IN_FLIGHT: one consumer process.
ours() {
    local name=$1 latency=$2 n=$3 cap=$4
    local db=bench_$name topic=bench.$name.schedules
    local want t0 t1 tprod pid hwm done_runs timeout=0 rps ov split inflight line bound cpu pg_ms

    log "$name: $n events, stub latency ${latency} ms, RUNLEDGER_MAX_IN_FLIGHT=$cap"
    consumer_start "$name" "$n" "$latency" "$cap" 0
    measure_begin "$db"
    cpu_begin "$pid"

    want=$((2 * (n + 1)))
    t0=$(now)
    produce "$topic" "$work/$name.events.tsv"
    tprod=$(calc "$(now) - $t0")
    wait_count "$db" "SELECT count(*) FROM outbox_delivered" "$want" "$wait_seconds" || timeout=1
    cpu=$(cpu_end "$pid")
    measure_end "$db"
    [ -z "${BENCH_WAL_BREAKDOWN:-}" ] || wal_breakdown "$db"
    hwm=$(hwm_kb "$pid")
    inflight=$(stub_stat max_in_flight)
    kill -0 "$pid" 2>/dev/null || die "$name: the consumer died (log: $work/$name.consumer.log)"
    run_figures "$name" "$t0"
    [ -z "${BENCH_TIMELINE:-}" ] || timeline "$name" "$t0"
    stop_pid "$pid" 40
    stop_pid "$stub_pid" 10

    line="$name events=$n completed=$done_runs runs_per_s=$(fmt "$rps") seconds=$(fmt "$(calc "$t1 - $t0")" 2)"
    line+=" overhead_p50_ms=${ov% *} overhead_p99_ms=${ov#* } $(split_fields) $(stmt_fields "$done_runs")"
    line+=" $(db_fields "$done_runs") $(wal_fields "$done_runs")"
    line+=" xacts_per_run=$(fmt "$(calc "$(xacts_since "$db") / max($done_runs, 1)")" 3)"
    line+=" rss_peak_mb=$(fmt "$(calc "$hwm / 1024")")"
    if [ "$latency" -gt 0 ]; then
        bound=$(calc "$inflight / ($latency / 1000.0)")
        line+=" latency_ms=$latency in_flight_max=$inflight in_flight_cap=$cap"
        line+=" eff=$(fmt "$(calc "$rps / $bound")" 3)"
        [ -z "$zero_rps" ] ||
            line+=" eff_vs_min_bound_zero=$(fmt "$(calc "$rps / min($bound, $zero_rps)")" 3)"
    else
        line+=" in_flight_max=$inflight in_flight_cap=$cap"
    fi
    pg_ms=$(fmt "$(calc "$(kv_value cpu_s_postgres "$cpu") * 1000 / max($done_runs, 1)")" 3)
    line+=" produce_s=$(fmt "$tprod" 2) $cpu pg_cpu_ms_per_run=$pg_ms load1=$(load1)"
    [ "$timeout" -eq 0 ] || line+=" timeout=1"
    out "$line"
    if [ "$latency" -eq 0 ]; then
        zero_rps=$rps
        zero_rss_mb=$(fmt "$(calc "$hwm / 1024")")
        zero_pg_ms=$pg_ms
    fi
}

has zero && ours zero 0 "$events" "$max_in_flight"
has slow && ours slow 500 "$slow_events" "$max_in_flight"
if has slow5s && [ "$slow5_events" -gt 0 ]; then
    ours slow5s 5000 "$slow5_events" "$slow5_in_flight"
fi

# ---- grown: the zero burst on a ledger that already holds history ------------

# grown_buffers DB FILE: the bench role's statements in DB by total time
# with their shared buffers hit, read (from the OS or disk), dirtied and
# written, from pg_stat_statements as the last window left it.
grown_buffers() {
    q "SELECT s.calls, round(s.total_exec_time::numeric, 1) AS ms,
              s.shared_blks_hit AS hit, s.shared_blks_read AS read,
              s.shared_blks_dirtied AS dirtied, s.shared_blks_written AS written,
              CASE WHEN s.toplevel THEN 'top' ELSE 'nested' END,
              regexp_replace(left(s.query, 110), '\s+', ' ', 'g')
         FROM pg_stat_statements s
         JOIN pg_database d ON d.oid = s.dbid
         JOIN pg_roles r ON r.oid = s.userid
        WHERE d.datname = '$1' AND r.rolname = '$role'
        ORDER BY s.total_exec_time DESC LIMIT 40" >"$2" 2>&1 || true
}

# grown: the zero scenario (BENCH_EVENTS events, stub answering at once,
# one consumer) on a ledger prefilled by grown_prefill.sql with
# BENCH_GROWN_RUNS finished runs (one attempt and two delivered
# notifications each), vacuumed, analysed and checkpointed before the
# consumer starts. vs_empty = its runs/s / the zero line's of this bench
# run (empty ledger); table_mb: runs, attempts, outbox and
# outbox_delivered with their indexes and TOAST after the prefill,
# bytes_per_run that / the prefilled runs.
grown() {
    local name=grown n=$events runs=$grown_runs cap=$max_in_flight
    local db=bench_grown topic=bench.grown.schedules notify=bench.grown.notifications
    local tp0 prefill_s bytes t0 tprod timeout=0 cpu hwm done_runs rps ov split t1 line prewarm_mb

    log "$name: prefilling $runs finished runs, then $n events, stub latency 0 ms"
    # pg_stat_statements still holds the zero window when zero ran just
    # before: kept beside this one's for the comparison
    [ -z "$zero_rps" ] || grown_buffers bench_zero "$work/bench_zero.buffers.txt"
    ledger_db "$db"
    tp0=$(now)
    PGOPTIONS="-c client_min_messages=warning" \
        psql -X -q -v ON_ERROR_STOP=1 -v n="$runs" -h 127.0.0.1 -p "$pgport" -U postgres \
        -d "$db" -f "$bench/grown_prefill.sql" >"$work/$name.prefill.log" 2>&1 ||
        die "$name: the prefill failed (log: $work/$name.prefill.log)"
    prefill_s=$(calc "$(now) - $tp0")
    bytes=$(DB=$db q "SELECT sum(pg_total_relation_size(c))
                        FROM unnest('{runs,attempts,outbox,outbox_delivered}'::regclass[]) c")
    log "$name: prefill took $(fmt "$prefill_s") s, $(calc "$bytes // 1048576") MB"
    # BENCH_GROWN_PREWARM=1: the indexes of those tables read into
    # shared_buffers first (pg_prewarm), as a ledger that has been running
    # holds them; without it the run starts on the cache the prefill left,
    # which streamed the whole history through it. Size shared_buffers to
    # hold them (BENCH_PG_SETTINGS), or the prewarm evicts itself.
    prewarm_mb=0
    if [ -n "${BENCH_GROWN_PREWARM:-}" ]; then
        DB=$db q "CREATE EXTENSION IF NOT EXISTS pg_prewarm" >/dev/null
        prewarm_mb=$(DB=$db q "SELECT (sum(pg_prewarm(i.indexrelid)) * 8 / 1024)::bigint
                                 FROM pg_index i
                                WHERE i.indrelid = ANY ('{runs,attempts,outbox,outbox_delivered}'::regclass[])")
        log "$name: prewarmed $prewarm_mb MB of indexes"
    fi

    # consumer_start without its fresh ledger: the prefilled one stays
    topics "$topic:4" "$notify:4" "bench.$name.dlq:1"
    stub_start "$name" 0
    gen "bench-$name-warmup" 1 "$work/$name.warmup.tsv"
    gen "bench-$name" "$n" "$work/$name.events.tsv"
    env DATABASE_URL="$(url_of "$db")" KAFKA_BOOTSTRAP_SERVERS="$bootstrap" \
        MODEL_BASE_URL="$stub_base/v1" RUNLEDGER_TOPIC="$topic" \
        RUNLEDGER_NOTIFY_TOPIC="$notify" RUNLEDGER_DLQ_TOPIC="bench.$name.dlq" \
        RUNLEDGER_GROUP_ID="bench-$name" RUNLEDGER_WORKER_ID="bench-$name-w0" \
        RUNLEDGER_HTTP_PORT=0 RUNLEDGER_MAX_IN_FLIGHT="$cap" \
        $own_group "$bin" consume >/dev/null 2>"$work/$name.consumer.log" &
    pid=$!
    pids+=("$pid")
    produce "$topic" "$work/$name.warmup.tsv"
    wait_count "$db" "SELECT count(*) FROM runs WHERE job = 'bench-$name-warmup' AND status = 'completed'
                         AND NOT EXISTS (SELECT 1 FROM outbox)" 1 120 ||
        die "$name: the warm-up run was not delivered in 120 s (log: $work/$name.consumer.log)"
    stub_reset
    measure_begin "$db"
    cpu_begin "$pid"

    t0=$(now)
    produce "$topic" "$work/$name.events.tsv"
    tprod=$(calc "$(now) - $t0")
    # Not count(outbox_delivered) as zero does: that scans the history
    # every 0.2 s. A completion inserts its outbox rows in its own
    # transaction, so all completed and an empty outbox means all delivered.
    wait_count "$db" "SELECT CASE WHEN EXISTS (SELECT 1 FROM outbox) THEN 0 ELSE
                             (SELECT count(*) FROM runs WHERE job = 'bench-$name'
                                 AND status = 'completed') END" "$n" "$wait_seconds" || timeout=1
    cpu=$(cpu_end "$pid")
    measure_end "$db"
    grown_buffers "$db" "$work/$db.buffers.txt"
    [ -z "${BENCH_WAL_BREAKDOWN:-}" ] || wal_breakdown "$db"
    hwm=$(hwm_kb "$pid")
    kill -0 "$pid" 2>/dev/null || die "$name: the consumer died (log: $work/$name.consumer.log)"
    run_figures "$name" "$t0"
    stop_pid "$pid" 40
    stop_pid "$stub_pid" 10

    line="$name runs=$runs prefill_s=$(fmt "$prefill_s") events=$n completed=$done_runs runs_per_s=$(fmt "$rps")"
    if [ -n "$zero_rps" ]; then
        line+=" vs_empty=$(fmt "$(calc "$rps / $zero_rps")" 3) empty_runs_per_s=$(fmt "$zero_rps")"
    else
        line+=" vs_empty=na"
    fi
    line+=" seconds=$(fmt "$(calc "$t1 - $t0")" 2)"
    line+=" overhead_p50_ms=${ov% *} overhead_p99_ms=${ov#* } $(split_fields) $(stmt_fields "$done_runs")"
    line+=" $(db_fields "$done_runs") $(wal_fields "$done_runs")"
    line+=" table_mb=$(calc "$bytes // 1048576") bytes_per_run=$(calc "$bytes // max($runs, 1)") prewarmed_index_mb=$prewarm_mb"
    line+=" rss_peak_mb=$(fmt "$(calc "$hwm / 1024")") produce_s=$(fmt "$tprod" 2) $cpu load1=$(load1)"
    [ "$timeout" -eq 0 ] || line+=" timeout=1"
    out "$line"
    # the history's heap and indexes: several GB at the default size
    q "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
}

has grown && grown

# ---- console: the web console's pages on a large ledger --------------------

# console: BENCH_CONSOLE_RUNS runs (1,000,000) written straight into a
# ledger of its own, then `runledger console` answering its pages to one
# signed-in viewer, 200 requests each in turn: the p95 of the runs page
# (first, by cursor, of a tenant, of a tenant and job, of a status, in a
# time window), a run's page, the
# approvals queue and an approval page, against 50 ms
# (tests/console/bench_console_pages.py).
console_scenario() {
    local db=rl_bench_console
    fresh_db "$db"
    log "console: ${BENCH_CONSOLE_RUNS:-1000000} runs, then the pages"
    (cd "$work" && DATABASE_URL="$(url_of "$db")" RUNLEDGER_BIN="$bin" \
        python3 "$root/tests/console/bench_console_pages.py" --line \
        "${BENCH_CONSOLE_RUNS:-1000000}" 200 >"$work/console.out" \
        2>"$work/console.log") || true
    if grep -q '^console ' "$work/console.out"; then
        out "$(grep '^console ' "$work/console.out")"
    else
        out "console error=failed log=${work#"$root"/}/console.log"
    fi
    q "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
}

has console && console_scenario

# ---- ratelimit: three consumers under a model limit -------------------------

# ratelimit: a stub enforcing --rpm/--tpm per sliding window (429 with the
# provider's headers beyond them), the same limits set for the group with
# `runledger model-limits set`, three consumer processes of one group and
# BENCH_RATELIMIT_RUNS runs produced at once. Prints how much of the limit
# was used: goodput_pct = requests the stub answered 200 per window / the
# limit, from the first event produced to the last run completed; the
# share of calls answered 429; attempts that did not end 'ok' and runs
# that failed.
ratelimit_run() {
    local name=ratelimit n=$ratelimit_runs rpm=$ratelimit_rpm tpm=$ratelimit_tpm
    local win=$ratelimit_window db=bench_ratelimit topic=bench.ratelimit.schedules
    local notify=bench.ratelimit.notifications i wpids=() url t0 t1 timeout=0
    local ok n429 done_runs failed_runs failed_att secs goodput pct429 line cpu
    local budget_s waits

    log "$name: $n runs, stub and group limit rpm=$rpm tpm=$tpm per ${win} s, 3 consumers"
    ledger_db "$db"
    url=$(url_of "$db")
    topics "$topic:6" "$notify:4" "bench.$name.dlq:1"
    STUB_RPM=$rpm STUB_TPM=$tpm STUB_WINDOW_SECONDS=$win stub_start "$name" 0
    DATABASE_URL=$url "$bin" model-limits set --model stub-1 --rpm "$rpm" \
        --tpm "$tpm" --window-seconds "$win" --actor bench >/dev/null \
        2>"$work/$name.limits.log" || die "$name: model-limits set failed (log: $work/$name.limits.log)"
    gen "bench-$name-warmup" 1 "$work/$name.warmup.tsv"
    gen "bench-$name" "$n" "$work/$name.events.tsv"
    for i in 0 1 2; do
        env DATABASE_URL="$url" KAFKA_BOOTSTRAP_SERVERS="$bootstrap" \
            MODEL_BASE_URL="$stub_base/v1" RUNLEDGER_TOPIC="$topic" \
            RUNLEDGER_NOTIFY_TOPIC="$notify" RUNLEDGER_DLQ_TOPIC="bench.$name.dlq" \
            RUNLEDGER_GROUP_ID="bench-$name" RUNLEDGER_WORKER_ID="bench-$name-w$i" \
            RUNLEDGER_HTTP_PORT=0 RUNLEDGER_MAX_IN_FLIGHT="$max_in_flight" \
            RUNLEDGER_BUDGET_DEFAULT_MAX_TOKENS="$ratelimit_max_tokens" \
            $own_group "$bin" consume >/dev/null 2>"$work/$name.consumer$i.log" &
        wpids+=("$!")
        pids+=("$!")
    done
    produce "$topic" "$work/$name.warmup.tsv"
    wait_count "$db" "SELECT count(*) FROM outbox_delivered" 2 120 ||
        die "$name: the warm-up run was not delivered in 120 s (logs: $work/$name.consumer*.log)"
    # the warm-up's request stays in the stub's window; its counters restart
    stub_reset
    measure_begin "$db"
    cpu_begin "${wpids[@]}"
    # the limit lets n runs through in n / rpm windows: that and a margin
    budget_s=$(calc "int($n / $rpm * $win * 1.5 + 60)")
    t0=$(now)
    produce "$topic" "$work/$name.events.tsv"
    wait_count "$db" "SELECT count(*) FROM runs WHERE job = 'bench-$name' AND status IN ('completed', 'failed')" \
        "$n" "$budget_s" || timeout=1
    cpu=$(cpu_end "${wpids[@]}")
    measure_end "$db"
    t1=$(DB=$db q "SELECT coalesce(extract(epoch FROM max(completed_at)), extract(epoch FROM now())) FROM runs WHERE job = 'bench-$name'")
    ok=$(python3 - "$stub_base/stats" <<'PY'
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    s = json.load(r)
print(s["rate_limit"]["accepted"], s["requests_429"])
PY
)
    n429=${ok#* }
    ok=${ok% *}
    IFS='|' read -r done_runs failed_runs failed_att < <(DB=$db q "
        SELECT count(*) FILTER (WHERE r.status = 'completed'),
               count(*) FILTER (WHERE r.status = 'failed'),
               (SELECT count(*) FROM attempts a JOIN runs x USING (run_id)
                 WHERE x.job = 'bench-$name' AND a.outcome IS DISTINCT FROM 'ok')
          FROM runs r WHERE r.job = 'bench-$name'")
    secs=$(calc "$t1 - $t0")
    goodput=$(calc "100.0 * $ok / ($secs / $win) / $rpm")
    pct429=$(calc "100.0 * $n429 / max($ok + $n429, 1)")
    for i in "${wpids[@]}"; do
        kill -0 "$i" 2>/dev/null || die "$name: a consumer died (logs: $work/$name.consumer*.log)"
    done
    DATABASE_URL=$url "$bin" model-limits show --model stub-1 >"$work/$name.limits.txt" 2>&1 || true
    waits=$(DB=$db q "SELECT coalesce(sum(waits), 0) FROM model_limits")
    for i in "${wpids[@]}"; do stop_pid "$i" 40; done
    stop_pid "$stub_pid" 10

    line="$name rpm=$rpm tpm=$tpm window_s=$win runs=$n completed=$done_runs failed_runs=$failed_runs"
    line+=" goodput_pct=$(fmt "$goodput") http_429_pct=$(fmt "$pct429" 2) http_200=$ok http_429=$n429"
    line+=" failed_attempts=$failed_att waits=$waits seconds=$(fmt "$secs" 1) $cpu load1=$(load1)"
    [ "$timeout" -eq 0 ] || line+=" timeout=1"
    out "$line"
}

has ratelimit && ratelimit_run

# ---- fairness: one tenant's burst against another's trickle ---------------

# fairness: one consumer with RUNLEDGER_MAX_IN_FLIGHT=BENCH_FAIRNESS_SLOTS
# (64) and a stub at 200 ms. Tenant A publishes BENCH_FAIRNESS_A_RUNS
# (10,000) runs at once; from the same moment tenant B publishes one run a
# second for BENCH_FAIRNESS_SECONDS (60), each event carrying its publish
# time in input.published_at. B's wait = its attempt's dispatched_at -
# published_at (Kafka, registration, the fair claim and the dispatch
# statement; p50/p99/max). A's share of idle slots = A's dispatches in the
# window / (slots x window / 0.2 s - B's dispatches in the window), the
# window running from the first publish to the end of B's publishing or
# A's last dispatch, whichever is first (past that A has no backlog).
fairness_run() {
    local name=fairness a_n=$fairness_a_runs secs=$fairness_seconds slots=$fairness_slots
    local db=bench_fairness topic=bench.fairness.schedules latency=200
    local t0 t1 w1 pace_pid timeout=0 budget_s cpu line
    local b_n a_done b_done w50 w99 wmax a_win b_win cap share

    log "$name: tenant A $a_n runs at once, tenant B 1/s for ${secs} s, stub ${latency} ms, 1 consumer, RUNLEDGER_MAX_IN_FLIGHT=$slots"
    consumer_start "$name" 0 "$latency" "$slots" 0
    python3 "$bench/gen_events.py" --job bench-fairness-a --tenant tenant-a \
        --count "$a_n" >"$work/$name.a.tsv"
    measure_begin "$db"
    cpu_begin "$pid"
    t0=$(now)
    $own_group python3 - "$secs" <<'PY' | $own_group "$streamer" "$bootstrap" "$topic" 5 2>"$work/$name.kcat_b.log" &
import json, sys, time
secs = int(sys.argv[1])
start = time.time()
for i in range(secs):
    time.sleep(max(0.0, start + i - time.time()))
    ev = {"job": "bench-fairness-b", "tenant": "tenant-b",
          "scheduled_at": "2026-08-07T09:00:00+00:00", "version": "v%d" % i,
          "input": {"doc": i, "published_at": time.time()},
          "request": {"model": "stub-1", "temperature": 0,
                      "messages": [{"role": "user",
                                    "content": "summarise {{input}}"}]},
          "notify": ["email", "slack"]}
    sys.stdout.write("tenant-b\t" + json.dumps(ev, separators=(",", ":")) + "\n")
    sys.stdout.flush()
PY
    pace_pid=$!
    pids+=("$pace_pid")
    produce "$topic" "$work/$name.a.tsv"
    wait "$pace_pid" 2>/dev/null || true
    forget_pid "$pace_pid"
    budget_s=$(calc "int($a_n / ($slots / ($latency / 1000.0)) * 2 + 60)")
    wait_count "$db" "SELECT count(*) FROM runs WHERE job IN ('bench-fairness-a', 'bench-fairness-b') AND status = 'completed'" \
        "$((a_n + secs))" "$budget_s" || timeout=1
    cpu=$(cpu_end "$pid")
    measure_end "$db"
    kill -0 "$pid" 2>/dev/null || die "$name: the consumer died (log: $work/$name.consumer.log)"
    t1=$(DB=$db q "SELECT extract(epoch FROM max(completed_at)) FROM runs WHERE job LIKE 'bench-fairness-_'")
    w1=$(DB=$db q "SELECT least($t0 + $secs, extract(epoch FROM max(a.dispatched_at)))
                     FROM attempts a JOIN runs r USING (run_id) WHERE r.job = 'bench-fairness-a'")
    IFS='|' read -r a_done b_n b_done w50 w99 wmax < <(DB=$db q "
        SELECT (SELECT count(*) FROM runs WHERE job = 'bench-fairness-a' AND status = 'completed'),
               (SELECT count(*) FROM runs WHERE job = 'bench-fairness-b'),
               (SELECT count(*) FROM runs WHERE job = 'bench-fairness-b' AND status = 'completed'),
               round(percentile_cont(0.5) WITHIN GROUP (ORDER BY w)::numeric),
               round(percentile_cont(0.99) WITHIN GROUP (ORDER BY w)::numeric),
               round(max(w)::numeric)
          FROM (SELECT (extract(epoch FROM min(a.dispatched_at))
                        - (r.raw_input->>'published_at')::float8) * 1000 AS w
                  FROM runs r JOIN attempts a USING (run_id)
                 WHERE r.job = 'bench-fairness-b' GROUP BY r.run_id, r.raw_input) s")
    IFS='|' read -r a_win b_win < <(DB=$db q "
        SELECT count(*) FILTER (WHERE r.job = 'bench-fairness-a'),
               count(*) FILTER (WHERE r.job = 'bench-fairness-b')
          FROM attempts a JOIN runs r USING (run_id)
         WHERE a.dispatched_at >= to_timestamp($t0) AND a.dispatched_at < to_timestamp($w1)")
    cap=$(calc "$slots * ($w1 - $t0) / ($latency / 1000.0)")
    share=$(calc "100.0 * $a_win / max($cap - $b_win, 1)")
    stop_pid "$pid" 40
    stop_pid "$stub_pid" 10

    line="$name a_runs=$a_done b_runs=$b_done b_wait_p50_ms=$w50 b_wait_p99_ms=$w99"
    line+=" a_share_of_idle_pct=$(fmt "$share") seconds=$(fmt "$(calc "$t1 - $t0")" 1)"
    line+=" b_published=$b_n b_wait_max_ms=$wmax window_s=$(fmt "$(calc "$w1 - $t0")" 1)"
    line+=" a_dispatched_in_window=$a_win b_dispatched_in_window=$b_win slot_calls_in_window=$(fmt "$cap" 0)"
    line+=" slots=$slots consumers=1 latency_ms=$latency $cpu load1=$(load1)"
    [ "$timeout" -eq 0 ] || line+=" timeout=1"
    out "$line"
}

has fairness && fairness_run

# ---- paced and soak: a steady stream instead of a burst ----------------------

# free_port: a TCP port nobody listens on right now (for /metrics).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# relay_batches PORT: "count sum queued swept": the relay's batch-latency
# histogram (runledger_outbox_delivery_latency_seconds) and the runs
# registered pending and claimed by the sweeper so far, from the
# consumer's /metrics.
relay_batches() {
    python3 - "http://127.0.0.1:$1/metrics" <<'PY'
import sys, urllib.request
n = s = q = w = 0.0
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("runledger_outbox_delivery_latency_seconds_count"):
                n = float(line.split()[-1])
            elif line.startswith("runledger_outbox_delivery_latency_seconds_sum"):
                s = float(line.split()[-1])
            elif line.startswith("runledger_queued_total"):
                q = float(line.split()[-1])
            elif line.startswith("runledger_swept_total"):
                w = float(line.split()[-1])
except OSError:
    pass
print(int(n), s, int(q), int(w))
PY
}

# paced NAME RATE SECONDS: one consumer process, the stub answering at
# once, events produced at RATE per second for SECONDS (tests/bench/pace.py
# into kcat). Samples the outbox backlog (pending rows) every second and
# the relay's mean batch latency every minute; prints the per-run overhead
# at that load, the backlog's p50/p99/max, the notification latency
# (completion -> delivered) p99, and the relay batch latency per minute.
paced() {
    local name=$1 rate=$2 secs=$3
    local db=bench_$name topic=bench.$name.schedules
    local n port pid pace_pid t0 t1 hwm done_runs timeout=0 rps ov split line
    local backlog_file=$work/$name.backlog.txt minutes_file=$work/$name.relay_minutes.txt
    local queued_file=$work/$name.queued_minutes.txt swept_file=$work/$name.swept_minutes.txt
    local next_min c0 s0 c1 s1 q0 w0 q1 w1 elapsed stats lat bl_p50 bl_p99 bl_max cpu sampler_pid

    n=$(calc "int($rate * $secs)")
    log "$name: $n events at $rate/s for ${secs} s, stub latency 0 ms"
    port=$(free_port)
    consumer_start "$name" "$n" 0 "$max_in_flight" "$port"
    measure_begin "$db"
    cpu_begin "$pid"

    : >"$backlog_file"
    : >"$minutes_file"
    : >"$queued_file"
    : >"$swept_file"
    t0=$(now)
    $own_group python3 "$bench/pace.py" "$work/$name.events.tsv" --rate "$rate" 2>"$work/$name.pace.log" |
        $own_group "$streamer" "$bootstrap" "$topic" 5 2>"$work/$name.kcat.log" &
    pace_pid=$!
    pids+=("$pace_pid")
    # The backlog each second, through outbox_pending_by_age_idx as the
    # service's gauge (a sequential scan would read every page the churn
    # left since the last vacuum), from one psql session: a psql (Debian's
    # is a Perl wrapper), python and date started every second cost about
    # 60 ms of CPU a second, on the cores the measured runs share.
    printf '%s\n\\watch 1\n' "SELECT count(*) FROM (SELECT 1 FROM outbox ORDER BY created_at) s" |
        PGOPTIONS="-c client_min_messages=warning" \
            psql -X -q -At -h 127.0.0.1 -p "$pgport" -U postgres -d "$db" >"$backlog_file" 2>/dev/null &
    sampler_pid=$!
    pids+=("$sampler_pid")
    read -r c0 s0 q0 w0 < <(relay_batches "$port")
    next_min=60
    while kill -0 "$pace_pid" 2>/dev/null; do
        sleep 1
        elapsed=$((${EPOCHREALTIME%.*} - ${t0%.*}))
        if [ "$elapsed" -ge "$next_min" ]; then
            read -r c1 s1 q1 w1 < <(relay_batches "$port")
            if [ "$c1" -gt "$c0" ]; then
                calc "round(($s1 - $s0) / ($c1 - $c0) * 1000, 1)" >>"$minutes_file"
            fi
            echo "$((q1 - q0))" >>"$queued_file"
            echo "$((w1 - w0))" >>"$swept_file"
            c0=$c1 s0=$s1 q0=$q1 w0=$w1
            next_min=$((next_min + 60))
        fi
    done
    wait "$pace_pid" 2>/dev/null || true
    forget_pid "$pace_pid"
    stop_pid "$sampler_pid" 5
    wait_count "$db" "SELECT count(*) FROM outbox_delivered" "$((2 * (n + 1)))" "$wait_seconds" || timeout=1
    cpu=$(cpu_end "$pid")
    measure_end "$db"
    hwm=$(hwm_kb "$pid")
    kill -0 "$pid" 2>/dev/null || die "$name: the consumer died (log: $work/$name.consumer.log)"
    run_figures "$name" "$t0"
    lat=$(DB=$db q "SELECT round((percentile_cont(0.99) WITHIN GROUP (ORDER BY
                          extract(epoch FROM delivered_at - created_at)) * 1000)::numeric, 1)
                     FROM outbox_delivered")
    stats=$(quantiles <"$backlog_file")
    stop_pid "$pid" 40
    stop_pid "$stub_pid" 10
    read -r _ bl_p50 bl_p99 bl_max <<<"$stats"
    line="$name rate=$rate seconds=$secs events=$n completed=$done_runs runs_per_s=$(fmt "$rps")"
    line+=" overhead_p50_ms=${ov% *} overhead_p99_ms=${ov#* } $(split_fields) $(stmt_fields "$done_runs")"
    line+=" backlog_p50=$bl_p50 backlog_p99=$bl_p99 backlog_max=$bl_max notify_latency_p99_ms=$lat"
    line+=" relay_batch_ms_per_min=$(paste -sd, "$minutes_file")"
    line+=" queued_per_min=$(paste -sd, "$queued_file") swept_per_min=$(paste -sd, "$swept_file")"
    line+=" $(db_fields "$done_runs") $(wal_fields "$done_runs") rss_peak_mb=$(fmt "$(calc "$hwm / 1024")") $cpu load1=$(load1)"
    [ "$timeout" -eq 0 ] || line+=" timeout=1"
    out "$line"
}

if has paced; then
    paced paced "${BENCH_PACED_RATE:-$(calc "int(${zero_rps:-1000} / 2)")}" "$paced_seconds"
fi
# trickle_floor RATE SECONDS: the part of a run trickle's overhead holds,
# with the plain statements, one run at a time at RATE per second on one
# connection (pgbench --rate) on an otherwise idle machine, each run's
# latency logged and counted from its actual start (pgbench's schedule lag
# taken off). The overhead a run shows in trickle runs from its claim's
# start to its completion's start less the model call: the claim and the
# dispatch record and their commits, plus the hand-overs between the
# service's threads, the HTTP call's setup and the completer; these lines
# are the floor under its first part, its tail included:
#   trickle_floor         steps 1 and 2 of pgbench/per_run_plain.sql
#                         (register + claim, then the dispatch record: two
#                         transactions, two commits; the script's text up
#                         to step 3), as the service runs them
#   trickle_floor_one     the same rows in one statement and one commit
#                         (pgbench/claim_dispatch_plain.sql): the best a
#                         run claimed and sent at once could do
#   trickle_floor_commit  one single-row insert and its commit
#                         (pgbench/commit_probe.sql): one round trip and
#                         one WAL flush, what any write a run waits for
#                         costs on this machine
trickle_floor() {
    local rate=$1 secs=$2 script=$work/trickle_floor.sql
    sed '/^WITH outcome AS (/,$d' "$bench/pgbench/per_run_plain.sql" >"$script"
    grep -q 'INSERT INTO attempts' "$script" ||
        die "trickle_floor: steps 1 and 2 not found in pgbench/per_run_plain.sql"
    floor_at_rate trickle_floor "the plain claim and dispatch" "$script" "$rate" "$secs"
    floor_at_rate trickle_floor_one "the plain claim and dispatch in one statement" \
        "$bench/pgbench/claim_dispatch_plain.sql" "$rate" "$secs"
    floor_at_rate trickle_floor_commit "one single-row commit" \
        "$bench/pgbench/commit_probe.sql" "$rate" "$secs"
}

# floor_at_rate NAME WHAT SCRIPT RATE SECONDS: SCRIPT through pgbench on a
# fresh ledger database at RATE per second for SECONDS on one connection;
# prints NAME's line: runs, latency p50, p99 and max in ms.
floor_at_rate() {
    local name=$1 what=$2 script=$3 rate=$4 secs=$5 db=bench_$1 n p50 p99 pmax
    log "$name: $what, pgbench at $rate/s for ${secs} s, 1 client"
    ledger_db "$db"
    DB=$db q "CREATE TABLE probe (client int, at timestamptz); ALTER TABLE probe OWNER TO $role" >/dev/null
    rm -f "$work/${name}_log".*
    if ! pgbench -h 127.0.0.1 -p "$pgport" -U "$role" -n -M prepared \
        -f "$script" -c 1 -j 1 -R "$rate" -T "$secs" \
        -l --log-prefix="$work/${name}_log" "$db" >"$work/$db.pgbench.log" 2>&1; then
        out "$name error=pgbench_failed log=${work#"$root"/}/$db.pgbench.log"
        return
    fi
    # log lines: client transaction latency_us script epoch us lag_us
    read -r n p50 p99 pmax < <(cat "$work/${name}_log".* |
        awk 'NF > 6 && $3 != "skipped" { print ($3 - $7) / 1000 }' | quantiles)
    out "$name rate=$rate seconds=$secs runs=$n latency_p50_ms=$p50 latency_p99_ms=$p99 latency_max_ms=$pmax load1=$(load1)"
    q "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
}

if has trickle; then
    paced trickle "$trickle_rate" "$trickle_seconds"
    trickle_floor "$trickle_rate" "$trickle_seconds"
fi
if has soak; then
    paced soak "${BENCH_SOAK_RATE:-$(calc "int(${zero_rps:-1000})")}" "$soak_seconds"
fi

# ---- ceiling: pgbench, the per-run statements one run at a time -----------

# ceiling_run SCRIPT LABEL CLIENTS [LINE]: one pgbench line, named LINE
# (default ceiling); sets tps ("" when the line is an error).
ceiling_run() {
    local script=$1 label=$2 c=$3 name=${4:-ceiling} db lat nrun line
    db=bench_ceiling_${label}_$c
    tps=
    log "$name ($label): pgbench, $c clients, ${ceiling_seconds} s"
    ledger_db "$db"
    measure_begin "$db"
    # A script that no longer matches the schema (common/src/db/ moved on) fails
    # this line only, not the whole bench.
    if ! pgbench -h 127.0.0.1 -p "$pgport" -U "$role" -n -M prepared \
        -f "$bench/pgbench/$script" -c "$c" -j "$(nproc)" \
        -T "$ceiling_seconds" "$db" >"$work/$db.pgbench.log" 2>&1; then
        log "pgbench failed: $(grep -m1 ERROR "$work/$db.pgbench.log" || true)"
        out "$name script=$label clients=$c error=pgbench_failed log=${work#"$root"/}/$db.pgbench.log"
        return
    fi
    measure_end "$db"
    pgbench_counts "$work/$db.pgbench.log"
    lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$work/$db.pgbench.log")
    if [ -z "$tps" ] || [ -z "$nrun" ] || [ "$nrun" -eq 0 ]; then
        out "$name script=$label clients=$c error=no_runs log=${work#"$root"/}/$db.pgbench.log"
        tps=
        return
    fi
    line="$name script=$label clients=$c seconds=$ceiling_seconds runs_per_s=$(fmt "$tps") run_latency_ms=$lat"
    # pg_stat_statements misses BEGIN/COMMIT that pgbench sends as
    # prepared statements: count them from the script instead.
    line+=" $(db_fields "$nrun" "$(grep -ciE '^(BEGIN|COMMIT|END);' "$bench/pgbench/$script")")"
    [ -z "$zero_rps" ] || line+=" ratio=$(fmt "$(calc "$zero_rps / $tps")" 3)"
    out "$line load1=$(load1)"
    q "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
}

if has ceiling; then
    # per_run.sql: the service's own statements, one run each;
    # per_run_single.sql: the single-run forms, the cheapest unbatched way.
    # The ceiling is the better of all lines.
    best=0
    for c in $ceiling_clients; do
        for script in per_run.sql per_run_single.sql; do
            ceiling_run "$script" "${script%.sql}" "$c"
            [ -z "$tps" ] || best=$(calc "max($best, $tps)")
        done
    done
    # per_run_plain.sql: the same run as plain statements on the same
    # tables, no functions: what the work costs, not what the functions
    # cost when they carry one run. Its own best and ratio.
    best_plain=0
    for c in $ceiling_clients; do
        ceiling_run per_run_plain.sql per_run_plain "$c" ceiling_plain
        [ -z "$tps" ] || best_plain=$(calc "max($best_plain, $tps)")
    done
    if [ -n "$zero_rps" ] && [ "$best" != 0 ]; then
        out "ratio zero_runs_per_s=$(fmt "$zero_rps") ceiling_runs_per_s=$(fmt "$best") ratio=$(fmt "$(calc "$zero_rps / $best")" 3)"
    fi
    if [ -n "$zero_rps" ] && [ "$best_plain" != 0 ]; then
        out "ratio_plain zero_runs_per_s=$(fmt "$zero_rps") ceiling_plain_runs_per_s=$(fmt "$best_plain") ratio_plain=$(fmt "$(calc "$zero_rps / $best_plain")" 3)"
    fi
fi

# ---- floor_batched: the ledger's writes, batched, as plain statements -----

# floor_run SCHEMA STATEMENTS RELAY: a pgbench script carrying 64 runs a
# statement (the size of zero's batches) at floor_clients clients for
# ceiling_seconds: STATEMENTS=plain runs pgbench/per_batch_plain.sql,
# STATEMENTS=service pgbench/per_batch.sql (the service's own statements);
# on the ledger's schema (SCHEMA=ledger, `runledger migrate`) or on
# pgbench/minimal_schema.sql (minimal); RELAY=move moves the delivered
# outbox rows as the relay does, RELAY=read (plain only) only reads them
# (an outbox written once). A psql session vacuums the outbox once a
# second meanwhile, as the service's relay does. PostgreSQL's CPU a run is
# the figure: the floor under zero's, with commits and round trips shared
# as the service's batches share them.
floor_run() {
    local schema=$1 kind=$2 relay=$3 db=bench_floor_$1_$2_$3 nrun tps cpu pg runs line vpid script
    script=per_batch_plain.sql
    [ "$kind" = plain ] || script=per_batch.sql
    log "floor_batched ($schema, $kind statements, relay $relay): pgbench, $floor_clients clients, ${ceiling_seconds} s"
    if [ "$schema" = ledger ]; then
        ledger_db "$db"
    else
        fresh_db "$db"
        PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 \
            -f "$bench/pgbench/minimal_schema.sql" "$(url_of "$db")" >/dev/null ||
            die "floor_batched: minimal_schema.sql failed"
    fi
    DB=$db q "CHECKPOINT" >/dev/null
    measure_begin "$db"
    cpu_begin
    printf 'VACUUM (SKIP_LOCKED, TRUNCATE false) outbox\n\\watch 1\n' |
        psql -X -q -h 127.0.0.1 -p "$pgport" -U "$role" -d "$db" >/dev/null 2>&1 &
    vpid=$!
    if ! pgbench -h 127.0.0.1 -p "$pgport" -U "$role" -n -M prepared \
        -D relay="$([ "$relay" = move ] && echo 1 || echo 0)" \
        -f "$bench/pgbench/$script" -c "$floor_clients" -j "$(nproc)" \
        -T "$ceiling_seconds" "$db" >"$work/$db.pgbench.log" 2>&1; then
        kill "$vpid" 2>/dev/null || true
        log "pgbench failed: $(grep -m1 ERROR "$work/$db.pgbench.log" || true)"
        out "floor_batched schema=$schema statements=$kind relay=$relay error=pgbench_failed log=${work#"$root"/}/$db.pgbench.log"
        return
    fi
    kill "$vpid" 2>/dev/null || true
    wait "$vpid" 2>/dev/null || true
    cpu=$(cpu_end)
    measure_end "$db"
    pgbench_counts "$work/$db.pgbench.log"
    if [ -z "$tps" ] || [ -z "$nrun" ] || [ "$nrun" -eq 0 ]; then
        out "floor_batched schema=$schema statements=$kind relay=$relay error=no_runs log=${work#"$root"/}/$db.pgbench.log"
        return
    fi
    runs=$((nrun * 64))
    pg=$(kv_value cpu_s_postgres "$cpu")
    line="floor_batched schema=$schema statements=$kind relay=$relay clients=$floor_clients seconds=$ceiling_seconds"
    line+=" runs=$runs runs_per_s=$(fmt "$(calc "$tps * 64")")"
    line+=" pg_cpu_ms_per_run=$(fmt "$(calc "$pg * 1000 / $runs")" 3)"
    [ -z "$zero_pg_ms" ] || line+=" zero_pg_cpu_ms_per_run=$zero_pg_ms zero_vs_floor=$(fmt "$(calc "$zero_pg_ms / ($pg * 1000 / $runs)")" 2)"
    line+=" $(wal_fields "$runs") cpu_s_postgres=$pg cpu_s_all=$(kv_value cpu_s_all "$cpu")"
    out "$line load1=$(load1)"
    q "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
}

if has floor; then
    floor_run ledger plain move
    floor_run ledger plain read
    floor_run minimal plain move
    floor_run minimal plain read
    floor_run ledger service move
fi

# ---- peers --------------------------------------------------------------------

# wait_assigned NAME WORKERS: until every worker's last assignment is
# non-empty and the assignments add up to the topic's 4 partitions.
wait_assigned() {
    local name=$1 workers=$2 i total ok
    for _ in $(seq 300); do
        total=0 ok=1
        for ((i = 0; i < workers; i++)); do
            if [ -s "$work/$name.w$i.assigned" ]; then
                total=$((total + $(cat "$work/$name.w$i.assigned")))
                [ "$(cat "$work/$name.w$i.assigned")" -gt 0 ] || ok=0
            else
                ok=0
            fi
        done
        [ "$ok" -eq 1 ] && [ "$total" -eq 4 ] && return 0
        sleep 0.2
    done
    return 1
}

# peer_python NAME WORKERS
peer_python() {
    local name=$1 workers=$2 n=$peer_events
    local db=bench_$name topic=bench.$name.schedules notify=bench.$name.notifications
    local want t0 t1 i pid wpids=() hwm sum_hwm=0 max_hwm=0 done_runs timeout=0 rps line cpu

    log "peer $name: $n events, $workers Python worker process(es)"
    fresh_db "$db"
    "$venv/bin/python" "$bench/peer_python_worker.py" --init "$(url_of "$db")"
    topics "$topic:4" "$notify:4"
    stub_start "$name" 0
    gen "bench-$name-warmup" 1 "$work/$name.warmup.tsv"
    gen "bench-$name" "$n" "$work/$name.events.tsv"
    rm -f "$work/$name".w*.assigned
    for ((i = 0; i < workers; i++)); do
        env DATABASE_URL="$(url_of "$db")" KAFKA_BOOTSTRAP_SERVERS="$bootstrap" \
            MODEL_BASE_URL="$stub_base/v1" PEER_TOPIC="$topic" \
            PEER_NOTIFY_TOPIC="$notify" PEER_GROUP_ID="bench-$name" \
            PEER_WORKER_ID="bench-$name-w$i" PEER_ASSIGN_FILE="$work/$name.w$i.assigned" \
            $own_group "$venv/bin/python" "$bench/peer_python_worker.py" \
            >/dev/null 2>"$work/$name.worker$i.log" &
        pid=$!
        pids+=("$pid")
        wpids+=("$pid")
    done
    produce "$topic" "$work/$name.warmup.tsv"
    wait_count "$db" "SELECT count(*) FROM outbox WHERE delivered_at IS NOT NULL" 2 120 ||
        die "peer $name: the warm-up job was not delivered in 120 s (logs: $work/$name.worker*.log)"
    # Every worker must hold partitions (the 4 of the topic spread over
    # them) before the clock starts, so no rebalance falls in the window.
    wait_assigned "$name" "$workers" ||
        die "peer $name: the workers did not share the 4 partitions in 60 s"
    measure_begin "$db"
    cpu_begin "${wpids[@]}"
    want=$((2 * (n + 1)))
    t0=$(now)
    produce "$topic" "$work/$name.events.tsv"
    wait_count "$db" "SELECT count(*) FROM outbox WHERE delivered_at IS NOT NULL" "$want" "$wait_seconds" || timeout=1
    cpu=$(cpu_end "${wpids[@]}")
    measure_end "$db"
    for pid in "${wpids[@]}"; do
        hwm=$(hwm_kb "$pid")
        sum_hwm=$((sum_hwm + hwm))
        [ "$hwm" -le "$max_hwm" ] || max_hwm=$hwm
    done
    t1=$(DB=$db q "SELECT extract(epoch FROM max(delivered_at)) FROM outbox")
    done_runs=$(DB=$db q "SELECT count(*) FROM jobs WHERE status = 'completed' AND job = 'bench-$name'")
    rps=$(calc "$done_runs / ($t1 - $t0)")
    for pid in "${wpids[@]}"; do stop_pid "$pid" 15; done
    stop_pid "$stub_pid" 10
    line="peer name=python workers=$workers events=$n completed=$done_runs runs_per_s=$(fmt "$rps") seconds=$(fmt "$(calc "$t1 - $t0")" 2)"
    line+=" $(db_fields "$done_runs")"
    line+=" rss_peak_mb=$(fmt "$(calc "$sum_hwm / 1024")") rss_peak_per_process_mb=$(fmt "$(calc "$max_hwm / 1024")")"
    [ -z "$zero_rps" ] ||
        line+=" vs_zero=$(fmt "$(calc "$rps / $zero_rps")" 3) ours_runs_per_s=$(fmt "$zero_rps") ours_rss_peak_mb=$zero_rss_mb"
    line+=" $cpu load1=$(load1)"
    [ "$timeout" -eq 0 ] || line+=" timeout=1"
    out "$line"
}

peer_graphile() {
    local name=graphile n=$peer_events
    local db=bench_peer_graphile topic=bench.graphile.schedules
    local want t0 t1 pid hwm done_runs timeout=0 rps line cpu

    log "peer graphile: $n events, Graphile Worker concurrency $graphile_concurrency"
    fresh_db "$db"
    topics "$topic:4"
    DATABASE_URL="$(url_of "$db")" NODE_PATH="$node_dir/node_modules" \
        node "$bench/peer_graphile/worker.js" --init \
        >"$work/$name.init.log" 2>&1 || die "graphile init failed (log: $work/$name.init.log)"
    stub_start "$name" 0
    gen "bench-$name-warmup" 1 "$work/$name.warmup.tsv"
    gen "bench-$name" "$n" "$work/$name.events.tsv"
    DATABASE_URL="$(url_of "$db")" KAFKA_BOOTSTRAP_SERVERS="$bootstrap" \
        MODEL_BASE_URL="$stub_base/v1" PEER_TOPIC="$topic" PEER_GROUP_ID="bench-$name" \
        PEER_CONCURRENCY="$graphile_concurrency" NODE_PATH="$node_dir/node_modules" \
        $own_group node "$bench/peer_graphile/worker.js" >/dev/null 2>"$work/$name.worker.log" &
    pid=$!
    pids+=("$pid")
    produce "$topic" "$work/$name.warmup.tsv"
    wait_count "$db" "SELECT count(*) FROM bench_results" 1 120 ||
        die "peer graphile: the warm-up job did not complete in 120 s (log: $work/$name.worker.log)"
    measure_begin "$db"
    cpu_begin "$pid"
    want=$((n + 1))
    t0=$(now)
    produce "$topic" "$work/$name.events.tsv"
    wait_count "$db" "SELECT count(*) FROM bench_results" "$want" "$wait_seconds" || timeout=1
    cpu=$(cpu_end "$pid")
    measure_end "$db"
    hwm=$(hwm_kb "$pid")
    t1=$(DB=$db q "SELECT extract(epoch FROM max(completed_at)) FROM bench_results")
    done_runs=$(calc "$(DB=$db q "SELECT count(*) FROM bench_results") - 1")
    rps=$(calc "$done_runs / ($t1 - $t0)")
    stop_pid "$pid" 15
    stop_pid "$stub_pid" 10
    line="peer name=graphile-worker concurrency=$graphile_concurrency events=$n completed=$done_runs runs_per_s=$(fmt "$rps") seconds=$(fmt "$(calc "$t1 - $t0")" 2)"
    line+=" $(db_fields "$done_runs")"
    line+=" rss_peak_mb=$(fmt "$(calc "$hwm / 1024")")"
    [ -z "$zero_rps" ] ||
        line+=" vs_zero=$(fmt "$(calc "$rps / $zero_rps")" 3) ours_runs_per_s=$(fmt "$zero_rps") ours_rss_peak_mb=$zero_rss_mb"
    line+=" notifications=none $cpu load1=$(load1)"
    [ "$timeout" -eq 0 ] || line+=" timeout=1"
    out "$line"
}

peer_river() {
    local name=river n=$peer_events
    local db=bench_peer_river topic=bench.river.schedules
    local want t0 t1 pid hwm done_runs outbox_rows timeout=0 rps line cpu

    log "peer river: $n events, River MaxWorkers $river_concurrency"
    fresh_db "$db"
    topics "$topic:4"
    DATABASE_URL="$(url_of "$db")" "$river_bin" --init >"$work/$name.init.log" 2>&1 ||
        die "river init failed (log: $work/$name.init.log)"
    stub_start "$name" 0
    gen "bench-$name-warmup" 1 "$work/$name.warmup.tsv"
    gen "bench-$name" "$n" "$work/$name.events.tsv"
    DATABASE_URL="$(url_of "$db")" KAFKA_BOOTSTRAP_SERVERS="$bootstrap" \
        MODEL_BASE_URL="$stub_base/v1" PEER_TOPIC="$topic" PEER_GROUP_ID="bench-$name" \
        PEER_CONCURRENCY="$river_concurrency" \
        $own_group "$river_bin" >/dev/null 2>"$work/$name.worker.log" &
    pid=$!
    pids+=("$pid")
    produce "$topic" "$work/$name.warmup.tsv"
    wait_count "$db" "SELECT count(*) FROM bench_results" 1 120 ||
        die "peer river: the warm-up job did not complete in 120 s (log: $work/$name.worker.log)"
    measure_begin "$db"
    cpu_begin "$pid"
    want=$((n + 1))
    t0=$(now)
    produce "$topic" "$work/$name.events.tsv"
    wait_count "$db" "SELECT count(*) FROM bench_results" "$want" "$wait_seconds" || timeout=1
    cpu=$(cpu_end "$pid")
    measure_end "$db"
    hwm=$(hwm_kb "$pid")
    kill -0 "$pid" 2>/dev/null || die "peer river: the worker died (log: $work/$name.worker.log)"
    t1=$(DB=$db q "SELECT extract(epoch FROM max(completed_at)) FROM bench_results")
    done_runs=$(calc "$(DB=$db q "SELECT count(*) FROM bench_results") - 1")
    outbox_rows=$(calc "$(DB=$db q "SELECT count(*) FROM outbox") - 2")
    rps=$(calc "$done_runs / ($t1 - $t0)")
    stop_pid "$pid" 15
    stop_pid "$stub_pid" 10
    line="peer name=river concurrency=$river_concurrency events=$n completed=$done_runs runs_per_s=$(fmt "$rps") seconds=$(fmt "$(calc "$t1 - $t0")" 2)"
    line+=" $(db_fields "$done_runs")"
    line+=" rss_peak_mb=$(fmt "$(calc "$hwm / 1024")")"
    [ -z "$zero_rps" ] ||
        line+=" vs_zero=$(fmt "$(calc "$rps / $zero_rps")" 3) ours_runs_per_s=$(fmt "$zero_rps") ours_rss_peak_mb=$zero_rss_mb"
    line+=" notifications=queued outbox_rows_per_run=$(fmt "$(calc "$outbox_rows / max($done_runs, 1)")" 2) $cpu load1=$(load1)"
    [ "$timeout" -eq 0 ] || line+=" timeout=1"
    out "$line"
}

if has peer; then
    for w in 1 4; do
        has_peer "python$w" || continue
        if [ "$py_ok" -eq 1 ]; then
            peer_python "python$w" "$w"
        else
            out "peer name=python workers=$w error=install_failed"
        fi
    done
    if has_peer graphile; then
        if [ "$node_ok" -eq 1 ]; then
            peer_graphile
        else
            out "peer name=graphile-worker error=install_failed"
        fi
    fi
    if has_peer river; then
        if [ "$river_ok" -eq 1 ]; then
            peer_river
        else
            out "peer name=river error=build_failed"
        fi
    fi
fi

log "done; per-scenario logs and statement breakdowns in ${work#"$root"/}"
