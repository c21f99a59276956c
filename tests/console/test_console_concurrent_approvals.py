"""Invariant: of concurrent approvals of one run through the console, by
different approvers on different connections, exactly one wins: one
decision, one audit row, one outbox row per destination; every other
request is refused with 409."""

import sys
import threading

import harness
from harness import check, csrf_of

N = 8


def test(ledger):
    names = ["appr%d" % i for i in range(N)]
    tokens = [ledger.add_user(n, "approver") for n in names]
    for n in names:
        ledger.run("approvers", "add", "--tenant", "acme", "--actor", n)
    run_id, digest, _ = ledger.waiting_run("acme", "j", "race",
                                           ("a", "b", "c"))
    console = harness.Console(ledger)
    try:
        forms = []
        for t in tokens:
            cookie = console.sign_in(t)
            csrf = csrf_of(console.request("GET", "/approvals/" + run_id,
                                           cookie=cookie).body)
            forms.append((cookie, {"csrf": csrf, "digest": digest,
                                   "decision": "approve"}))
        barrier = threading.Barrier(N)
        statuses = [None] * N

        def go(i):
            barrier.wait()
            r = console.request("POST", "/approvals/" + run_id,
                                cookie=forms[i][0], form=forms[i][1])
            statuses[i] = r.status

        threads = [threading.Thread(target=go, args=(i,)) for i in range(N)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        check(statuses.count(200) == 1, "exactly one approval wins: %s"
              % statuses)
        check(statuses.count(409) == N - 1, "every other one is 409")
        check(ledger.sql("SELECT count(*) FROM approvals") == "1",
              "one decision recorded")
        check(ledger.sql("SELECT count(*) FROM audit"
                         " WHERE via = 'console'") == "1",
              "one audit row")
        check(ledger.sql("SELECT count(*) FROM outbox") == "3",
              "one outbox row per destination, once")
    finally:
        console.stop()


if __name__ == "__main__":
    sys.exit(harness.main(test, "concurrent"))
