/* Policy retry_once against a non-deduplicating endpoint: an ambiguous
 * call (hang past the timeout, or reset after the request was sent) gets
 * exactly one more attempt. When that one succeeds the run completes and
 * the extra generation is visible as one ambiguous attempt (2 generations,
 * 2 attempts); when it is ambiguous again the run is unknown after 2
 * attempts, waiting for an operator, with no output and no outbox row. */
#include <stdio.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char ok_hang[RL_HEX_SIZE], ok_reset[RL_HEX_SIZE], unknown[RL_HEX_SIZE];
    char job[160];

    e2e_setup(&t, "fonce", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, "[[fault:hang times=1]]",
                      ok_hang);
    e2e_produce_event(&t, job, "tenant-a", 1, "[[fault:reset times=1]]",
                      ok_reset);
    e2e_produce_event(&t, job, "tenant-a", 2, "[[fault:close_mid_body]]",
                      unknown);
    e2e_flush(&t);
    fx_spawn(&t, "consume", "RUNLEDGER_AMBIGUOUS_POLICY=retry_once", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    fx_check_completed_once(&t, ok_hang);
    RL_CHECK_INTEQ(fx_attempts(&t, ok_hang, "ambiguous"), 1);
    RL_CHECK_INTEQ(fx_attempts(&t, ok_hang, "*"), 2);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, ok_hang), 2);

    fx_check_completed_once(&t, ok_reset);
    RL_CHECK_INTEQ(fx_attempts(&t, ok_reset, "ambiguous"), 1);
    RL_CHECK_INTEQ(fx_attempts(&t, ok_reset, "*"), 2);

    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT status || '/' || error_class FROM runs "
                             "WHERE run_id='%s' AND output IS NULL",
                             unknown),
                   "unknown/ambiguous");
    RL_CHECK_INTEQ(fx_attempts(&t, unknown, "ambiguous"), 2);
    RL_CHECK_INTEQ(fx_attempts(&t, unknown, "*"), 2);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, unknown), 2);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM outbox_delivered WHERE "
                            "run_id='%s'",
                            unknown),
                   0);
    e2e_teardown(&t);
    RL_TEST_END();
}
