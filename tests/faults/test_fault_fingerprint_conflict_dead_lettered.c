/* Same run ID, different effective request (another prompt): the event is
 * dead-lettered with reason fingerprint_conflict, the stored run is
 * untouched (same output, fingerprint, attempts and outbox rows), nothing
 * is dispatched for it, and the offset is committed. Also before the
 * first run finished: a conflicting event never steals or resets it. */
#include <stdio.h>

#include "faults.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run_id[RL_HEX_SIZE], other[RL_HEX_SIZE], job[160], before[160];

    e2e_setup(&t, "fconflict", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, NULL, run_id);
    e2e_flush(&t);
    fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));
    snprintf(before, sizeof(before), "%s",
             e2e_textf(&t,
                       "SELECT md5(output::text) || fingerprint || "
                       "attempts || lease_epoch FROM runs WHERE run_id='%s'",
                       run_id));

    /* Same job, tenant, time and version; another prompt. */
    e2e_produce_event(&t, job, "tenant-a", 0, "and also translate it", other);
    e2e_flush(&t);
    RL_CHECK_STREQ(other, run_id);
    RL_CHECK_INTEQ(fx_dead_letters(&t, "fingerprint_conflict", run_id), 1);
    RL_REQUIRE(fx_settled(&t, 40000));
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT md5(output::text) || fingerprint || "
                             "attempts || lease_epoch FROM runs WHERE "
                             "run_id='%s'",
                             run_id),
                   before);
    fx_check_completed_once(&t, run_id);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "*"), 1);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run_id), 1);
    RL_CHECK_INTEQ(e2e_group_lag(&t), 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
