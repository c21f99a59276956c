"""Invariant: the runs page walks the ledger newest first by keyset: the
"next" links visit every run exactly once, in (created_at, run_id) order,
runs created in the same microsecond included, and runs decades older
than the rest (beyond every window of creation time the page reads by)
too; the tenant, job, status and
time-window filters hold on every page; a cursor the console did not write
is refused (400)."""

import html
import re
import sys

import harness
from harness import check

RUNS = 130
OLD = 3


def walk(console, cookie, path):
    seen = []
    pages = 0
    while path:
        r = console.request("GET", path, cookie=cookie)
        if r.status != 200:
            raise harness.Failed("%s answered %d" % (path, r.status))
        pages += 1
        seen += re.findall(r'<tr class="run"><td><a href="/runs/([0-9a-f]{64})"',
                           r.body)
        nxt = re.search(r'<a id="next" href="([^"]+)"', r.body)
        path = html.unescape(nxt.group(1)) if nxt else None
        if pages > 20:
            raise harness.Failed("more pages than runs")
    return seen, pages


def test(ledger):
    token = ledger.add_user("rita", "viewer")
    # Ten runs share each created_at: ties are broken by run_id.
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status, output, completed_at, created_at)"
        " SELECT encode(sha256(('r' || i)::bytea), 'hex'), 'job' || (i %% 3),"
        "        't' || (i %% 2), now() - make_interval(secs => i), 'v1',"
        "        encode(sha256(('f' || i)::bytea), 'hex'), '{}'::jsonb,"
        "        'completed', '\"x\"'::jsonb, now(),"
        "        timestamptz '2026-12-01 00:00:00+00'"
        "          + make_interval(secs => i / 10)"
        "   FROM generate_series(1, %d) i" % RUNS)
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status, output, completed_at, created_at)"
        " SELECT encode(sha256(('old' || i)::bytea), 'hex'), 'job2', 't1',"
        "        now() - make_interval(days => i), 'v1',"
        "        encode(sha256(('fold' || i)::bytea), 'hex'),"
        "        '{}'::jsonb, 'completed', '\"x\"'::jsonb, now(),"
        "        timestamptz '1996-01-01 00:00:00+00'"
        "          + make_interval(secs => i)"
        "   FROM generate_series(1, %d) i" % OLD)
    want = ledger.sql("SELECT string_agg(run_id, ',' ORDER BY created_at"
                      " DESC, run_id DESC) FROM runs").split(",")
    console = harness.Console(ledger)
    try:
        cookie = console.sign_in(token)
        seen, pages = walk(console, cookie, "/runs")
        check(pages == 3, "133 runs are 3 pages of 50")
        check(seen == want, "the pages visit every run once, newest first")
        t1 = ledger.sql("SELECT string_agg(run_id, ',' ORDER BY created_at"
                        " DESC, run_id DESC) FROM runs WHERE tenant = 't1'"
                        " AND job = 'job2'").split(",")
        seen, _ = walk(console, cookie, "/runs?tenant=t1&job=job2")
        check(seen == t1, "the tenant and job filters hold on every page")
        t0 = ledger.sql("SELECT string_agg(run_id, ',' ORDER BY created_at"
                        " DESC, run_id DESC) FROM runs WHERE tenant = 't0'"
                        ).split(",")
        seen, _ = walk(console, cookie, "/runs?tenant=t0")
        check(seen == t0, "the tenant filter alone holds on every page")
        seen, _ = walk(console, cookie, "/runs?tenant=nobody")
        check(seen == [], "a tenant with no runs lists none")
        window = ledger.sql(
            "SELECT string_agg(run_id, ',' ORDER BY created_at DESC,"
            " run_id DESC) FROM runs WHERE created_at >= '2026-12-01"
            " 00:00:03+00' AND created_at < '2026-12-01 00:00:09+00'"
        ).split(",")
        seen, _ = walk(console, cookie, "/runs?from=2026-12-01T00:00:03Z"
                       "&to=2026-12-01T00:00:09Z&status=completed")
        check(seen == window, "the time window and status filters hold")
        seen, _ = walk(console, cookie, "/runs?status=pending")
        check(seen == [], "a status no run has lists none")
        seen, _ = walk(console, cookie, "/runs?status=bogus")
        check(seen == [], "a status the ledger does not know lists none")
        r = console.request("GET", "/runs?after=garbage", cookie=cookie)
        check(r.status == 400, "a cursor the console did not write is 400")
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "runs"))
