/* A run's deadline measures waiting, not a wait the provider imposed,
 * through a running consumer, the real broker, PostgreSQL and the stub.
 *
 * RUNLEDGER_RUN_DEADLINE_SECONDS is 60. The run's first call gets 429
 * with Retry-After: 3600, which also pauses the model for an hour. The
 * run is then pending, due in an hour, and its deadline moved by the same
 * hour (it still has its 60 s once the wait is over). The hour passes
 * (the run's times and the model's pause shifted back by it): the
 * sweeper claims the run, its second call answers, and it completes,
 * where before it failed with `deadline` at that claim. */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char a[RL_HEX_SIZE], job[160];
    const char *consume_args[] = {"consume", NULL};
    int slot;

    e2e_setup(&t, "opsdeadlinewait", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    {
        const char *env[] = {"RUNLEDGER_RUN_DEADLINE_SECONDS=60",
                             "RUNLEDGER_RELAY_INTERVAL_MS=50", NULL};

        slot = ops_spawn(&t, consume_args, env);
    }
    e2e_produce_event(&t, job, "tenant-d", 0,
                      "[[fault:429 retry_after=3600 times=1]]", a);
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM runs WHERE run_id = '%s'"
                             " AND status = 'pending'"
                             " AND next_attempt_at > now() + interval '50 "
                             "minutes'",
                             a));
    /* Its 60 s of deadline are still ahead once the hour is over. */
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id = '%s'"
                            " AND deadline_at - next_attempt_at"
                            "     BETWEEN interval '50 seconds'"
                            "         AND interval '61 seconds'",
                            a),
                   1);

    /* The hour passes, for the run and for the model the 429 paused. */
    RL_REQUIRE(e2e_int(&t, "WITH u AS (UPDATE model_limits SET paused_until"
                           " = paused_until - interval '1 hour' RETURNING 1)"
                           " SELECT count(*) FROM u") == 1);
    RL_REQUIRE(e2e_intf(&t,
                        "WITH u AS (UPDATE runs"
                        "   SET next_attempt_at = next_attempt_at - "
                        "interval '1 hour',"
                        "       deadline_at = deadline_at - interval '1 hour'"
                        " WHERE run_id = '%s' RETURNING 1)"
                        " SELECT count(*) FROM u",
                        a) == 1);
    RL_CHECK(e2e_wait_completed_and_delivered(&t, job, 1));
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id = '%s'"
                            " AND status = 'completed'",
                            a),
                   1);

    RL_CHECK(e2e_stop(&t, slot, 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
