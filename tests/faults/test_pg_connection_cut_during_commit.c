/* The worker's PostgreSQL connection is cut while its completing
 * transaction (output + outbox + attempt outcome) is in flight: the test
 * holds the run's row lock so the worker's statement blocks inside the
 * transaction, terminates the backend of that statement
 * (pg_terminate_backend; the worker's other connections stay), then lets
 * go. The worker cannot know whether its COMMIT happened; it
 * reconnects and resolves by redoing the guarded, idempotent step, which
 * re-reads the row: the run is completed once, with one attempt (outcome
 * ok), one generation and one outbox row per channel. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "faults.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"

int
main(void)
{
    struct e2e t;
    char run_id[RL_HEX_SIZE], job[160], url[1400], app[64];
    char errstr[512];
    struct rl_db *locker;
    int slot;

    e2e_setup(&t, "fpgcut", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(app, sizeof(app), "cut%d", (int)getpid());
    snprintf(url, sizeof(url), "DATABASE_URL=%s&application_name=%s",
             t.database_url, app);
    e2e_produce_event(&t, job, "tenant-a", 0, NULL, run_id);
    e2e_flush(&t);
    slot = fx_spawn(&t, "consume", url, "RUNLEDGER_RELAY=false",
                    "RUNLEDGER_LEASE_SECONDS=30",
                    "RL_FAILPOINTS=after_model_response=pause@1", NULL);
    RL_REQUIRE(e2e_wait_stopped(&t, slot, 30000));

    locker = rl_db_connect(t.database_url, errstr, sizeof(errstr));
    RL_REQUIRE(locker);
    RL_REQUIRE(rl_db_exec(locker, "BEGIN", 0, NULL, NULL, 0, errstr,
                          sizeof(errstr)) >= 0);
    {
        const char *params[1] = {run_id};

        RL_REQUIRE(rl_db_exec(locker,
                              "SELECT 1 FROM runs WHERE run_id = $1 FOR "
                              "UPDATE",
                              1, params, NULL, 0, errstr, sizeof(errstr)) == 1);
    }
    kill(t.procs[slot], SIGCONT);
    /* The worker is now blocked inside its completing statement. */
    RL_REQUIRE(e2e_wait_intf(&t, 1, 20000,
                             "SELECT count(*) FROM pg_stat_activity WHERE "
                             "application_name='%s' AND wait_event_type="
                             "'Lock'",
                             app));
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM (SELECT "
                            "pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE application_name='%s' AND "
                            "wait_event_type='Lock') k",
                            app),
                   1);
    RL_REQUIRE(rl_db_exec(locker, "ROLLBACK", 0, NULL, NULL, 0, errstr,
                          sizeof(errstr)) >= 0);
    rl_db_destroy(locker);

    fx_spawn(&t, "relay", NULL); /* deliver the outbox */
    RL_REQUIRE(fx_settled(&t, 40000));
    fx_check_completed_once(&t, run_id);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "*"), 1);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "ok"), 1);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run_id), 1);
    RL_CHECK(e2e_alive(&t, slot));
    e2e_teardown(&t);
    RL_TEST_END();
}
