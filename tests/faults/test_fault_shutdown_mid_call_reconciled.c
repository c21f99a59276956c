/* A call cut off by shutdown after it was sent, against an endpoint that
 * keeps a record (RUNLEDGER_MODEL_STORED_COMPLETIONS=true, a private stub
 * whose stored completions show 300 ms after they were made).
 *
 * A first consumer sends the run's call; the stub generates and never
 * answers (hang). SIGTERM: after the grace period the call is cancelled,
 * and the run goes back with its attempt still without outcome (not
 * "ambiguous"), exit 0. A second consumer claims it, finds the unsettled
 * attempt, looks it up in the record and adopts the answer: the run
 * completes once with that one attempt (ok, reconciled_at set) and the
 * stub counted one generation. Had the first consumer recorded the
 * attempt ambiguous, retry_once would have sent a second call. */
#include <stdio.h>
#include <time.h>

#include "faults.h"
#include "rl/runid.h"
#include "rltest.h"

int
main(void)
{
    struct e2e t;
    char victim[RL_HEX_SIZE], job[160];
    const char *const stub_env[] = {"STUB_STORE_LAG_MS=300", NULL};
    int64_t deadline;
    int slot;

    e2e_setup(&t, "fsdrec", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_produce_event(&t, job, "tenant-a", 0, "[[fault:hang]]", victim);
    e2e_flush(&t);
    slot = fx_spawn(&t, "consume", "RUNLEDGER_MODEL_STORED_COMPLETIONS=true",
                    "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=1",
                    "MODEL_TIMEOUT_MS=60000", NULL);
    deadline = rltest_now_ms() + 20000;
    while (e2e_stub_generations(&t, victim) < 1 && rltest_now_ms() < deadline) {
        struct timespec ts = {0, 50000000L};

        nanosleep(&ts, NULL);
    }
    RL_REQUIRE(e2e_stub_generations(&t, victim) == 1);
    RL_CHECK(e2e_stop(&t, slot, 30000));
    RL_CHECK_INTEQ(fx_attempts(&t, victim, NULL), 1);
    RL_CHECK_INTEQ(fx_attempts(&t, victim, "*"), 1);
    RL_CHECK_STREQ(
        e2e_textf(&t, "SELECT status FROM runs WHERE run_id='%s'", victim),
        "pending");

    fx_spawn(&t, "consume", "RUNLEDGER_MODEL_STORED_COMPLETIONS=true",
             "RUNLEDGER_RECONCILE_SETTLE_MS=5000", NULL);
    RL_REQUIRE(fx_settled(&t, 30000));
    fx_check_completed_once(&t, victim);
    RL_CHECK_INTEQ(fx_attempts(&t, victim, "*"), 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id='%s' "
                            "AND outcome='ok' AND reconciled_at IS NOT NULL",
                            victim),
                   1);
    RL_CHECK_INTEQ(e2e_stub_generations(&t, victim), 1);
    e2e_teardown(&t);
    RL_TEST_END();
}
