/* A batch created at the provider whose id never reached the ledger is
 * adopted, not created again. Built twice (CMake defines CRASH):
 * - CRASH=0: the create's reply is lost (the stub makes the batch, then
 *   closes the connection unanswered: failpoint batch_create_drop_reply);
 *   the same worker looks the batch up by the local id in its metadata
 *   and adopts it.
 * - CRASH=1: the worker is killed (SIGKILL, failpoint batch_after_create)
 *   after the create's reply and before the id is stored; a second
 *   worker takes the batch when its lease expires, looks it up and
 *   adopts it.
 * Either way the stub saw one batch and one generation per run, the
 * ledger's batch row records exactly one create begun, and every run
 * completed once with its notifications. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#ifndef CRASH
#error "define CRASH"
#endif

#define RUNS 20

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160], key[RL_HEX_SIZE + 8];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5", NULL};
    int slot;

    e2e_setup(&t, CRASH ? "batchkill" : "batchdrop", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "20", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    slot = bt_spawn(&t,
                    CRASH ? "RL_FAILPOINTS=batch_after_create=crash@1"
                          : "RL_FAILPOINTS=batch_create_drop_reply=error@1",
                    NULL);
    if (CRASH) {
        /* Killed with the batch made at the provider and unknown to the
         * ledger: an intent with one create begun and no provider id. */
        RL_REQUIRE(e2e_wait_exit(&t, slot, 60000) != -1);
        RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 1);
        RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batches WHERE "
                                   "state = 'intent' AND create_tries = 1 "
                                   "AND provider_batch_id IS NULL"),
                       1);
        bt_spawn(&t, NULL);
    }
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 90000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || create_tries || '/' "
                                "|| (provider_batch_id IS NOT NULL) || '/' "
                                "|| lines_ok FROM batches"),
                   "completed/1/true/20");
    for (int i = 0; i < RUNS; i++) {
        fx_check_completed_once(&t, ids[i]);
        RL_CHECK_INTEQ(fx_attempts(&t, ids[i], "ok"), 1);
        snprintf(key, sizeof(key), "%.64s:1", ids[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, key), 1);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
