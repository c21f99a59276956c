/* Every batch expires at the stub (STUB_BATCH_EXPIRE_SECONDS=0.5): each
 * run follows its job's --on-expiry, none is lost and none answered
 * twice (RUNLEDGER_MAX_ATTEMPTS=2):
 * - live: attempt 1 transient (batch_expired), attempt 2 a live call: the
 *   run completed once with one generation, under its run ID;
 * - fail: failed with error_class batch_expired after its one attempt;
 * - rebatch: attempt 1 and 2 expired in two batches, then no attempt left:
 *   failed (attempts_exhausted) and dead-lettered.
 * The stub generated only the live calls; no run is left waiting. */
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
    char live[RUNS][RL_HEX_SIZE], fail[RUNS][RL_HEX_SIZE],
        rebatch[RUNS][RL_HEX_SIZE];
    char jl[160], jf[160], jr[160], key[RL_HEX_SIZE + 8];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=30",
                                    "STUB_BATCH_EXPIRE_SECONDS=0.5", NULL};

    e2e_setup(&t, "batchexp", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(jl, sizeof(jl), "live-%s", t.name);
    snprintf(jf, sizeof(jf), "fail-%s", t.name);
    snprintf(jr, sizeof(jr), "rebatch-%s", t.name);
    bt_batch_set(&t, jl, "--window", "500ms", "--on-expiry", "live", NULL);
    bt_batch_set(&t, jf, "--window", "500ms", "--on-expiry", "fail", NULL);
    bt_batch_set(&t, jr, "--window", "500ms", "--on-expiry", "rebatch", NULL);
    for (int i = 0; i < RUNS; i++) {
        e2e_produce_event(&t, jl, "tenant-a", i, NULL, live[i]);
        e2e_produce_event(&t, jf, "tenant-a", i, NULL, fail[i]);
        e2e_produce_event(&t, jr, "tenant-a", i, NULL, rebatch[i]);
    }
    e2e_flush(&t);
    bt_spawn(&t, "RUNLEDGER_MAX_ATTEMPTS=2", NULL);
    RL_REQUIRE(fx_settled(&t, 90000));

    for (int i = 0; i < RUNS; i++) {
        fx_check_completed_once(&t, live[i]);
        RL_CHECK_INTEQ(fx_attempts(&t, live[i], "transient"), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, live[i], "ok"), 1);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, live[i]), 1);
        snprintf(key, sizeof(key), "%.64s:1", live[i]);
        RL_CHECK(e2e_stub_generations(&t, key) <= 0);

        RL_CHECK_STREQ(e2e_textf(&t,
                                 "SELECT status || '/' || error_class FROM "
                                 "runs WHERE run_id = '%s' AND output IS "
                                 "NULL",
                                 fail[i]),
                       "failed/batch_expired");
        RL_CHECK_INTEQ(fx_attempts(&t, fail[i], "*"), 1);

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
        RL_CHECK(fx_dead_letters(&t, NULL, rebatch[i]) >= 1);
    }
    RL_CHECK_INTEQ(bt_stub_stat(&t, "generations"), RUNS);
    RL_CHECK(e2e_int(&t, "SELECT count(*) FROM batches WHERE state = "
                         "'expired'") >= 2);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batches WHERE state "
                               "<> 'expired'"),
                   0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batch_runs WHERE state "
                               "IN ('waiting', 'in_batch')"),
                   0);
    e2e_teardown(&t);
    RL_TEST_END();
}
