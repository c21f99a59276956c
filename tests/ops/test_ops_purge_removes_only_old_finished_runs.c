/* `runledger purge` against a real ledger: it removes exactly the
 * completed and failed runs last updated before the cutoff that have no
 * undelivered notification, with their attempts, decisions, approvals,
 * delivered notifications and budget reservations; it keeps unknown,
 * pending, running and awaiting-approval runs however old, recent finished
 * runs, and runs with a pending or dead-lettered outbox row; --status narrows
 * it, --dry-run counts without deleting, small batches add up to the same
 * result, a second purge finds nothing. /metrics reports runledger_ledger_rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rl/db_conn.h"
#include "rltest.h"
#include "rltest_db.h"

static char out[1 << 16], err[8192];

/* n runs named <group>-<i> in status, last updated age_days ago, each with
 * one attempt (an outcome unless running) and, when finished, one
 * delivered notification. */
static void
add_runs(struct e2e *t, const char *group, const char *status, int n,
         int age_days)
{
    char sql[4096], errstr[512];
    const char *fin =
        strcmp(status, "completed") == 0 || strcmp(status, "failed") == 0
            ? "true"
            : "false";

    snprintf(
        sql, sizeof(sql),
        "WITH g AS (SELECT encode(sha256(convert_to('%s-' || i, 'UTF8')),"
        "                         'hex') AS id, i,"
        "                  now() - make_interval(days => %d) AS at"
        "             FROM generate_series(1, %d) i),"
        " r AS (INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
        "        fingerprint, request, status, output, completed_at,"
        "        lock_owner, lock_expires_at, next_attempt_at, proposal,"
        "        proposal_digest, attempts, created_at, updated_at)"
        "       SELECT id, '%s', 'tenant-purge',"
        "              '2026-01-01'::timestamptz + make_interval(secs => i),"
        "              'v1', id, '{}', '%s',"
        "              CASE WHEN '%s' = 'completed' THEN '{\"a\":1}'::jsonb "
        "END,"
        "              CASE WHEN '%s' = 'completed' THEN at END,"
        "              CASE WHEN '%s' = 'running' THEN 'w' END,"
        "              CASE WHEN '%s' = 'running' THEN now() + interval '1h'"
        "              END,"
        "              CASE WHEN '%s' = 'pending' THEN at END,"
        "              CASE WHEN '%s' = 'awaiting_approval' THEN '{}'::jsonb"
        "              END,"
        "              CASE WHEN '%s' = 'awaiting_approval' THEN id END,"
        "              1, at, at FROM g RETURNING run_id),"
        " a AS (INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker,"
        "        idempotency_key, dispatched_at, outcome, finished_at)"
        "       SELECT id, 1, 1, 'w', id || ':1', at,"
        "              CASE WHEN '%s' <> 'running' THEN 'ok' END,"
        "              CASE WHEN '%s' <> 'running' THEN at END FROM g)"
        "INSERT INTO outbox_delivered (run_id, channel, explicit_payload, "
        "created_at,"
        "       delivered_at, delivery_count)"
        "SELECT id, 'email', '{}', at, at, 1 FROM g WHERE %s",
        group, age_days, n, group, status, status, status, status, status,
        status, status, status, status, status, fin);
    RL_REQUIRE(
        rl_db_exec(t->db, sql, 0, NULL, NULL, 0, errstr, sizeof(errstr)) >= 0);
}

static void
exec_sql(struct e2e *t, const char *sql)
{
    char errstr[512];

    if (rl_db_exec(t->db, sql, 0, NULL, NULL, 0, errstr, sizeof(errstr)) < 0) {
        fprintf(stderr, "%s: %s\n", sql, errstr);
        RL_REQUIRE(0);
    }
}

static int
purge(struct e2e *t, const char *a1, const char *a2, const char *a3,
      const char *a4, const char *a5, const char *a6)
{
    const char *args[] = {"purge", a1, a2, a3, a4, a5, a6, NULL};
    int rc = ops_run(t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));

    fprintf(stderr, "runledger purge %s %s %s %s: exit %d\n%s%s", a1,
            a2 ? a2 : "", a3 ? a3 : "", a4 ? a4 : "", rc, out, err);
    return rc;
}

/* The number printed after the table name on a count line of out. */
static long
printed(const char *table)
{
    char needle[64];
    const char *p;

    snprintf(needle, sizeof(needle), "  %s ", table);
    p = strstr(out, needle);
    return p ? strtol(p + strlen(needle), NULL, 10) : -1;
}

static int64_t
group_rows(struct e2e *t, const char *table, const char *job)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM %s x JOIN runs r USING (run_id)"
             " WHERE r.job = '%s'",
             table, job);
    return e2e_int(t, sql);
}

int
main(void)
{
    struct e2e t;
    int64_t total;

    e2e_setup(&t, "opspurge", 1);

    add_runs(&t, "old-completed", "completed", 30, 40);
    add_runs(&t, "old-failed", "failed", 20, 40);
    add_runs(&t, "new-completed", "completed", 10, 5);
    add_runs(&t, "old-unknown", "unknown", 4, 40);
    add_runs(&t, "old-pending", "pending", 4, 40);
    add_runs(&t, "old-running", "running", 4, 40);
    add_runs(&t, "old-awaiting", "awaiting_approval", 4, 40);
    add_runs(&t, "old-queued", "completed", 3, 40);
    /* a notification still queued keeps its run */
    exec_sql(&t, "INSERT INTO outbox (run_id, channel, explicit_payload, "
                 "created_at)"
                 " SELECT run_id, 'slack', '{}', updated_at FROM runs"
                 "  WHERE job = 'old-queued'");
    /* an operator's decision touched this old failed run yesterday */
    exec_sql(&t, "UPDATE runs SET updated_at = now() - interval '1 day'"
                 " WHERE run_id = (SELECT min(run_id) FROM runs"
                 "                  WHERE job = 'old-failed')");
    /* so does a dead-lettered one, kept for an operator */
    add_runs(&t, "old-dead", "completed", 2, 40);
    exec_sql(&t, "INSERT INTO outbox_dead (run_id, channel, payload,"
                 "       payload_bytes, created_at, delivery_count, reason)"
                 " SELECT run_id, 'slack', '{}', 2, updated_at, 5, 'refused'"
                 "   FROM runs WHERE job = 'old-dead'");
    /* decisions, approvals and leftover reservations go with their run */
    exec_sql(&t, "INSERT INTO run_decisions (run_id, decision, actor, reason,"
                 "       prior_status, attempts)"
                 " (SELECT run_id, 'resolve_failed', 'alice', 'gone',"
                 "         'unknown', 1 FROM runs WHERE job = 'old-failed'"
                 "     AND updated_at < now() - interval '30 days' LIMIT 4)"
                 " UNION ALL"
                 " (SELECT run_id, 'resolve_failed', 'alice', 'gone',"
                 "         'unknown', 1 FROM runs WHERE job = 'old-unknown'"
                 "   LIMIT 2)");
    exec_sql(&t, "INSERT INTO approvals (run_id, digest, actor, decision)"
                 " SELECT run_id, run_id, 'bob', 'approve' FROM runs"
                 "  WHERE job = 'old-completed' ORDER BY run_id LIMIT 3");
    exec_sql(&t, "INSERT INTO budget_reservations (run_id, attempt_no, tenant,"
                 "       scopes, day, tokens)"
                 " SELECT run_id, 1, tenant, '{\"\"}', current_date, 10"
                 "   FROM runs WHERE job = 'old-failed'"
                 "    AND updated_at < now() - interval '30 days' LIMIT 2");
    total = e2e_int(&t, "SELECT count(*) FROM runs");
    RL_REQUIRE(total == 81);

    /* ---- bad usage: nothing touched ---- */
    RL_CHECK(purge(&t, NULL, NULL, NULL, NULL, NULL, NULL) == 2);
    RL_CHECK(purge(&t, "--older-than", "30", NULL, NULL, NULL, NULL) == 2);
    RL_CHECK(purge(&t, "--older-than", "30d", "--status", "unknown", NULL,
                   NULL) == 2);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM runs") == total);

    /* ---- dry run: the counts, nothing deleted ---- */
    RL_CHECK(purge(&t, "--older-than", "30d", "--dry-run", NULL, NULL, NULL) ==
             0);
    RL_CHECK(printed("runs") == 49);
    RL_CHECK(printed("attempts") == 49);
    RL_CHECK(printed("outbox_delivered") == 49);
    RL_CHECK(printed("run_decisions") == 4);
    RL_CHECK(printed("approvals") == 3);
    RL_CHECK(printed("budget_reservations") == 2);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM runs") == total);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM attempts") == total);
    RL_CHECK(purge(&t, "--older-than", "30d", "--status", "failed", "--dry-run",
                   NULL) == 0);
    RL_CHECK(printed("runs") == 19);

    /* ---- --status completed, in batches of 7 ---- */
    RL_CHECK(purge(&t, "--older-than", "30d", "--status", "completed",
                   "--batch", "7") == 0);
    RL_CHECK(printed("runs") == 30);
    RL_CHECK(strstr(out, "5 batches of at most 7 runs") != NULL);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM runs"
                         " WHERE job = 'old-completed'") == 0);
    RL_CHECK(group_rows(&t, "runs", "old-failed") == 20);

    /* ---- the rest: failed ---- */
    RL_CHECK(purge(&t, "--older-than", "720h", NULL, NULL, NULL, NULL) == 0);
    RL_CHECK(printed("runs") == 19);
    RL_CHECK(printed("run_decisions") == 4);
    RL_CHECK(printed("budget_reservations") == 2);

    /* exactly the eligible runs and every row naming them are gone */
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM runs") == total - 49);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM attempts") == total - 49);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM outbox_delivered") ==
             30 + 20 + 10 + 3 + 2 - 49);
    RL_CHECK(e2e_int(&t,
                     "SELECT count(*) FROM attempts a WHERE NOT EXISTS"
                     " (SELECT 1 FROM runs r WHERE r.run_id = a.run_id)") == 0);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM outbox_delivered d WHERE NOT"
                         " EXISTS (SELECT 1 FROM runs r"
                         "          WHERE r.run_id = d.run_id)") == 0);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM approvals") == 0);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM run_decisions") == 2);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM budget_reservations") == 0);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM runs WHERE job = 'old-failed'"
                         "   AND updated_at > now() - interval '2 days'") == 1);
    RL_CHECK(group_rows(&t, "runs", "new-completed") == 10);
    RL_CHECK(group_rows(&t, "runs", "old-unknown") == 4);
    RL_CHECK(group_rows(&t, "runs", "old-pending") == 4);
    RL_CHECK(group_rows(&t, "runs", "old-running") == 4);
    RL_CHECK(group_rows(&t, "runs", "old-awaiting") == 4);
    RL_CHECK(group_rows(&t, "runs", "old-queued") == 3);
    RL_CHECK(group_rows(&t, "outbox", "old-queued") == 3);
    RL_CHECK(group_rows(&t, "outbox_delivered", "old-queued") == 3);
    RL_CHECK(group_rows(&t, "runs", "old-dead") == 2);

    /* ---- nothing left to do; a shorter retention reaches newer runs ---- */
    RL_CHECK(purge(&t, "--older-than", "30d", NULL, NULL, NULL, NULL) == 0);
    RL_CHECK(printed("runs") == 0);
    RL_CHECK(purge(&t, "--older-than", "6d", NULL, NULL, NULL, NULL) == 0);
    RL_CHECK(printed("runs") == 0);
    RL_CHECK(purge(&t, "--older-than", "5760m", NULL, NULL, NULL, NULL) == 0);
    RL_CHECK(printed("runs") == 10);
    RL_CHECK(group_rows(&t, "runs", "new-completed") == 0);

    /* ---- the row-count gauge ---- */
    {
        static char body[1 << 18];
        char port_env[64];
        const char *consume[] = {"consume", NULL};
        const char *env[] = {port_env, "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1",
                             NULL};
        int port = ops_free_port();

        snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
        RL_REQUIRE(ops_spawn(&t, consume, env) >= 0);
        RL_CHECK(ops_wait_http(port, "/readyz", 200, 60000));
        RL_CHECK(ops_http_get(port, "/metrics", body, sizeof(body)) == 200);
        RL_CHECK(ops_metrics_check(body) > 0);
        RL_CHECK(ops_metric(body, "runledger_ledger_rows{table=\"runs\"}") >=
                 0);
        RL_CHECK(
            ops_metric(body, "runledger_ledger_rows{table=\"attempts\"}") >= 0);
        RL_CHECK(ops_metric(body, "runledger_ledger_rows{table=\"outbox_"
                                  "delivered\"}") >= 0);
    }

    e2e_teardown(&t);
    RL_TEST_END();
}
