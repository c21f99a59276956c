/* Seed 000, "two workers try to claim the same run concurrently": one
 * logical run published 12 times under different keys (so on every
 * partition) and consumed by two consumer processes at once. Exactly one
 * claim wins: one runs row, one attempt, one generation, one outbox row
 * per channel; every copy is acknowledged (offsets committed). */
#include <stdio.h>

#include "faults.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run_id[RL_HEX_SIZE], job[160], value[2048], key[32];

    e2e_setup(&t, "fclaim2", 4);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_event(value, sizeof(value), job, "tenant-a", 0,
              "[[fault:latency ms=300]]", run_id);
    fx_spawn(&t, "consume", NULL);
    fx_spawn(&t, "consume", NULL);
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        e2e_produce(&t, key, value);
    }
    e2e_flush(&t);
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), 1);
    fx_check_completed_once(&t, run_id);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "*"), 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT lease_epoch FROM runs WHERE "
                            "run_id='%s'",
                            run_id),
                   1);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run_id), 1);
    e2e_teardown(&t);
    RL_TEST_END();
}
