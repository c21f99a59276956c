/* A create that reaches the provider long after the batch's lease would
 * have expired makes one provider batch, not two: two workers, a 5 s
 * batch lease, MODEL_TIMEOUT_MS 120 s and a create the stub makes and
 * answers 15 s late (STUB_BATCH_CREATE_DELAY_MS). The worker whose create
 * is in flight renews the lease while the call runs, so the other never
 * takes the intent over, never finds it missing after the settle period
 * and never creates it again. The stub saw one batch and one generation
 * per run, the ledger's batch records one create, and every run completed
 * once. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 10

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=1",
                                    "STUB_BATCH_CREATE_DELAY_MS=15000", NULL};

    e2e_setup(&t, "batchlate", 2);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "10", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    bt_spawn(&t, "MODEL_TIMEOUT_MS=120000", NULL);
    bt_spawn(&t, "MODEL_TIMEOUT_MS=120000", NULL);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 120000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || create_tries || '/' "
                                "|| lines_ok FROM batches"),
                   "completed/1/10");
    bt_check_answered_once(&t, ids, RUNS);
    e2e_teardown(&t);
    RL_TEST_END();
}
