"""Invariant: only an approver or operator who is an approver of the run's
tenant, for every destination channel where scoped, decides a run, and the
decision is recorded with the signed-in identity as actor (never a form
field), in the same transaction as its audit row (address and digest). A
viewer and a non-approver see no approve button and their forged POSTs are
refused (403); a stale digest and an already decided run are refused (409,
saying by whom and when); an unknown run is 404; refusals change nothing."""

import sys

import harness
from harness import check, csrf_of, element


def test(ledger):
    tokens = {n: ledger.add_user(n, role) for n, role in (
        ("viewer1", "viewer"), ("outsider", "approver"),
        ("scoped", "approver"), ("wide", "operator"))}
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "viewer1")
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "scoped",
               "--channel", "slack")
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "wide")
    ledger.run("approvers", "add", "--tenant", "other", "--actor", "outsider")
    two, two_digest, _ = ledger.waiting_run("acme", "j", "two channels",
                                            ("email", "slack"))
    one, one_digest, _ = ledger.waiting_run("acme", "j", "slack only",
                                            ("slack",))
    console = harness.Console(ledger)
    cookies = {n: console.sign_in(t) for n, t in tokens.items()}

    def page(user, run_id):
        return console.request("GET", "/approvals/" + run_id,
                               cookie=cookies[user])

    def post(user, run_id, digest, decision="approve", **extra):
        csrf = csrf_of(page(user, run_id).body)
        form = dict({"csrf": csrf, "digest": digest, "decision": decision},
                    **extra)
        return console.request("POST", "/approvals/" + run_id,
                               cookie=cookies[user], form=form)

    def unchanged(run_id):
        return (ledger.sql("SELECT status FROM runs WHERE run_id = '%s'"
                           % run_id) == "awaiting_approval" and
                ledger.sql("SELECT count(*) FROM approvals WHERE run_id ="
                           " '%s'" % run_id) == "0")

    try:
        for user in ("viewer1", "outsider"):
            body = page(user, two).body
            check('id="approve"' not in body and 'id="reject"' not in body,
                  "%s sees no approve or reject button" % user)
            check(element(body, "pre", "content") == "two channels",
                  "%s still sees the content" % user)
        r = post("viewer1", two, two_digest)
        check(r.status == 403 and "viewer" in r.body,
              "a viewer's forged approval is refused (403)")
        r = post("outsider", two, two_digest)
        check(r.status == 403 and "not an approver" in r.body,
              "an approver of another tenant is refused (403)")
        check('id="approve"' not in page("scoped", two).body,
              "a slack-scoped approver sees no button for email+slack")
        r = post("scoped", two, two_digest)
        check(r.status == 403, "a slack-scoped approver cannot approve a"
              " run that also goes to email (403)")
        check(unchanged(two), "the refusals changed nothing")

        r = post("wide", two, "f" * 64)
        check(r.status == 409 and "not the one shown" in r.body,
              "a stale digest is refused (409) with a clear message")
        check(unchanged(two), "the stale approval changed nothing")

        r = post("wide", two, two_digest, reason="looks right",
                 actor="mallory")
        check(r.status == 200 and 'id="message" class="ok"' in r.body,
              "the operator approves (200, ok message)")
        check(ledger.sql("SELECT actor || ':' || decision || ':' || digest"
                         " FROM approvals WHERE run_id = '%s'" % two)
              == "wide:approve:" + two_digest,
              "the decision's actor is the signed-in user, not a form field")
        check(ledger.sql("SELECT status FROM runs WHERE run_id = '%s'" % two)
              == "completed", "the approved run is completed")
        check(ledger.sql("SELECT string_agg(channel, ',' ORDER BY channel)"
                         " FROM outbox WHERE run_id = '%s'" % two)
              == "email,slack", "one outbox row per destination")
        check(ledger.sql("SELECT actor || '|' || action || '|' || address"
                         " || '|' || digest || '|' || via || '|' || detail"
                         " FROM audit WHERE run_id = '%s'" % two)
              == "wide|approve|127.0.0.1|%s|console|looks right" % two_digest,
              "one audit row: who, what, address, digest, reason")

        r = post("wide", two, two_digest)
        check(r.status == 409 and "already decided (approve) by wide at"
              in r.body, "a second decision is refused (409): by whom, when")
        check('id="approve"' not in page("wide", two).body,
              "a decided run shows no buttons")

        r = post("scoped", one, one_digest, decision="reject")
        check(r.status == 200, "a slack-scoped approver rejects a slack-only"
              " run")
        check(ledger.sql("SELECT status || ':' || error_class FROM runs"
                         " WHERE run_id = '%s'" % one) == "failed:rejected",
              "the rejected run failed with error_class rejected")
        check(ledger.sql("SELECT count(*) FROM outbox WHERE run_id = '%s'"
                         % one) == "0", "a rejection queues nothing")

        r = console.request("POST", "/approvals/" + "ab" * 32,
                            cookie=cookies["wide"],
                            form={"csrf": csrf_of(page("wide", two).body),
                                  "digest": two_digest,
                                  "decision": "approve"})
        check(r.status == 404, "an unknown run is 404")
        check(page("wide", "ab" * 32).status == 404,
              "an unknown run's page is 404")

        ledger.run("users", "revoke", "wide")
        check(page("wide", two).status == 303,
              "a revoked user's session is gone")
        audit = ledger.run("audit", "--run", two).stdout
        check("approve" in audit and "wide" in audit,
              "runledger audit --run lists the decision")
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "decisions"))
