"""Invariant: the operator CLI works with a login of the role its command
needs and no other (docs/deploying.md, Database roles): as
runledger_readonly, `runs list`, `runs show`, `report` and `audit` answer
and a cancel is refused; as runledger_console, `runs cancel`, `runs
retry` and `runs approve` work (through the SECURITY DEFINER functions)
and are audited, while `users add` and `approvers add`, which grant
rights, are refused; as runledger_worker, `users list` is refused. Each
refusal is PostgreSQL's "permission denied" and changes nothing."""

import sys

import harness
from harness import check, lit


def refused(out, what):
    check(out.returncode == 1 and "permission denied" in out.stderr,
          "%s is refused (1, permission denied): %d %s"
          % (what, out.returncode, out.stderr.strip()[-200:]))


def test(ledger):
    waiting, digest, _ = ledger.waiting_run("acme", "cli-roles", "hello")
    failed = "f" * 64
    ledger.sql(
        "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        " fingerprint, request, status, attempts) VALUES (%s, 'cli-roles',"
        " 'acme', now(), 'v1', %s, '{}'::jsonb, 'failed', 1)"
        % (lit(failed), lit("e" * 64)))
    ledger.run("approvers", "add", "--tenant", "acme", "--actor", "olga")

    def as_role(component, *args):
        env = dict(ledger.env, DATABASE_URL=ledger.role_url(component))
        return ledger.run(*args, check_rc=False, env=env)

    # Reports and reads: the read-only role.
    for args in (("runs", "list", "--json"), ("runs", "show", failed),
                 ("report", "--since", "2000-01-01T00:00:00Z"),
                 ("audit", "--json")):
        out = as_role("readonly", *args)
        check(out.returncode == 0, "as readonly: %s answers (%d %s)"
              % (" ".join(args[:2]), out.returncode, out.stderr.strip()))
    refused(as_role("readonly", "runs", "cancel", waiting, "--actor", "olga",
                    "--reason", "no"), "as readonly: runs cancel")
    refused(as_role("readonly", "users", "list"), "as readonly: users list")

    # Operator actions: the console's role.
    out = as_role("console", "runs", "retry", failed, "--actor", "olga",
                  "--reason", "again")
    check(out.returncode == 0, "as console: runs retry works (%d %s)"
          % (out.returncode, out.stderr.strip()))
    check(ledger.sql("SELECT status FROM runs WHERE run_id = %s"
                     % lit(failed)) == "pending", "the retry re-opened it")
    out = as_role("console", "runs", "approve", waiting, "--digest", digest,
                  "--actor", "olga")
    check(out.returncode == 0, "as console: runs approve works (%d %s)"
          % (out.returncode, out.stderr.strip()))
    check(ledger.sql("SELECT status FROM runs WHERE run_id = %s"
                     % lit(waiting)) == "completed", "the approval completed it")
    check(ledger.sql("SELECT string_agg(action, ',' ORDER BY id) FROM audit"
                     " WHERE actor = 'olga'") == "retry,approve",
          "both are audited")
    before = ledger.sql("SELECT count(*) FROM audit")
    refused(as_role("console", "users", "add", "mallory", "--role",
                    "operator"), "as console: users add")
    refused(as_role("console", "approvers", "add", "--tenant", "acme",
                    "--actor", "mallory"), "as console: approvers add")
    check(ledger.sql("SELECT count(*) FROM console_users") == "0" and
          ledger.sql("SELECT count(*) FROM approvers WHERE actor = 'mallory'")
          == "0" and ledger.sql("SELECT count(*) FROM audit") == before,
          "the refused grants changed nothing")

    # The workers never read the console's users.
    refused(as_role("worker", "users", "list"), "as worker: users list")


if __name__ == "__main__":
    sys.exit(harness.main(test, "cli_roles"))
