/* `runledger runs cancel` and `budgets wake` against a running consumer,
 * the real broker, PostgreSQL and the stub model.
 *
 * A run whose model call takes 20 s is cancelled while the call is in
 * flight, with the default 30 s lease (whose renewal falls due only after
 * 10 s). Asserts: the run ends cancelled at once, without output; within
 * 5 s the consumer logs the lost lease and cancels the call, and handles
 * the call's end as cancelled ("lease lost during the call"), not as an
 * answer it discards: the call did not run its 20 s; nothing is
 * published (no outbox rows, no notification); the one attempt is closed
 * as cancelled; `runs show` (text and --json) shows the decision with
 * actor, reason and prior status. The same event produced again is
 * acknowledged as a duplicate: the group's offsets reach the end, no
 * new run or attempt. A completed run cannot be cancelled (exit 3). The
 * filter cancel is refused without --tenant (exit 2), --dry-run counts
 * and changes nothing, the real one cancels those runs only. `budgets
 * wake` makes a tenant's budget-deferred runs due and says how many. The
 * gauges runledger_runs_awaiting_approval and runledger_cancelled_runs
 * count what the ledger holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rl/runid.h"
#include "rltest.h"

#define CALL_MS 20000

static char out[1 << 16], err[8192];

static long
log_lines(const char *path, const char *run_id, const char *msg)
{
    char *text = ops_slurp(path);
    long n = 0;

    if (!text)
        return -1;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        n += strstr(line, msg) && (!run_id || strstr(line, run_id));
    free(text);
    return n;
}

struct log_wait {
    const char *path, *run_id, *msg;
};

static int
logged(struct e2e *t, void *opaque)
{
    const struct log_wait *w = opaque;

    (void)t;
    return log_lines(w->path, w->run_id, w->msg) > 0;
}

/* A pending run of tenant, inserted directly, due at the SQL expression
 * next. */
static void
insert_pending(struct e2e *t, const char *tenant, const char *job, int i,
               const char *error_class, const char *next)
{
    char sql[1024];

    snprintf(sql, sizeof(sql),
             "WITH i AS (INSERT INTO runs (run_id, job, tenant, "
             "scheduled_at, version, fingerprint, request, status, "
             "next_attempt_at, error_class) VALUES "
             "(encode(sha256('%s|%s|%d'::bytea), 'hex'), '%s', '%s', "
             "'2026-01-01T00:00:00Z'::timestamptz + make_interval(hours => "
             "%d), 'v1', repeat('f', 64), '{}', 'pending', %s, %s) "
             "RETURNING 1) SELECT count(*) FROM i",
             tenant, job, i, job, tenant, i, next,
             error_class ? error_class : "NULL");
    RL_REQUIRE(e2e_int(t, sql) == 1);
}

/* Sleeps about ms. */
static void
pause_ms(struct e2e *t, long ms)
{
    e2e_wait_intf(t, 1, ms, "SELECT 0");
}

int
main(void)
{
    struct e2e t;
    char a[RL_HEX_SIZE], b[RL_HEX_SIZE], job[160], latency[64], port_env[64];
    char log[200];
    const char *consume_args[] = {"consume", NULL};
    int port = ops_free_port();
    int slot, rc;
    struct log_wait cancelling, abandoned;

    e2e_setup(&t, "opscancel", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(latency, sizeof(latency), "[[fault:latency ms=%d]]", CALL_MS);
    e2e_produce_event(&t, job, "tenant-c", 0, latency, a);
    e2e_flush(&t);

    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    {
        const char *env[] = {port_env, "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1",
                             "RUNLEDGER_RELAY_INTERVAL_MS=50",
                             "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};

        slot = ops_spawn(&t, consume_args, env);
    }
    snprintf(log, sizeof(log), "%s", ops_log_path(&t, slot));

    /* A's call in flight */
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT count(*) FROM attempts WHERE run_id = "
                             "'%s' AND outcome IS NULL",
                             a));

    {
        const char *args[] = {"runs", "cancel", a, NULL};

        RL_CHECK_INTEQ(
            ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)),
            2);
        RL_CHECK(strstr(err, "--actor") != NULL);
    }
    {
        const char *args[] = {"runs",         "cancel", a,
                              "--actor",      "alice",  "--reason",
                              "wrong prompt", NULL};

        rc = ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));
        RL_CHECK_INTEQ(rc, 0);
        if (rc != 0)
            fprintf(stderr, "%s%s", out, err);
        RL_CHECK(strstr(out, "cancelled by alice (was running") != NULL);
    }
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id = '%s' "
                            "AND status = 'cancelled' AND output IS NULL",
                            a),
                   1);

    /* the consumer sees the fenced lease and cancels the call well before
     * its 20 s answer (and before the 30 s lease's renewal is due) */
    cancelling =
        (struct log_wait){log, a, "lease lost: cancelling the model call"};
    abandoned = (struct log_wait){log, a, "lease lost during the call"};
    RL_CHECK(e2e_wait(logged, &t, &cancelling, 5000));
    RL_CHECK(e2e_wait(logged, &t, &abandoned, 5000));
    RL_CHECK_INTEQ(log_lines(log, a, "result discarded"), 0);

    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id = "
                            "'%s'",
                            a),
                   1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id = "
                            "'%s' AND outcome = 'cancelled' AND error LIKE "
                            "'%%alice%%'",
                            a),
                   1);

    /* show: the decision, text and JSON */
    {
        const char *args[] = {"runs", "show", a, NULL};

        RL_CHECK_INTEQ(
            ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)),
            0);
        RL_CHECK(strstr(out, "cancelled") != NULL);
        RL_CHECK(strstr(out, "cancel") != NULL && strstr(out, "alice"));
        RL_CHECK(strstr(out, "wrong prompt") != NULL);
    }
    {
        const char *args[] = {"runs", "show", a, "--json", NULL};

        RL_CHECK_INTEQ(
            ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)),
            0);
        RL_CHECK(strstr(out, "\"decision\":\"cancel\"") != NULL);
        RL_CHECK(strstr(out, "\"prior_status\":\"running\"") != NULL);
        RL_CHECK(strstr(out, "\"actor\":\"alice\"") != NULL);
    }

    /* the same event again: acknowledged as a duplicate */
    e2e_produce_event(&t, job, "tenant-c", 0, latency, NULL);
    /* and a plain run that completes */
    e2e_produce_event(&t, job, "tenant-c", 1, NULL, b);
    e2e_flush(&t);
    RL_CHECK(e2e_wait_intf(&t, 1, 30000,
                           "SELECT count(*) FROM runs WHERE run_id = '%s' AND "
                           "status = 'completed'",
                           b));
    for (int i = 0; i < 150 && e2e_group_lag(&t) != 0; i++)
        pause_ms(&t, 200);
    RL_CHECK_INTEQ(e2e_group_lag(&t), 0);
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM runs WHERE job = '%s'", job), 2);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id = "
                            "'%s'",
                            a),
                   1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT (SELECT count(*) FROM outbox WHERE run_id "
                            "= '%s') + (SELECT count(*) FROM outbox_delivered "
                            "WHERE run_id = '%s')",
                            a, a),
                   0);
    RL_CHECK_INTEQ(e2e_count_with_header(&t, t.notify, "run_id", a), 0);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id = '%s' "
                            "AND status = 'cancelled' AND output IS NULL",
                            a),
                   1);

    /* a completed run cannot be cancelled */
    {
        const char *args[] = {"runs",  "cancel",   b,   "--actor",
                              "alice", "--reason", "x", NULL};

        RL_CHECK_INTEQ(
            ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)),
            3);
        RL_CHECK(strstr(err, "it is completed") != NULL);
    }

    /* filter cancel */
    for (int i = 0; i < 3; i++)
        insert_pending(&t, "tenant-bulk", "bulk", i, NULL,
                       "now() + interval '1 hour'");
    insert_pending(&t, "tenant-keep", "bulk", 9, NULL,
                   "now() + interval '1 hour'");
    {
        const char *args[] = {"runs",     "cancel",  "--status",
                              "pending",  "--actor", "alice",
                              "--reason", "bulk",    NULL};

        RL_CHECK_INTEQ(
            ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)),
            2);
        RL_CHECK(strstr(err, "--tenant") != NULL);
    }
    {
        const char *args[] = {"runs",        "cancel",    "--tenant",
                              "tenant-bulk", "--dry-run", NULL};

        RL_CHECK_INTEQ(
            ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)),
            0);
        RL_CHECK(strstr(out, "3 runs would be cancelled") != NULL);
    }
    RL_CHECK_INTEQ(e2e_intf(&t, "SELECT count(*) FROM runs WHERE tenant = "
                                "'tenant-bulk' AND status = 'pending'"),
                   3);
    {
        const char *args[] = {"runs",    "cancel", "--tenant", "tenant-bulk",
                              "--job",   "bulk",   "--status", "pending",
                              "--actor", "alice",  "--reason", "bulk",
                              NULL};

        RL_CHECK_INTEQ(
            ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)),
            0);
        RL_CHECK(strstr(out, "3 runs cancelled by alice") != NULL);
    }
    RL_CHECK_INTEQ(e2e_intf(&t, "SELECT count(*) FROM runs WHERE status = "
                                "'cancelled' AND tenant = 'tenant-bulk'"),
                   3);
    RL_CHECK_INTEQ(e2e_intf(&t, "SELECT count(*) FROM runs WHERE status = "
                                "'pending' AND tenant = 'tenant-keep'"),
                   1);

    /* budgets wake */
    insert_pending(&t, "tenant-wake", "deferred", 1, "'budget'",
                   "rl_next_budget_window()");
    insert_pending(&t, "tenant-wake", "deferred", 2, "'budget'",
                   "rl_next_budget_window()");
    {
        const char *args[] = {"budgets", "wake", "--tenant", "tenant-wake",
                              "--actor", "bob",  NULL};

        RL_CHECK_INTEQ(
            ops_run(&t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)),
            0);
        RL_CHECK(strstr(out, "2 deferred runs of tenant-wake made due now") !=
                 NULL);
    }
    RL_CHECK_INTEQ(e2e_intf(&t, "SELECT count(*) FROM run_decisions WHERE "
                                "decision = 'wake' AND actor = 'bob'"),
                   2);

    /* gauges: one run awaiting approval, 4 cancelled */
    RL_REQUIRE(
        e2e_intf(&t, "WITH u AS (UPDATE runs SET status = "
                     "'awaiting_approval', proposal = '{}', "
                     "proposal_digest = repeat('a', 64) WHERE tenant = "
                     "'tenant-keep' RETURNING 1) SELECT count(*) FROM u") == 1);
    for (int i = 0;
         i < 50 && ops_scrape(port, "runledger_runs_awaiting_approval") != 1;
         i++)
        pause_ms(&t, 200);
    RL_CHECK(ops_scrape(port, "runledger_runs_awaiting_approval") == 1);
    RL_CHECK(ops_scrape(port, "runledger_cancelled_runs") == 4);

    RL_CHECK(e2e_alive(&t, slot));
    RL_CHECK(e2e_stop(&t, slot, 20000));
    if (rltest_failures) {
        char *text = ops_slurp(log);

        fprintf(stderr, "--- %s ---\n%s\n", log, text ? text : "");
        free(text);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
