/* A 200 whose content is empty, whose body is not JSON, or whose body is
 * larger than MODEL_MAX_RESPONSE_BYTES fails the run at once: status
 * failed, error_class invalid_output, 1 attempt, one dead letter, no
 * outbox row. */
#include <stdio.h>

#include "faults.h"
#include "rltest.h"

static const char *const directives[] = {"[[fault:empty]]",
                                         "[[fault:invalid_json]]",
                                         "[[fault:oversize bytes=200000]]"};

int
main(void)
{
    struct e2e t;
    char run_ids[3][RL_HEX_SIZE], job[160];

    e2e_setup(&t, "finvalid", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < 3; i++)
        e2e_produce_event(&t, job, "tenant-a", i, directives[i], run_ids[i]);
    e2e_flush(&t);
    fx_spawn(&t, "consume", "MODEL_MAX_RESPONSE_BYTES=65536", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    for (int i = 0; i < 3; i++) {
        RL_CHECK_STREQ(e2e_textf(&t,
                                 "SELECT status || '/' || error_class FROM "
                                 "runs WHERE run_id='%s' AND output IS NULL",
                                 run_ids[i]),
                       "failed/invalid_output");
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "*"), 1);
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "invalid_output"), 1);
        RL_CHECK_INTEQ(fx_dead_letters(&t, "invalid_output", run_ids[i]), 1);
    }
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox") +
                       e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   0);
    e2e_teardown(&t);
    RL_TEST_END();
}
