/* `runledger consume` in batch mode stops within its grace while the
 * batcher waits on the provider: SIGTERM while a create hangs (the stub
 * makes it 60 s late; MODEL_TIMEOUT_MS 120 s; grace 3 s). The batcher's
 * call ends when the process begins to stop, its batch is released for
 * another worker (no lease left on it), and the process exits 0 within
 * the grace period, long before the watchdog. Prints the time to exit. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "batch_test.h"
#include "faults.h"
#include "rltest.h"

#define RUNS 4
#define GRACE_MS 3000

int
main(void)
{
    struct e2e t;
    char job[160];
    const char *const stub_env[] = {"STUB_BATCH_CREATE_DELAY_MS=60000", NULL};
    int slot, status;
    int64_t started, took;

    e2e_setup(&t, "batchstop", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    bt_batch_set(&t, job, "--window", "60s", "--max-runs", "4", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_flush(&t);
    slot = bt_spawn(&t, "MODEL_TIMEOUT_MS=120000",
                    "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL);
    /* The create begun: the batcher waits in it. */
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT count(*) FROM batches WHERE "
                             "create_tries = 1 AND lock_owner IS NOT NULL"));
    started = rltest_now_ms();
    e2e_signal(&t, slot, SIGTERM, 0);
    status = e2e_wait_exit(&t, slot, 40000);
    took = rltest_now_ms() - started;
    RL_CHECK(status != -1);
    RL_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    RL_CHECK(took <= GRACE_MS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM batches WHERE "
                               "lock_owner IS NOT NULL"),
                   0);
    printf("batch-mode shutdown: exited %lld ms after SIGTERM (grace %d ms), "
           "status %d\n",
           (long long)took, GRACE_MS,
           status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    e2e_teardown(&t);
    RL_TEST_END();
}
