/* A batch whose output cannot be read is given up, not retried forever:
 * one line of its output is over the 16 MB line limit (a 17 MB answer),
 * which is refused again however often it is downloaded. The file is
 * downloaded once; the batch ends 'failed' with the reason in its
 * detail; the runs whose answers came before the long line are completed
 * once, and the others follow --on-expiry fail (failed, class
 * batch_unreadable, one dead letter each): no run is left running. */
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
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0.5", NULL};
    int completed = 0, unreadable = 0;

    e2e_setup(&t, "batchunread", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "4", "--on-expiry",
                 "fail", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i,
                          i == 2 ? "[[fault:oversize bytes=17000000]]" : NULL,
                          ids[i]);
    e2e_flush(&t);
    bt_spawn(&t, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 90000,
                             "SELECT count(*) FROM runs WHERE job = '%s' AND "
                             "status IN ('completed', 'failed')",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batches WHERE state = "
                               "'failed' AND detail LIKE '%longer than%'"),
                   1);
    /* Read once: a line over the limit is over it at every read. */
    RL_CHECK_INTEQ(bt_stub_stat(&t, "file_reads"), 1);
    for (int i = 0; i < RUNS; i++) {
        const char *st =
            e2e_textf(&t,
                      "SELECT status || '/' || coalesce(error_class, '') "
                      "FROM runs WHERE run_id = '%s'",
                      ids[i]);

        if (strcmp(st, "completed/") == 0) {
            completed++;
            fx_check_completed_once(&t, ids[i]);
        } else {
            RL_CHECK_STREQ(st, "failed/batch_unreadable");
            RL_CHECK_INTEQ(fx_dead_letters(&t, NULL, ids[i]), 1);
            unreadable++;
        }
    }
    RL_CHECK_STREQ(
        e2e_textf(&t, "SELECT status FROM runs WHERE run_id = '%s'", ids[2]),
        "failed");
    RL_CHECK_INTEQ(completed + unreadable, RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batch_runs WHERE state "
                               "IN ('waiting', 'in_batch')"),
                   0);
    printf("unreadable batch: %d runs completed before the long line, %d "
           "failed per policy, file read %ld time(s)\n",
           completed, unreadable, bt_stub_stat(&t, "file_reads"));
    e2e_teardown(&t);
    RL_TEST_END();
}
