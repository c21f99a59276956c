"""Invariant, in a real browser (headless chromium over WebDriver): after
5 bad sign-in tokens for a user, the user's real token typed into the
sign-in page still signs in; a user scoped to tenant acme sees only
acme's runs in the runs list and a "no such run" page for another
tenant's run; and the run page's Cancel button reports what committed
even when the models' horizon refresh after it fails (done, and the run
is cancelled)."""

import os
import secrets
import sys

import harness
from harness import check, lit, wait_for
from webdriver import Browser, find_browser

ARTIFACTS = os.path.join(os.getcwd(), "artifacts")


def insert_pending(ledger, tenant):
    run_id = secrets.token_hex(32)
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status, next_attempt_at) VALUES (%s, 'j',"
        " %s, now(), 'v1', %s, '{}'::jsonb, 'pending', now())"
        % (lit(run_id), lit(tenant), lit(secrets.token_hex(32))))
    return run_id


def test(ledger):
    paths = find_browser()
    harness.require_service("chromium and chromedriver", paths is not None)
    token = ledger.run("users", "add", "amy", "--role", "operator",
                       "--tenants", "acme").stdout.strip().splitlines()[-1]
    mine = insert_pending(ledger, "acme")
    theirs = insert_pending(ledger, "beta")
    ledger.sql(
        "CREATE OR REPLACE FUNCTION %s.rl_model_horizon_refresh()"
        " RETURNS integer LANGUAGE plpgsql AS $fn$ BEGIN RAISE EXCEPTION"
        " 'horizon refresh broken by the test'; END $fn$" % ledger.schema)
    console = harness.Console(ledger)
    browser = None
    try:
        for i in range(5):
            r = console.request("POST", "/signin",
                                form={"token": "amy." + "0" * 64})
            check(r.status == 401, "bad token %d: 401" % (i + 1))
        browser = Browser(paths[0], paths[1], harness.free_port(),
                          "chromedriver-scoped.log")
        browser.go(console.origin + "/signin")
        browser.type(browser.one("#token"), token)
        browser.click(browser.one("#signin"))
        check(wait_for(lambda: browser.url() == console.origin +
                       "/approvals", "the queue after sign-in", 15),
              "after 5 bad tokens, amy's real token signs her in")

        browser.go(console.origin + "/runs")
        tenants = browser.script(
            "return Array.from(document.querySelectorAll('tr.run td:nth-child(3)'))"
            ".map(e => e.textContent)")
        check(tenants == ["acme"], "amy's runs list shows acme only (%s)"
              % tenants)
        browser.screenshot(os.path.join(ARTIFACTS, "scoped-runs.png"))
        browser.go(console.origin + "/runs/" + theirs)
        check(browser.text(browser.one("#message")) == "no such run",
              "beta's run is not found for amy")

        browser.go(console.origin + "/runs/" + mine)
        browser.click(browser.one("#cancel"))
        message = wait_for(lambda: browser.find("#message"),
                           "the outcome of the cancel", 15)[0]
        status = ledger.sql("SELECT status FROM runs WHERE run_id = %s"
                            % lit(mine))
        said_done = browser.attr(message, "class") == "ok"
        browser.screenshot(os.path.join(ARTIFACTS, "scoped-cancel.png"))
        check(said_done and status == "cancelled",
              "the page says done and the cancel committed (%s, %s)"
              % (browser.text(message), status))
        check(ledger.sql("SELECT status FROM runs WHERE run_id = %s"
                         % lit(theirs)) == "pending",
              "beta's run is untouched")
    finally:
        if browser:
            browser.quit()
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "scopedb"))
