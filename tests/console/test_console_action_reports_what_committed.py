"""Invariant: an operator's action in the console reports what the ledger
committed. With the models' horizon refresh (what a cancel runs after it
commits) failing, the cancel still commits and the page says done; the
page never says done for a transaction PostgreSQL rolled back (it answers
COMMIT with ROLLBACK, and no error, once an error aborted it). Every
pooled connection then serves the next requests outside any
transaction."""

import secrets
import sys

import harness
from harness import check, csrf_of, lit


def test(ledger):
    token = ledger.add_user("opal", "operator")
    run_id = secrets.token_hex(32)
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status, next_attempt_at) VALUES (%s, 'j',"
        " 'acme', now(), 'v1', %s, '{}'::jsonb, 'pending', now())"
        % (lit(run_id), lit(secrets.token_hex(32))))
    ledger.sql(
        "CREATE OR REPLACE FUNCTION %s.rl_model_horizon_refresh()"
        " RETURNS integer LANGUAGE plpgsql AS $fn$ BEGIN RAISE EXCEPTION"
        " 'horizon refresh broken by the test'; END $fn$" % ledger.schema)
    console = harness.Console(ledger)
    cookie = console.sign_in(token)
    try:
        page = console.request("GET", "/runs/" + run_id, cookie=cookie)
        r = console.request(
            "POST", "/runs/%s/action" % run_id, cookie=cookie,
            form={"csrf": csrf_of(page.body), "action": "cancel",
                  "reason": "refresh broken"})
        status = ledger.sql("SELECT status FROM runs WHERE run_id = %s"
                            % lit(run_id))
        said_done = r.status == 200 and 'class="ok"' in r.body
        check(said_done == (status == "cancelled"),
              "the page says done exactly when the cancel committed "
              "(page %d %s, run %s)" % (r.status,
                                         "done" if said_done else "error",
                                         status))
        check(status == "cancelled" and said_done,
              "a failing refresh after the commit leaves the cancel done")
        check(ledger.sql("SELECT count(*) FROM audit WHERE run_id = %s"
                         % lit(run_id)) == ("1" if status == "cancelled"
                                            else "0"),
              "an audit row exactly when the cancel committed")
        for i in range(12):
            r = console.request("GET", "/runs/" + run_id, cookie=cookie)
            check(r.status == 200, "request %d after the action: 200" % i)
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "commit"))
