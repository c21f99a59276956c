"""Invariant: a console user added with `--tenants` reads only those
tenants, enforced in the queries: an approver of A opening a run of B
(its run page, its approval page, a decision or an operator's action on
it) gets 404, and the runs list, the approvals queue and the cost report
never show B. An unscoped user keeps seeing every tenant."""

import secrets
import sys

import harness
from harness import check, csrf_of, lit


def test(ledger):
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
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "tenants"))
