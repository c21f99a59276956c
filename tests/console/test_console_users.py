"""Invariant: a console user's sign-in token is shown once and never
stored (the ledger holds its SHA-256 alone); adding a user, adding and
removing an approver and revoking a user are each audited with who did
it; a revoked user cannot sign in and its sessions end; the audit trail
cannot be changed or removed (UPDATE, DELETE, TRUNCATE refused) and
`runledger audit` lists it."""

import hashlib
import sys

import harness
from harness import check


def test(ledger):
    token = ledger.add_user("dora", "approver")
    check(token.startswith("dora.") and len(token) == 5 + 64,
          "users add prints NAME.SECRET (64 hex) on the last line")
    stored = ledger.sql("SELECT token_sha256 FROM console_users"
                        " WHERE name = 'dora'")
    check(stored == hashlib.sha256(token.encode()).hexdigest(),
          "the ledger holds the token's SHA-256")
    dump = ledger.sql("SELECT row_to_json(u)::text FROM console_users u")
    check(token.split(".")[1] not in dump and token not in dump,
          "the token itself is nowhere in console_users")
    check(ledger.sql("SELECT count(*) FROM audit WHERE action = 'add_user'"
                     " AND detail = 'dora as approver' AND via = 'cli'")
          == "1", "users add writes an audit row")
    again = ledger.run("users", "add", "dora", check_rc=False)
    check(again.returncode == 3, "adding an active user again is refused (3)")
    check(ledger.sql("SELECT count(*) FROM audit WHERE action = 'add_user'")
          == "1", "a refused add writes no audit row")
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "dora",
               "--by", "ops-admin")
    ledger.run("approvers", "remove", "--tenant", "acme", "--actor", "dora",
               "--by", "ops-admin")
    check(ledger.sql("SELECT string_agg(action || ':' || detail, ','"
                     " ORDER BY id) FROM audit WHERE actor = 'ops-admin'")
          == "add_approver:dora of tenant acme,"
             "remove_approver:dora of tenant acme",
          "approvers add and remove are audited with who made them")
    bad = ledger.run("users", "add", "no spaces", check_rc=False)
    check(bad.returncode == 2, "a name with a space is bad usage (2)")
    role = ledger.run("users", "add", "x", "--role", "root", check_rc=False)
    check(role.returncode == 2, "an unknown role is bad usage (2)")
    listed = ledger.run("users", "list").stdout
    check("dora" in listed and "approver" in listed, "users list shows dora")
    check(token.split(".")[1] not in listed, "users list shows no token")

    console = harness.Console(ledger)
    try:
        cookie = console.sign_in(token)
        r = console.request("GET", "/approvals", cookie=cookie)
        check(r.status == 200, "signed in, the queue answers 200")
        session = ledger.sql("SELECT session_sha256 FROM console_sessions")
        check(session == hashlib.sha256(cookie.encode()).hexdigest(),
              "the ledger holds the session cookie's SHA-256 only")
        ledger.run("users", "revoke", "dora", "--actor", "ops-admin")
        check(ledger.sql("SELECT count(*) FROM console_sessions") == "0",
              "revoking ends the user's sessions")
        r = console.request("GET", "/approvals", cookie=cookie)
        check(r.status == 303 and r.header("location") == "/signin",
              "the revoked user's cookie no longer signs in")
        r = console.request("POST", "/signin", form={"token": token})
        check(r.status == 401, "the revoked user's token is refused (401)")
    finally:
        console.stop()
    missing = ledger.run("users", "revoke", "dora", check_rc=False)
    check(missing.returncode == 3, "revoking a revoked user is refused (3)")

    audit = ledger.run("audit", "--json").stdout
    check('"revoke_user"' in audit and '"ops-admin"' in audit,
          "runledger audit lists the revoke and who did it")
    for stmt in ("UPDATE audit SET actor = 'mallory'",
                 "DELETE FROM audit",
                 "TRUNCATE audit",
                 "UPDATE audit SET actor = 'mallory' WHERE false"):
        out = ledger.sql(stmt, check_rc=False)
        check(out.returncode != 0 and "append-only" in out.stderr,
              "the ledger refuses: " + stmt)
    check(ledger.sql("SELECT count(*) FROM audit WHERE actor = 'ops-admin'")
          == "3", "the audit rows are still there, unchanged")


if __name__ == "__main__":
    sys.exit(harness.main(test, "users"))
