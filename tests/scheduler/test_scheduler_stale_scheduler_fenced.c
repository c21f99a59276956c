/* Two schedulers wrongly active at once still give one run per window,
 * and the stale one is fenced.
 *
 * Scheduler A is active and then frozen (SIGSTOP) past its lease; B takes
 * the lease (a new epoch) and publishes. A is thawed (SIGCONT) with its
 * tick in the middle: it may publish the windows it had computed, then its
 * lease renewal or its mark is refused. Asserts: A logs that it lost the
 * lease, every window from creation to the cursor has exactly one run and
 * the job has as many runs as windows. Fails on a stale scheduler whose
 * mark moves the cursor or that publishes a window under another run ID. */
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
    int64_t created, through, gaps[64];
    long ngaps, windows;
    pid_t a, b;
    const char *const fast[] = {"--lease-ms", "3000", NULL};

    e2e_setup(&t, "sch_fence", 2);
    snprintf(job, sizeof(job), "job-%s", t.name);
    sched_set(&t, "every2s", job, "*/2 * * * * *", "PT2S", "all", 0);
    created = sched_created(&t, "every2s");
    e2e_spawn(&t, "consume", NULL);
    a = sched_spawn(&t, "a", 0, fast);
    for (int i = 0; i < 150 && !sched_log_has(&t, "a", "active at lease"); i++)
        sched_sleep_ms(100);
    RL_REQUIRE(sched_log_has(&t, "a", "active at lease"));
    b = sched_spawn(&t, "b", 0, fast);
    sched_sleep_ms(3000);
    kill(a, SIGSTOP);
    for (int i = 0; i < 150 && !sched_log_has(&t, "b", "active at lease"); i++)
        sched_sleep_ms(100);
    RL_CHECK(sched_log_has(&t, "b", "active at lease"));
    sched_sleep_ms(3000);
    kill(a, SIGCONT);
    for (int i = 0; i < 100 && !sched_log_has(&t, "a", "lease"); i++)
        sched_sleep_ms(100);
    sched_sleep_ms(4000);
    RL_CHECK(sched_log_has(&t, "a", "lost the lease") ||
             sched_log_has(&t, "a", "is no longer held"));
    kill(a, SIGTERM);
    kill(b, SIGTERM);
    waitpid(a, NULL, 0);
    waitpid(b, NULL, 0);
    through = sched_through(&t, "every2s");
    windows = (long)((through - (created - created % 2)) / 2);
    RL_CHECK(e2e_wait_intf(&t, windows, 30000,
                           "SELECT count(*) FROM runs WHERE job = '%s'", job));
    ngaps = sched_gaps(&t, "every2s", created, through, gaps, 64);
    RL_CHECK_INTEQ(ngaps, 0);
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM runs WHERE job = '%s'", job),
        windows);
    e2e_teardown(&t);
    RL_TEST_END();
}
