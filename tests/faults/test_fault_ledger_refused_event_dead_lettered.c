/* An event the parser accepts but PostgreSQL refuses (here a test-only
 * CHECK constraint on the tenant; in the wild a value jsonb or a column
 * rejects) arrives in one claim batch with 20 good ones. The refusal is
 * not a lost connection: the batch is claimed again one run at a time,
 * the 20 good runs complete once each, and the refused event is
 * dead-lettered with reason rejected_by_ledger and its source offset;
 * nothing is retried forever and every offset is committed. */
#include <stdio.h>

#include "faults.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run_ids[20][RL_HEX_SIZE], poison[RL_HEX_SIZE], job[160];

    e2e_setup(&t, "frefused", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    RL_REQUIRE(e2e_int(&t, "ALTER TABLE runs ADD CONSTRAINT test_poison "
                           "CHECK (tenant <> 'poison')") == 0);
    for (int i = 0; i < 20; i++) {
        e2e_produce_event(&t, job, "tenant-a", i, NULL, run_ids[i]);
        if (i == 10)
            e2e_produce_event(&t, job, "poison", 99, NULL, poison);
    }
    e2e_flush(&t);
    fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));

    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), 20);
    for (int i = 0; i < 20; i++) {
        fx_check_completed_once(&t, run_ids[i]);
        RL_CHECK_INTEQ(fx_attempts(&t, run_ids[i], "*"), 1);
    }
    RL_CHECK_INTEQ(fx_dead_letters(&t, "rejected_by_ledger", poison), 1);
    RL_CHECK_INTEQ(fx_dead_letters_now(&t, NULL, NULL), 1);
    RL_CHECK_INTEQ(e2e_group_lag(&t), 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
