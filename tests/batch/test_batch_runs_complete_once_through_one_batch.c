/* 1,000 runs of a batch-mode job against the stub's /v1/files and
 * /v1/batches, through `runledger consume`: the stub saw exactly one batch
 * created and 1,000 generations, one per run (custom_id run:1); every run
 * completed once with one attempt (ok, its usage), two notifications
 * delivered, its batch_runs row completed; the batch's row says completed
 * with 1,000 answers stored; no run was called live; /metrics counts the
 * 1,000 generations and their tokens as live answers' are; the answers
 * were stored many to a statement.
 * RL_BATCH_TEST_RUNS (up to 10,000) runs more, for docs/performance.md;
 * the figures of the batch are printed either way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "ops.h"
#include "rltest.h"

#define RUNS_MAX 10000

int
main(void)
{
    struct e2e t;
    static char ids[RUNS_MAX][RL_HEX_SIZE];
    char job[160], key[RL_HEX_SIZE + 8], http[64], max_runs[16];
    int port = ops_free_port();
    const char *runs_env = getenv("RL_BATCH_TEST_RUNS");
    const int runs =
        runs_env && atoi(runs_env) > 0 && atoi(runs_env) <= RUNS_MAX
            ? atoi(runs_env)
            : 1000;
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5", NULL};

    e2e_setup(&t, "batchone", 2);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    /* One batch: it fills at runs runs long before its window ends. */
    snprintf(max_runs, sizeof(max_runs), "%d", runs);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", max_runs, NULL);
    for (int i = 0; i < runs; i++)
        e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i, NULL,
                          ids[i]);
    e2e_flush(&t);
    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", port);
    bt_spawn(&t, http, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, runs, 300000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), runs);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batches"), 1);
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT state || '/' || (runs = %d) || '/' || "
                             "(lines_ok = %d) || '/' || lines_ignored FROM "
                             "batches",
                             runs, runs),
                   "completed/true/true/0");
    /* Many answers a statement, as live answers are completed: a
     * completion's completed_at is its transaction's start, so the
     * distinct ones count the statements (256 lines each at most). */
    RL_CHECK(e2e_int(&t, "SELECT count(DISTINCT completed_at) FROM runs") <=
             (runs + 255) / 256 + 2);
    /* From the first answer stored to the last: the batcher's pace. */
    printf("batch of %d runs: created to every answer stored %.1f s; "
           "answers stored in %.2f s, %.0f lines/s\n",
           runs,
           (double)e2e_int(&t, "SELECT (extract(epoch FROM max(r.completed_at)"
                               " - min(b.submitted_at)) * 1000)::int8 FROM "
                               "runs r, batches b") /
               1000.0,
           (double)e2e_int(&t, "SELECT (extract(epoch FROM max(completed_at) - "
                               "min(completed_at)) * 1000)::int8 FROM runs") /
               1000.0,
           runs * 1000.0 /
               (double)(e2e_int(&t, "SELECT greatest(1, (extract(epoch FROM "
                                    "max(completed_at) - min(completed_at))"
                                    " * 1000)::int8) FROM runs")));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batch_runs WHERE state "
                               "= 'completed' AND attempt_no = 1"),
                   runs);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts WHERE outcome "
                               "= 'ok' AND completion_tokens > 0"),
                   runs);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), runs);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   2 * runs);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE lock_owner "
                               "IS NOT NULL"),
                   0);
    RL_CHECK(ops_scrape(port, "runledger_generations_total") == runs);
    RL_CHECK(ops_scrape(port, "runledger_tokens_total{kind=\"completion\"}") >
             0);
    for (int i = 0; i < runs; i += 97) {
        fx_check_completed_once(&t, ids[i]);
        snprintf(key, sizeof(key), "%.64s:1", ids[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, key), 1);
        /* Never called live (a live call is counted under the run ID). */
        RL_CHECK(e2e_stub_generations(&t, ids[i]) <= 0);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
