/* A second provider batch under a batch's local id (what a create made
 * after its worker lost the lease leaves) is cancelled at the provider
 * and never read. The ledger's create reaches the stub 3 s late
 * (STUB_BATCH_CREATE_DELAY_MS); meanwhile another batch naming the same
 * local id in its metadata is created at the stub from the same request
 * file. The batch the ledger adopted is polled, completed and read; the
 * other is cancelled at its first poll, before it finished (the stub
 * finishes a batch 6 s after its create): no generation of its lines,
 * only the adopted batch's output downloaded, every run completed once
 * with one generation. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 5

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160], local[64], file[128], stray[128], adopted[128];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=6",
                                    "STUB_BATCH_CREATE_DELAY_MS=3000", NULL};
    int cancelled = 0, others = 0;

    e2e_setup(&t, "batchstray", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "5", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    bt_spawn(&t, "MODEL_TIMEOUT_MS=120000", NULL);
    /* The ledger's create on its way. */
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM batches WHERE "
                             "create_tries = 1"));
    snprintf(local, sizeof(local), "%s",
             e2e_text(&t, "SELECT batch_id FROM batches"));
    snprintf(file, sizeof(file), "%s",
             e2e_text(&t, "SELECT input_file_id FROM batches"));
    RL_REQUIRE(bt_stub_create_batch(&t, file, local, stray, sizeof(stray)) ==
               0);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 60000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    snprintf(adopted, sizeof(adopted), "%s",
             e2e_text(&t, "SELECT provider_batch_id FROM batches"));
    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 2);
    bt_count_strays(&t, adopted, &others, &cancelled);
    RL_CHECK_INTEQ(others, 1);
    RL_CHECK_INTEQ(cancelled, 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "file_reads"), 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT state || '/' || lines_ok FROM "
                                "batches"),
                   "completed/5");
    bt_check_answered_once(&t, ids, RUNS);
    e2e_teardown(&t);
    RL_TEST_END();
}
