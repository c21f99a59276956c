"""Invariant: in a real browser (Debian's chromium, headless, driven over
WebDriver), an approver signs in, opens the approval queue and the approval
page, sees exactly the content that will be sent (a model output holding
<script> and "><img onerror> shown as text: nothing executes, the console
log stays clean), approves it, and exactly one notification carrying that
content reaches the notification topic. The run's entry into
awaiting_approval queued one approval_requested notification linking to
that approval page (RUNLEDGER_CONSOLE_BASE_URL).

The run is real: `runledger publish`, `runledger consume` (with its relay)
and the stub model on the shared broker and PostgreSQL. A screenshot of
each page is kept in artifacts/ beside the test (the approval page's is
docs/console-approval.png, the run page's timeline docs/console-timeline.png).
The run page's timeline lists the run's events in order and draws one
marker per event."""

import json
import os
import subprocess
import sys

import harness
from harness import BIN, check, wait_for
from webdriver import Browser, find_browser

TOPICS_BIN = os.environ.get("CONSOLE_TOPICS_BIN", "")
EVIL_MODEL = ('stub<script>console.log("xss-script")</script>'
              '"><img src=x onerror=console.log("xss-img")>')
ARTIFACTS = os.path.join(os.getcwd(), "artifacts")


def clean_log(entries):
    return [e for e in entries
            if e.get("level") in ("SEVERE", "WARNING") or
            "xss" in e.get("message", "")]


def test(ledger):
    paths = find_browser()
    harness.require_service("chromium and chromedriver",
                            paths is not None)
    boot = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "")
    harness.require_service("KAFKA_BOOTSTRAP_SERVERS", boot)
    harness.require_service("MODEL_BASE_URL",
                            os.environ.get("MODEL_BASE_URL", ""))
    name = ledger.schema.replace("_", "-")
    topics = {"RUNLEDGER_TOPIC": name + ".schedules",
              "RUNLEDGER_NOTIFY_TOPIC": name + ".notify",
              "RUNLEDGER_DLQ_TOPIC": name + ".dlq"}
    out = subprocess.run([TOPICS_BIN, boot, "30000"] +
                         ["%s:1" % t for t in topics.values()],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, "topics created: " + out.stderr.strip())
    console_port = harness.free_port()
    origin = "http://127.0.0.1:%d" % console_port
    env = dict(ledger.env, RUNLEDGER_GROUP_ID=name,
               RUNLEDGER_CONSOLE_BASE_URL=origin + "/", **topics)

    event = {"job": "brief", "tenant": "acme",
             "scheduled_at": "2026-12-04T05:00:00Z", "version": "v1",
             "request": {"model": EVIL_MODEL, "messages": [
                 {"role": "user", "content": "summarise the day"}]},
             "notify": ["slack"], "approval": {"required": True}}
    out = subprocess.run([BIN, "publish", "--stdin"], env=env,
                         input=json.dumps(event) + "\n", capture_output=True,
                         text=True, timeout=60)
    check(out.returncode == 0, "the approval-required event is published")
    run_id = out.stdout.strip().split()[-1]

    consume = subprocess.Popen([BIN, "consume"],
                               env=ledger.component_env("worker_relay", env),
                               stdout=open("consume.log", "w"),
                               stderr=subprocess.STDOUT)
    console = browser = None
    try:
        wait_for(lambda: ledger.sql(
            "SELECT status FROM runs WHERE run_id = '%s'" % run_id)
            == "awaiting_approval", "the run to await approval", 60)
        check(ledger.sql("SELECT count(*) FROM outbox WHERE channel <>"
                         " 'approval_requested'") == "0" and
              ledger.sql("SELECT count(*) FROM outbox_delivered WHERE"
                         " channel <> 'approval_requested'") == "0",
              "nothing of the answer is queued before the approval")
        token = ledger.add_user("approver1", "approver")
        ledger.run("approvers", "add", "--tenant", "acme", "--actor",
                   "approver1")
        console = harness.Console(ledger, port=console_port)
        browser = Browser(paths[0], paths[1], harness.free_port(),
                          "chromedriver.log")

        browser.go(console.origin + "/approvals")
        check(browser.url() == console.origin + "/signin",
              "not signed in, the queue sends the browser to /signin")
        browser.screenshot(os.path.join(ARTIFACTS, "signin.png"))
        browser.type(browser.one("#token"), token)
        browser.click(browser.one("#signin"))
        check(wait_for(lambda: browser.url() == console.origin +
                       "/approvals", "the queue after sign-in", 15),
              "signed in, the browser is on the queue")
        browser.screenshot(os.path.join(ARTIFACTS, "approvals.png"))
        links = browser.find("a.approval")
        check(len(links) == 1, "the queue lists the waiting run")
        browser.click(links[0])
        check(wait_for(lambda: browser.url() == console.origin +
                       "/approvals/" + run_id, "the approval page", 15),
              "the link opens the run's approval page")

        shown = browser.text(browser.one("#content"))
        digest = browser.text(browser.one("#digest"))
        check(digest == ledger.sql("SELECT proposal_digest FROM runs"),
              "the page shows the stored proposal's digest")
        check(json.loads(shown) == json.loads(ledger.sql(
            "SELECT proposal->'content' FROM runs")),
            "the page shows the proposal's content")
        check(json.loads(shown).get("model") == EVIL_MODEL,
              "the model output's markup is shown as text")
        check(browser.script(
            "return document.querySelectorAll("
            "'main script, main img, main svg').length") == 0,
            "no script or img element came from the ledger")
        check([b.lower() for b in browser.script(
            "return Array.from(document.querySelectorAll('#destinations li'))"
            ".map(e => e.textContent)")] == ["slack"],
            "the destinations are listed")
        check(browser.text(browser.one("#operation")) == "notify",
              "the operation is shown")
        browser.screenshot(os.path.join(ARTIFACTS, "approval.png"))
        docs = os.environ.get("RL_CONSOLE_DOCS_SCREENSHOT")
        if docs:
            browser.screenshot(docs)

        browser.click(browser.one("#approve"))
        message = wait_for(lambda: browser.find("#message"),
                           "the outcome of the approval", 15)[0]
        check(browser.attr(message, "class") == "ok",
              "the approval succeeds: " + browser.text(message))
        browser.screenshot(os.path.join(ARTIFACTS, "approved.png"))
        check(ledger.sql("SELECT actor FROM approvals") == "approver1",
              "the decision is recorded as the signed-in user")

        wait_for(lambda: ledger.sql("SELECT count(*) FROM outbox_delivered")
                 == "2", "the relay to deliver the notifications", 60)
        out = subprocess.run(
            ["kcat", "-b", boot, "-C", "-t", topics["RUNLEDGER_NOTIFY_TOPIC"],
             "-o", "beginning", "-e", "-q", "-f", "%s\n"],
            capture_output=True, text=True, timeout=60)
        every = [json.loads(line) for line in out.stdout.splitlines()
                 if line.strip()]
        pings = [n for n in every if n.get("type") == "approval_requested"]
        check(len(pings) == 1 and pings[0]["run_id"] == run_id and
              pings[0]["url"] == origin + "/approvals/" + run_id and
              pings[0]["digest"] == digest,
              "one approval_requested notification links to the page")
        notes = [n for n in every if n.get("type") != "approval_requested"]
        check(len(notes) == 1, "exactly one notification of the answer")
        check(notes[0]["run_id"] == run_id and
              notes[0]["channel"] == "slack", "it is the run's, for slack")
        check(notes[0]["output"] == json.loads(shown),
              "its content is exactly what the page showed")

        browser.go(console.origin + "/runs/" + run_id)
        browser.screenshot(os.path.join(ARTIFACTS, "run.png"))
        check("approver1" in browser.text(browser.one("#audit")),
              "the run page shows the decision in its audit")
        whats = browser.script(
            "return Array.from(document.querySelectorAll("
            "'#timeline .what')).map(e => e.textContent)")
        want = ["registered", "attempt 1 dispatched", "attempt 1 ended: ok",
                "approval requested", "approval decided: approve",
                "completed", "notification delivered: slack"]
        check([w for w in whats if w in want] == want,
              "the run's timeline lists its events in order: %s" % whats)
        check(len(browser.find("#timeline-axis .mark")) == len(whats),
              "the time axis draws one marker per event")
        browser.script("document.getElementById('timeline-heading')"
                       ".scrollIntoView()")
        browser.screenshot(os.path.join(ARTIFACTS, "run-timeline.png"))
        docs = os.environ.get("RL_CONSOLE_DOCS_TIMELINE_SCREENSHOT")
        if docs:
            browser.screenshot(docs)
        browser.go(console.origin + "/runs")
        browser.screenshot(os.path.join(ARTIFACTS, "runs.png"))
        check(len(browser.find("tr.run")) == 1, "the runs page lists it")
        browser.go(console.origin + "/costs")
        check(len(browser.find("#cost-chart rect.bar")) >= 1,
              "the costs page draws the run's tokens")
        browser.screenshot(os.path.join(ARTIFACTS, "costs.png"))
        browser.go(console.origin + "/limits")
        browser.screenshot(os.path.join(ARTIFACTS, "limits.png"))
        bad = clean_log(browser.console_log())
        check(bad == [], "the browser's console log is clean: %s" % bad)
    finally:
        if browser:
            browser.quit()
        if console:
            console.stop()
        consume.terminate()
        try:
            consume.wait(timeout=40)
        except subprocess.TimeoutExpired:
            consume.kill()
            consume.wait()


if __name__ == "__main__":
    sys.exit(harness.main(test, "browser"))
