"""Invariant: a run's page shows its timeline: every event the ledger keeps
of the run, in time order, each with its time as the ledger recorded it:
its registration (the event's topic, partition and offset), each lease
epoch, each attempt's dispatch and end (outcome, HTTP status, latency),
the approval requested and decided (by whom), the completion, each
notification queued and delivered, and an operator's action from the
audit trail. A failed attempt is said in words, not by colour alone, and
values from the ledger are escaped there too. The timeline is drawn as
SVG with one marker per event, with no inline style."""

import html
import re
import sys

import harness
from harness import check, csrf_of, lit

TS = "to_char(%s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"


def items(page):
    """The timeline's entries: (datetime, lane, what, tag, detail)."""
    ol = re.search(r'<ol id="timeline"[^>]*>(.*?)</ol>', page, re.S)
    if not ol:
        raise harness.Failed("the run page has no timeline list")
    out = []
    for li in re.findall(r"<li [^>]*>(.*?)</li>", ol.group(1), re.S):
        at = re.search(r'<time datetime="([^"]+)">([^<]*)</time>', li)
        lane = re.search(r'<span class="lane-name">([^<]*)</span>', li)
        what = re.search(r'<span class="what">([^<]*)</span>', li)
        tag = re.search(r'<span class="tag [^"]*">([^<]*)</span>', li)
        detail = re.search(r'<span class="detail">([^<]*)</span>', li)
        if not (at and lane and what):
            raise harness.Failed("a timeline entry without time, lane or "
                                 "what: %r" % li)
        out.append((html.unescape(at.group(1)), html.unescape(at.group(2)),
                    lane.group(1), html.unescape(what.group(1)),
                    tag.group(1) if tag else "",
                    detail.group(1) if detail else ""))
    return out


def test(ledger):
    tokens = {n: ledger.add_user(n, role) for n, role in (
        ("abe", "approver"), ("vera", "viewer"))}
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "abe")
    run_id, digest, _ = ledger.waiting_run("acme", "tl", "the answer",
                                           ("email", "slack"))
    q = lit(run_id)
    # The run as the workers leave it: read from partition 3 offset 41, a
    # first attempt under lease epoch 1 that failed (HTTP 503), a second
    # under epoch 2 that proposed; times an hour back, apart.
    ledger.sql(
        "UPDATE runs SET created_at = now() - interval '1 hour',"
        " source_topic = 'schedules', source_partition = 3,"
        " source_offset = 41, lease_epoch = 2, attempts = 2"
        " WHERE run_id = %s" % q)
    ledger.sql(
        "INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker,"
        " idempotency_key, dispatched_at, outcome, http_status, latency_ms,"
        " error, finished_at, prompt_tokens, completion_tokens)"
        " SELECT %s, 1, 1, 'w-one', 'k1', r.created_at + interval '12 ms',"
        "        'transient', 503, 480,"
        "        'upstream said <script>alert(1)</script>',"
        "        r.created_at + interval '492 ms', NULL, NULL"
        "   FROM runs r WHERE r.run_id = %s"
        " UNION ALL"
        " SELECT %s, 2, 2, 'w-two', 'k2', r.created_at + interval '2 s',"
        "        'ok', 200, 350, NULL, r.created_at + interval '2350 ms',"
        "        120, 30"
        "   FROM runs r WHERE r.run_id = %s" % (q, q, q, q))
    console = harness.Console(ledger)
    try:
        cookies = {n: console.sign_in(t) for n, t in tokens.items()}
        page = console.request("GET", "/approvals/" + run_id,
                               cookie=cookies["abe"]).body
        r = console.request("POST", "/approvals/" + run_id,
                            cookie=cookies["abe"],
                            form={"csrf": csrf_of(page), "digest": digest,
                                  "decision": "approve"})
        check(r.status == 200 and "approved by abe" in r.body,
              "abe approves through the console")
        # The relay delivers both notifications, slack first.
        for channel, after in (("slack", "250 ms"), ("email", "400 ms")):
            ledger.sql(
                "WITH d AS (DELETE FROM outbox WHERE run_id = %s"
                "            AND channel = '%s' RETURNING *)"
                " INSERT INTO outbox_delivered (run_id, channel,"
                "   explicit_payload, created_at, delivered_at,"
                "   delivery_count)"
                " SELECT run_id, channel, explicit_payload, created_at,"
                "        created_at + interval '%s', 1 FROM d"
                % (q, channel, after))
        ledger.sql(
            "INSERT INTO audit (at, actor, action, run_id, via, detail)"
            " SELECT a.decided_at + interval '5 s', 'opal', 'replay', %s,"
            "        'console', 'partition 0 offset 7'"
            "   FROM approvals a WHERE a.run_id = %s" % (q, q))

        def at(expr, table="runs r", where="r.run_id = %s" % q):
            return ledger.sql("SELECT %s FROM %s WHERE %s"
                              % (TS % expr, table, where))

        a1 = "t.run_id = %s AND t.attempt_no = 1" % q
        a2 = "t.run_id = %s AND t.attempt_no = 2" % q
        d = "d.run_id = %s AND d.channel = '%%s'" % q
        want = [
            (at("r.created_at"), "Run", "registered"),
            (at("t.dispatched_at", "attempts t", a1), "Leases",
             "lease epoch 1"),
            (at("t.dispatched_at", "attempts t", a1), "Attempts",
             "attempt 1 dispatched"),
            (at("t.finished_at", "attempts t", a1), "Attempts",
             "attempt 1 ended: transient"),
            (at("t.dispatched_at", "attempts t", a2), "Leases",
             "lease epoch 2"),
            (at("t.dispatched_at", "attempts t", a2), "Attempts",
             "attempt 2 dispatched"),
            (at("t.finished_at", "attempts t", a2), "Attempts",
             "attempt 2 ended: ok"),
            (at("t.finished_at", "attempts t", a2), "Approval",
             "approval requested"),
            (at("a.decided_at", "approvals a", "a.run_id = %s" % q),
             "Approval", "approval decided: approve"),
            (at("r.completed_at"), "Run", "completed"),
            (at("d.created_at", "outbox_delivered d", d % "email"),
             "Notifications", "notification queued: email"),
            (at("d.created_at", "outbox_delivered d", d % "slack"),
             "Notifications", "notification queued: slack"),
            (at("d.delivered_at", "outbox_delivered d", d % "slack"),
             "Notifications", "notification delivered: slack"),
            (at("d.delivered_at", "outbox_delivered d", d % "email"),
             "Notifications", "notification delivered: email"),
            (at("a.at", "audit a", "a.run_id = %s AND a.action = 'replay'"
                % q), "Operators", "replay by opal"),
        ]
        body = console.request("GET", "/runs/" + run_id,
                               cookie=cookies["vera"]).body
        got = items(body)
        check([(g[0], g[2], g[3]) for g in got] == want,
              "the timeline lists the run's %d events in order, each at "
              "the time the ledger recorded" % len(want))
        check([g[0] for g in got] == sorted(g[0] for g in got),
              "the times never go back")
        check(all(g[1].startswith(g[0][:10] + " " + g[0][11:26]) and
                  g[1].endswith(" UTC") for g in got),
              "each entry shows its time as text")
        by_what = {g[3]: g for g in got}
        failed = by_what["attempt 1 ended: transient"]
        check(failed[4] == "failed" and "HTTP 503" in failed[5] and
              "latency 480 ms" in failed[5],
              "the failed attempt says failed in words, with its HTTP "
              "status and latency")
        check("&lt;script&gt;alert(1)&lt;/script&gt;" in failed[5] and
              "<script>" not in body,
              "the attempt's error is escaped in the timeline")
        check(by_what["attempt 2 ended: ok"][4] == "ok",
              "the attempt that succeeded says ok")
        check("by abe" in by_what["approval decided: approve"][5] and
              "via console" in by_what["approval decided: approve"][5],
              "the decision says who took it, and through what")
        check("schedules partition 3 offset 41" in by_what["registered"][5],
              "the registration says which event it read")
        svg = re.search(r'<svg id="timeline-axis".*?</svg>', body, re.S)
        check(svg is not None and "<title" in svg.group(0) and
              len(re.findall(r'class="mark tone-', svg.group(0))) ==
              len(want),
              "the time axis has a titled SVG with one marker per event")
        check(" style=" not in body and "<script" not in body,
              "no inline style or script on the page")
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "timeline"))
