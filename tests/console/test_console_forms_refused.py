"""Invariant: a state-changing form is refused (403) and changes nothing
without the session's CSRF token, with another session's token, without
an Origin or with a foreign one; a POST without a session is refused
(403), a GET without one is sent to sign in; sign-out ends the session
and an expired session signs nobody in."""

import sys

import harness
from harness import check, csrf_of


def test(ledger):
    token = ledger.add_user("fay", "approver")
    other = ledger.add_user("gus", "approver")
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "fay")
    run_id, digest, _ = ledger.waiting_run("acme", "j", "hello")
    console = harness.Console(ledger)
    path = "/approvals/" + run_id
    try:
        cookie = console.sign_in(token)
        csrf = csrf_of(console.request("GET", path, cookie=cookie).body)
        check(csrf is not None, "the approval page carries a CSRF token")
        cookie2 = console.sign_in(other)
        csrf2 = csrf_of(console.request("GET", "/approvals",
                                        cookie=cookie2).body)
        check(csrf2 and csrf2 != csrf, "each session has its own token")
        form = {"digest": digest, "decision": "approve"}
        cases = [
            ("no CSRF token", cookie, form, True),
            ("another session's CSRF token", cookie,
             dict(form, csrf=csrf2), True),
            ("a wrong CSRF token", cookie, dict(form, csrf="0" * 64), True),
            ("no Origin", cookie, dict(form, csrf=csrf), None),
            ("a foreign Origin", cookie, dict(form, csrf=csrf),
             "https://evil.example"),
            ("Origin null", cookie, dict(form, csrf=csrf), "null"),
            ("no session", None, dict(form, csrf=csrf), True),
        ]
        for what, ck, f, origin in cases:
            r = console.request("POST", path, cookie=ck, form=f,
                                origin=origin if origin is not None
                                else False)
            check(r.status == 403, "POST with %s is refused (403)" % what)
        check(ledger.sql("SELECT status FROM runs") == "awaiting_approval"
              and ledger.sql("SELECT count(*) FROM approvals") == "0"
              and ledger.sql("SELECT count(*) FROM audit"
                             " WHERE via = 'console'") == "0",
              "nothing changed")
        r = console.request("POST", "/signin", form={"token": token},
                            origin="https://evil.example")
        check(r.status == 403, "a sign-in from a foreign Origin is refused")

        r = console.request("POST", "/signout", cookie=cookie, form={})
        check(r.status == 403, "sign-out without the CSRF token is refused")
        r = console.request("POST", "/signout", cookie=cookie,
                            form={"csrf": csrf})
        check(r.status == 303 and r.header("location") == "/signin",
              "sign-out answers 303 to /signin")
        check("Max-Age=0" in r.header("set-cookie"),
              "sign-out clears the cookie")
        r = console.request("GET", "/approvals", cookie=cookie)
        check(r.status == 303, "the signed-out session signs nobody in")

        ledger.sql("UPDATE console_sessions SET expires_at = now()"
                   " - interval '1 second'")
        r = console.request("GET", "/approvals", cookie=cookie2)
        check(r.status == 303 and r.header("location") == "/signin",
              "an expired session is sent to sign in")
        r = console.request("POST", path, cookie=cookie2,
                            form=dict(form, csrf=csrf2))
        check(r.status == 403, "an expired session's POST is refused")
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "forms"))
