/* A batch whose polls keep failing is given up, not polled forever with
 * its runs held: the stub forgets its batches once the batch is
 * submitted (as a provider does after a key change: every poll a 404).
 * After 5 failed polls in a row the batch ends 'failed' with the reason
 * in its detail, and its runs follow --on-expiry live: each is sent live
 * and completed once. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 4

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=600", NULL};

    e2e_setup(&t, "batchpollfail", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "4", "--on-expiry",
                 "live", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    bt_spawn(&t, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM batches WHERE state = "
                             "'submitted'"));
    RL_REQUIRE(bt_stub_reset(&t) == 0);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 90000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || failures || '/' || "
                                "(detail LIKE 'given up: poll: %404%') "
                                "FROM batches"),
                   "failed/5/true");
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batch_runs WHERE state "
                               "IN ('waiting', 'in_batch')"),
                   0);
    for (int i = 0; i < RUNS; i++)
        fx_check_completed_once(&t, ids[i]);
    e2e_teardown(&t);
    RL_TEST_END();
}
