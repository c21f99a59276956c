"""Invariant: failed sign-ins are limited per user (5 a minute) and per
address (10 a minute): past the limit a wrong token is answered 429, but
the right token always signs in (5 bad tokens for a user, or 10 from the
address every Ingress client shares, lock nobody out); the cookie set on
success is HttpOnly, SameSite=Strict, Path=/ (and Secure with
--secure-cookies)."""

import sys

import harness
from harness import check


def test(ledger):
    token = ledger.add_user("hal", "viewer")
    ida = ledger.add_user("ida", "viewer")
    console = harness.Console(ledger)
    try:
        r = console.request("POST", "/signin", form={"token": token})
        cookie = r.header("set-cookie")
        check(r.status == 303 and r.header("location") == "/approvals",
              "the right token signs in: 303 to /approvals")
        for attr in ("HttpOnly", "SameSite=Strict", "Path=/"):
            check(attr in cookie, "the cookie is " + attr)
        check("Secure" not in cookie, "no Secure flag over plain http")
        wrong = "hal." + "0" * 64
        for i in range(5):
            r = console.request("POST", "/signin", form={"token": wrong})
            check(r.status == 401 and 'id="message"' in r.body,
                  "wrong token %d: 401 with a message" % (i + 1))
        r = console.request("POST", "/signin", form={"token": token})
        check(r.status == 303 and r.header("location") == "/approvals",
              "after 5 bad tokens for hal, hal's real token signs him in")
        r = console.request("POST", "/signin", form={"token": wrong})
        check(r.status == 429, "hal's sixth wrong token: 429")
        for i in range(4):
            r = console.request("POST", "/signin",
                                form={"token": "nobody%d.%s" % (i, "1" * 64)})
            check(r.status == 401, "unknown user %d: 401" % i)
        r = console.request("POST", "/signin",
                            form={"token": "ida." + "2" * 64})
        check(r.status == 401, "ida's first wrong token: 401 (10th failure)")
        r = console.request("POST", "/signin",
                            form={"token": "ida." + "3" * 64})
        check(r.status == 429, "the address's 11th attempt: 429")
        r = console.request("POST", "/signin", form={"token": ida})
        check(r.status == 303,
              "with the address locked, ida's real token still signs in")
    finally:
        console.stop()
    secure = harness.Console(ledger, "--secure-cookies")
    try:
        r = secure.request("POST", "/signin", form={"token": token},
                           origin="https://127.0.0.1:%d" % secure.port)
        check(r.status == 303 and "; Secure" in r.header("set-cookie"),
              "--secure-cookies marks the cookie Secure")
    finally:
        secure.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "ratelimit"))
