"""Invariant: only an operator acts on runs in the console (cancel, retry,
resolve an unknown run as failed), as `runledger runs` does, with the
signed-in user as actor and the audit row (who, what, address, reason) in
the same transaction; a viewer's or an approver's forged action is refused
(403) and changes nothing; an action the run's state refuses is 409 and
leaves no audit row. The same operator actions taken with `runledger runs`
are audited too (via cli)."""

import secrets
import sys

import harness
from harness import check, csrf_of, lit


def insert_run(ledger, status, extra_cols="", extra_vals=""):
    run_id = secrets.token_hex(32)
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status%s) VALUES (%s, 'j', 'acme', now(),"
        " 'v1', %s, '{}'::jsonb, '%s'%s)"
        % (extra_cols, lit(run_id), lit(secrets.token_hex(32)), status,
           extra_vals))
    return run_id


def test(ledger):
    tokens = {n: ledger.add_user(n, role) for n, role in (
        ("opal", "operator"), ("abe", "approver"), ("vera", "viewer"))}
    pending = insert_run(ledger, "pending", ", next_attempt_at", ", now()")
    unknown = insert_run(ledger, "unknown")
    done = insert_run(ledger, "completed", ", output, completed_at",
                      ", '\"x\"'::jsonb, now()")
    console = harness.Console(ledger)
    cookies = {n: console.sign_in(t) for n, t in tokens.items()}

    def act(user, run_id, action, reason="by the book"):
        page = console.request("GET", "/runs/" + run_id, cookie=cookies[user])
        return console.request(
            "POST", "/runs/%s/action" % run_id, cookie=cookies[user],
            form={"csrf": csrf_of(page.body), "action": action,
                  "reason": reason, "actor": "mallory"})

    def status(run_id):
        return ledger.sql("SELECT status FROM runs WHERE run_id = '%s'"
                          % run_id)

    try:
        for user in ("vera", "abe"):
            body = console.request("GET", "/runs/" + pending,
                                   cookie=cookies[user]).body
            check('id="cancel"' not in body, "%s sees no action buttons"
                  % user)
            r = act(user, pending, "cancel")
            check(r.status == 403, "%s's forged cancel is refused (403)"
                  % user)
        check(status(pending) == "pending" and
              ledger.sql("SELECT count(*) FROM audit"
                         " WHERE via = 'console'") == "0",
              "the refusals changed nothing")
        check('id="cancel"' in console.request(
            "GET", "/runs/" + pending, cookie=cookies["opal"]).body,
            "the operator sees the action buttons")

        r = act("opal", pending, "cancel")
        check(r.status == 200 and 'class="ok"' in r.body,
              "the operator cancels the pending run")
        check(status(pending) == "cancelled", "the run is cancelled")
        check(ledger.sql("SELECT actor || '|' || action || '|' || address ||"
                         " '|' || via || '|' || detail FROM audit WHERE"
                         " run_id = '%s'" % pending)
              == "opal|cancel|127.0.0.1|console|by the book",
              "one audit row: who, what, address, reason")
        r = act("opal", unknown, "resolve")
        check(r.status == 200 and status(unknown) == "failed",
              "the operator resolves the unknown run as failed")
        r = act("opal", unknown, "retry", reason="")
        check(r.status == 200 and status(unknown) == "pending",
              "the operator retries the failed run, without a reason")
        check(ledger.sql("SELECT string_agg(action || ':' || via, ','"
                         " ORDER BY id) FROM audit WHERE run_id = '%s'"
                         % unknown) == "resolve_failed:console,retry:console",
              "the resolve and the retry are audited as the console's")
        r = act("opal", done, "retry")
        check(r.status == 409 and "completed" in r.body,
              "retrying a completed run is refused (409), saying why")
        check(status(done) == "completed" and ledger.sql(
            "SELECT count(*) FROM audit WHERE run_id = '%s'" % done) == "0",
            "the refusal changed nothing and left no audit row")
        check(ledger.sql("SELECT count(*) FROM audit WHERE actor = 'opal'")
              == "3", "three actions, three audit rows")
        cli = insert_run(ledger, "pending", ", next_attempt_at", ", now()")
        ledger.run("runs", "cancel", cli, "--actor", "carl", "--reason",
                   "from the shell")
        check(ledger.sql("SELECT actor || '|' || action || '|' || via || '|'"
                         " || coalesce(address, '-') || '|' || detail FROM"
                         " audit WHERE run_id = '%s'" % cli)
              == "carl|cancel|cli|-|from the shell",
              "runledger runs cancel is audited too (via cli)")
        r = console.request("POST", "/runs/%s/action" % pending,
                            cookie=cookies["opal"],
                            form={"action": "retry"})
        check(r.status == 403, "an action without the CSRF token is refused")
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "operator"))
