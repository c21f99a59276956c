"""Invariant: a console session ends when unused as well as when old, its
cookie cannot be planted by a sibling host over https, and proxy mode
keeps one session per user. Over https (--secure-cookies) the cookie is
__Host-rl_session (Secure, Path=/, no Domain) and only that name signs in;
a session unused for longer than RUNLEDGER_CONSOLE_SESSION_IDLE_SECONDS
signs nobody in while younger than its absolute lifetime, and use keeps
it alive; behind the proxy, requests without a cookie reuse the user's
session instead of adding one each."""

import hashlib
import sys

import harness
from harness import check


def test(ledger):
    token = ledger.add_user("sam", "viewer")
    ledger.add_user("ivy", "viewer")

    secure = harness.Console(ledger, "--secure-cookies")
    try:
        r = secure.request("POST", "/signin", form={"token": token},
                           origin="https://127.0.0.1:%d" % secure.port)
        cookie = r.header("set-cookie") or ""
        check(r.status == 303 and cookie.startswith("__Host-rl_session="),
              "over https the cookie is __Host-rl_session (%r)" % cookie)
        check("; Secure" in cookie and "Path=/" in cookie and
              "Domain" not in cookie,
              "the __Host- cookie is Secure, Path=/, without a Domain")
        value = cookie.split(";")[0].split("=", 1)[1]
        r = secure.request("GET", "/approvals",
                           headers={"Cookie": "__Host-rl_session=" + value})
        check(r.status == 200, "the __Host- cookie signs in (%d)" % r.status)
        r = secure.request("GET", "/approvals",
                           headers={"Cookie": "rl_session=" + value})
        check(r.status == 303, "the unprefixed name does not, over https")
    finally:
        secure.stop()

    console = harness.Console(
        ledger, env={"RUNLEDGER_CONSOLE_SESSION_IDLE_SECONDS": "600"})
    try:
        cookie = console.sign_in(token)
        this = " WHERE session_sha256 = '%s'" % hashlib.sha256(
            cookie.encode()).hexdigest()
        check(console.request("GET", "/approvals", cookie=cookie).status
              == 200, "a fresh session signs in")
        ledger.sql("UPDATE console_sessions SET last_seen_at = now() -"
                   " interval '9 minutes'" + this)
        check(console.request("GET", "/approvals", cookie=cookie).status
              == 200, "9 minutes unused, within the 10-minute idle limit")
        check(ledger.sql("SELECT last_seen_at > now() - interval '1 minute'"
                         " FROM console_sessions" + this) == "t",
              "using the session moves its last use")
        ledger.sql("UPDATE console_sessions SET last_seen_at = now() -"
                   " interval '11 minutes'" + this)
        r = console.request("GET", "/approvals", cookie=cookie)
        check(r.status == 303 and r.header("location") == "/signin",
              "11 minutes unused: the session signs nobody in, though its"
              " absolute lifetime has hours left (%d)" % r.status)
    finally:
        console.stop()

    hdr = "X-Forwarded-User"
    proxied = harness.Console(ledger, "--trusted-user-header", hdr,
                              "--trusted-proxy", "127.0.0.0/8")
    try:
        before = int(ledger.sql("SELECT count(*) FROM console_sessions"
                                " WHERE user_name = 'ivy'"))
        for i in range(6):
            r = proxied.request("GET", "/approvals", headers={hdr: "ivy"})
            check(r.status == 200, "proxied request %d: 200" % i)
        after = int(ledger.sql("SELECT count(*) FROM console_sessions"
                               " WHERE user_name = 'ivy'"))
        check(after - before == 1, "6 cookieless proxied requests opened one"
              " session, not %d" % (after - before))
    finally:
        proxied.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "sessions"))
