/* A batch given up unread may have generated at the provider: its polls
 * answer 404 (the stub's poll_404 batch fault, as after a key change)
 * while the provider runs it to completion all the same. Its runs go on
 * by --on-expiry rebatch and complete through a second batch; the
 * attempt spent in the batch nobody read is recorded as one that may
 * have generated (ambiguous), so every generation the provider counted
 * for a run is an attempt the ledger shows as such. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 3

int
main(void)
{
    struct e2e t;
    static char ids[RUNS][RL_HEX_SIZE];
    char job[160];
    const char *const stub_env[] = {"STUB_BATCH_SECONDS=0", NULL};

    e2e_setup(&t, "batchgivenupgen", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "3", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, ids[i]);
    e2e_flush(&t);
    RL_REQUIRE(bt_stub_call(&t, "POST", "/admin/batch_fault",
                            "{\"mode\":\"poll_404\",\"times\":1000}") == 200);
    bt_spawn(&t, NULL);
    /* Given up after 5 polls answered 404 in a row; meanwhile another
     * client's list of the provider's batches finds it completed: its
     * lines were generated. */
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM batches WHERE state = "
                             "'submitted'"));
    {
        int64_t until = rltest_now_ms() + 60000;

        while (e2e_int(&t, "SELECT count(*) FROM batches WHERE state = "
                           "'failed'") == 0 &&
               rltest_now_ms() < until) {
            RL_REQUIRE(bt_stub_call(&t, "GET", "/v1/batches", NULL) == 200);
            nanosleep(&(struct timespec){0, 200000000L}, NULL);
        }
    }
    RL_REQUIRE(e2e_int(&t, "SELECT count(*) FROM batches WHERE state = "
                           "'failed'") == 1);
    RL_REQUIRE(bt_stub_call(&t, "DELETE", "/admin/batch_fault", NULL) == 200);
    RL_REQUIRE(e2e_wait_intf(&t, RUNS, 90000,
                             "SELECT count(*) FROM runs WHERE status = "
                             "'completed' AND job = '%s'",
                             job));
    RL_REQUIRE(fx_settled(&t, 60000));

    for (int i = 0; i < RUNS; i++) {
        long gens = 0;
        int64_t may;

        for (int a = 1; a <= 4; a++) {
            char key[RL_HEX_SIZE + 8];
            long g;

            snprintf(key, sizeof(key), "%.64s:%d", ids[i], a);
            g = e2e_stub_generations(&t, key);
            if (g > 0)
                gens += g;
        }
        may = e2e_intf(&t,
                       "SELECT count(*) FROM attempts WHERE run_id = '%s' AND "
                       "(outcome IS NULL OR outcome IN ('ok', 'ambiguous', "
                       "'cancelled', 'lease_lost', 'invalid_output'))",
                       ids[i]);
        RL_CHECK_INTEQ(gens, 2);
        RL_CHECK(gens <= may);
        fx_check_completed_once(&t, ids[i]);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
