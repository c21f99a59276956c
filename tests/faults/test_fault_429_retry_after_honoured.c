/* 429 with Retry-After: 2 is retried, and not before the endpoint said:
 * the retry's dispatch is at least 2 s after the 429 came back, although
 * the configured backoff is 100 ms. The run completes once, with one
 * generation and one outbox row per channel. */
#include <stdio.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run_id[RL_HEX_SIZE], job[160];

    e2e_setup(&t, "f429", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0,
                      "[[fault:429 retry_after=2 times=1]]", run_id);
    e2e_flush(&t);
    fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    fx_check_completed_once(&t, run_id);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "*"), 2);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id='%s' "
                            "AND attempt_no=1 AND outcome='transient' AND "
                            "http_status=429",
                            run_id),
                   1);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "ok"), 1);
    /* Retry-After is honoured: >= 2000 ms between the 429's arrival and
     * the next dispatch (both on the database clock). */
    RL_CHECK(e2e_intf(&t,
                      "SELECT (extract(epoch FROM a2.dispatched_at - "
                      "a1.finished_at) * 1000)::int8 FROM attempts a1 JOIN "
                      "attempts a2 USING (run_id) WHERE run_id='%s' AND "
                      "a1.attempt_no=1 AND a2.attempt_no=2",
                      run_id) >= 2000);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run_id), 1);
    e2e_teardown(&t);
    RL_TEST_END();
}
