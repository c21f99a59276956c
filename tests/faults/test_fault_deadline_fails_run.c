/* RUNLEDGER_RUN_DEADLINE_SECONDS bounds a run whatever its attempts left:
 * a run that keeps getting 503 with 100 attempts allowed is failed with
 * error_class deadline once 3 s have passed since it was registered, gets
 * a dead letter, and is never dispatched after the deadline. */
#include <stdio.h>

#include "faults.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run_id[RL_HEX_SIZE], job[160];

    e2e_setup(&t, "fdeadline", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, "[[fault:503]]", run_id);
    e2e_flush(&t);
    fx_spawn(&t, "consume", "RUNLEDGER_RUN_DEADLINE_SECONDS=3",
             "RUNLEDGER_MAX_ATTEMPTS=100", "RUNLEDGER_BACKOFF_BASE_MS=200",
             NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT status || '/' || error_class FROM "
                             "runs WHERE run_id='%s'",
                             run_id),
                   "failed/deadline");
    RL_CHECK(fx_attempts(&t, run_id, "*") >= 2);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "*"),
                   fx_attempts(&t, run_id, "transient"));
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts a JOIN runs r "
                            "USING (run_id) WHERE run_id='%s' AND "
                            "a.dispatched_at > r.deadline_at",
                            run_id),
                   0);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id='%s' AND "
                            "updated_at >= deadline_at",
                            run_id),
                   1);
    RL_CHECK_INTEQ(fx_dead_letters(&t, "deadline", run_id), 1);
    e2e_teardown(&t);
    RL_TEST_END();
}
