/* Cancels against batches in flight (the stub answers a batch after 8 s):
 * - one run of five cancelled while its batch runs: its line is ignored
 *   (counted in lines_ignored), the run stays cancelled with no output and
 *   no notification; the four others complete once;
 * - every run of a second batch cancelled: the batcher cancels the batch
 *   at the provider, which answers none of its lines (no generation), and
 *   the batch ends cancelled.
 * While the first batch runs, `runs show` names it and its state, and
 * /metrics counts one submitted batch, its runs waiting and its age. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "batch_test.h"
#include "faults.h"
#include "ops.h"
#include "rltest.h"

#define RUNS 5

static int
cancel(struct e2e *t, const char *const *args)
{
    static char out[8192], err[8192];
    int rc = ops_run(t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));

    if (rc != 0)
        fprintf(stderr, "runs cancel: %s", err);
    return rc;
}

int
main(void)
{
    struct e2e t;
    char a[RUNS][RL_HEX_SIZE], b[RUNS][RL_HEX_SIZE];
    char ja[160], jb[160], http[64];
    static char out[65536];
    int port;
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=8", NULL};

    e2e_setup(&t, "batchcancel", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(ja, sizeof(ja), "a-%s", t.name);
    snprintf(jb, sizeof(jb), "b-%s", t.name);
    bt_batch_set(&t, ja, "--window", "300ms", NULL);
    bt_batch_set(&t, jb, "--window", "300ms", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, ja, "tenant-a", i, NULL, a[i]);
    e2e_flush(&t);
    port = ops_free_port();
    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", port);
    bt_spawn(&t, http, "RUNLEDGER_HEALTH_INTERVAL_SECONDS=1", NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT count(*) FROM batches WHERE state = "
                             "'submitted' AND runs = %d",
                             RUNS));
    {
        const char *args[] = {"runs", "show", a[1], NULL};
        const char *json_args[] = {"runs", "show", a[1], "--json", NULL};

        RL_CHECK_INTEQ(ops_run(&t, args, NULL, NULL, out, sizeof(out), NULL, 0),
                       0);
        RL_CHECK(strstr(out, "batch: rlb_") != NULL);
        RL_CHECK(strstr(out, "submitted") != NULL);
        RL_CHECK(strstr(out, "attempt 1 of the run: in_batch") != NULL);
        RL_CHECK_INTEQ(
            ops_run(&t, json_args, NULL, NULL, out, sizeof(out), NULL, 0), 0);
        RL_CHECK(strstr(out, "\"batch_state\":\"submitted\"") != NULL);
    }
    {
        double submitted = -1, waiting = -1, age = -1;

        for (int i = 0; i < 50 && (submitted != 1 || waiting != RUNS); i++) {
            struct timespec ts = {0, 100000000L};

            submitted = ops_scrape(port, "runledger_batches{state="
                                         "\"submitted\"}");
            waiting = ops_scrape(port, "runledger_batch_runs_waiting");
            age = ops_scrape(port, "runledger_batch_oldest_open_seconds");
            nanosleep(&ts, NULL);
        }
        RL_CHECK(submitted == 1);
        RL_CHECK(waiting == RUNS);
        RL_CHECK(age > 0);
    }
    {
        const char *args[] = {"runs", "cancel",   a[0],   "--actor",
                              "test", "--reason", "gone", NULL};
        RL_REQUIRE(cancel(&t, args) == 0);
    }
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM batches WHERE state = "
                             "'completed'"));
    RL_CHECK_STREQ(e2e_text(&t, "SELECT lines_ok || '/' || lines_ignored "
                                "FROM batches WHERE state = 'completed'"),
                   "4/1");
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT status FROM runs WHERE run_id = '%s' "
                             "AND output IS NULL",
                             a[0]),
                   "cancelled");
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM outbox_delivered WHERE "
                            "run_id = '%s'",
                            a[0]) +
                       e2e_intf(&t,
                                "SELECT count(*) FROM outbox WHERE run_id = "
                                "'%s'",
                                a[0]),
                   0);
    for (int i = 1; i < RUNS; i++)
        RL_CHECK(e2e_wait_intf(&t, 2, 30000,
                               "SELECT count(*) FROM outbox_delivered WHERE "
                               "run_id = '%s'",
                               a[i]));

    /* Every run of the second batch cancelled. */
    for (int i = 0; i < 3; i++)
        e2e_produce_event(&t, jb, "tenant-b", i, NULL, b[i]);
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT count(*) FROM batches WHERE state = "
                             "'submitted' AND runs = 3"));
    {
        const char *args[] = {"runs",    "cancel", "--tenant", "tenant-b",
                              "--job",   jb,       "--status", "running",
                              "--actor", "test",   "--reason", "gone",
                              NULL};
        RL_REQUIRE(cancel(&t, args) == 0);
    }
    RL_CHECK(e2e_wait_intf(&t, 1, 30000,
                           "SELECT count(*) FROM batches WHERE state = "
                           "'cancelled' AND runs = 3 AND lines_ok = 0"));
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE job = '%s' AND "
                            "status = 'cancelled'",
                            jb),
                   3);
    /* Five lines of the first batch; none of the cancelled one's. */
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    e2e_teardown(&t);
    RL_TEST_END();
}
