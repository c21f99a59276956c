/* Policy dedupe against a deduplicating endpoint (a stub of the test's own
 * with STUB_DEDUPE=1): a call that hangs past MODEL_TIMEOUT_MS, and one
 * whose response is cut mid-body, are ambiguous; each is retried with the
 * same Idempotency-Key, the endpoint replays the first generation, and the
 * run completes with exactly 1 billable generation. */
#include <stdio.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

static const char *const directives[] = {"[[fault:hang times=1]]",
                                         "[[fault:close_mid_body times=1]]",
                                         "[[fault:reset times=1]]"};

int
main(void)
{
    struct e2e t;
    char run_ids[3][RL_HEX_SIZE], job[160];
    const char *const stub_env[] = {"STUB_DEDUPE=1", NULL};

    e2e_setup(&t, "fdedupe", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < 3; i++)
        e2e_produce_event(&t, job, "tenant-a", i, directives[i], run_ids[i]);
    e2e_flush(&t);
    fx_spawn(&t, "consume", "RUNLEDGER_AMBIGUOUS_POLICY=dedupe", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    for (int i = 0; i < 3; i++) {
        fx_check_completed_once(&t, run_ids[i]);
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "ambiguous"), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "ok"), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "*"), 2);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, run_ids[i]), 1);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
