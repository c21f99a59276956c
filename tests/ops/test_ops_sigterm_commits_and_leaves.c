/* SIGTERM while model calls are in flight (the stub holds each for
 * 3 s): the consumer stops claiming, lets the calls finish within
 * RUNLEDGER_SHUTDOWN_GRACE_SECONDS, commits exactly the durable prefix,
 * leaves the group (no member left: a successor gets the partitions at
 * once, not after a session timeout) and exits 0 within the grace.
 * Then with a grace shorter than the calls: the calls are abandoned, the
 * process still exits 0 promptly, every committed offset belongs to a run
 * the ledger holds, and a successor completes every run. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "ops.h"
#include "rltest.h"

#define RUNS 8

static void
nap(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Every offset below the committed one of each partition has its run in
 * the ledger. */
static int
committed_are_durable(struct e2e *t, int partitions)
{
    int ok = 1;

    for (int p = 0; p < partitions; p++) {
        int64_t committed = ops_committed(t, p);
        int64_t durable;

        if (committed < 0)
            continue;
        durable = e2e_intf(t,
                           "SELECT count(*) FROM runs WHERE source_partition"
                           " = %d AND source_offset < %lld",
                           p, (long long)committed);
        if (durable != committed) {
            fprintf(stderr,
                    "partition %d: committed %lld, durable below it %lld\n", p,
                    (long long)committed, (long long)durable);
            ok = 0;
        }
    }
    return ok;
}

static int
in_flight(struct e2e *t, long want)
{
    return e2e_wait_intf(t, want, 30000,
                         "SELECT count(*) FROM attempts WHERE outcome IS "
                         "NULL");
}

int
main(void)
{
    struct e2e t;
    const char *consume_args[] = {"consume", NULL};
    int slot, status;
    int64_t started, took;

    e2e_setup(&t, "opsterm", 2);

    /* 1: grace long enough: in-flight runs finish. */
    {
        const char *env[] = {"RUNLEDGER_SHUTDOWN_GRACE_SECONDS=10", NULL};

        slot = ops_spawn(&t, consume_args, env);
    }
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, "ops-term", i % 2 ? "tenant-a" : "tenant-b", i,
                          "[[fault:latency ms=3000]]", NULL);
    e2e_flush(&t);
    RL_CHECK(in_flight(&t, RUNS));
    started = rltest_now_ms();
    e2e_signal(&t, slot, SIGTERM, 0);
    status = e2e_wait_exit(&t, slot, 15000);
    took = rltest_now_ms() - started;
    RL_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    RL_CHECK(took < 10000 + 3000);
    RL_CHECK(e2e_intf(&t, "SELECT count(*) FROM runs WHERE status = "
                          "'completed'") == RUNS);
    RL_CHECK(e2e_group_lag(&t) == 0);
    RL_CHECK(committed_are_durable(&t, 2));
    RL_CHECK(ops_group_members(&t) == 0);

    /* 2: grace shorter than the calls: abandoned, exit 0 promptly. */
    {
        const char *env[] = {"RUNLEDGER_SHUTDOWN_GRACE_SECONDS=1", NULL};

        slot = ops_spawn(&t, consume_args, env);
    }
    for (int i = RUNS; i < 2 * RUNS; i++)
        e2e_produce_event(&t, "ops-term", i % 2 ? "tenant-a" : "tenant-b", i,
                          "[[fault:latency ms=6000]]", NULL);
    e2e_flush(&t);
    RL_CHECK(in_flight(&t, RUNS));
    started = rltest_now_ms();
    e2e_signal(&t, slot, SIGTERM, 0);
    status = e2e_wait_exit(&t, slot, 15000);
    took = rltest_now_ms() - started;
    RL_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    RL_CHECK(took < 1000 + 4000);
    RL_CHECK(e2e_intf(&t, "SELECT count(*) FROM runs WHERE status = "
                          "'completed'") == RUNS);
    /* Abandoned attempts are recorded, the runs handed back. */
    RL_CHECK(e2e_intf(&t, "SELECT count(*) FROM attempts WHERE outcome IS "
                          "NULL") == 0);
    RL_CHECK(e2e_intf(&t, "SELECT count(*) FROM runs WHERE status = "
                          "'running'") == 0);
    RL_CHECK(committed_are_durable(&t, 2));
    RL_CHECK(ops_group_members(&t) == 0);

    /* A successor finishes them all. */
    slot = ops_spawn(&t, consume_args, NULL);
    RL_CHECK(e2e_wait_intf(&t, 2 * RUNS, 90000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    nap(100);
    e2e_signal(&t, slot, SIGTERM, 1);
    RL_CHECK(e2e_group_lag(&t) == 0);
    RL_CHECK(committed_are_durable(&t, 2));
    e2e_teardown(&t);
    RL_TEST_END();
}
