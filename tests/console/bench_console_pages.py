"""Console page timings with a large ledger: `runledger console` as a
process against PostgreSQL, a private schema filled with N runs (default
1,000,000: 1 in 1,000 awaiting approval with a proposal, two attempts
each for 1 in 10), then p50/p95/max of each page over sequential requests
from one signed-in viewer. Prints one line per page; exits 1 when a p95
is above the target (50 ms).

usage: RUNLEDGER_BIN=... DATABASE_URL=... [CONSOLE_PROPOSAL_BIN=...]
       python3 tests/console/bench_console_pages.py [--line] [RUNS] [REQUESTS]

--line ends with one key=value line for `make bench` (the console
scenario of tests/bench/bench.sh). Without CONSOLE_PROPOSAL_BIN (a build
without tests) the waiting runs' proposal is a fixed text whose digest
is its SHA-256 here: the approval page does the same work either way."""

import hashlib
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TARGET_MS = 50.0


def fill(ledger, runs):
    t0 = time.monotonic()
    if harness.PROPOSAL_BIN:
        _, digest, canonical = ledger.waiting_run("t0", "job0",
                                                  "proposal text")
    else:
        canonical = ('{"content":"proposal text","destination":'
                     '[{"channel":"slack"}],"operation":"notify"}')
        digest = hashlib.sha256(canonical.encode()).hexdigest()
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status, output, completed_at, attempts,"
        " proposal, proposal_digest, next_attempt_at, created_at)"
        " SELECT encode(sha256(('run' || i)::bytea), 'hex'),"
        "        'job' || (i %% 50), 't' || (i %% 20),"
        "        now() - make_interval(secs => i), 'v1',"
        "        encode(sha256(('fp' || i)::bytea), 'hex'), '{}'::jsonb,"
        "        CASE WHEN i %% 1000 = 0 THEN 'awaiting_approval'"
        "             WHEN i %% 97 = 0 THEN 'pending' ELSE 'completed' END,"
        "        CASE WHEN i %% 1000 <> 0 AND i %% 97 <> 0"
        "             THEN '\"an answer\"'::jsonb END,"
        "        CASE WHEN i %% 1000 <> 0 AND i %% 97 <> 0 THEN now() END,"
        "        1,"
        "        CASE WHEN i %% 1000 = 0 THEN %s::jsonb END,"
        "        CASE WHEN i %% 1000 = 0 THEN %s END,"
        "        CASE WHEN i %% 97 = 0 AND i %% 1000 <> 0"
        "             THEN now() + interval '1 day' END,"
        "        now() - make_interval(secs => i)"
        "   FROM generate_series(1, %d) i"
        % (harness.lit(canonical), harness.lit(digest), runs - 1),
        timeout=1800)
    ledger.sql(
        "INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker,"
        " idempotency_key, dispatched_at, outcome, prompt_tokens,"
        " completion_tokens, finished_at)"
        " SELECT r.run_id, n, 1, 'w', r.run_id || ':' || n, r.created_at,"
        "        'ok', 100, 50, r.created_at"
        "   FROM runs r, generate_series(1, 2) n"
        "  WHERE r.status = 'completed' AND get_byte(decode(r.run_id, 'hex'),"
        "        0) < 26", timeout=1800)
    ledger.sql("VACUUM ANALYZE runs", timeout=1800)
    ledger.sql("VACUUM ANALYZE attempts", timeout=1800)
    return time.monotonic() - t0


def timed(console, cookie, path, n):
    times = []
    for _ in range(n):
        t = time.monotonic()
        r = console.request("GET", path, cookie=cookie)
        times.append((time.monotonic() - t) * 1000)
        if r.status != 200:
            raise harness.Failed("%s answered %d" % (path, r.status))
    times.sort()
    return (times[len(times) // 2], times[int(len(times) * 0.95) - 1],
            times[-1], r.body)


KEYS = ["runs", "runs_next", "tenant", "tenant_job", "status", "window",
        "run", "approvals", "approval"]


def main():
    args = sys.argv[1:]
    line = "--line" in args
    args = [a for a in args if a != "--line"]
    runs = int(args[0]) if len(args) > 0 else 1000000
    n = int(args[1]) if len(args) > 1 else 200
    p95s = []
    ledger = harness.Ledger("bench")
    failed = False
    try:
        took = fill(ledger, runs)
        print("filled %d runs in %.0f s" % (runs, took), flush=True)
        token = ledger.add_user("bench", "viewer")
        console = harness.Console(ledger)
        try:
            cookie = console.sign_in(token)
            first = console.request("GET", "/runs", cookie=cookie).body
            cursor = re.search(r'id="next" href="([^"]+)"', first)
            deep = harness.unescape(cursor.group(1)) if cursor else "/runs"
            some = ledger.sql("SELECT run_id FROM runs ORDER BY created_at"
                              " LIMIT 1 OFFSET %d" % (runs // 2))
            # A day's window a week back: its newest runs.
            day_ago = ledger.sql(
                "SELECT to_char((now() - interval '7 days') AT TIME ZONE"
                " 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') || ' ' ||"
                " to_char((now() - interval '6 days') AT TIME ZONE 'UTC',"
                " 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')").split(" ")
            waiting = ledger.sql("SELECT run_id FROM runs WHERE status ="
                                 " 'awaiting_approval' LIMIT 1")
            pages = [("runs page", "/runs"),
                     ("runs page 2 (cursor)", deep),
                     ("runs of a tenant", "/runs?tenant=t7"),
                     ("runs of a tenant and job",
                      "/runs?tenant=t7&job=job27"),
                     ("runs of a status", "/runs?status=pending"),
                     ("runs in a time window", "/runs?from=" + day_ago[0]
                      + "&to=" + day_ago[1]),
                     ("run page", "/runs/" + some),
                     ("approvals queue", "/approvals"),
                     ("approval page", "/approvals/" + waiting)]
            for name, path in pages:
                p50, p95, top, _ = timed(console, cookie, path, n)
                verdict = "ok" if p95 <= TARGET_MS else "OVER"
                failed |= p95 > TARGET_MS
                p95s.append(p95)
                print("%-26s p50 %6.1f ms  p95 %6.1f ms  max %6.1f ms  %s"
                      % (name, p50, p95, top, verdict), flush=True)
        finally:
            console.stop()
    finally:
        if os.environ.get("RL_KEEP_SCHEMA") != "1":
            ledger.drop()
    if line:
        print("console runs=%d requests=%d %s target_p95_ms=%.0f met=%d" % (
            runs, n, " ".join("%s_p95_ms=%.1f" % (k, v)
                              for k, v in zip(KEYS, p95s)),
            TARGET_MS, 0 if failed else 1), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
