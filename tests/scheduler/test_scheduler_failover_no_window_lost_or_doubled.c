/* Killing the active scheduler lets the standby take over within 15 s,
 * with no window lost or doubled.
 *
 * A schedule with a window every 2 s (catch-up all), two schedulers with
 * the default lease (10 s) and a consumer. The active one is killed with
 * SIGKILL after a few windows. Asserts: the other logs that it is active
 * within 15 s of the kill; after it published a few more windows, every
 * window from the schedule's creation to its cursor has its run, and the
 * job has exactly as many runs as windows. Fails on a standby that never
 * takes over, a takeover that drops the windows of the failover, or
 * windows published under two run IDs. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "rltest.h"
#include "sched_test.h"

int
main(void)
{
    struct e2e t;
    char job[160];
    int64_t created, through, killed_at, took_over = -1, gaps[64];
    long ngaps, windows;
    pid_t a, b;

    e2e_setup(&t, "sch_fo", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    sched_set(&t, "every2s", job, "*/2 * * * * *", "PT2S", "all", 0);
    created = sched_created(&t, "every2s");
    e2e_spawn(&t, "consume", NULL);
    a = sched_spawn(&t, "a", 0, NULL);
    for (int i = 0; i < 150 && !sched_log_has(&t, "a", "active at lease"); i++)
        sched_sleep_ms(100);
    RL_REQUIRE(sched_log_has(&t, "a", "active at lease"));
    b = sched_spawn(&t, "b", 0, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 20000,
                             "SELECT (count(*) >= 3)::int FROM runs"
                             " WHERE job = '%s'",
                             job));
    RL_CHECK(!sched_log_has(&t, "b", "active at lease"));
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    killed_at = rltest_now_ms();
    while (rltest_now_ms() - killed_at < 20000) {
        if (sched_log_has(&t, "b", "active at lease")) {
            took_over = rltest_now_ms() - killed_at;
            break;
        }
        sched_sleep_ms(100);
    }
    fprintf(stderr, "standby took over %lld ms after the kill\n",
            (long long)took_over);
    RL_CHECK(took_over >= 0 && took_over <= 15000);
    /* A few windows under the new scheduler, then a clean stop. */
    sched_sleep_ms(5000);
    kill(b, SIGTERM);
    waitpid(b, NULL, 0);
    through = sched_through(&t, "every2s");
    windows = (long)((through - (created - created % 2)) / 2);
    RL_CHECK(windows >= 8);
    RL_CHECK(e2e_wait_intf(&t, windows, 30000,
                           "SELECT count(*) FROM runs WHERE job = '%s'", job));
    ngaps = sched_gaps(&t, "every2s", created, through, gaps, 64);
    for (long i = 0; i < ngaps && i < 64; i++)
        fprintf(stderr, "window %lld has no run\n", (long long)gaps[i]);
    RL_CHECK_INTEQ(ngaps, 0);
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM runs WHERE job = '%s'", job),
        windows);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(DISTINCT scheduled_at) FROM runs"
                            " WHERE job = '%s'",
                            job),
                   windows);
    e2e_teardown(&t);
    RL_TEST_END();
}
