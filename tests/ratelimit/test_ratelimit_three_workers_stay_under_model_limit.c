/* A model limit set with the CLI holds for the whole group: three
 * consumers, 300 runs of model stub-1, a limit of 120 requests per 6 s
 * window (`runledger model-limits set --window-seconds 6`, the period
 * shortened so the test takes seconds) under a stub that answers 429 past
 * 150 per sliding 6 s window. Asserts: every run completes with one
 * attempt (none fails for attempts, none is retried), the stub never saw
 * more than 120 requests in any 6 s window and answered no 429, and the
 * limit did defer runs (it was in the way). Fails without the limit: the
 * three workers send as fast as the stub answers, reach its 150 and get
 * 429s, spending attempts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"
#include "rltest.h"

#define EVENTS 300
#define LIMIT 120

int
main(void)
{
    struct e2e t;
    const char *stub_env[] = {"STUB_RPM=150", "STUB_WINDOW_SECONDS=6",
                              "STUB_LATENCY_MS=50", NULL};
    const char *env[] = {"RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_SWEEP_INTERVAL_MS=200",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    const char *bin = getenv("RUNLEDGER_BIN");
    char job[160], cmd[2048];
    int slots[3];
    int64_t t0;
    long max_window;

    e2e_setup(&t, "rl_limit", 3);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    RL_REQUIRE(bin != NULL);
    snprintf(cmd, sizeof(cmd),
             "DATABASE_URL='%s' '%s' model-limits set --model stub-1 "
             "--rpm %d --window-seconds 6 >/dev/null",
             t.database_url, bin, LIMIT);
    RL_CHECK(system(cmd) == 0);

    for (int i = 0; i < EVENTS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_flush(&t);
    t0 = rltest_now_ms();
    for (int i = 0; i < 3; i++)
        slots[i] = e2e_spawn(&t, "consume", env);

    RL_CHECK(e2e_wait_intf(&t, EVENTS, 120000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    max_window = e2e_stub_stat(&t, "max_requests_per_window");
    printf("# %d runs in %.1f s; stub: %ld requests, at most %ld in a 6 s "
           "window (limit %d, stub's 150), %ld answered 429; rate-limit "
           "deferrals %lld\n",
           EVENTS, (double)(rltest_now_ms() - t0) / 1000.0,
           e2e_stub_stat(&t, "requests"), max_window, LIMIT,
           e2e_stub_stat(&t, "rate_limited"),
           (long long)e2e_int(&t, "SELECT coalesce(sum(waits), 0) FROM "
                                  "model_limits"));
    RL_CHECK(max_window <= LIMIT);
    RL_CHECK_INTEQ(e2e_stub_stat(&t, "rate_limited"), 0);
    RL_CHECK_INTEQ(e2e_stub_stat(&t, "requests"), EVENTS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), EVENTS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                               "'failed'"),
                   0);
    RL_CHECK(e2e_int(&t, "SELECT coalesce(sum(waits), 0) FROM "
                         "model_limits") > 0);
    for (int i = 0; i < 3; i++)
        RL_CHECK(e2e_stop(&t, slots[i], 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
