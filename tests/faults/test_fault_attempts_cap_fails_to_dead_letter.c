/* A run that keeps getting 503 stops at RUNLEDGER_MAX_ATTEMPTS (3): status
 * failed, error_class attempts_exhausted, exactly 3 dispatches, no output,
 * no outbox row, one dead letter naming the run, and its offset is
 * committed (the failure is durable). */
#include <stdio.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run_id[RL_HEX_SIZE], job[160];

    e2e_setup(&t, "fcap", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, "[[fault:503]]", run_id);
    e2e_flush(&t);
    fx_spawn(&t, "consume", "RUNLEDGER_MAX_ATTEMPTS=3", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT status || '/' || error_class FROM "
                             "runs WHERE run_id='%s'",
                             run_id),
                   "failed/attempts_exhausted");
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "*"), 3);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "transient"), 3);
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT attempts FROM runs WHERE run_id='%s'", run_id), 3);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id='%s' AND "
                            "output IS NULL",
                            run_id),
                   1);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox") +
                       e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   0);
    RL_CHECK_INTEQ(fx_dead_letters(&t, "attempts_exhausted", run_id), 1);
    RL_CHECK_INTEQ(e2e_group_lag(&t), 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
