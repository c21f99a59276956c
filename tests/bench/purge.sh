#!/usr/bin/env bash
# tests/bench/purge.sh — what `runledger purge` costs a consumer at load.
#
# On the services `make services-up` started (build/services.env: the
# PostgreSQL, the Kafka broker), in a database and topics of its own:
#
#   1. fills the ledger with PURGE_BENCH_RUNS (100,000) finished runs, 60
#      days old, each with one attempt and one delivered notification
#      (generate_series INSERTs that satisfy the schema's constraints);
#   2. starts a stub model at 0 ms and one `runledger consume`, and
#      produces PURGE_BENCH_EVENTS (200,000) schedule events at once so the
#      consumer stays saturated;
#   3. samples the consumer's completed runs (/metrics) every second for
#      PURGE_BENCH_BEFORE seconds (15), then runs `runledger purge
#      --older-than 30d --batch PURGE_BENCH_BATCH` (1000) while sampling,
#      then PURGE_BENCH_AFTER seconds (10) more.
#
# Prints one key=value line on stdout: consume runs/s before, during and
# after the purge, the purge's runs/s and longest batch, the runs left.
# Progress and the purge's own output go to stderr. Everything it started
# is stopped on exit, its database and topics are left for inspection
# until the next run drops them.
#
#   make build && make services-up && tests/bench/purge.sh
#   PURGE_BENCH_RUNS=20000 PURGE_BENCH_EVENTS=60000 tests/bench/purge.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
env_file=${SERVICES_ENV:-$root/build/services.env}
bin=${RUNLEDGER_BIN:-$root/build/consumer/runledger}
work=${PURGE_BENCH_DIR:-$root/build/bench-purge}
runs=${PURGE_BENCH_RUNS:-100000}
events=${PURGE_BENCH_EVENTS:-200000}
before=${PURGE_BENCH_BEFORE:-15}
after=${PURGE_BENCH_AFTER:-10}
batch=${PURGE_BENCH_BATCH:-1000}
cap=${PURGE_BENCH_MAX_IN_FLIGHT:-2048}
db=bench_purge
name=bench-purge-$$

pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT
log() { echo "purge-bench: $*" >&2; }
die() {
    log "$*"
    exit 1
}

[ -f "$env_file" ] || die "no $env_file: run make services-up first"
# shellcheck disable=SC1090
. "$env_file"
[ -x "$bin" ] || die "no $bin: run make build first"
mkdir -p "$work"

base_url=${DATABASE_URL%/*}
url="$base_url/$db"
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "$1"; }
qd() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$url" -c "$1"; }

log "database $db, $runs old finished runs"
q "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
q "CREATE DATABASE $db" >/dev/null
"$bin" migrate --database-url "$url" >/dev/null 2>"$work/migrate.log" ||
    die "migrate failed (log: $work/migrate.log)"

t0=$(date +%s.%N)
qd "
CREATE TEMP TABLE g AS
SELECT encode(sha256(convert_to('old-' || i, 'UTF8')), 'hex') AS id, i,
       now() - interval '60 days' + make_interval(secs => i) AS at,
       CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'completed' END AS status
  FROM generate_series(1, $runs) i;
INSERT INTO runs (run_id, job, tenant, scheduled_at, version, fingerprint,
                  request, status, output, completed_at, attempts,
                  last_error, error_class, created_at, updated_at)
SELECT id, 'bench-old', 'tenant-' || (i % 64),
       '2020-01-01'::timestamptz + make_interval(secs => i), 'v1', id,
       '{\"notify\":[\"email\"],\"request\":{\"model\":\"stub-1\"}}',
       status,
       CASE WHEN status = 'completed'
            THEN jsonb_build_object('text', 'answer ' || i) END,
       CASE WHEN status = 'completed' THEN at END, 1,
       CASE WHEN status = 'failed' THEN 'HTTP 400' END,
       CASE WHEN status = 'failed' THEN 'permanent' END, at, at
  FROM g;
INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker,
                      idempotency_key, dispatched_at, outcome, http_status,
                      prompt_tokens, completion_tokens, latency_ms,
                      finished_at)
SELECT id, 1, 1, 'bench-old-w', id || ':1', at,
       CASE WHEN status = 'completed' THEN 'ok' ELSE 'permanent' END,
       CASE WHEN status = 'completed' THEN 200 ELSE 400 END, 20, 40, 5, at
  FROM g;
INSERT INTO outbox_delivered (run_id, channel, explicit_payload, created_at,
                              delivered_at, delivery_count)
SELECT id, 'email', NULL,
       at, at, 1
  FROM g WHERE status = 'completed';
ANALYZE runs; ANALYZE attempts; ANALYZE outbox_delivered;" >/dev/null
fill_s=$(echo "$(date +%s.%N) - $t0" | bc)
log "filled in ${fill_s}s: $(qd "SELECT pg_size_pretty(pg_total_relation_size('runs') + pg_total_relation_size('attempts') + pg_total_relation_size('outbox_delivered'))")"

# topics
tool=$work/rl_topics
if [ ! -x "$tool" ] || [ "$root/tests/harness/rl_topics.c" -nt "$tool" ]; then
    # shellcheck disable=SC2046 # pkg-config prints several flags
    cc -std=c11 -O1 -o "$tool" "$root/tests/harness/rl_topics.c" \
        $(pkg-config --cflags --libs rdkafka) >&2 || die "could not build rl_topics"
fi
topic=$name.schedules
"$tool" "$KAFKA_BOOTSTRAP_SERVERS" 60000 "$topic:4" "$name.notifications:4" \
    "$name.dlq:1" >&2 || die "could not create topics"

# stub model at 0 ms
portfile=$work/stub.port
rm -f "$portfile"
STUB_LATENCY_MS=0 python3 "$root/tests/stub/stub_model.py" --port 0 \
    --port-file "$portfile" >/dev/null 2>"$work/stub.log" &
pids+=($!)
for ((i = 0; i < 200; i++)); do
    [ -s "$portfile" ] && break
    sleep 0.05
done
[ -s "$portfile" ] || die "stub model did not start (log: $work/stub.log)"
stub="http://127.0.0.1:$(cat "$portfile")"

http_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
env DATABASE_URL="$url" MODEL_BASE_URL="$stub/v1" \
    RUNLEDGER_TOPIC="$topic" RUNLEDGER_NOTIFY_TOPIC="$name.notifications" \
    RUNLEDGER_DLQ_TOPIC="$name.dlq" RUNLEDGER_GROUP_ID="$name" \
    RUNLEDGER_WORKER_ID="$name-w0" RUNLEDGER_HTTP_PORT="$http_port" \
    RUNLEDGER_MAX_IN_FLIGHT="$cap" RUNLEDGER_LOG_LEVEL=warn \
    "$bin" consume >/dev/null 2>"$work/consumer.log" &
pids+=($!)

completed() {
    curl -s "http://127.0.0.1:$http_port/metrics" |
        sed -n 's/^runledger_runs_total{outcome="completed"} \([0-9.e+]*\)$/\1/p' |
        awk '{printf "%d\n", $1}'
}
for ((i = 0; i < 600; i++)); do
    curl -sf "http://127.0.0.1:$http_port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

log "producing $events events"
python3 "$root/tests/bench/gen_events.py" --job bench-load --count "$events" \
    >"$work/events.tsv"
kcat -P -b "$KAFKA_BOOTSTRAP_SERVERS" -t "$topic" -K $'\t' -X linger.ms=5 \
    -X queue.buffering.max.messages=1000000 <"$work/events.tsv" ||
    die "kcat could not produce"
# the first completions: the consumer is past its start
for ((i = 0; i < 600; i++)); do
    c=$(completed)
    [ "${c:-0}" -gt 0 ] && break
    sleep 0.1
done

# sample SECONDS: completed runs/s over that many seconds (also while a
# purge runs in the background: until it exits when PURGE_PID is set)
rate_over() {
    local s=$1 c0 c1 t0 t1
    c0=$(completed)
    t0=$(date +%s.%N)
    if [ -n "${PURGE_PID:-}" ]; then
        while kill -0 "$PURGE_PID" 2>/dev/null; do sleep 0.2; done
    else
        sleep "$s"
    fi
    c1=$(completed)
    t1=$(date +%s.%N)
    echo "($c1 - $c0) / ($t1 - $t0)" | bc -l | xargs printf '%.0f'
}

log "consume alone for ${before}s"
rps_before=$(rate_over "$before")
log "consume: $rps_before runs/s; purging"
DATABASE_URL="$url" "$bin" purge --older-than 30d --batch "$batch" \
    >"$work/purge.out" 2>"$work/purge.err" &
PURGE_PID=$!
rps_during=$(rate_over 0)
wait "$PURGE_PID" || die "purge failed: $(cat "$work/purge.err")"
PURGE_PID=
cat "$work/purge.out" >&2
log "consume after the purge for ${after}s"
rps_after=$(rate_over "$after")
left_completed=$(completed)

summary=$(grep 'batches of at most' "$work/purge.out")
purge_rps=$(echo "$summary" | sed -n 's/.*: \([0-9]*\) runs\/s.*/\1/p')
purge_s=$(echo "$summary" | sed -n 's/.* in \([0-9.]*\) s:.*/\1/p')
longest=$(echo "$summary" | sed -n 's/.*longest batch \([0-9.]*\) s.*/\1/p')
removed=$(sed -n 's/^  runs *\([0-9]*\)$/\1/p' "$work/purge.out")
old_left=$(qd "SELECT count(*) FROM runs WHERE job = 'bench-old'")
backlog=$((events - left_completed))

echo "purge_bench old_runs=$runs removed=$removed old_left=$old_left batch=$batch purge_s=$purge_s purge_runs_per_s=$purge_rps longest_batch_s=$longest consume_runs_per_s_before=$rps_before consume_runs_per_s_during=$rps_during consume_runs_per_s_after=$rps_after events=$events events_left=$backlog cores=$(nproc) load1=$(cut -d' ' -f1 /proc/loadavg)"
[ "$backlog" -gt 0 ] ||
    log "warning: the consumer ran out of events; raise PURGE_BENCH_EVENTS"
