/* Seed 000, "a timeout occurs after collection" / "... after the final
 * database commit": the first worker's ledger thread stalls for 4 s at the
 * step (a delay failpoint), longer than its 2 s lease, while a second
 * worker runs. After collection: the second worker takes the expired
 * lease over and completes the run; the stalled worker's dispatch record
 * is refused when it wakes, so it never calls the model. After the final
 * commit: the run is completed once; the stall only delays the offset and
 * the redelivered event finds the run completed. Either way: one row,
 * one attempt, one generation, one outbox row per channel. */
#include <stdio.h>

#include "faults.h"
#include "rltest.h"

#ifndef STEP
#error "define STEP"
#endif

int
main(void)
{
    struct e2e t;
    char run_id[RL_HEX_SIZE], later[RL_HEX_SIZE], job[160], fp[128];
    int stalled;

    e2e_setup(&t, "fstall", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(fp, sizeof(fp), "RL_FAILPOINTS=%s=delay:4000@1", STEP);
    e2e_produce_event(&t, job, "tenant-a", 0, NULL, run_id);
    e2e_flush(&t);
    stalled = fx_spawn(&t, "consume", fp, NULL);
    RL_REQUIRE(e2e_wait_intf(
        &t, 1, 30000, "SELECT count(*) FROM runs WHERE run_id='%s'", run_id));
    fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 40000,
                             "SELECT count(*) FROM runs WHERE run_id='%s' "
                             "AND status='completed'",
                             run_id));
    e2e_produce_event(&t, job, "tenant-a", 1, NULL, later);
    e2e_flush(&t);
    RL_REQUIRE(fx_settled(&t, 40000));

    fx_check_completed_once(&t, run_id);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "*"), 1);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run_id), 1);
    fx_check_completed_once(&t, later);
    RL_CHECK(e2e_alive(&t, stalled));
    e2e_teardown(&t);
    RL_TEST_END();
}
