/* A 429 slows the whole model, not the run that got it: three consumers,
 * no limit configured, a stub allowing 20 requests of model stub-1 per
 * sliding 2 s window and answering 429 with the provider's headers past
 * that. 80 events arrive 10 every 200 ms. Once one worker got a 429 it
 * records a pause on the model's row, and every worker's dispatch
 * statement defers the model's runs until the reset: the stub counts the
 * requests that arrive between a 429 (plus 300 ms for calls already on
 * the way) and the reset it announced, and must count none. Every run
 * completes and none fails. Fails without the shared pause: the runs that
 * arrive during a pause are sent at once by whichever worker claims them,
 * and get 429s of their own. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "e2e.h"
#include "rltest.h"

#define EVENTS 80

int
main(void)
{
    struct e2e t;
    const char *stub_env[] = {"STUB_RPM=20", "STUB_WINDOW_SECONDS=2",
                              "STUB_PAUSE_GRACE_MS=300", NULL};
    const char *env[] = {"RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_MAX_ATTEMPTS=20",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    char job[160];
    int slots[3];

    e2e_setup(&t, "rl_pause", 3);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < 3; i++)
        slots[i] = e2e_spawn(&t, "consume", env);
    /* Let the three join the group before the first event. */
    {
        struct timespec ts = {3, 0};

        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < EVENTS; i++) {
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
        if (i % 10 == 9) {
            struct timespec ts = {0, 200000000L};

            e2e_flush(&t);
            nanosleep(&ts, NULL);
        }
    }
    e2e_flush(&t);

    RL_CHECK(e2e_wait_intf(&t, EVENTS, 120000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    printf("# stub: %ld requests, %ld answered 429, %ld sent during a "
           "pause; ledger: %lld attempts, %lld pauses recorded, %lld "
           "deferrals\n",
           e2e_stub_stat(&t, "requests"), e2e_stub_stat(&t, "requests_429"),
           e2e_stub_stat(&t, "requests_during_pause"),
           (long long)e2e_int(&t, "SELECT count(*) FROM attempts"),
           (long long)e2e_int(&t, "SELECT coalesce(sum(throttles), 0) FROM "
                                  "model_limits"),
           (long long)e2e_int(&t, "SELECT coalesce(sum(waits), 0) FROM "
                                  "model_limits"));
    RL_CHECK(e2e_stub_stat(&t, "requests_429") > 0);
    RL_CHECK_INTEQ(e2e_stub_stat(&t, "requests_during_pause"), 0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                               "'failed'"),
                   0);
    for (int i = 0; i < 3; i++)
        RL_CHECK(e2e_stop(&t, slots[i], 30000));
    e2e_teardown(&t);
    RL_TEST_END();
}
