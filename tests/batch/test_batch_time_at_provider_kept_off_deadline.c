/* A run's deadline counts its own waiting, not the hours its batch spent
 * at the provider. Every batch expires at the stub after 8 s
 * (STUB_BATCH_EXPIRE_SECONDS), twice the run deadline
 * (RUNLEDGER_RUN_DEADLINE_SECONDS=4), RUNLEDGER_MAX_ATTEMPTS=2:
 * - on_expiry live: the run goes live and completes once, one generation,
 *   instead of failing "deadline" at the claim after the batch;
 * - on_expiry rebatch: it goes to a second batch, which expires too, and
 *   then fails attempts_exhausted, never "deadline".
 * Fails when the release after a batch keeps the deadline the run was
 * claimed with: every run then fails "deadline" and --on-expiry live or
 * rebatch never takes effect. */
#include <stdio.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 3

int
main(void)
{
    struct e2e t;
    char live[RUNS][RL_HEX_SIZE], rebatch[RUNS][RL_HEX_SIZE];
    char jl[160], jr[160];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=60",
                                    "STUB_BATCH_EXPIRE_SECONDS=8", NULL};

    e2e_setup(&t, "batchdl", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(jl, sizeof(jl), "live-%s", t.name);
    snprintf(jr, sizeof(jr), "rebatch-%s", t.name);
    bt_batch_set(&t, jl, "--window", "500ms", "--on-expiry", "live", NULL);
    bt_batch_set(&t, jr, "--window", "500ms", "--on-expiry", "rebatch", NULL);
    for (int i = 0; i < RUNS; i++) {
        e2e_produce_event(&t, jl, "tenant-a", i, NULL, live[i]);
        e2e_produce_event(&t, jr, "tenant-a", i, NULL, rebatch[i]);
    }
    e2e_flush(&t);
    bt_spawn(&t, "RUNLEDGER_MAX_ATTEMPTS=2", "RUNLEDGER_RUN_DEADLINE_SECONDS=4",
             NULL);
    /* Registered first: "settled" holds trivially before the consumer
     * has read anything. */
    RL_REQUIRE(e2e_wait_intf(&t, 2 * RUNS, 60000, "SELECT count(*) FROM runs"));
    RL_REQUIRE(fx_settled(&t, 120000));

    for (int i = 0; i < RUNS; i++) {
        fx_check_completed_once(&t, live[i]);
        RL_CHECK_INTEQ(fx_attempts(&t, live[i], "transient"), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, live[i], "ok"), 1);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, live[i]), 1);

        RL_CHECK_STREQ(e2e_textf(&t,
                                 "SELECT status || '/' || error_class FROM "
                                 "runs WHERE run_id = '%s' AND output IS "
                                 "NULL",
                                 rebatch[i]),
                       "failed/attempts_exhausted");
        RL_CHECK_INTEQ(fx_attempts(&t, rebatch[i], "transient"), 2);
        RL_CHECK_INTEQ(e2e_intf(&t,
                                "SELECT count(DISTINCT batch_id) FROM "
                                "batch_runs WHERE run_id = '%s'",
                                rebatch[i]),
                       2);
    }
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                               "error_class = 'deadline'"),
                   0);
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    e2e_teardown(&t);
    RL_TEST_END();
}
