#!/usr/bin/env bash
# demo.sh — the body of `make demo` once $BUILD_DIR is built: a short story
# a newcomer can follow, on throwaway services of its own.
#
#   1. starts PostgreSQL, Kafka and the stub model in $RL_DEMO_DIR/services
#      (never the shared build/services a `make test` may be using)
#   2. migrates the ledger (twice: the second applies nothing)
#   3. starts two consumers (`runledger consume`) in one consumer group
#   4. publishes sample events for two tenants: new runs, duplicates (same
#      event again; extra whitespace, another UTC offset, reordered request
#      keys), a CronJob-style `--now --window P1D` fired twice, a request the
#      model rejects (`[[fault:400]]`) and one malformed event (refused by
#      `publish`, then sent raw with kcat)
#   5. waits, bounded, until the ledger and the consumer group have settled
#   6. shows the runs table, the duplicates suppressed, the notifications and
#      dead letters on their topics, and the failed run
#   7. a schedule in the ledger whose CronJob-style publisher misses a
#      window: `schedules gaps` finds it, `schedules backfill` closes it
#   8. serves the web console (`runledger console`), prints its address and
#      a sign-in token, and approves an approval-required run through it as
#      a browser would (RL_DEMO_CONSOLE_WAIT=SECONDS first leaves that long
#      to approve it yourself)
#   9. SIGTERMs the console and consumers, stops the services — on every way out,
#      also after a failure or Ctrl-C (the exit code stays the demo's)
#
# Files: $RL_DEMO_DIR/events/ (the sample requests), logs/ (consumer,
# publish and services logs), services/ and services.env.
#
# Environment: BUILD_DIR (build), RL_DEMO_DIR ($BUILD_DIR/demo),
# RL_DEMO_READY_TIMEOUT (60 s: consumers joining the group),
# RL_DEMO_SETTLE_TIMEOUT (90 s: events settling), RL_DEMO_CONSOLE_WAIT (0 s). RL_SERVICES_DIR and
# RL_SERVICES_ENV from the caller (make exports the shared ones) are ignored.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build_dir=$(realpath -m -- "${BUILD_DIR:-build}")
bin=$build_dir/consumer/runledger
demo_dir=$(realpath -m -- "${RL_DEMO_DIR:-$build_dir/demo}")
ready_timeout=${RL_DEMO_READY_TIMEOUT:-60}
settle_timeout=${RL_DEMO_SETTLE_TIMEOUT:-90}
logs=$demo_dir/logs
evdir=$demo_dir/events
# The demo's own services: `make demo` must never touch (or stop) the
# services of a `make test` running next to it.
export RL_SERVICES_DIR=$demo_dir/services
export RL_SERVICES_ENV=$demo_dir/services.env
services=$root/tests/harness/services.sh

[ -x "$bin" ] || {
    echo "demo.sh: $bin not found: run make build first" >&2
    exit 1
}
for tool in kcat python3 psql; do
    command -v "$tool" >/dev/null 2>&1 ||
        {
            echo "demo.sh: $tool not found: run tests/harness/deps.sh" >&2
            exit 1
        }
done

# A path as the reader sees it: relative to the repository when inside it.
rel() {
    case "$1" in
    "$root"/*) echo "${1#"$root"/}" ;;
    *) echo "$1" ;;
    esac
}

# Settings a caller may have exported for their own Runledger must not leak
# into the demo's (its topics, group, model and secrets are its own).
while read -r name; do
    unset "$name"
done < <(compgen -e | grep -E '^(RUNLEDGER_|MODEL_API_KEY)' || true)

# One demo at a time per folder. Descriptor 8 is closed for everything that
# outlives a step (services, consumers), so the lock dies with this script.
mkdir -p "$demo_dir"
exec 8>"$demo_dir/demo.lock"
flock -n 8 || {
    echo "demo.sh: another demo is running in $(rel "$demo_dir")" >&2
    exit 1
}

t_start=$SECONDS
consumer_pids=()
consumer_ports=()
console_pid=
services_started=0

# --- small helpers (Python: the standard library only) --------------------

read -r -d '' helper_py <<'EOF' || true
import json, socket, sys, urllib.request

def metrics(port):
    """{name: [(labels, value)]} from one consumer's /metrics, or None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except Exception:
        return None
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, labels = head.partition("{")
        out.setdefault(name, []).append((labels.rstrip("}"), float(value)))
    return out

def total(m, name, label=None):
    return sum(v for l, v in m.get(name, []) if label is None or label in l)

def headers(rec):
    h = rec.get("headers") or []
    return {h[i]: h[i + 1] for i in range(0, len(h) - 1, 2)}

def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]

def short(run_id):
    return run_id[:12] + "…" if len(run_id) > 12 else run_id

cmd, args = sys.argv[1], sys.argv[2:]

if cmd == "console-approve":       # sign in, open the page, approve
    import html, http.client, re, urllib.parse
    port, token, run_id = args
    def req(method, path, cookie=None, form=None):
        c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
        h = {"Origin": "http://127.0.0.1:" + port}
        if cookie:
            h["Cookie"] = "rl_session=" + cookie
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            h["Content-Type"] = "application/x-www-form-urlencoded"
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.getheader("Set-Cookie") or "", r.read().decode()
    status, cookie, _ = req("POST", "/signin", form={"token": token})
    cookie = re.match(r"rl_session=([0-9a-f]+)", cookie)
    if status != 303 or not cookie:
        sys.exit("sign-in answered %d" % status)
    cookie = cookie.group(1)
    status, _, page = req("GET", "/approvals/" + run_id, cookie)
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    digest = re.search(r'name="digest" value="([0-9a-f]+)"', page)
    content = re.search(r'<pre id="content">(.*?)</pre>', page, re.S)
    if status != 200 or not (csrf and digest and content):
        sys.exit("the approval page answered %d without a decision form" % status)
    print("  GET /approvals/%s... shows the content to be sent:" % run_id[:12])
    print("    " + html.unescape(content.group(1))[:160] + " ...")
    print("  and its digest " + digest.group(1))
    status, _, page = req("POST", "/approvals/" + run_id, cookie,
                          {"csrf": csrf.group(1), "digest": digest.group(1),
                           "decision": "approve", "reason": "demo"})
    msg = re.search(r'<p id="message" class="(ok|error)">(.*?)</p>', page, re.S)
    print("  POST /approvals/%s... (Approve) -> %d: %s" % (run_id[:12], status,
          html.unescape(msg.group(2)) if msg else "?"))
    sys.exit(0 if status == 200 else 1)

elif cmd == "ready-console":       # exit 0 when the console answers
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{args[0]}/healthz", timeout=2) as r:
            sys.exit(0 if r.status == 200 else 1)
    except OSError:
        sys.exit(1)

elif cmd == "free-ports":          # N ports nobody listens on now
    socks = [socket.socket() for _ in range(int(args[0]))]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    print(" ".join(str(s.getsockname()[1]) for s in socks))

elif cmd == "ready":               # exit 0 when /readyz answers 200
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{args[0]}/readyz", timeout=2) as r:
            sys.exit(0 if r.status == 200 else 1)
    except Exception:
        sys.exit(1)

elif cmd == "probe":               # shell assignments summed over consumers
    sums = dict(events=0, dead=0, lag=0, lagparts=0, dups=0)
    parts = []
    for port in args:
        m = metrics(port)
        if m is None:
            print("probe_ok=0")
            sys.exit(0)
        sums["events"] += total(m, "runledger_events_total")
        sums["dead"] += total(m, "runledger_dead_letters_total")
        sums["dups"] += total(m, "runledger_duplicates_total")
        lag = m.get("runledger_consumer_lag", [])
        sums["lag"] += sum(v for _, v in lag)
        sums["lagparts"] += len(lag)
        owned = sorted(int(l.split('partition="')[1].split('"')[0]) for l, _ in lag)
        parts.append(",".join(map(str, owned)) or "-")
    print("probe_ok=1")
    for k, v in sums.items():
        print(f"probe_{k}={int(v)}")
    print("probe_parts=(" + " ".join(parts) + ")")

elif cmd == "consumers":           # per-consumer table from /metrics
    rows = []
    for i, port in enumerate(args, 1):
        m = metrics(port) or {}
        rows.append([f"consumer-{i}",
                     total(m, "runledger_events_total"),
                     total(m, "runledger_events_invalid_total"),
                     total(m, "runledger_duplicates_total"),
                     total(m, "runledger_runs_total", 'outcome="completed"'),
                     total(m, "runledger_runs_total", 'outcome="failed"'),
                     total(m, "runledger_generations_total"),
                     total(m, "runledger_dead_letters_total"),
                     total(m, "runledger_outbox_relayed_total")])
    rows.append(["total"] + [sum(r[c] for r in rows) for c in range(1, 9)])
    head = ["", "events", "invalid", "duplicates", "completed", "failed",
            "generations", "dead letters", "notified"]
    fmt = "  {:<12}" + "".join("{:>%d}" % (len(h) + 2) for h in head[1:])
    print(fmt.format(*head))
    for r in rows:
        print(fmt.format(r[0], *(int(v) for v in r[1:])))

elif cmd == "stub":                # what the model endpoint saw
    with urllib.request.urlopen(args[0] + "/stats", timeout=5) as r:
        s = json.load(r)
    faults = ", ".join(f"{n} answered {k}" for k, n in sorted(s["faults"].items())) or "none"
    print(f"  requests {s['requests']}, generations {s['generations']}, "
          f"faults injected: {faults}")
    many = {k: n for k, n in s["by_key"].items() if n != 1}
    print("  generations per Idempotency-Key (the run id): "
          + ("exactly 1 for every key" if not many
             else ", ".join(f"{short(k)}={n}" for k, n in many.items())))

elif cmd == "notifications":       # kcat -J lines of the notification topic
    recs = records(args[0])
    keys = [headers(r).get("idempotency-key", "") for r in recs]
    print(f"  {len(recs)} records, {len(set(keys))} distinct idempotency-key headers")
    print()
    print("  {:<9} {:<6} {:<22} {:<18} {:<18} {}".format(
        "partition", "offset", "idempotency-key", "tenant", "job", "output (first words)"))
    for r, key in sorted(zip(recs, keys), key=lambda x: (x[0]["partition"], x[0]["offset"])):
        h = headers(r)
        run, _, channel = key.partition(":")
        try:
            text = json.loads(r["payload"])["output"]["text"]
        except Exception:
            text = ""
        text = text if len(text) <= 34 else text[:33] + "…"
        print("  {:<9} {:<6} {:<22} {:<18} {:<18} {}".format(
            r["partition"], r["offset"], f"{short(run)}:{channel}",
            h.get("tenant", ""), h.get("job", ""), text))

elif cmd == "dlq":                 # kcat -J lines of the dead-letter topic
    recs = records(args[0])
    print(f"  {len(recs)} records")
    print()
    print("  {:<6} {:<16} {:<17} {:<14} {}".format(
        "offset", "reason", "source", "run", "detail"))
    for r in sorted(recs, key=lambda x: x["offset"]):
        h = headers(r)
        src = f"p{h.get('source_partition', '?')} offset {h.get('source_offset', '?')}"
        print("  {:<6} {:<16} {:<17} {:<14} {}".format(
            r["offset"], h.get("reason", ""), src,
            short(h["run_id"]) if "run_id" in h else "-", h.get("detail", "")))
    for r in sorted(recs, key=lambda x: x["offset"]):
        if "run_id" not in headers(r):
            print()
            print(f"  the rejected event (offset {r['offset']}), as it was sent:")
            print("    " + (r.get("payload") or ""))
EOF

py() {
    python3 -c "$helper_py" "$@"
}

# --- output ---------------------------------------------------------------

section_no=0
section() {
    section_no=$((section_no + 1))
    echo
    echo "== $section_no. $*"
    echo
}

# Indents what it reads by two spaces (command output inside a section).
indent() {
    sed 's/^/  /'
}

now_ms() {
    date +%s%3N
}

# Seconds since $1 (from now_ms), one decimal.
since() {
    local d=$(($(now_ms) - $1))
    printf '%d.%d' $((d / 1000)) $((d % 1000 / 100))
}

# --- stopping: consumers first (they commit to Kafka), then the services --

# Whether pid $1 runs (a zombie has exited: only the wait is missing).
alive() {
    kill -0 "$1" 2>/dev/null &&
        [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

stop_consumers() {
    local i n pid rc t0 deadline how summary failed=0
    for i in "${!consumer_pids[@]}"; do
        pid=${consumer_pids[$i]}
        n=$((i + 1))
        [ -n "$pid" ] || continue
        t0=$(now_ms)
        how="had already exited"
        if alive "$pid"; then
            how=SIGTERM
            kill -TERM "$pid" 2>/dev/null || true
            deadline=$((SECONDS + 40))
            while alive "$pid"; do
                if ((SECONDS >= deadline)); then
                    how="ignored SIGTERM for 40 s: SIGKILL"
                    kill -KILL "$pid" 2>/dev/null || true
                    break
                fi
                sleep 0.1
            done
        fi
        rc=0
        wait "$pid" 2>/dev/null || rc=$?
        summary=$(grep -o '"msg":"stopped: [^"]*"' "$logs/consumer-$n.log" 2>/dev/null |
            tail -n 1 | sed 's/"msg":"stopped: //; s/"$//')
        if [ "$how" = SIGTERM ]; then
            printf '  consumer-%d (pid %s): SIGTERM, exited %d after %s s%s\n' \
                "$n" "$pid" "$rc" "$(since "$t0")" "${summary:+ — $summary}"
        else
            printf '  consumer-%d (pid %s): %s, exit status %d\n' "$n" "$pid" "$how" "$rc"
        fi
        consumer_pids[i]=
        [ "$rc" -eq 0 ] || failed=1
    done
    rm -f "$demo_dir"/consumer-*.pid
    return "$failed"
}

cleanup() {
    local rc=$? failed=0
    trap - EXIT
    # Stopping must finish even when stdout is gone (`| head`) or a second
    # Ctrl-C arrives: no failed write or signal may end this handler early.
    trap '' PIPE INT TERM
    set +e
    if [ "$rc" -ne 0 ]; then
        echo
        case "$rc" in
        130 | 143) echo "demo: interrupted; stopping what the demo started" >&2 ;;
        *) echo "demo: a step failed (exit $rc); stopping what the demo started" >&2 ;;
        esac
        for f in "$logs"/consumer-*.log; do
            [ -s "$f" ] || continue
            echo "  last lines of $(rel "$f"):" >&2
            tail -n 5 "$f" | sed 's/^/    /' >&2
        done
    fi
    section "Stopping everything the demo started"
    if [ -n "$console_pid" ]; then
        kill -TERM "$console_pid" 2>/dev/null
        wait "$console_pid" 2>/dev/null
        echo "  the console (pid $console_pid): SIGTERM, stopped"
    fi
    if [ ${#consumer_pids[@]} -gt 0 ]; then
        stop_consumers || failed=1
    fi
    if [ "$services_started" -eq 1 ]; then
        if "$services" down 8>&- >"$logs/services-down.log" 2>&1; then
            echo "  PostgreSQL, Kafka and the stub model stopped" \
                "(log: $(rel "$logs/services-down.log"))"
        else
            cat "$logs/services-down.log" >&2
            failed=1
        fi
    fi
    [ "$rc" -ne 0 ] || rc=$failed
    echo
    if [ "$rc" -eq 0 ]; then
        echo "demo: done in $((SECONDS - t_start)) s. Logs: $(rel "$logs")/"
    else
        echo "demo: FAILED (exit $rc) after $((SECONDS - t_start)) s. Logs: $(rel "$logs")/" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
    echo "demo: $*" >&2
    exit 1
}

# A consumer left behind by a demo that was killed (SIGKILL skips the trap):
# stopped before its services go.
leftovers=0
for f in "$demo_dir"/consumer-*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
        grep -qF -- "$bin consume"; then
        leftovers=$((leftovers + 1))
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 300); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -f "$f"
done
rm -rf "$logs" "$evdir"
mkdir -p "$logs" "$evdir"

cat <<EOF
Runledger demo
==============

Two tenants schedule AI jobs by publishing events to Kafka. Two Runledger
consumers give every logical run one id, one row in the PostgreSQL ledger,
one model call and one notification per channel — however often the event
arrives. Everything runs on this machine and is stopped at the end.
Files: $(rel "$demo_dir")/ (events/ holds the sample requests, logs/ the logs).
EOF

# --- 1. services ------------------------------------------------------------

section "Throwaway services"
t0=$SECONDS
services_started=1
# A demo killed earlier may have left its services running with old data:
# start from nothing.
"$services" down 8>&- >"$logs/services-up.log" 2>&1 || true
if grep -q 'stopped' "$logs/services-up.log" || [ "$leftovers" -gt 0 ]; then
    echo "  (stopped what an earlier, killed demo left running: $leftovers consumers and its services)"
fi
if ! "$services" up 8>&- >>"$logs/services-up.log" 2>&1; then
    cat "$logs/services-up.log" >&2
    fail "the services did not start"
fi
# shellcheck disable=SC1090 # written by services.sh
. "$RL_SERVICES_ENV"
printf '  %-11s %s\n' \
    PostgreSQL "$DATABASE_URL" \
    Kafka "$KAFKA_BOOTSTRAP_SERVERS  topics runledger.schedules (4 partitions)," \
    "" "runledger.notifications (4), runledger.dlq (1)" \
    "stub model" "$MODEL_BASE_URL  (OpenAI-compatible; tests/stub/stub_model.py)"
echo "  up in $((SECONDS - t0)) s (log: $(rel "$logs/services-up.log"))"
stub_url=${MODEL_BASE_URL%/v1}

# --- 2. migrate -------------------------------------------------------------

section "The ledger"
echo "  \$ runledger migrate"
"$bin" migrate 2>"$logs/migrate.log" | indent
echo "  \$ runledger migrate            # a second time: nothing to apply"
"$bin" migrate 2>>"$logs/migrate.log" | indent

# --- 3. consumers -----------------------------------------------------------

section "Two consumers in one consumer group"
read -r -a ports <<<"$(py free-ports 3)"
consumer_ports=("${ports[0]}" "${ports[1]}")
console_port=${ports[2]}
console_url=http://127.0.0.1:$console_port
for i in 1 2; do
    port=${consumer_ports[$((i - 1))]}
    # Own session: a Ctrl-C reaches the demo, which stops them in order.
    # Statistics and commits every second so the lag below is fresh.
    RUNLEDGER_WORKER_ID=demo-consumer-$i \
        RUNLEDGER_HTTP_PORT=$port \
        RUNLEDGER_HEALTH_INTERVAL_SECONDS=1 \
        RUNLEDGER_SHUTDOWN_GRACE_SECONDS=10 \
        RUNLEDGER_KAFKA_STATISTICS_INTERVAL_MS=1000 \
        RUNLEDGER_KAFKA_AUTO_COMMIT_INTERVAL_MS=1000 \
        RUNLEDGER_CONSOLE_BASE_URL=$console_url \
        setsid "$bin" consume >"$logs/consumer-$i.log" 2>&1 </dev/null 8>&- &
    consumer_pids+=("$!")
    echo "$!" >"$demo_dir/consumer-$i.pid"
    printf '  consumer-%d  pid %-7s worker id demo-consumer-%d   metrics http://127.0.0.1:%s/metrics\n' \
        "$i" "$!" "$i" "$port"
    printf '               log %s\n' "$(rel "$logs/consumer-$i.log")"
done
t0=$(now_ms)
deadline=$((SECONDS + ready_timeout))
until py ready "${consumer_ports[0]}" && py ready "${consumer_ports[1]}"; do
    for i in 0 1; do
        alive "${consumer_pids[$i]}" ||
            fail "consumer-$((i + 1)) exited (log: $(rel "$logs/consumer-$((i + 1)).log"))"
    done
    ((SECONDS < deadline)) ||
        fail "the consumers did not both join the group within ${ready_timeout} s"
    sleep 0.2
done
echo "  both ready (/readyz 200: PostgreSQL reachable, partitions assigned) after $(since "$t0") s"

# --- 4. publish ---------------------------------------------------------------

section "Publishing schedule events"

acme=workspace-acme
globex=workspace-globex

# The sample requests, as a team would keep them next to its CronJob.
cat >"$evdir/competitor-summary.json" <<'EOF'
{"model": "stub-1", "temperature": 0,
 "messages": [{"role": "system", "content": "You summarise competitor news for a product team."},
              {"role": "user", "content": "Summarise this week's competitor news: {{input}}"}]}
EOF
cat >"$evdir/daily-digest.json" <<'EOF'
{"model": "stub-1", "messages": [{"role": "user", "content": "Write today's digest of {{input}}"}]}
EOF
# `[[fault:400]]` makes the stub answer 400, standing in for a request the
# provider rejects (an unknown model, a malformed parameter).
cat >"$evdir/weekly-report.json" <<'EOF'
{"model": "stub-1", "messages": [{"role": "user", "content": "Write the weekly report for {{input}} [[fault:400]]"}]}
EOF
echo '{"competitors": ["Initech", "Umbrella"], "week": "2026-W32"}' >"$evdir/acme-input.json"
echo '{"competitors": ["Hooli", "Vandelay"], "week": "2026-W32"}' >"$evdir/globex-input.json"
# The same logical runs again, as other producers would send them.
req_reordered='{"messages":[{"role":"system","content":"You summarise competitor news for a product team."},{"role":"user","content":"Summarise this week'"'"'s competitor news: {{input}}"}],"temperature":0,"model":"stub-1"}'
req_compact=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":")))' \
    "$evdir/competitor-summary.json")
acme_in=$(tr -d '\n' <"$evdir/acme-input.json")
globex_in=$(tr -d '\n' <"$evdir/globex-input.json")
cat >"$evdir/duplicates.jsonl" <<EOF
{"job":"competitor-summary","tenant":"$acme","scheduled_at":"2026-08-07T09:00:00+00:00","version":"v1","input":$acme_in,"request":$req_compact,"notify":["email","slack"]}
{"job":" competitor-summary ","tenant":"$acme  ","scheduled_at":"2026-08-07T11:00:00+02:00","version":"v1","input":$acme_in,"request":$req_reordered,"notify":["slack","email"]}
{"job":"competitor-summary","tenant":"$globex","scheduled_at":"2026-08-07T05:00:00.250-04:00","version":"v1","input":$globex_in,"request":$req_compact,"notify":["email","slack"]}
EOF
malformed='{"job":"competitor-summary","tenant":"'$globex'","scheduled_at":"2026-08-07T09:00:00","version":"v1","request":{"model":"stub-1","messages":[{"role":"user","content":"hi"}]},"notify":["email"]}'
echo "$malformed" >"$evdir/malformed.jsonl"

# One row per event on the topic: how it was sent, what it said, its run id.
ev_how=() ev_tenant=() ev_job=() ev_at=() ev_note=() ev_id=()
add_event() {
    ev_how+=("$1") ev_tenant+=("$2") ev_job+=("$3") ev_at+=("$4") ev_note+=("$5") ev_id+=("$6")
}

# publish NOTE... -- ARGS: runs `runledger publish ARGS`, returns its run ids
# in $ids (stderr goes to the publish log).
publish() {
    local out
    if ! out=$("$bin" publish "$@" 2>>"$logs/publish.log"); then
        tail -n 3 "$logs/publish.log" >&2
        fail "runledger publish $1 ... failed (log: $(rel "$logs/publish.log"))"
    fi
    mapfile -t ids <<<"$out"
}

cs_flags=(--job competitor-summary --at 2026-08-07T09:00:00+00:00 --version v1
    --request "@$evdir/competitor-summary.json" --notify "email,slack")
echo "  \$ runledger publish --job competitor-summary --tenant $acme \\"
echo "        --at 2026-08-07T09:00:00+00:00 --version v1 --notify email,slack \\"
echo "        --request @$(rel "$evdir")/competitor-summary.json --input @$(rel "$evdir")/acme-input.json"
publish "${cs_flags[@]}" --tenant "$acme" --input "@$evdir/acme-input.json"
add_event publish "$acme" competitor-summary 2026-08-07T09:00:00+00:00 "" "${ids[0]}"
publish "${cs_flags[@]}" --tenant "$globex" --input "@$evdir/globex-input.json"
add_event publish "$globex" competitor-summary 2026-08-07T09:00:00+00:00 "" "${ids[0]}"
echo "  (and the same for $globex)"

echo "  \$ runledger publish --stdin < $(rel "$evdir")/duplicates.jsonl"
publish --stdin <"$evdir/duplicates.jsonl"
add_event "publish --stdin" "$acme" competitor-summary 2026-08-07T09:00:00+00:00 \
    "as #1: the same event again (a producer retry)" "${ids[0]}"
add_event "publish --stdin" "'$acme  '" "' competitor-summary '" 2026-08-07T11:00:00+02:00 \
    "as #1: extra whitespace, +02:00, request keys and notify reordered" "${ids[1]}"
add_event "publish --stdin" "$globex" competitor-summary 2026-08-07T05:00:00.250-04:00 \
    "as #2: -04:00, fractional seconds (truncated)" "${ids[2]}"

echo "  \$ runledger publish --job daily-digest --tenant T --now --window P1D ...   # a CronJob firing"
dd_flags=(--job daily-digest --now --window P1D --version v1
    --request "@$evdir/daily-digest.json" --notify "email,slack")
for round in 1 2; do
    for t in "$acme" "$globex"; do
        publish "${dd_flags[@]}" --tenant "$t" --input "{\"tenant\":\"$t\"}"
        if [ "$round" -eq 1 ]; then
            add_event "publish --now" "$t" daily-digest "now, window P1D" "" "${ids[0]}"
        else
            add_event "publish --now" "$t" daily-digest "now, window P1D" \
                "fired again later that day: late re-publish" "${ids[0]}"
        fi
    done
done

echo "  \$ runledger publish --job weekly-report --tenant $acme \\"
echo "        --at 2026-08-05T07:30:00+00:00 --window P1W ... # its request carries [[fault:400]]"
publish --job weekly-report --tenant "$acme" --at 2026-08-05T07:30:00+00:00 \
    --window P1W --version v1 --request "@$evdir/weekly-report.json" \
    --input '{"team":"growth"}' --notify email,slack
add_event publish "$acme" weekly-report "2026-08-05T07:30:00+00:00 P1W" \
    "new run; the model will reject it (HTTP 400)" "${ids[0]}"

echo
echo "  A malformed event (no UTC offset) is refused by publish, nothing is sent:"
echo "  \$ runledger publish --stdin < $(rel "$evdir")/malformed.jsonl"
rc=0
"$bin" publish --stdin <"$evdir/malformed.jsonl" >/dev/null 2>"$logs/publish-refused.log" || rc=$?
[ "$rc" -eq 2 ] || fail "publish should refuse the malformed event with exit 2, got $rc"
grep -v '^{' "$logs/publish-refused.log" | indent | indent
echo "    (exit $rc)"
echo "  so it is sent raw, as a producer that skips validation would:"
echo "  \$ kcat -P -b \$KAFKA_BOOTSTRAP_SERVERS -t runledger.schedules -k $globex < $(rel "$evdir")/malformed.jsonl"
kcat -P -b "$KAFKA_BOOTSTRAP_SERVERS" -t runledger.schedules -k "$globex" \
    <"$evdir/malformed.jsonl" 2>>"$logs/publish.log" ||
    fail "kcat could not produce the malformed event"
add_event kcat "$globex" competitor-summary 2026-08-07T09:00:00 "no UTC offset: malformed" "-"

# Labels A, B, ... in order of first appearance make duplicates visible.
declare -A label_of=()
next_label=0
labels=(A B C D E F G H I J K L)
n_events=${#ev_id[@]}
n_malformed=0
echo
printf '  %-2s  %-15s  %-18s  %-22s  %-30s  %-3s  %s\n' \
    "#" "sent with" "tenant" "job" "scheduled_at (as sent)" "run" "note"
for ((i = 0; i < n_events; i++)); do
    id=${ev_id[$i]}
    if [ "$id" = - ]; then
        run="-"
        n_malformed=$((n_malformed + 1))
    elif [ -n "${label_of[$id]:-}" ]; then
        run=${label_of[$id]}
    else
        label_of[$id]=${labels[$next_label]}
        next_label=$((next_label + 1))
        run=${label_of[$id]}
    fi
    note=${ev_note[$i]}
    if [ "$id" != - ] && [ -z "$note" ]; then
        note="new run ${id:0:12}…"
    fi
    printf '  %-2s  %-15s  %-18s  %-22s  %-30s  %-3s  %s\n' \
        "$((i + 1))" "${ev_how[$i]}" "${ev_tenant[$i]}" "${ev_job[$i]}" \
        "${ev_at[$i]}" "$run" "$note"
done
n_runs=${#label_of[@]}
n_valid=$((n_events - n_malformed))
echo
echo "  Published $n_events events: $n_valid valid ones for $n_runs logical runs" \
    "(A–${labels[$((n_runs - 1))]}), and $n_malformed malformed."
# The weekly report is the one that fails; the rest complete.
n_failing=1
n_dead_expected=$((n_malformed + n_failing))

# --- 5. settle ----------------------------------------------------------------

section "Waiting until everything has settled"
echo "  polling the ledger and both consumers' /metrics (at most ${settle_timeout} s) until:"
echo "  every event consumed, every run completed or failed, the outbox empty,"
echo "  every dead letter acknowledged, and consumer-group lag 0 on every partition"
t0=$(now_ms)
deadline=$((SECONDS + settle_timeout))
stable_since=
# Set by `py probe` (eval) on every round.
probe_ok=0 probe_events=0 probe_dead=0 probe_dups=0 probe_lag=0 probe_lagparts=0
probe_parts=(- -)
while :; do
    for i in 0 1; do
        alive "${consumer_pids[$i]}" ||
            fail "consumer-$((i + 1)) exited (log: $(rel "$logs/consumer-$((i + 1)).log"))"
    done
    eval "$(py probe "${consumer_ports[@]}")"
    IFS='|' read -r db_runs db_open db_outbox < <(psql -X -At -F '|' "$DATABASE_URL" -c "
        SELECT count(*),
               count(*) FILTER (WHERE status NOT IN ('completed', 'failed')),
               (SELECT count(*) FROM outbox)
          FROM runs" 2>>"$logs/psql.log") || db_runs=
    if [ "$probe_ok" = 1 ] && [ -n "$db_runs" ] &&
        [ "$probe_events" -ge "$n_events" ] && [ "$db_runs" -eq "$n_runs" ] &&
        [ "$db_open" -eq 0 ] && [ "$db_outbox" -eq 0 ] &&
        [ "$probe_dead" -ge "$n_dead_expected" ] &&
        [ "$probe_lagparts" -ge 4 ] && [ "$probe_lag" -eq 0 ]; then
        # Lag comes from librdkafka statistics (every second): it counts only
        # once it held over two fresh rounds of them.
        [ -n "$stable_since" ] || stable_since=$(now_ms)
        if (($(now_ms) - stable_since >= 2200)); then
            break
        fi
    else
        stable_since=
    fi
    if ((SECONDS >= deadline)); then
        echo "  not settled after ${settle_timeout} s: events consumed ${probe_events:-?}/$n_events," \
            "runs ${db_runs:-?}/$n_runs (${db_open:-?} open), outbox ${db_outbox:-?}," \
            "dead letters ${probe_dead:-?}/$n_dead_expected, lag ${probe_lag:-?}" >&2
        fail "the demo did not settle"
    fi
    sleep 0.25
done
echo "  settled $(since "$t0") s after the last publish ($(since "$stable_since") s of it confirming the lag):"
echo "    $probe_events events consumed, $db_runs runs in a final state, outbox empty," \
    "$probe_dead dead letters"
echo "    consumer-group lag 0: consumer-1 owns partitions ${probe_parts[0]}," \
    "consumer-2 owns ${probe_parts[1]}"

# --- 6. the story ---------------------------------------------------------------

section "The runs table"
echo "  \$ runledger runs list"
"$bin" runs list 2>>"$logs/cli.log" | indent

section "Duplicates suppressed"
n_dups=$((n_valid - n_runs))
echo "  $n_valid valid events − $n_runs logical runs = $n_dups deliveries suppressed as duplicates"
echo "  (runledger_duplicates_total over both consumers: $probe_dups)."
[ "$probe_dups" -eq "$n_dups" ] ||
    echo "  note: the metric differs: an event re-delivered after a rebalance counts again"
echo
echo "  Per consumer, from /metrics:"
py consumers "${consumer_ports[@]}"
echo
echo "  The model endpoint (stub /stats):"
py stub "$stub_url"

section "Notifications on runledger.notifications"
echo "  \$ kcat -C -t runledger.notifications -e   # header idempotency-key = <run id>:<channel>"
kcat -C -b "$KAFKA_BOOTSTRAP_SERVERS" -t runledger.notifications -o beginning -e -q -J \
    >"$logs/notifications.jsonl" 2>>"$logs/kcat.log" ||
    fail "kcat could not read runledger.notifications"
py notifications "$logs/notifications.jsonl"
echo
echo "  Receivers apply each idempotency-key once: delivery is at least once."

section "Dead letters on runledger.dlq"
echo "  \$ kcat -C -t runledger.dlq -e   # headers reason, detail, source_partition, source_offset"
kcat -C -b "$KAFKA_BOOTSTRAP_SERVERS" -t runledger.dlq -o beginning -e -q -J \
    >"$logs/dlq.jsonl" 2>>"$logs/kcat.log" ||
    fail "kcat could not read runledger.dlq"
py dlq "$logs/dlq.jsonl"

section "The failed run"
failed_id=$("$bin" runs list --status failed --json 2>>"$logs/cli.log" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["run_id"])') ||
    fail "no failed run in the ledger"
echo "  \$ runledger runs show $failed_id"
"$bin" runs show "$failed_id" 2>>"$logs/cli.log" | indent
echo
echo "  A rejected request is not retried: fix it and publish a new --version,"
echo "  or \`runledger runs retry $failed_id\` to run the same request again."

section "A schedule, a missed window, a backfill"
# The ledger knows the schedule; a CronJob-style publisher sends its
# windows and misses one; the audit finds it and backfill publishes it.
# Windows of 5 s (a six-field cron, a test switch) so the demo need not
# wait for minutes; in production a schedule has five fields.
export RL_TEST_CRON_SECONDS=1
digest_flags=(--job minute-digest --tenant "$globex" --version v1
    --window PT5S --request "@$evdir/daily-digest.json")
echo "  \$ runledger schedules set globex-digest --cron '*/5 * * * * *' \\"
echo "        --job minute-digest --tenant $globex --version v1 --window PT5S \\"
echo "        --request @daily-digest.json --audit-only   # published by a CronJob"
"$bin" schedules set globex-digest --cron '*/5 * * * * *' --audit-only \
    "${digest_flags[@]}" 2>>"$logs/cli.log" | indent ||
    fail "runledger schedules set failed"
# Three windows: the first and the third published as a CronJob would
# (`publish --now --window PT5S`, one second into the window), the second
# not (its controller was down).
for w in 1 2 3; do
    sleep "$(python3 -c 'import time; print(5 - time.time() % 5 + 1)')"
    if [ "$w" = 2 ]; then
        echo "  window $w: not published (the CronJob's controller was down)"
        continue
    fi
    publish --now "${digest_flags[@]}"
    echo "  window $w: \$ runledger publish --now --window PT5S ...   -> ${ids[0]:0:16}..."
done
"$bin" schedules pause globex-digest 2>>"$logs/cli.log" >/dev/null ||
    fail "runledger schedules pause failed"
gaps_json() {
    "$bin" schedules gaps globex-digest --since PT2M --grace PT0S --json 2>>"$logs/cli.log"
}
deadline=$((SECONDS + 30))
until [ "$(gaps_json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 1 ]; do
    ((SECONDS < deadline)) || fail "the audit did not settle on one missing window"
    sleep 0.5
done
echo "  \$ runledger schedules gaps --grace PT0S"
"$bin" schedules gaps globex-digest --since PT2M --grace PT0S 2>>"$logs/cli.log" | indent
missed=$(gaps_json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["window"])')
echo "  \$ runledger schedules backfill globex-digest --from $missed --to $missed"
"$bin" schedules backfill globex-digest --from "$missed" --to "$missed" \
    2>>"$logs/cli.log" | indent || fail "runledger schedules backfill failed"
deadline=$((SECONDS + 30))
until [ "$(gaps_json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 0 ]; do
    ((SECONDS < deadline)) || fail "the backfilled window got no run"
    sleep 0.5
done
echo "  \$ runledger schedules gaps --grace PT0S   # the window has its run now"
"$bin" schedules gaps globex-digest --since PT2M --grace PT0S 2>>"$logs/cli.log" | indent
unset RL_TEST_CRON_SECONDS

section "An approval in the web console"
setsid "$bin" console --listen "127.0.0.1:$console_port" >"$logs/console.log" 2>&1 </dev/null 8>&- &
console_pid=$!
echo "  \$ runledger users add demo-approver --role approver   # prints a sign-in token"
token=$("$bin" users add demo-approver --role approver 2>>"$logs/cli.log" | tail -n 1) ||
    fail "runledger users add failed"
echo "  \$ runledger approvers add --tenant $acme --actor demo-approver"
"$bin" approvers add --tenant "$acme" --actor demo-approver 2>>"$logs/cli.log" | indent
# The answer waits for a person: "approval": {"required": true}.
cat >"$evdir/press-release.json" <<'EOF'
{"job": "press-release", "tenant": "workspace-acme", "scheduled_at": "2026-08-07T09:00:00Z",
 "version": "v1", "input": {"product": "Anvil 2"}, "notify": ["slack"],
 "approval": {"required": true},
 "request": {"model": "stub-1", "messages": [{"role": "user", "content": "Draft the press release for {{input}}"}]}}
EOF
echo "  \$ runledger publish --stdin < events/press-release.json   # \"approval\": {\"required\": true}"
approval_run=$(tr -d '\n' <"$evdir/press-release.json" | "$bin" publish --stdin 2>>"$logs/publish.log" | tail -n 1) ||
    fail "could not publish the approval-required event"
deadline=$((SECONDS + 60))
until "$bin" runs show "$approval_run" 2>>"$logs/cli.log" | grep -q awaiting_approval; do
    ((SECONDS < deadline)) || fail "run $approval_run did not reach awaiting_approval in 60 s"
    sleep 0.2
done
until py ready-console "$console_port"; do
    alive "$console_pid" || fail "the console exited (log: $(rel "$logs/console.log"))"
    ((SECONDS < deadline)) || fail "the console did not answer in time"
    sleep 0.2
done
echo "  run ${approval_run:0:16}... waits for approval (its approval_requested"
echo "  notification links to the page below)."
echo
echo "  console   $console_url/approvals   (runledger console --listen 127.0.0.1:$console_port)"
echo "  token     $token"
echo "  page      $console_url/approvals/$approval_run"
wait_s=${RL_DEMO_CONSOLE_WAIT:-0}
if [ "$wait_s" -gt 0 ]; then
    echo
    echo "  Sign in with the token and approve it yourself; the demo approves it in $wait_s s otherwise."
    deadline=$((SECONDS + wait_s))
    while ((SECONDS < deadline)) &&
        "$bin" runs show "$approval_run" 2>>"$logs/cli.log" | grep -q awaiting_approval; do
        sleep 1
    done
fi
echo
if "$bin" runs show "$approval_run" 2>>"$logs/cli.log" | grep -q awaiting_approval; then
    py console-approve "$console_port" "$token" "$approval_run" ||
        fail "the approval through the console failed (log: $(rel "$logs/console.log"))"
fi
echo
echo "  \$ runledger audit --run ${approval_run:0:16}..."
"$bin" audit --run "$approval_run" --json 2>>"$logs/cli.log" | python3 -c '
import json, sys
for a in json.load(sys.stdin):
    print("  %s  %s by %s via %s from %s, digest %s..." % (a["at"], a["action"],
          a["actor"], a["via"], a["address"], a["digest"][:16]))'
echo
echo "  The approval is recorded as the signed-in user, bound to the digest shown;"
echo "  the relay then publishes exactly that content (docs/console.md)."

# cleanup (the EXIT trap) stops the console, the consumers and the services.

