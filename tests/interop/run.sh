#!/usr/bin/env bash
# run.sh — the body of `make interop`: the e2e scenario through a real
# LiteLLM proxy, to see what a gateway in front of the model changes.
#
#   1. installs the LiteLLM proxy (`litellm[proxy]==$LITELLM_VERSION`) into
#      a private venv under $RL_CACHE_DIR/interop/ (once per version)
#   2. starts PostgreSQL, Kafka and the stub model of its own in
#      $RL_INTEROP_DIR/services (never the shared build/services)
#   3. starts the proxy on a free loopback port with litellm.yaml: model
#      stub-1 routed to the stub as an OpenAI-compatible upstream, a fresh
#      master key (the consumer's MODEL_API_KEY_FILE); LiteLLM telemetry
#      vetoed, no callbacks, no database, local copies of every
#      file it would fetch, and an HTTP(S) proxy setting that sends any
#      non-loopback request to a closed loopback port
#   4. probes the proxy directly: an ok, a 400 and an always-429 request
#      (status, time, upstream calls, id headers, whether Idempotency-Key
#      reaches the stub); then resets the stub's counters
#   5. phase 1: publishes four plain runs, one whose first upstream answer
#      is 429 with Retry-After ([[fault:429 retry_after=1 times=1]]) and one
#      the model rejects ([[fault:400]]); one consumer with MODEL_BASE_URL
#      at the proxy runs them; waits until the ledger, the notification
#      topic and the dead-letter topic have settled
#   6. phase 2 (stub counters reset): one run the stub answers 429 on every
#      call, to count upstream calls per Runledger attempt
#   7. checks and prints a summary (evaluate.py); stops the consumer, the
#      proxy and the services on every way out
#
# Checked (exit 1 when one fails): every plain run and the 429-once run
# completed once, with one ok attempt and one notification per channel;
# the 400 run and the always-429 run failed and were dead-lettered; every
# finished attempt recorded an upstream request id. Reported, never failed:
# whether the gateway retried the 429s and how many upstream calls and
# generations that made, and whether Idempotency-Key reached the stub.
#
# Environment: BUILD_DIR (build), RL_CACHE_DIR (.cache), LITELLM_VERSION
# (1.108.7), RL_INTEROP_VENV ($RL_CACHE_DIR/interop/litellm-<version>),
# RL_INTEROP_DIR ($BUILD_DIR/interop), RL_INTEROP_PROXY_TIMEOUT (300 s for
# the proxy to answer), RL_INTEROP_SETTLE_TIMEOUT (240 s per phase).
# pip takes its index and certificates from the caller's pip configuration.
set -euo pipefail

prog=interop
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
here=$root/tests/interop
build_dir=$(realpath -m -- "${BUILD_DIR:-build}")
bin=$build_dir/consumer/runledger
litellm_version=${LITELLM_VERSION:-1.108.7}
cache_dir=$(realpath -m -- "${RL_CACHE_DIR:-$root/.cache}")
venv=$(realpath -m -- "${RL_INTEROP_VENV:-$cache_dir/interop/litellm-$litellm_version}")
idir=$(realpath -m -- "${RL_INTEROP_DIR:-$build_dir/interop}")
proxy_timeout=${RL_INTEROP_PROXY_TIMEOUT:-300}
settle_timeout=${RL_INTEROP_SETTLE_TIMEOUT:-240}
logs=$idir/logs
evdir=$idir/events
out=$idir/out
max_attempts=3
export RL_SERVICES_DIR=$idir/services
export RL_SERVICES_ENV=$idir/services.env
services=$root/tests/harness/services.sh

die() {
    echo "$prog: $*" >&2
    exit 1
}

[ -x "$bin" ] || die "$bin not found: run make build first"
for tool in kcat psql python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run tests/harness/deps.sh"
done

# The caller's Runledger settings must not leak into this run's consumer.
while read -r name; do
    unset "$name"
done < <(compgen -e | grep -E '^(RUNLEDGER_|MODEL_API_KEY)' || true)

mkdir -p "$idir"
exec 8>"$idir/interop.lock"
flock -n 8 || die "another interop run holds $idir/interop.lock"
rm -rf "$logs" "$evdir" "$out"
mkdir -p "$logs" "$evdir" "$out"

t_start=$SECONDS
services_started=0
proxy_pid=
consumer_pid=

py() {
    python3 "$here/evaluate.py" "$@"
}

alive() {
    kill -0 "$1" 2>/dev/null &&
        [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# stop PID NAME: SIGTERM to the process group it leads (setsid), SIGKILL
# after 30 s.
stop() {
    local pid=$1 name=$2 deadline
    alive "$pid" || return 0
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 30))
    while alive "$pid"; do
        if ((SECONDS >= deadline)); then
            echo "$prog: $name ignored SIGTERM for 30 s: SIGKILL" >&2
            kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    trap - EXIT
    trap '' PIPE INT TERM
    set +e
    if [ "$rc" -ne 0 ]; then
        echo "$prog: failed (exit $rc); stopping what this run started" >&2
        for f in "$logs/consumer.log" "$logs/litellm.log"; do
            [ -s "$f" ] || continue
            echo "  last lines of ${f#"$root"/}:" >&2
            tail -n 8 "$f" | sed 's/^/    /' >&2
        done
    fi
    [ -z "$consumer_pid" ] || stop "$consumer_pid" consumer
    [ -z "$proxy_pid" ] || stop "$proxy_pid" "LiteLLM proxy"
    rm -f "$idir"/*.pid "$idir/litellm-master-key"
    if [ "$services_started" -eq 1 ]; then
        "$services" down 8>&- >"$logs/services-down.log" 2>&1 ||
            { cat "$logs/services-down.log" >&2; [ "$rc" -ne 0 ] || rc=1; }
    fi
    echo "$prog: consumer, LiteLLM proxy and services stopped;" \
        "$( [ "$rc" -eq 0 ] && echo passed || echo "FAILED (exit $rc)") after" \
        "$((SECONDS - t_start)) s; logs in ${logs#"$root"/}/"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A run killed by SIGKILL skips the trap: stop what it left behind first.
for f in "$idir"/consumer.pid "$idir"/litellm.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
        grep -qE -- "$bin consume|litellm"; then
        stop "$pid" "leftover $(basename "$f" .pid)"
    fi
    rm -f "$f"
done

# --- 1. LiteLLM ------------------------------------------------------------

echo "== LiteLLM proxy $litellm_version (venv ${venv#"$root"/})"
if [ -f "$venv/.installed" ] && [ "$(cat "$venv/.installed")" = "$litellm_version" ]; then
    echo "   already installed"
else
    t0=$SECONDS
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" || die "python3 -m venv $venv failed"
    if ! "$venv/bin/pip" install "litellm[proxy]==$litellm_version" \
        >"$logs/pip.log" 2>&1; then
        tail -n 20 "$logs/pip.log" >&2
        die "pip could not install litellm[proxy]==$litellm_version (log: ${logs#"$root"/}/pip.log)"
    fi
    echo "$litellm_version" >"$venv/.installed"
    echo "   installed in $((SECONDS - t0)) s"
fi

# --- 2. services -------------------------------------------------------------

echo "== PostgreSQL, Kafka, stub model (private, in ${idir#"$root"/}/services)"
services_started=1
"$services" down 8>&- >"$logs/services-up.log" 2>&1 || true
if ! "$services" up 8>&- >>"$logs/services-up.log" 2>&1; then
    cat "$logs/services-up.log" >&2
    die "the services did not start"
fi
# shellcheck disable=SC1090 # written by services.sh
. "$RL_SERVICES_ENV"
stub_url=${MODEL_BASE_URL%/v1}
echo "   stub model $MODEL_BASE_URL"
"$bin" migrate >"$logs/migrate.log" 2>&1 || die "runledger migrate failed (log: ${logs#"$root"/}/migrate.log)"

# --- 3. the proxy ------------------------------------------------------------

proxy_port=$(py free-ports 1)
proxy_url=http://127.0.0.1:$proxy_port
echo "== LiteLLM proxy on $proxy_url -> openai/stub-1 at $MODEL_BASE_URL"
# LiteLLM 1.108 refuses to start without a strong master key. A fresh one
# per run, in a file only this user reads: the consumer sends it as its
# MODEL_API_KEY_FILE, as it would send a virtual key.
key_file=$idir/litellm-master-key
(umask 077 && python3 -c 'import secrets; print("sk-" + secrets.token_hex(32))' >"$key_file")
# A clean environment: LiteLLM reads DATABASE_URL, REDIS_*, provider keys
# and callback settings from it, and must see none of the caller's.
# HTTP(S)_PROXY point at a closed loopback port so that anything that
# tries to leave the machine fails at once; NO_PROXY keeps the stub direct.
setsid env -i PATH="$venv/bin:/usr/bin:/bin" HOME="$idir" LANG=C.UTF-8 \
    TMPDIR="${TMPDIR:-/tmp}" \
    RL_INTEROP_STUB_BASE_URL="$MODEL_BASE_URL" \
    RL_INTEROP_STUB_API_KEY=interop-unchecked \
    LITELLM_MASTER_KEY="$(cat "$key_file")" \
    LITELLM_TELEMETRY_DISABLED=true \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS=True \
    LITELLM_LOCAL_BLOG_POSTS=True \
    LITELLM_LOCAL_AUTOROUTER_PRESETS=True \
    LITELLM_LOCAL_POLICY_TEMPLATES=True \
    HF_HUB_OFFLINE=1 \
    HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 \
    ALL_PROXY=http://127.0.0.1:9 NO_PROXY=127.0.0.1,localhost \
    http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 \
    all_proxy=http://127.0.0.1:9 no_proxy=127.0.0.1,localhost \
    "$venv/bin/litellm" --config "$here/litellm.yaml" \
    --host 127.0.0.1 --port "$proxy_port" \
    >"$logs/litellm.log" 2>&1 </dev/null 8>&- &
proxy_pid=$!
echo "$proxy_pid" >"$idir/litellm.pid"
t0=$SECONDS
until py http-ok "$proxy_url/health/liveliness"; do
    alive "$proxy_pid" || die "the LiteLLM proxy exited (log: ${logs#"$root"/}/litellm.log)"
    ((SECONDS - t0 < proxy_timeout)) ||
        die "the LiteLLM proxy did not answer within ${proxy_timeout} s"
    sleep 1
done
echo "   answering after $((SECONDS - t0)) s"

echo "== Probe: requests straight to the proxy, with Idempotency-Key: interop-probe"
py probe "$proxy_url" "$stub_url" "$key_file" | tee "$out/probe.txt"
py post "$stub_url/admin/reset" >/dev/null

# --- 4. consumer ---------------------------------------------------------------

consumer_port=$(py free-ports 1)
RUNLEDGER_WORKER_ID=interop-1 \
    MODEL_BASE_URL=$proxy_url/v1 \
    MODEL_API_KEY_FILE=$key_file \
    RUNLEDGER_HTTP_PORT=$consumer_port \
    RUNLEDGER_MAX_ATTEMPTS=$max_attempts \
    RUNLEDGER_BACKOFF_BASE_MS=500 \
    RUNLEDGER_HEALTH_INTERVAL_SECONDS=1 \
    RUNLEDGER_SHUTDOWN_GRACE_SECONDS=10 \
    setsid "$bin" consume >"$logs/consumer.log" 2>&1 </dev/null 8>&- &
consumer_pid=$!
echo "$consumer_pid" >"$idir/consumer.pid"
t0=$SECONDS
until py http-ok "http://127.0.0.1:$consumer_port/readyz"; do
    alive "$consumer_pid" || die "the consumer exited (log: ${logs#"$root"/}/consumer.log)"
    ((SECONDS - t0 < 90)) || die "the consumer was not ready within 90 s"
    sleep 0.5
done
echo "== Consumer ready (MODEL_BASE_URL=$proxy_url/v1, RUNLEDGER_MAX_ATTEMPTS=$max_attempts)"

# --- 5. events -----------------------------------------------------------------

# request FILE CONTENT: a chat request for model stub-1.
request() {
    python3 -c 'import json,sys; print(json.dumps({"model": "stub-1",
        "messages": [{"role": "user", "content": sys.argv[1]}]}))' "$2" >"$evdir/$1"
}
request plain.json 'Summarise the news for {{input}}'
request 429-once.json 'Summarise the news for {{input}} [[fault:429 retry_after=1 times=1]]'
request 400.json 'Summarise the news for {{input}} [[fault:400]]'
request 429-always.json 'Summarise the news for {{input}} [[fault:429 retry_after=1]]'

# publish ROLE TENANT JOB REQUEST: one event; records "run_id role".
publish() {
    local id
    id=$("$bin" publish --job "$3" --tenant "$2" --at 2026-08-07T09:00:00+00:00 \
        --version v1 --request "@$evdir/$4" --input "{\"tenant\":\"$2\"}" \
        --notify email,slack 2>>"$logs/publish.log") ||
        die "runledger publish failed (log: ${logs#"$root"/}/publish.log)"
    echo "$id $1" >>"$out/runs.txt"
    printf '   %-10s %-14s %-16s %s\n' "$1" "$2" "$3" "$id"
}

# settle PHASE: waits until this phase's runs are final, their outbox rows
# relayed and the topics hold what they should; saves the evidence.
settle() {
    local phase=$1 t0=$SECONDS
    while :; do
        alive "$consumer_pid" || die "the consumer exited (log: ${logs#"$root"/}/consumer.log)"
        alive "$proxy_pid" || die "the LiteLLM proxy exited (log: ${logs#"$root"/}/litellm.log)"
        kcat -C -b "$KAFKA_BOOTSTRAP_SERVERS" -t runledger.notifications -o beginning \
            -e -q -J >"$out/notifications.jsonl" 2>>"$logs/kcat.log" || true
        kcat -C -b "$KAFKA_BOOTSTRAP_SERVERS" -t runledger.dlq -o beginning \
            -e -q -J >"$out/dlq.jsonl" 2>>"$logs/kcat.log" || true
        psql -X -At "$DATABASE_URL" -v ON_ERROR_STOP=1 -c "
            SELECT coalesce(json_agg(json_build_object(
                'run_id', r.run_id, 'status', r.status,
                'error_class', r.error_class, 'output', r.output,
                'outbox', (SELECT count(*) FROM outbox o WHERE o.run_id = r.run_id),
                'attempts', (SELECT coalesce(json_agg(json_build_object(
                    'no', a.attempt_no, 'outcome', a.outcome,
                    'http_status', a.http_status,
                    'upstream_request_id', a.upstream_request_id,
                    'idempotency_key', a.idempotency_key, 'error', a.error)
                    ORDER BY a.attempt_no), '[]') FROM attempts a
                    WHERE a.run_id = r.run_id))), '[]')
              FROM runs r" >"$out/ledger.json" 2>>"$logs/psql.log" || true
        py sockets "$proxy_pid" >>"$out/sockets.log" || true
        if py settled "$out" "$max_attempts"; then
            break
        fi
        ((SECONDS - t0 < settle_timeout)) || {
            py settled "$out" "$max_attempts" --why >&2 || true
            die "phase $phase did not settle within ${settle_timeout} s"
        }
        sleep 2
    done
    py get "$stub_url/stats" >"$out/stub-phase$phase.json"
    while read -r id _; do
        py get "$stub_url/stats?key=$id"
    done <"$out/runs.txt" >"$out/stub-keys-phase$phase.jsonl"
    echo "   settled after $((SECONDS - t0)) s"
}

echo "== Phase 1: publish (runledger publish), consume through the proxy"
: >"$out/runs.txt"
for t in acme globex; do
    publish plain "tenant-$t" competitor-summary plain.json
    publish plain "tenant-$t" daily-digest plain.json
done
publish 429-once tenant-acme rate-limited 429-once.json
publish 400 tenant-acme rejected 400.json
settle 1

echo "== Phase 2: stub counters reset; a run the stub answers 429 on every call"
py post "$stub_url/admin/reset" >/dev/null
publish 429-always tenant-globex always-limited 429-always.json
settle 2

echo
py evaluate "$out" "$max_attempts" "$litellm_version"
