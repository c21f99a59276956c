/* Seed 000, "queue deduplication expires while the durable run record
 * remains": after five runs completed, a consumer of a brand-new consumer
 * group (no committed offsets: Kafka's memory of what was done is gone)
 * consumes the whole topic again from the beginning. The ledger is the
 * authority: no run is dispatched again (one attempt, one generation
 * each), outputs are unchanged, no outbox row is added, and the new group
 * commits every offset. */
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "faults.h"
#include "rltest.h"

#define RUNS 5

int
main(void)
{
    struct e2e t;
    char run_ids[RUNS][RL_HEX_SIZE], job[160], group[200], group_env[220];
    char before[64];
    int first;

    e2e_setup(&t, "fqgone", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, run_ids[i]);
    e2e_flush(&t);
    first = fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));
    e2e_signal(&t, first, SIGTERM, 1);
    snprintf(before, sizeof(before), "%s",
             e2e_text(&t, "SELECT md5(string_agg(output::text, ',' ORDER "
                          "BY run_id)) FROM runs"));

    snprintf(group, sizeof(group), "%s-fresh", t.name);
    snprintf(group_env, sizeof(group_env), "RUNLEDGER_GROUP_ID=%s", group);
    fx_spawn(&t, "consume", group_env, NULL);
    {
        int64_t deadline = rltest_now_ms() + 40000;

        while (e2e_group_lag_of(&t, group) != 0 && rltest_now_ms() < deadline) {
            struct timespec ts = {0, 200000000L};

            nanosleep(&ts, NULL);
        }
    }
    RL_CHECK_INTEQ(e2e_group_lag_of(&t, group), 0);
    RL_CHECK_STREQ(e2e_text(&t, "SELECT md5(string_agg(output::text, ',' "
                                "ORDER BY run_id)) FROM runs"),
                   before);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), RUNS);
    for (int i = 0; i < RUNS; i++) {
        fx_check_completed_once(&t, run_ids[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, run_ids[i]), 1);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
