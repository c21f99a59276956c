/* A relay batch short of RUNLEDGER_RELAY_BATCH is followed by a wait, not
 * by another read: rows committed while the batch was out must wake the
 * relay at once, not after RUNLEDGER_RELAY_INTERVAL_MS.
 *
 * One consumer with the interval at 600 s, and its relay's first batch
 * held 5 s after it was produced (relay_after_produce=delay). Run 0
 * completes and its rows go out in that batch; run 1 completes while the
 * batch is held. Asserts: when run 1 is complete, run 0's two rows are
 * leased by the batch and run 1's two are not in it (they are due),
 * nothing is delivered yet, and then all four are
 * delivered within 30 s. Fails on a relay that waits out the interval
 * after a short batch (its wake-up lost or ignored). */
#include <stdio.h>

#include "e2e.h"
#include "rl/runid.h"
#include "rltest.h"

/* A run's outbox rows that no batch holds (due), and those a batch holds
 * (leased: due only when the lease ends). */
#define UNLOCKED                                                               \
    "SELECT count(*) FROM outbox WHERE run_id = '%s' AND due_at <= now()"
#define HELD                                                                   \
    "SELECT count(*) FROM outbox WHERE run_id = '%s' AND due_at > now()"

int
main(void)
{
    struct e2e t;
    const char *env[] = {"RUNLEDGER_RELAY_INTERVAL_MS=600000",
                         "RL_FAILPOINTS=relay_after_produce=delay:5000@1",
                         NULL};
    char job[160], run0[RL_HEX_SIZE], run1[RL_HEX_SIZE];

    e2e_setup(&t, "e2e_rwake", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    e2e_spawn(&t, "consume", env);
    e2e_produce_event(&t, job, "tenant-a", 0, NULL, run0);
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_intf(&t, 2, 60000, HELD, run0));

    e2e_produce_event(&t, job, "tenant-a", 1, NULL, run1);
    e2e_flush(&t);
    RL_CHECK(e2e_wait_completed(&t, job, 2, 30000));
    RL_CHECK_INTEQ(e2e_intf(&t, HELD, run0), 2);
    RL_CHECK_INTEQ(e2e_intf(&t, UNLOCKED, run1), 2);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"), 0);

    RL_CHECK(
        e2e_wait_intf(&t, 4, 30000, "SELECT count(*) FROM outbox_delivered"));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox"), 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
