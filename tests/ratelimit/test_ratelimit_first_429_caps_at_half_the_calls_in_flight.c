/* The adaptive cap (on by default) starts from the calls the worker has
 * in flight, not from one call for the whole group: one consumer, no
 * limit configured, a stub answering after 1.5 s that publishes no
 * rate-limit headers. 16 events of one model are in the topic before the
 * consumer starts, so their calls go out together; the first event's
 * first call is answered 429 (Retry-After 1) after 300 ms, while the 15
 * others are still in flight. The worker counts 16 calls of the model in
 * flight (the refused one included), so the model's row has one throttle
 * and a cap of 8 (at least 6, allowing for calls not yet sent when the
 * 429 came); every run completes and none fails. Fails on 019's
 * rl_model_throttled, which counts only model_calls (empty before the
 * first cap) and sets a cap of 1. */
#include <stdio.h>
#include <string.h>

#include "e2e.h"
#include "rltest.h"

#define EVENTS 16

int
main(void)
{
    struct e2e t;
    const char *stub_env[] = {"STUB_LATENCY_MS=1500", NULL};
    const char *env[] = {"RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    char job[160];
    int slot;
    int64_t cap;

    e2e_setup(&t, "rl_cap", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < EVENTS; i++)
        e2e_produce_event(
            &t, job, "tenant-a", i,
            i == 0 ? "[[fault:429 retry_after=1 ms=300 times=1]]" : NULL, NULL);
    e2e_flush(&t);
    slot = e2e_spawn(&t, "consume", env);

    RL_CHECK(e2e_wait_intf(&t, 1, 30000,
                           "SELECT count(*) FROM model_limits WHERE "
                           "throttles > 0"));
    cap = e2e_int(&t, "SELECT coalesce(min(concurrency_cap), 0) FROM "
                      "model_limits");
    printf("# first cap %lld, stub in flight at most %ld\n", (long long)cap,
           e2e_stub_stat(&t, "max_in_flight"));
    RL_CHECK(cap >= 6);

    RL_CHECK(e2e_wait_intf(&t, EVENTS, 60000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    RL_CHECK_INTEQ(
        e2e_int(&t, "SELECT count(*) FROM runs WHERE status = 'failed'"), 0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT coalesce(sum(throttles), 0) FROM "
                               "model_limits"),
                   1);
    RL_CHECK(e2e_stop(&t, slot, 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
