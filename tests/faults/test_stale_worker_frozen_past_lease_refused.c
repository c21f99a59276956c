/* A consumer frozen (SIGSTOP, by the pause failpoint) after the model
 * answered and before it recorded anything, for longer than its lease and
 * its Kafka session: a second consumer takes the partition and the run
 * over (the unrecorded dispatch is ambiguous; retry_once dispatches once
 * more) and completes it. Then the frozen one is resumed (SIGCONT): it
 * tells the truth about its call (attempt 1 gets its outcome) but its
 * completion is refused: output, completed_at and the outbox stay those of
 * the new owner, the run was completed once, both generations are visible
 * as two attempts. Its stale lease writes are refused (checked directly
 * with its epoch too), its Kafka generation is fenced, and both consumers
 * go on working: three later runs complete and every offset is committed. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "faults.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rl/runid.h"
#include "rltest.h"
#include "rltest_db.h"

int
main(void)
{
    struct e2e t;
    char victim[RL_HEX_SIZE], later[3][RL_HEX_SIZE], job[160];
    char output_md5[64], completed_at[64], stale_worker[160];
    const char *const channels[] = {"email"};
    char errstr[512];
    int64_t stale_epoch;
    int completed = -1;
    int frozen, status;

    e2e_setup(&t, "fstop", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(stale_worker, sizeof(stale_worker), "%s-w0", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, NULL, victim);
    e2e_flush(&t);
    frozen = fx_spawn(&t, "consume",
                      "RL_FAILPOINTS=after_model_response=pause@1", NULL);
    RL_REQUIRE(e2e_wait_stopped(&t, frozen, 30000));
    stale_epoch = e2e_intf(&t,
                           "SELECT lease_epoch FROM runs WHERE "
                           "run_id='%s'",
                           victim);

    fx_spawn(&t, "consume", NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM runs WHERE run_id='%s' "
                             "AND status='completed'",
                             victim));
    RL_REQUIRE(e2e_wait_intf(&t, 2, 20000,
                             "SELECT count(*) FROM outbox_delivered WHERE "
                             "run_id='%s'",
                             victim));
    snprintf(output_md5, sizeof(output_md5), "%s",
             e2e_textf(&t,
                       "SELECT md5(output::text) FROM runs WHERE "
                       "run_id='%s'",
                       victim));
    snprintf(completed_at, sizeof(completed_at), "%s",
             e2e_textf(&t,
                       "SELECT completed_at::text FROM runs WHERE "
                       "run_id='%s'",
                       victim));
    RL_CHECK(e2e_intf(&t, "SELECT lease_epoch FROM runs WHERE run_id='%s'",
                      victim) > stale_epoch);

    /* The stale owner's writes, straight at the ledger. */
    RL_CHECK_INTEQ(rl_db_release(t.db,
                                 &(struct rl_lease){.run_id = victim,
                                                    .worker = stale_worker,
                                                    .epoch = stale_epoch},
                                 0, "x", "x", errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(rl_db_fail(t.db,
                              &(struct rl_lease){.run_id = victim,
                                                 .worker = stale_worker,
                                                 .epoch = stale_epoch},
                              RL_RUN_FAILED, "x", "x", errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(rltest_db_complete(t.db, victim, stale_worker, stale_epoch,
                                      NULL, "{\"text\":\"stale\"}", channels, 1,
                                      &completed, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(completed, 0);

    /* Thaw the frozen worker: it records its call, and is refused. */
    kill(t.procs[frozen], SIGCONT);
    RL_CHECK(e2e_wait_intf(&t, 1, 20000,
                           "SELECT count(*) FROM attempts WHERE run_id='%s' "
                           "AND attempt_no=1 AND outcome='ok'",
                           victim));
    for (int i = 0; i < 3; i++)
        e2e_produce_event(&t, job, "tenant-a", 1 + i, NULL, later[i]);
    e2e_flush(&t);
    RL_REQUIRE(fx_settled(&t, 60000));

    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT md5(output::text) FROM runs WHERE "
                             "run_id='%s'",
                             victim),
                   output_md5);
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT completed_at::text FROM runs WHERE "
                             "run_id='%s'",
                             victim),
                   completed_at);
    fx_check_completed_once(&t, victim);
    RL_CHECK_INTEQ(fx_attempts(&t, victim, "*"), 2);
    RL_CHECK_INTEQ(fx_attempts(&t, victim, "ok"), 2);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, victim), 2);
    /* The accepted output is the new owner's (attempt 2). */
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs r JOIN attempts a "
                            "USING (run_id) WHERE run_id='%s' AND "
                            "a.attempt_no=2 AND a.upstream_request_id = "
                            "r.output->>'upstream_request_id'",
                            victim),
                   1);
    for (int i = 0; i < 3; i++) {
        fx_check_completed_once(&t, later[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(&t, later[i]), 1);
    }
    RL_CHECK(e2e_alive(&t, frozen));
    status = e2e_signal(&t, frozen, SIGTERM, 1);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    RL_CHECK_INTEQ(e2e_group_lag(&t), 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
