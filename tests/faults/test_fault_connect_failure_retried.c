/* A connect failure happens before any request byte left: it is retried
 * (outcome not_sent, never counted as ambiguous) and, once the endpoint
 * is reachable, the run completes with exactly one generation. The first
 * worker points at a closed port; a second one at the stub. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char run_id[RL_HEX_SIZE], job[160];
    int slot, status;

    e2e_setup(&t, "fconn", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, NULL, run_id);
    e2e_flush(&t);
    slot = fx_spawn(&t, "consume", "MODEL_BASE_URL=http://127.0.0.1:9/v1",
                    "RUNLEDGER_MAX_ATTEMPTS=100", NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT (count(*) >= 3)::int FROM attempts "
                             "WHERE run_id='%s' AND outcome='not_sent'",
                             run_id));
    status = e2e_signal(&t, slot, SIGTERM, 1);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    RL_CHECK_STREQ(
        e2e_textf(&t, "SELECT status FROM runs WHERE run_id='%s'", run_id),
        "pending");
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT ambiguous_count FROM (SELECT "
                            "rl_ambiguous_attempts('%s') ambiguous_count) a",
                            run_id),
                   0);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run_id), 0);

    fx_spawn(&t, "consume", "RUNLEDGER_MAX_ATTEMPTS=100", NULL);
    RL_REQUIRE(fx_settled(&t, 40000));
    fx_check_completed_once(&t, run_id);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "ok"), 1);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, NULL), 0);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "*"),
                   fx_attempts(&t, run_id, "not_sent") + 1);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, run_id), 1);
    e2e_teardown(&t);
    RL_TEST_END();
}
