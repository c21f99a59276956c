/* A download longer than the batch's lease is read by one worker: two
 * workers, a 5 s batch lease, output and error files each sent over 12 s
 * (STUB_FILE_CONTENT_SECONDS). The reader renews the lease while the file
 * arrives, so the other worker never polls the batch and reads it too;
 * every act on a line is fenced by that lease. Each file is downloaded
 * once; the 3 refused lines fail their runs with one dead letter each;
 * the batch's counts are 3 answered and 3 failed. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 6

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5",
                                    "STUB_FILE_CONTENT_SECONDS=12", NULL};

    e2e_setup(&t, "batchslowread", 2);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "6", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i,
                          i % 2 ? "[[fault:400]]" : NULL, ids[i]);
    e2e_flush(&t);
    bt_spawn(&t, NULL);
    bt_spawn(&t, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 120000,
                             "SELECT count(*) FROM batches WHERE state = "
                             "'completed'"));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(bt_stub_stat(&t, "file_reads"), 2);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT lines_ok || '/' || lines_failed || "
                                "'/' || lines_ignored FROM batches"),
                   "3/3/0");
    for (int i = 0; i < RUNS; i++) {
        if (i % 2) {
            RL_CHECK_STREQ(e2e_textf(&t,
                                     "SELECT status || '/' || error_class "
                                     "FROM runs WHERE run_id = '%s'",
                                     ids[i]),
                           "failed/model_rejected");
            RL_CHECK_INTEQ(fx_dead_letters(&t, NULL, ids[i]), 1);
        } else {
            fx_check_completed_once(&t, ids[i]);
        }
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
