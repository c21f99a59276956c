"""Invariant: in proxy mode the user header is honoured only from a
trusted proxy address, a name it passes gets the role `runledger users`
gives it (none: refused), and forms still need that session's CSRF token;
without the header, a session cookie alone signs nobody in. Proxy mode
is set by flags or by the RUNLEDGER_CONSOLE_* settings."""

import re
import sys

import harness
from harness import check, csrf_of


def test(ledger):
    token = ledger.add_user("ivy", "operator")
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "ivy")
    run_id, digest, _ = ledger.waiting_run("acme", "j", "proxied")
    hdr = "X-Forwarded-User"
    trusted = harness.Console(ledger, "--trusted-user-header", hdr,
                              "--trusted-proxy", "127.0.0.0/8")
    # Proxy mode from the settings this time, as the chart sets it.
    untrusted = harness.Console(ledger, env={
        "RUNLEDGER_CONSOLE_TRUSTED_USER_HEADER": hdr,
        "RUNLEDGER_CONSOLE_TRUSTED_PROXY": "10.0.0.0/8,::1/128"})
    try:
        r = untrusted.request("GET", "/approvals", headers={hdr: "ivy"})
        check(r.status == 403 and "open it through the proxy" in r.body,
              "the header from a non-trusted address signs nobody in, and"
              " the page says to come through the proxy")
        r = untrusted.request("POST", "/approvals/" + run_id,
                              headers={hdr: "ivy"},
                              form={"digest": digest, "decision": "approve"})
        check(r.status == 403, "a POST with the header from a non-trusted"
              " address is refused")
        cookie = untrusted.sign_in(token)
        r = untrusted.request("GET", "/approvals", cookie=cookie)
        check(r.status == 403, "in proxy mode (from the settings) a session"
              " cookie without the proxy's header signs nobody in")
        r = trusted.request("GET", "/approvals", headers={hdr: "nobody"})
        check(r.status == 403 and "signed in at the proxy as nobody, who is"
              " no console user" in r.body,
              "a name with no console user is refused, and told so")
        r = trusted.request("GET", "/approvals/" + run_id,
                            headers={hdr: "ivy"})
        check(r.status == 200 and 'id="approve"' in r.body,
              "the trusted proxy's user signs in with its role")
        cookie = r.header("set-cookie").split(";")[0].split("=", 1)[1]
        csrf = csrf_of(r.body)
        form = {"digest": digest, "decision": "approve"}
        r = trusted.request("POST", "/approvals/" + run_id,
                            headers={hdr: "ivy"}, cookie=cookie, form=form)
        check(r.status == 403, "without the CSRF token the POST is refused")
        r = trusted.request("GET", "/approvals", cookie=cookie)
        check(r.status == 403, "the cookie without the header signs nobody"
              " in")
        r = trusted.request("POST", "/approvals/" + run_id,
                            headers={hdr: "ivy", "X-Forwarded-For":
                                     "6.6.6.6, 192.0.2.44"},
                            cookie=cookie, form=dict(form, csrf=csrf))
        check(r.status == 200, "with the header and the token it decides"
              " (%d %s)" % (r.status, re.findall(r"id=\"message\"[^<]*", r.body)))
        check(ledger.sql("SELECT actor FROM approvals") == "ivy",
              "the actor is the proxy's user")
        check(ledger.sql("SELECT address FROM audit WHERE via = 'console'") == "192.0.2.44",
              "the audit row has the client address the proxy appended")
    finally:
        trusted.stop()
        untrusted.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "proxy"))
