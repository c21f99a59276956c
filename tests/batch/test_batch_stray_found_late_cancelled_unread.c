/* A stray that the provider lists only after the adopted batch's first
 * poll is cancelled before it runs, not left to finish. The ledger's
 * first create is made at the stub but its reply is lost
 * (create_drop_reply), and the stub's list leaves that batch out for 3 s
 * (list_lag), longer than the 1 s the worker looks for it: the worker
 * creates again (create_tries 2) and adopts the second. The first shows
 * in the list only after the second's first poll; it is cancelled at a
 * later poll, before the stub finishes it 6 s after its create: no
 * generation of its lines, only the adopted batch read, every run
 * completed once with one generation. */
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
    char job[160], adopted[128];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=6", NULL};
    int cancelled = 0, others = 0;

    e2e_setup(&t, "batchstraylate", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "4", NULL);
    RL_REQUIRE(bt_stub_call(&t, "POST", "/admin/batch_fault",
                            "{\"mode\":\"create_drop_reply\"}") == 200);
    RL_REQUIRE(bt_stub_call(&t, "POST", "/admin/batch_fault",
                            "{\"mode\":\"list_lag\",\"ms\":3000}") == 200);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    bt_spawn(&t, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 60000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_STREQ(e2e_text(&t, "SELECT create_tries || '/' || state FROM "
                                "batches"),
                   "2/completed");
    snprintf(adopted, sizeof(adopted), "%s",
             e2e_text(&t, "SELECT provider_batch_id FROM batches"));
    RL_CHECK_INTEQ(bt_stub_stat(&t, "batches_created"), 2);
    bt_count_strays(&t, adopted, &others, &cancelled);
    RL_CHECK_INTEQ(others, 1);
    RL_CHECK_INTEQ(cancelled, 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "file_reads"), 1);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    bt_check_answered_once(&t, ids, RUNS);
    e2e_teardown(&t);
    RL_TEST_END();
}
