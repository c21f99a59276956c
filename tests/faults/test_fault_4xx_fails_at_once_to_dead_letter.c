/* 400, 401, 403, 404 and 422 are permanent: the run fails after exactly
 * one dispatch (no retry), error_class model_rejected, one dead letter
 * naming the run, nothing in the outbox, offsets committed. */
#include <stdio.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

static const int codes[] = {400, 401, 403, 404, 422};

int
main(void)
{
    struct e2e t;
    char run_ids[5][RL_HEX_SIZE], job[160], directive[64];

    e2e_setup(&t, "f4xx", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < 5; i++) {
        snprintf(directive, sizeof(directive), "[[fault:%d]]", codes[i]);
        e2e_produce_event(&t, job, "tenant-a", i, directive, run_ids[i]);
    }
    e2e_flush(&t);
    fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    for (int i = 0; i < 5; i++) {
        RL_CHECK_STREQ(e2e_textf(&t,
                                 "SELECT status || '/' || error_class FROM "
                                 "runs WHERE run_id='%s'",
                                 run_ids[i]),
                       "failed/model_rejected");
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "*"), 1);
        RL_CHECK_INTEQ(e2e_intf(&t,
                                "SELECT count(*) FROM attempts WHERE "
                                "run_id='%s' AND outcome='permanent' AND "
                                "http_status=%d",
                                run_ids[i], codes[i]),
                       1);
        RL_CHECK_INTEQ(fx_dead_letters(&t, "model_rejected", run_ids[i]), 1);
    }
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox") +
                       e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   0);
    RL_CHECK_INTEQ(e2e_group_lag(&t), 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
