"""Invariant, in a real browser (headless chromium over WebDriver): the
schedules page lists every schedule the user may read with its last and
next window and the windows of its recent past that have no run; a
schedule's page marks each window missing or links it to its run, and
that link opens the run's page; the missing windows are exactly those
`runledger schedules gaps` reports; and a viewer scoped to tenant acme
sees acme's schedule only (beta's is "no such schedule"); with more
schedules than a page, the "Next page" links list each once.

Two audit-only schedules (one per tenant), hourly, made five hours old.
The runs of some windows are registered under the run ID and
fingerprint the consumer would give the window's event (the production
parser, console_event_identity; the run ID checked against `runledger
publish --dry-run`), one window of acme's is left without its run."""

import json
import os
import re
import subprocess
import sys
import time

import harness
from harness import BIN, check, lit, wait_for
from webdriver import Browser, find_browser

IDENTITY_BIN = os.environ.get("CONSOLE_EVENT_IDENTITY_BIN", "")
ARTIFACTS = os.path.join(os.getcwd(), "artifacts")
HOUR = 3600
REQUEST = {"model": "m", "messages": [{"role": "user",
                                       "content": "the day's summary"}]}


def utc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))


def db_now(ledger):
    return int(ledger.sql("SELECT floor(extract(epoch FROM now()))"))


def register(ledger, job, tenant, start):
    """Stores the run the consumer would register for the window of
    job/tenant starting at start; returns its run ID."""
    event = {"job": job, "tenant": tenant, "scheduled_at": utc(start),
             "version": "v1", "window": "PT1H", "request": REQUEST}
    out = subprocess.run([IDENTITY_BIN, json.dumps(event)],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise harness.Failed("console_event_identity: " + out.stderr)
    run_id, fingerprint = out.stdout.split()
    published = subprocess.run(
        [BIN, "publish", "--stdin", "--dry-run"], env=ledger.env,
        input=json.dumps(event) + "\n", capture_output=True, text=True,
        timeout=30)
    if published.stdout.strip() != run_id:
        raise harness.Failed("publish --dry-run gives run ID %r, not %s: %s"
                             % (published.stdout, run_id, published.stderr))
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status, next_attempt_at) VALUES (%s, %s,"
        " %s, to_timestamp(%d), 'v1', %s, %s::jsonb, 'pending', now())"
        % (lit(run_id), lit(job), lit(tenant), start, lit(fingerprint),
           lit(json.dumps({"notify": [], "request": REQUEST}))))
    return run_id


def sign_in(browser, console, token):
    browser.cmd("DELETE", "/cookie")
    browser.go(console.origin + "/signin")
    browser.type(browser.one("#token"), token)
    browser.click(browser.one("#signin"))
    wait_for(lambda: browser.url() == console.origin + "/approvals",
             "the queue after sign-in", 15)


def rows(browser):
    """{schedule name: {column class: text}} of the schedules list."""
    return browser.script(
        "const out = {};"
        "for (const tr of document.querySelectorAll('tr.schedule')) {"
        "  const row = {};"
        "  for (const td of tr.querySelectorAll('td[class]'))"
        "    row[td.className] = td.textContent;"
        "  out[tr.dataset.name] = row;"
        "}"
        "return out;")


def test(ledger):
    paths = find_browser()
    harness.require_service("chromium and chromedriver", paths is not None)
    if not IDENTITY_BIN:
        raise harness.Failed("CONSOLE_EVENT_IDENTITY_BIN is not set")
    with open("schedules-request.json", "w") as f:
        json.dump(REQUEST, f)
    for name, tenant, cron in (("brief-acme", "acme", "0 * * * *"),
                               ("brief-beta", "beta", "30 * * * *")):
        ledger.run("schedules", "set", name, "--job", "brief", "--tenant",
                   tenant, "--cron", cron, "--version", "v1", "--window",
                   "PT1H", "--request", "@schedules-request.json",
                   "--audit-only")
    # Away from the turn of an hour: the page's last window is the one
    # this test computes.
    now = wait_for(lambda: (lambda t: t if 120 <= t % HOUR <= HOUR - 120
                            else None)(db_now(ledger)),
                   "a time away from the turn of the hour", HOUR)
    ledger.sql("UPDATE schedules SET created_at = to_timestamp(%d)"
               % (now - 5 * HOUR + 60))
    h0 = now - now % HOUR
    acme = {h: register(ledger, "brief", "acme", h)
            for h in (h0, h0 - HOUR, h0 - 3 * HOUR, h0 - 4 * HOUR)}
    gap = h0 - 2 * HOUR
    b0 = h0 + 1800 if h0 + 1800 <= now else h0 - 1800
    beta_run = register(ledger, "brief", "beta", b0)

    gaps = json.loads(ledger.run("schedules", "gaps", "--since", "PT6H",
                                 "--json").stdout)
    acme_gaps = [g["window"] for g in gaps if g["schedule"] == "brief-acme"]
    check(acme_gaps == [utc(gap)],
          "schedules gaps finds acme's one missing window (%s)" % acme_gaps)

    viewer = ledger.add_user("vic", "viewer")
    scoped = ledger.run("users", "add", "amy", "--role", "viewer",
                        "--tenants", "acme").stdout.strip().splitlines()[-1]
    console = harness.Console(ledger)
    browser = None
    try:
        browser = Browser(paths[0], paths[1], harness.free_port(),
                          "chromedriver-schedules.log")
        sign_in(browser, console, viewer)
        browser.click(browser.one("nav a[href='/schedules']"))
        wait_for(lambda: browser.url() == console.origin + "/schedules",
                 "the schedules page from the navigation", 15)
        listed = rows(browser)
        browser.screenshot(os.path.join(ARTIFACTS, "schedules.png"))
        check(sorted(listed) == ["brief-acme", "brief-beta"],
              "the schedules page lists both schedules (%s)" % sorted(listed))
        row = listed["brief-acme"]
        check(utc(h0) in row["last"] and acme[h0][:16] in row["last"],
              "acme's last window is %s with its run (%s)"
              % (utc(h0), row["last"]))
        check(row["next"].strip() == utc(h0 + HOUR),
              "acme's next window is %s (%s)" % (utc(h0 + HOUR), row["next"]))
        check(row["missing-count"] == "1",
              "acme has one missing window (%s)" % row["missing-count"])
        check(listed["brief-beta"]["tenant"] == "beta" and
              "audit only" in listed["brief-beta"]["state"],
              "beta's audit-only schedule is listed with its tenant")

        browser.click(browser.one("a[href='/schedules/brief-acme']"))
        wait_for(lambda: browser.url().endswith("/schedules/brief-acme"),
                 "acme's schedule page", 15)
        windows = browser.script(
            "return Array.from(document.querySelectorAll('tr.window'))"
            ".map(tr => [tr.dataset.start, tr.className,"
            " (tr.querySelector('a.window-run') || {}).pathname || null,"
            " tr.textContent])")
        browser.screenshot(os.path.join(ARTIFACTS, "schedule-acme.png"))
        starts = [w[0] for w in windows]
        expected = [utc(h) for h in (h0, h0 - HOUR, h0 - 2 * HOUR,
                                     h0 - 3 * HOUR, h0 - 4 * HOUR)]
        check(starts == expected,
              "acme's page lists its five windows newest first (%s)" % starts)
        by_start = {w[0]: w for w in windows}
        missing = [w[0] for w in windows if "missing" in w[1].split()]
        check(missing == [utc(gap)] and by_start[utc(gap)][2] is None and
              "missing" in by_start[utc(gap)][3],
              "the window without a run is marked missing, with no link "
              "(%s)" % missing)
        check(missing == acme_gaps,
              "the page's missing windows are those schedules gaps reports")
        for h, run_id in acme.items():
            check(by_start[utc(h)][2] == "/runs/" + run_id,
                  "window %s links to its run" % utc(h))
        target = h0 - 3 * HOUR
        browser.click(browser.one(
            "tr.window[data-start='%s'] a.window-run" % utc(target)))
        wait_for(lambda: browser.url() == console.origin + "/runs/" +
                 acme[target], "the window's run page", 15)
        check(browser.text(browser.one("h1 code")) == acme[target] and
              browser.text(browser.one("#run-tenant")) == "acme",
              "the window's link opens its run's page")
        errors = [e for e in browser.console_log()
                  if e.get("level") in ("SEVERE", "WARNING")]
        check(not errors,
              "the pages leave the browser's console log clean (%s)"
              % errors)

        sign_in(browser, console, scoped)
        browser.go(console.origin + "/schedules")
        listed = rows(browser)
        check(sorted(listed) == ["brief-acme"],
              "acme's scoped viewer sees acme's schedule only (%s)"
              % sorted(listed))
        browser.go(console.origin + "/schedules/brief-beta")
        check(browser.text(browser.one("#message")) == "no such schedule",
              "beta's schedule page is not found for acme's viewer")
        browser.go(console.origin + "/runs/" + beta_run)
        check(browser.text(browser.one("#message")) == "no such run",
              "nor is beta's window run")

        # More schedules than a page: the "Next page" links visit each
        # once, in name order.
        names = ["brief-acme", "brief-beta"]
        for i in range(25):
            name = "more-%02d" % i
            ledger.run("schedules", "set", name, "--job", "brief",
                       "--tenant", "acme", "--cron", "15 3 * * *",
                       "--version", "v1", "--window", "P1D", "--request",
                       "@schedules-request.json", "--audit-only")
            names.append(name)
        cookie = console.sign_in(viewer)
        seen, path = [], "/schedules"
        for _ in range(10):
            page = console.request("GET", path, cookie=cookie)
            check(page.status == 200, "%s answers 200" % path)
            seen += re.findall(r'<tr class="schedule" data-name="([^"]+)"',
                               page.body)
            more = re.search(r'<a id="next" href="([^"]+)"', page.body)
            if not more:
                break
            path = harness.unescape(more.group(1))
        check(seen == sorted(names),
              "the pages list all %d schedules once, in order (%d seen)"
              % (len(names), len(seen)))
    finally:
        if browser:
            browser.quit()
        log = console.stop()
        if "ERROR" in log or "error" in log:
            print(log[-4000:])


if __name__ == "__main__":
    sys.exit(harness.main(test, "schedpage"))
