/* 500, 502, 503 and 504 are transient: each run below fails twice and is
 * retried from the ledger (next_attempt_at, the sweeper), not by
 * re-consuming Kafka, until it completes: 3 attempts, 2 transient with
 * the status, one generation, one outbox row per channel. */
#include <stdio.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

static const int codes[] = {500, 502, 503, 504};

int
main(void)
{
    struct e2e t;
    char run_ids[4][RL_HEX_SIZE], job[160], directive[64];

    e2e_setup(&t, "f5xx", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < 4; i++) {
        snprintf(directive, sizeof(directive), "[[fault:%d times=2]]",
                 codes[i]);
        e2e_produce_event(&t, job, "tenant-a", i, directive, run_ids[i]);
    }
    e2e_flush(&t);
    fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    for (int i = 0; i < 4; i++) {
        fx_check_completed_once(&t, run_ids[i]);
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "*"), 3);
        RL_CHECK_INTEQ(e2e_intf(&t,
                                "SELECT count(*) FROM attempts WHERE "
                                "run_id='%s' AND outcome='transient' AND "
                                "http_status=%d AND attempt_no <= 2",
                                run_ids[i], codes[i]),
                       2);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, run_ids[i]), 1);
    }
    /* Each attempt had a lease of its own: claims, not redelivery. */
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(DISTINCT (run_id, lease_epoch)) "
                               "FROM attempts"),
                   12);
    RL_CHECK_INTEQ(fx_dead_letters_now(&t, NULL, NULL), 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
