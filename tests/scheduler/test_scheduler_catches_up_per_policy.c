/* A scheduler stopped across 5 windows catches up per each schedule's
 * policy when it runs again.
 *
 * Three schedules with a window every 2 s, catch-up skip, latest and all,
 * one consumer. The scheduler runs, is stopped (SIGTERM) for 12 s (at
 * least 5 windows), runs again for a few windows. Asserts, over the
 * schedules' windows from creation to their cursor: "all" has no window
 * without a run; "skip" misses at least 5 (the downtime); "latest" misses
 * exactly the windows "skip" misses but the last of them. Fails on a
 * policy that publishes more or fewer missed windows than it says. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "rltest.h"
#include "sched_test.h"

#define MAXG 64

int
main(void)
{
    static const char *const names[] = {"skip", "latest", "all"};
    struct e2e t;
    char job[3][160];
    int64_t created[3], through[3], gaps[3][MAXG];
    long ngaps[3];
    pid_t pid;

    e2e_setup(&t, "sch_cu", 2);
    for (int i = 0; i < 3; i++) {
        snprintf(job[i], sizeof(job[i]), "job-%s-%s", t.name, names[i]);
        sched_set(&t, names[i], job[i], "*/2 * * * * *", "PT2S", names[i], 0);
        created[i] = sched_created(&t, names[i]);
    }
    e2e_spawn(&t, "consume", NULL);
    pid = sched_spawn(&t, "a", 0, NULL);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                             "SELECT (count(*) >= 2)::int FROM runs"
                             " WHERE job = '%s'",
                             job[2]));
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    sched_sleep_ms(12000);
    pid = sched_spawn(&t, "b", 0, NULL);
    sched_sleep_ms(6000);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    for (int i = 0; i < 3; i++)
        through[i] = sched_through(&t, names[i]);
    /* The consumer has registered every published window once the "all"
     * schedule's windows are all there. */
    RL_CHECK(e2e_wait_intf(&t, (through[2] - (created[2] - created[2] % 2)) / 2,
                           30000, "SELECT count(*) FROM runs WHERE job = '%s'",
                           job[2]));
    sched_sleep_ms(1000);
    for (int i = 0; i < 3; i++) {
        ngaps[i] =
            sched_gaps(&t, names[i], created[i], through[i], gaps[i], MAXG);
        fprintf(stderr, "%s: %ld windows without a run\n", names[i], ngaps[i]);
    }
    RL_CHECK_INTEQ(ngaps[2], 0);
    RL_CHECK(ngaps[0] >= 5);
    RL_CHECK_INTEQ(ngaps[1], ngaps[0] - 1);
    /* latest publishes the last missed window: its gaps are skip's but
     * the last one. */
    for (long k = 0; k + 1 < ngaps[0] && k < ngaps[1] && k < MAXG; k++)
        RL_CHECK_INTEQ(gaps[1][k], gaps[0][k]);
    e2e_teardown(&t);
    RL_TEST_END();
}
