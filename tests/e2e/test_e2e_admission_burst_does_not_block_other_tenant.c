/* Admission never waits for a model slot, and slots go round-robin
 * across tenants. One consumer with RUNLEDGER_MAX_IN_FLIGHT=4, a stub
 * answering after 200 ms, one partition: tenant A's 200 events, then
 * tenant B's 5 behind them. Asserts: B's 5 runs are registered within 10 s
 * and every offset is committed within 15 s, while A's burst (200 calls,
 * 4 at a time: 10 s of calls at the least) is far from done; B's runs
 * complete while at most half of A's have; all 205 complete, one
 * generation each. On a ledger that claims first-come, B's events wait in
 * the partition behind A's 200 (its partition pauses at the cap) and B
 * completes last. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "e2e.h"
#include "rl/db_conn.h"
#include "rltest.h"

#define A_RUNS 200
#define B_RUNS 5

static long
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int
lag_zero(struct e2e *t, void *opaque)
{
    (void)opaque;
    return e2e_group_lag(t) == 0;
}

int
main(void)
{
    struct e2e t;
    const char *stub_env[] = {"STUB_LATENCY_MS=200", NULL};
    const char *env[] = {"RUNLEDGER_MAX_IN_FLIGHT=4",
                         "RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    char job_a[160], job_b[160];
    long start, registered_ms = -1, lag_ms = -1, b_done_ms = -1;
    int64_t a_done_at_b = -1;
    int slot;

    e2e_setup(&t, "e2e_admit", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job_a, sizeof(job_a), "a-%s", t.name);
    snprintf(job_b, sizeof(job_b), "b-%s", t.name);
    for (int i = 0; i < A_RUNS; i++)
        e2e_produce_event(&t, job_a, "tenant-a", i, NULL, NULL);
    e2e_flush(&t);
    for (int i = 0; i < B_RUNS; i++)
        e2e_produce_event(&t, job_b, "tenant-b", i, NULL, NULL);
    e2e_flush(&t);

    start = now_ms();
    slot = e2e_spawn(&t, "consume", env);
    if (e2e_wait_intf(&t, B_RUNS, 10000,
                      "SELECT count(*) FROM runs WHERE tenant = 'tenant-b'"))
        registered_ms = now_ms() - start;
    /* B's completion first: the offsets are committed on librdkafka's
     * auto-commit interval (5 s by default), and by then A's burst is well
     * on its way whatever order B's runs went in. */
    if (e2e_wait_intf(&t, B_RUNS, 30000,
                      "SELECT count(*) FROM runs WHERE tenant = 'tenant-b' "
                      "AND status = 'completed'")) {
        b_done_ms = now_ms() - start;
        a_done_at_b = e2e_int(&t, "SELECT count(*) FROM runs WHERE tenant = "
                                  "'tenant-a' AND status = 'completed'");
    }
    if (e2e_wait(lag_zero, &t, NULL, 15000))
        lag_ms = now_ms() - start;
    printf("B registered after %ld ms, B completed after %ld ms with %lld of "
           "A's %d completed, lag 0 after %ld ms\n",
           registered_ms, b_done_ms, (long long)a_done_at_b, A_RUNS, lag_ms);
    RL_CHECK(registered_ms >= 0);
    RL_CHECK(lag_ms >= 0 && lag_ms < 15000);
    RL_CHECK(b_done_ms >= 0);
    RL_CHECK(a_done_at_b >= 0 && a_done_at_b <= A_RUNS / 2);

    RL_CHECK(e2e_wait_intf(&t, A_RUNS + B_RUNS, 90000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"),
                   A_RUNS + B_RUNS);
    RL_CHECK(e2e_stub_stat(&t, "generations") == A_RUNS + B_RUNS);
    RL_CHECK(e2e_stub_stat(&t, "max_in_flight") <= 4);
    RL_CHECK(e2e_stop(&t, slot, 30000));
    RL_CHECK(e2e_group_lag(&t) == 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
