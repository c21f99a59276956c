"""Invariant: a console user added with `--tenants` reads only those
tenants, enforced in the queries: an approver of A opening a run of B
(its run page, its approval page, a decision or an operator's action on
it) gets 404, and the runs list, the approvals queue and the cost report
never show B. The pages whose rows the console filters itself show none
of B either: the budgets and the per-tenant report of /costs, the limits
of /limits, and the dead letters of /deadletters (listed, or opened for a
replay: 404). An unscoped user keeps seeing every tenant, B's rows on
those pages included, so each check has something to hide.

The dead letters are produced straight to a topic of the test's own
(kcat, with the tenant header the consumer writes), on the shared
broker."""

import os
import re
import secrets
import subprocess
import sys

import harness
from harness import check, csrf_of, element, lit

TOPICS_BIN = os.environ.get("CONSOLE_TOPICS_BIN", "")


def dead_letter(boot, topic, tenant):
    """A dead letter of tenant on partition 0 of topic, as the consumer
    writes one for an event the ledger refused."""
    headers = {"reason": "rejected_by_ledger", "detail": "refused",
               "source": "consumer", "value_kind": "event", "run_id": "",
               "job": "job-" + tenant, "tenant": tenant}
    args = ["kcat", "-b", boot, "-P", "-t", topic, "-p", "0"]
    for k, v in headers.items():
        args += ["-H", "%s=%s" % (k, v)]
    out = subprocess.run(args, input='{"tenant":"%s"}' % tenant,
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise harness.Failed("kcat failed: " + out.stderr)


def rows_of(page, ident):
    """The rows of the table <table id="ident"> (None: no such table)."""
    table = element(page, "table", ident)
    return None if table is None else re.findall(r"<tr>(.*?)</tr>", table,
                                                 re.S)


def tenants_in(page, ident):
    """The tenants of table ident's rows (its first cell naming one of
    the test's tenants)."""
    return {t for row in rows_of(page, ident) or []
            for t in ("acme", "beta") if "<td>%s</td>" % t in row}


def test(ledger):
    boot = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "")
    harness.require_service("KAFKA_BOOTSTRAP_SERVERS", boot)
    dlq = ledger.schema.replace("_", "-") + ".dlq"
    out = subprocess.run([TOPICS_BIN, boot, "30000", dlq + ":1"],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, "topic created: " + out.stderr.strip())
    ledger.env = dict(ledger.env, RUNLEDGER_DLQ_TOPIC=dlq)
    dead_letter(boot, dlq, "acme")  # offset 0
    dead_letter(boot, dlq, "beta")  # offset 1
    for tenant in ("acme", "beta"):
        ledger.run("budgets", "set", "--tenant", tenant, "--tokens", "1000")
        ledger.run("limits", "set", "--tenant", tenant, "--concurrency",
                   "3")
    scoped = ledger.run("users", "add", "amy", "--role", "operator",
                        "--tenants", "acme").stdout.strip().splitlines()[-1]
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "amy")
    ledger.run("approvers", "add", "--tenant", "beta", "--actor", "amy")
    everyone = ledger.add_user("una", "viewer")
    a_run, _, _ = ledger.waiting_run("acme", "ja", "for acme")
    b_run, b_digest, _ = ledger.waiting_run("beta", "jb", "for beta")
    b_pending = secrets.token_hex(32)
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status, next_attempt_at) VALUES (%s, 'jb',"
        " 'beta', now(), 'v1', %s, '{}'::jsonb, 'pending', now())"
        % (lit(b_pending), lit(secrets.token_hex(32))))
    check(ledger.run("users", "add", "bad", "--tenants", "a,,b",
                     check_rc=False).returncode == 2,
          "--tenants with an empty name is refused")
    console = harness.Console(ledger)
    try:
        amy = console.sign_in(scoped)
        una = console.sign_in(everyone)
        for path in ("/runs/" + b_run, "/approvals/" + b_run,
                     "/runs/" + b_pending):
            r = console.request("GET", path, cookie=amy)
            check(r.status == 404, "amy (acme only) opening %s: 404 (%d)"
                  % (path, r.status))
        r = console.request("GET", "/runs/" + a_run, cookie=amy)
        check(r.status == 200, "amy opens acme's run")
        csrf = csrf_of(r.body)
        r = console.request("POST", "/approvals/" + b_run, cookie=amy,
                            form={"csrf": csrf, "digest": b_digest,
                                  "decision": "approve"})
        check(r.status == 404 and ledger.sql(
            "SELECT status FROM runs WHERE run_id = %s" % lit(b_run))
            == "awaiting_approval",
            "amy's approval of beta's run: 404, nothing decided (%d)"
            % r.status)
        r = console.request("POST", "/runs/%s/action" % b_pending,
                            cookie=amy, form={"csrf": csrf,
                                              "action": "cancel"})
        check(r.status == 404 and ledger.sql(
            "SELECT status FROM runs WHERE run_id = %s" % lit(b_pending))
            == "pending", "amy's cancel of beta's run: 404, nothing done")
        for path in ("/runs", "/runs?status=pending", "/runs?tenant=beta",
                     "/approvals", "/costs"):
            body = console.request("GET", path, cookie=amy).body
            check(b_run[:16] not in body and b_pending[:16] not in body and
                  ">beta<" not in body,
                  "%s never shows beta to amy" % path)
        body = console.request("GET", "/runs", cookie=amy).body
        check(a_run[:16] in body, "amy's runs list shows acme's run")
        body = console.request("GET", "/runs", cookie=una).body
        check(a_run[:16] in body and b_run[:16] in body,
              "an unscoped user still sees both tenants")
        check(console.request("GET", "/runs/" + b_run, cookie=una).status
              == 200, "an unscoped user opens beta's run")

        # The rows the console filters itself: each table shows acme's
        # row to amy and beta's only to una.
        costs = {u: console.request("GET", "/costs", cookie=c).body
                 for u, c in (("amy", amy), ("una", una))}
        limits = {u: console.request("GET", "/limits", cookie=c).body
                  for u, c in (("amy", amy), ("una", una))}
        for page, ident, what in ((costs, "budgets", "budgets"),
                                  (costs, "report", "per-tenant report rows"),
                                  (limits, "limits", "limits")):
            check(tenants_in(page["una"], ident) == {"acme", "beta"},
                  "the %s show una both tenants (%s)"
                  % (what, tenants_in(page["una"], ident)))
            check(tenants_in(page["amy"], ident) == {"acme"},
                  "the %s show amy acme's row and not beta's (%s)"
                  % (what, tenants_in(page["amy"], ident)))

        def listed(cookie):
            body = console.request("GET", "/deadletters", cookie=cookie).body
            return set(re.findall(r'<tr class="deadletter" id="dl-0-(\d+)"',
                                  body))

        check(listed(una) == {"0", "1"},
              "the dead letters show una both tenants' (%s)" % listed(una))
        check(listed(amy) == {"0"},
              "the dead letters show amy acme's and not beta's (%s)"
              % listed(amy))
        r = console.request("POST", "/deadletters/0-1/replay", cookie=amy,
                            form={"csrf": csrf})
        check(r.status == 404, "amy opening beta's dead letter for a "
              "replay: 404 (%d)" % r.status)
        r = console.request("POST", "/deadletters/0-0/replay", cookie=amy,
                            form={"csrf": csrf})
        check(r.status == 200 and "confirm" in r.body,
              "amy opens acme's dead letter for a replay (%d)" % r.status)
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "tenants"))
