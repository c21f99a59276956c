/* Policy park: the first ambiguous call (response cut mid-body, or a hang
 * past the timeout) makes the run unknown at once: 1 attempt, 1
 * generation, no retry, no output, no outbox row, offset committed. */
#include <stdio.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run_ids[2][RL_HEX_SIZE], job[160];

    e2e_setup(&t, "fpark", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0,
                      "[[fault:close_mid_body times=1]]", run_ids[0]);
    e2e_produce_event(&t, job, "tenant-a", 1, "[[fault:hang times=1]]",
                      run_ids[1]);
    e2e_flush(&t);
    fx_spawn(&t, "consume", "RUNLEDGER_AMBIGUOUS_POLICY=park", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    for (int i = 0; i < 2; i++) {
        RL_CHECK_STREQ(e2e_textf(&t,
                                 "SELECT status || '/' || error_class FROM "
                                 "runs WHERE run_id='%s' AND output IS NULL",
                                 run_ids[i]),
                       "unknown/ambiguous");
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "*"), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "ambiguous"), 1);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, run_ids[i]), 1);
    }
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox") +
                       e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   0);
    RL_CHECK_INTEQ(e2e_group_lag(&t), 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
