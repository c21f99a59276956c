"""Invariant: the dead-letters page lists the dead-letter topic as
`runledger dlq list` does, newest first, with every value escaped (a
tenant and an event holding markup are shown as text), under the
console's headers; replaying a dead letter is an operator's, needs a
confirmation (the first POST only shows it), is refused (403, nothing
sent, nothing audited) without the CSRF token, from a foreign Origin and
for a viewer or an approver; an operator's confirmed replay is audited
(who, what, when, from which address) and puts the event back on the
schedule topic, where its run runs once, and a second replay runs nothing
again. Older dead letters are reached through the keyset "next" link,
each listed once.

The run is real: `runledger publish`, `runledger consume` and the stub
model on the shared broker and PostgreSQL; the ledger refuses the event
at first (a CHECK on the tenant, so it is dead-lettered as
rejected_by_ledger) and takes it once the CHECK is dropped."""

import datetime
import json
import os
import re
import subprocess
import sys

import harness
from harness import BIN, HEADERS, check, csrf_of, wait_for

TOPICS_BIN = os.environ.get("CONSOLE_TOPICS_BIN", "")
TENANT = 'po<b>ison"\''
JOB = "report<script>alert(1)</script>"


def event(n):
    return {"job": JOB, "tenant": TENANT,
            "scheduled_at": "2026-12-04T05:%02d:00Z" % n, "version": "v1",
            "request": {"model": "stub", "messages": [
                {"role": "user", "content": "<img src=x onerror=alert(1)>"}]}}


def outbox_dead_letter(boot, topic, partition, channel):
    """An outbox dead letter (no event to replay) on the given partition,
    produced directly, as the relay would."""
    now = datetime.datetime.now(datetime.timezone.utc)
    at = now.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (
        now.microsecond // 1000)
    headers = {"reason": "payload_too_large", "detail": "too big",
               "source": "outbox", "value_kind": "none", "run_id": "",
               "job": "", "tenant": "", "channel": channel,
               "dead_lettered_at": at}
    args = ["kcat", "-b", boot, "-P", "-t", topic, "-p", str(partition)]
    for k, v in headers.items():
        args += ["-H", "%s=%s" % (k, v)]
    out = subprocess.run(args, input="{}", capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        raise harness.Failed("kcat failed: " + out.stderr)


def test(ledger):
    boot = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "")
    harness.require_service("KAFKA_BOOTSTRAP_SERVERS", boot)
    harness.require_service("MODEL_BASE_URL",
                            os.environ.get("MODEL_BASE_URL", ""))
    name = ledger.schema.replace("_", "-")
    topics = {"RUNLEDGER_TOPIC": name + ".schedules",
              "RUNLEDGER_NOTIFY_TOPIC": name + ".notify",
              "RUNLEDGER_DLQ_TOPIC": name + ".dlq"}
    # Two partitions of dead letters: the page merges them, newest first.
    out = subprocess.run([TOPICS_BIN, boot, "30000"] +
                         ["%s:%d" % (t, 2 if k == "RUNLEDGER_DLQ_TOPIC"
                                     else 1)
                          for k, t in topics.items()],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, "topics created: " + out.stderr.strip())
    env = dict(ledger.env, RUNLEDGER_GROUP_ID=name, **topics)
    ledger.env = env
    ledger.sql("ALTER TABLE runs ADD CONSTRAINT test_poison"
               " CHECK (tenant <> %s)" % harness.lit(TENANT))

    # Outbox dead letters on the other partition, older than every other
    # dead letter, and (below) newer: the page merges the partitions.
    for n in range(2):
        outbox_dead_letter(boot, topics["RUNLEDGER_DLQ_TOPIC"], 1,
                           "early%d" % n)
    # 53 refused events: more than a page (50) of dead letters.
    out = subprocess.run(
        [BIN, "publish", "--stdin"], env=env, capture_output=True,
        text=True, timeout=60,
        input="".join(json.dumps(event(n)) + "\n" for n in range(53)))
    check(out.returncode == 0, "the events are published: " + out.stderr)
    run_ids = out.stdout.split()
    check(len(run_ids) == 53, "53 run IDs")

    tokens = {n: ledger.add_user(n, role) for n, role in (
        ("opal", "operator"), ("abe", "approver"), ("vera", "viewer"))}
    consume = subprocess.Popen([BIN, "consume"],
                               env=ledger.component_env("worker_relay", env),
                               stdout=open("consume-dl.log", "w"),
                               stderr=subprocess.STDOUT)
    console = None
    try:
        console = harness.Console(ledger)
        cookies = {n: console.sign_in(t) for n, t in tokens.items()}

        def page(user, path="/deadletters"):
            return console.request("GET", path, cookie=cookies[user])

        def rows(body):
            return re.findall(r'<tr class="deadletter" id="dl-(\d+)-(\d+)"',
                              body)

        wait_for(lambda: len(ledger.run("dlq", "list", "--json").stdout
                             .splitlines()) == 55,
                 "the 53 events to be dead-lettered", 90)
        for n in range(2):
            outbox_dead_letter(boot, topics["RUNLEDGER_DLQ_TOPIC"], 1,
                               "late%d" % n)
        listed = page("vera")
        for k, v in HEADERS.items():
            check(listed.header(k) == v, "the page sends %s" % k)
        check(listed.header("cache-control") == "no-store",
              "the page is not cached")
        body = listed.body
        check("<script>" not in body and "<b>" not in body and
              "<img" not in body, "no markup from the topic reaches the page")
        check("report&lt;script&gt;alert(1)&lt;/script&gt;" in body and
              "po&lt;b&gt;ison&quot;&#39;" in body,
              "the job and the tenant are shown escaped")
        check("&lt;img src=x onerror=alert(1)&gt;" in body,
              "the event (the dead letter's value) is shown escaped")
        def when(body):
            # The broker's timestamps, the page's order: the time shown is
            # the one each producer stamped, which two producers (kcat's
            # and the consumer's) need not stamp in the broker's order.
            return [int(ts) for ts in re.findall(
                r'<tr class="deadletter" id="dl-\d+-\d+" data-ts="(-?\d+)">'
                r'<td><code>[^<]*</code></td><td>[^<]*</td>', body)]

        first = when(body)
        check(len(first) == 50 and first == sorted(first, reverse=True),
              "newest first, across the topic's partitions")
        # Which event the newest dead letter holds: its scheduled minute.
        top = "%s-%s" % rows(body)[2]
        row = harness.unescape(body.split('id="dl-%s"' % top)[1].split(
            "</tr>")[0])
        minute = re.search(r'"scheduled_at": "2026-12-04T05:(\d\d):00Z"',
                           row)
        check(minute is not None, "the row shows the dead letter's event")
        newest = run_ids[int(minute.group(1))]
        check("rejected_by_ledger" in body, "the reason is listed")
        check('class="replay"' not in body, "a viewer gets no replay form")
        nxt = re.search(r'<a id="next" href="([^"]+)"', body)
        check(nxt is not None, "a next link to older dead letters")
        older = page("vera", nxt.group(1).replace("&amp;", "&")).body
        check(len(set(rows(body) + rows(older))) == 57 and
              len(rows(older)) == 7 and 'id="next"' not in older,
              "the two pages list every dead letter once, then end")
        check(min(first) >= max(when(older)),
              "the older page holds the older dead letters")
        def sources(body):
            return re.findall(r'<td class="reason">[^<]*</td><td>([^<]*)</td>',
                              body)

        order = sources(body) + sources(older)
        check(order[:2] == ["outbox"] * 2 and order[-2:] == ["outbox"] * 2
              and order[2:-2] == ["intake"] * 53,
              "the late outbox dead letters first, the early ones last")
        check("an outbox dead letter carries no event" in body,
              "an outbox dead letter is shown as not replayable")
        check("OFFSET" not in nxt.group(1).upper(), "keyset cursor")

        opal_page = page("opal").body
        check('class="replay"' in opal_page, "an operator gets replay forms")
        csrf = csrf_of(opal_page)
        target = "/deadletters/%s/replay" % top

        def audit_rows():
            return ledger.sql("SELECT count(*) FROM audit WHERE"
                              " action = 'replay_dead_letter'")

        def schedule_events():
            out = subprocess.run(
                ["kcat", "-b", boot, "-C", "-t", topics["RUNLEDGER_TOPIC"],
                 "-o", "beginning", "-e", "-q", "-f", "x\n"],
                capture_output=True, text=True, timeout=60)
            return len(out.stdout.split())

        sent_before = schedule_events()
        check(sent_before == 53, "53 events on the schedule topic")
        for user in ("vera", "abe"):
            r = console.request("POST", target, cookie=cookies[user],
                                form={"csrf": csrf_of(page(user).body),
                                      "confirm": "yes"})
            check(r.status == 403, "%s's replay is refused (403)" % user)
        r = console.request("POST", target, cookie=cookies["opal"],
                            form={"confirm": "yes"})
        check(r.status == 403, "a replay without the CSRF token is refused")
        r = console.request("POST", target, cookie=cookies["opal"],
                            form={"csrf": csrf, "confirm": "yes"},
                            origin="http://evil.example")
        check(r.status == 403, "a replay from a foreign Origin is refused")
        r = console.request("POST", target, cookie=cookies["opal"],
                            form={"csrf": csrf})
        check(r.status == 200 and '<button type="submit" id="confirm" '
              'name="confirm" value="yes">' in r.body and
              'class="ok"' not in r.body and "<script>" not in r.body,
              "the first POST shows the confirmation")
        check(audit_rows() == "0" and schedule_events() == sent_before,
              "the refusals and the confirmation sent and audited nothing")

        ledger.sql("ALTER TABLE runs DROP CONSTRAINT test_poison")
        r = console.request("POST", target, cookie=cookies["opal"],
                            form={"csrf": csrf, "confirm": "yes"})
        check(r.status == 200 and
              re.search(r'<p id="message" class="ok">sent by opal', r.body),
              "the operator's confirmed replay is sent: %d" % r.status)
        check(newest in r.body, "the outcome names the run")
        check(ledger.sql("SELECT actor || '|' || action || '|' ||"
                         " coalesce(run_id, '-') ||"
                         " '|' || address || '|' || via || '|' ||"
                         " (at > now() - interval '1 minute') FROM audit"
                         " WHERE via = 'console'")
              == "opal|replay_dead_letter|%s|127.0.0.1|console|true" % newest,
              "one audit row: who, what, which run, from where, when")
        wait_for(lambda: ledger.sql("SELECT status FROM runs WHERE run_id ="
                                    " '%s'" % newest) == "completed",
                 "the replayed event's run to complete", 90)
        check(schedule_events() == sent_before + 1,
              "the event went back to the schedule topic once")

        r = console.request("POST", target, cookie=cookies["opal"],
                            form={"csrf": csrf, "confirm": "yes"})
        check(r.status == 200 and 'class="ok"' in r.body,
              "a second replay is sent too")
        # A later run of its own on the same (single) partition: once it
        # is done, the second copy before it was consumed.
        sentinel = dict(event(59), tenant="acme")
        out = subprocess.run([BIN, "publish", "--stdin"], env=env,
                             input=json.dumps(sentinel) + "\n",
                             capture_output=True, text=True, timeout=60)
        check(out.returncode == 0, "a later event is published")
        later = out.stdout.split()[-1]
        wait_for(lambda: ledger.sql("SELECT status FROM runs WHERE run_id ="
                                    " '%s'" % later) == "completed",
                 "the later run to complete", 90)
        check(ledger.sql("SELECT count(*) FROM runs WHERE tenant = %s"
                         % harness.lit(TENANT)) == "1",
              "of the 53 dead letters, only the replayed one is a run")
        check(ledger.sql("SELECT count(*) FROM attempts WHERE run_id = '%s'"
                         % newest) == "1",
              "the replayed run ran once, replayed twice")
        check(audit_rows() == "2", "each replay has its audit row")
    finally:
        if console:
            console.stop()
        consume.terminate()
        try:
            consume.wait(timeout=40)
        except subprocess.TimeoutExpired:
            consume.kill()
            consume.wait()


if __name__ == "__main__":
    sys.exit(harness.main(test, "deadletters"))
