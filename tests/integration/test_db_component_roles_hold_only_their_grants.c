/* Invariant: each component's role can do what its component does and
 * nothing that lets it rewrite the ledger's history (schema/
 * 072_component_roles.sql). As runledger_console: disabling the audit
 * trigger, UPDATE runs, DELETE or TRUNCATE of the audit, adding a console
 * user or an approver are refused; a cancel, a retry and an audit row
 * still work (the operator functions are SECURITY DEFINER), and the
 * cancel is audited; it moves a session's last use but not its expiry or
 * its user. As runledger_worker: reading console_users or
 * calling an operator function is refused; registering and claiming a run
 * works. As runledger_relay: UPDATE runs and reading console_users are
 * refused. As runledger_readonly: reading runs and the audit works,
 * reading the console's sessions or users and writing the audit are
 * refused. Each login is a member of its group role only
 * (tests/support/rltest_roles.c). */
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "rltest_roles.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[\"email\"],\"request\":{\"messages\":[],\"model\":\"m\"}}";

static struct rl_db *
connect_as(const char *component, const char *schema)
{
    const char *base = rltest_service_env("DATABASE_URL");
    char url[RLTEST_ROLE_URL_SIZE] = "", errstr[512];
    struct rl_db *db;

    if (rltest_role_url(base, base, component, url, sizeof(url), errstr,
                        sizeof(errstr)) != 0)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(strstr(url, "user=rl_test_") != NULL);
    db = rl_db_connect_schema(url, schema, errstr, sizeof(errstr));
    if (!db)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(db);
    return db;
}

/* sql is refused with a privilege error (not any other failure). */
static void
check_refused(struct rl_db *db, const char *who, const char *sql)
{
    char errstr[512];
    int rc = rl_db_exec(db, sql, 0, NULL, NULL, 0, errstr, sizeof(errstr));

    if (rc >= 0)
        fprintf(stderr, "%s may run: %s\n", who, sql);
    RL_CHECK(rc < 0);
    if (rc < 0 && !strstr(errstr, "permission denied") &&
        !strstr(errstr, "must be owner"))
        fprintf(stderr, "%s: %s: not a privilege error: %s\n", who, sql,
                errstr);
    RL_CHECK(rc < 0 && (strstr(errstr, "permission denied") ||
                        strstr(errstr, "must be owner")));
}

static void
check_allowed(struct rl_db *db, const char *who, const char *sql)
{
    char errstr[512];
    int rc = rl_db_exec(db, sql, 0, NULL, NULL, 0, errstr, sizeof(errstr));

    if (rc < 0)
        fprintf(stderr, "%s may not run: %s: %s\n", who, sql, errstr);
    RL_CHECK(rc >= 0);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_db *console, *worker, *relay, *readonly;
    struct fixture_run cancelled, retried;
    struct rl_claim claim;
    struct rl_decision dec;
    char errstr[512];

    console = connect_as("console", schema);
    worker = connect_as("worker", schema);
    relay = connect_as("relay", schema);
    readonly = connect_as("readonly", schema);

    /* The worker registers and claims with its own grants. */
    fixture_run_init(&cancelled, "roles-cancel", request, NULL);
    RL_REQUIRE(rltest_db_claim(worker, &cancelled.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_WON);
    rl_claim_clear(&claim);
    fixture_run_init(&retried, "roles-retry", request, NULL);
    RL_REQUIRE(rltest_db_claim(worker, &retried.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(rl_db_fail(worker,
                          &(struct rl_lease){.run_id = retried.run_id,
                                             .worker = "w1",
                                             .epoch = claim.lease_epoch},
                          RL_RUN_FAILED, "model", "gave up", errstr,
                          sizeof(errstr)) == 0);
    rl_claim_clear(&claim);

    /* The console's credentials cannot rewrite history ... */
    check_refused(console, "console",
                  "ALTER TABLE audit DISABLE TRIGGER audit_append_only");
    check_refused(console, "console", "ALTER TABLE audit DISABLE TRIGGER ALL");
    check_refused(console, "console", "UPDATE runs SET status = 'completed'");
    check_refused(console, "console",
                  "UPDATE runs SET output = '{}' WHERE output IS NULL");
    check_refused(console, "console", "DELETE FROM audit");
    check_refused(console, "console", "TRUNCATE audit");
    check_refused(console, "console", "UPDATE audit SET actor = 'nobody'");
    check_refused(console, "console",
                  "INSERT INTO console_users (name, role, token_sha256)"
                  " VALUES ('mallory', 'operator', repeat('0', 64))");
    check_refused(console, "console",
                  "INSERT INTO approvers (tenant, actor)"
                  " VALUES ('workspace-acme', 'mallory')");
    check_refused(console, "console", "DELETE FROM runs");
    check_refused(console, "console",
                  "INSERT INTO outbox (run_id, channel)"
                  " SELECT run_id, 'x' FROM runs");
    /* ... and still does its work. */
    check_allowed(console, "console",
                  "INSERT INTO audit (actor, action, via)"
                  " VALUES ('alice', 'replay', 'console')");
    check_allowed(console, "console", "SELECT count(*) FROM console_users");
    check_allowed(console, "console",
                  "UPDATE console_sessions SET last_seen_at = now()");
    check_refused(console, "console",
                  "UPDATE console_sessions SET expires_at = 'infinity'");
    check_refused(console, "console",
                  "UPDATE console_sessions SET user_name = 'mallory'");
    RL_CHECK(rl_db_run_cancel(console, cancelled.run_id, "alice", "not needed",
                              &dec, errstr, sizeof(errstr)) == 0);
    RL_CHECK_STREQ(dec.prior_status, "running");
    RL_CHECK(fixture_int(db,
                         "SELECT count(*) FROM runs WHERE run_id = $1"
                         " AND status = 'cancelled'",
                         cancelled.run_id) == 1);
    RL_CHECK(fixture_int(db,
                         "SELECT count(*) FROM audit WHERE run_id = $1"
                         " AND action = 'cancel' AND actor = 'alice'",
                         cancelled.run_id) == 1);
    RL_CHECK(rl_db_run_retry(console, retried.run_id, "alice", "try again",
                             &dec, errstr, sizeof(errstr)) == 0);
    RL_CHECK(fixture_int(db,
                         "SELECT count(*) FROM runs WHERE run_id = $1"
                         " AND status = 'pending'",
                         retried.run_id) == 1);

    /* A worker reads no console users and takes no operator action. */
    check_refused(worker, "worker", "SELECT count(*) FROM console_users");
    check_refused(worker, "worker", "SELECT count(*) FROM console_sessions");
    check_refused(worker, "worker",
                  "SELECT * FROM rl_operator_cancel('x', 'w', 'r')");
    check_refused(worker, "worker",
                  "ALTER TABLE audit DISABLE TRIGGER audit_append_only");
    check_refused(worker, "worker", "DELETE FROM audit");
    check_refused(worker, "worker", "UPDATE run_limits SET concurrency = 1000");
    check_refused(worker, "worker", "UPDATE budgets SET daily_tokens = 0");

    /* The relay moves outbox rows, nothing else. */
    check_refused(relay, "relay", "UPDATE runs SET status = 'completed'");
    check_refused(relay, "relay", "SELECT count(*) FROM console_users");
    check_refused(relay, "relay", "DELETE FROM audit");
    check_allowed(relay, "relay", "SELECT count(*) FROM outbox");

    /* Reports read, and write nothing. */
    check_allowed(readonly, "readonly", "SELECT count(*) FROM runs");
    check_allowed(readonly, "readonly", "SELECT count(*) FROM audit");
    check_refused(readonly, "readonly",
                  "SELECT count(*) FROM console_sessions");
    check_refused(readonly, "readonly", "SELECT count(*) FROM console_users");
    check_refused(readonly, "readonly",
                  "INSERT INTO audit (actor, action, via)"
                  " VALUES ('x', 'y', 'cli')");
    check_refused(readonly, "readonly",
                  "SELECT * FROM rl_operator_retry('x', 'w', 'r', 0)");

    rl_db_destroy(console);
    rl_db_destroy(worker);
    rl_db_destroy(relay);
    rl_db_destroy(readonly);
    fixture_drop(db, schema);
    RL_TEST_END();
}
