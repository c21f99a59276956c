/* 1,000 runs of a batch-mode job against the stub's /v1/files and
 * /v1/batches, through `runledger consume`: the stub saw exactly one batch
 * created and 1,000 generations, one per run (custom_id run:1); every run
 * completed once with one attempt (ok, its usage), two notifications
 * delivered, its batch_runs row completed; the batch's row says completed
 * with 1,000 answers stored; no run was called live; /metrics counts the
 * 1,000 generations and their tokens as live answers' are. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "ops.h"
#include "rltest.h"

#define RUNS 1000

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160], key[RL_HEX_SIZE + 8], http[64];
    int port = ops_free_port();
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5", NULL};

    e2e_setup(&t, "batchone", 2);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    /* One batch: it fills at 1,000 runs long before its window ends. */
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "1000", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i, NULL,
                          ids[i]);
    e2e_flush(&t);
    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", port);
    bt_spawn(&t, http, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 120000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batches"), 1);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || runs || '/' || "
                                "lines_ok || '/' || lines_ignored FROM "
                                "batches"),
                   "completed/1000/1000/0");
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batch_runs WHERE state "
                               "= 'completed' AND attempt_no = 1"),
                   RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts WHERE outcome "
                               "= 'ok' AND completion_tokens > 0"),
                   RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   2 * RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE lock_owner "
                               "IS NOT NULL"),
                   0);
    RL_CHECK(ops_scrape(port, "runledger_generations_total") == RUNS);
    RL_CHECK(ops_scrape(port, "runledger_tokens_total{kind=\"completion\"}") >
             0);
    for (int i = 0; i < RUNS; i += 97) {
        fx_check_completed_once(&t, ids[i]);
        snprintf(key, sizeof(key), "%.64s:1", ids[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, key), 1);
        /* Never called live (a live call is counted under the run ID). */
        RL_CHECK(e2e_stub_generations(&t, ids[i]) <= 0);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
