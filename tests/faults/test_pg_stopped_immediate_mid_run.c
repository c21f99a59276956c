/* PostgreSQL (a private instance) stopped with `pg_ctl stop -m immediate`
 * while two consumers have runs in every stage, and restarted 2 s later
 * (crash recovery): the consumers reconnect and redo each interrupted
 * step. Every run completes exactly once, with one outbox row per channel
 * and every notification delivered and every offset committed; every
 * attempt has its outcome, no lease recorded two dispatches (a dispatch
 * record whose COMMIT went through just before the crash is found again,
 * never doubled), and every generation is an attempt row. With 15 s
 * leases a 2 s outage leaves one attempt per run; on a loaded machine a
 * run whose lease ran out meanwhile is taken over, visibly. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"
#include "rltest.h"

#define RUNS 150

int
main(void)
{
    struct e2e t;
    char dir[PATH_MAX], cwd[PATH_MAX - 64], url[512], job[160];
    struct timespec outage = {2, 0};
    static char run_ids[RUNS][RL_HEX_SIZE];
    long one_generation = 0, invisible = 0;

    RL_REQUIRE(getcwd(cwd, sizeof(cwd)));
    snprintf(dir, sizeof(dir), "%s/pgkill-%d", cwd, (int)getpid());
    e2e_private_pg(dir, url, sizeof(url));
    e2e_setup_at(&t, "fpgkill", 2, url, NULL);
    snprintf(job, sizeof(job), "job-%s", t.name);
    fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=15", NULL);
    fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=15", NULL);
    for (int i = 0; i < RUNS; i++)
        e2e_produce_event(&t, job, i % 2 ? "tenant-a" : "tenant-b", i,
                          "[[fault:latency ms=150]]", run_ids[i]);
    e2e_flush(&t);
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT (count(*) >= %d)::int FROM runs WHERE "
                             "status='completed'",
                             RUNS / 4));

    RL_REQUIRE(e2e_harness("pg.sh", "kill", dir) == 0);
    nanosleep(&outage, NULL); /* the outage itself, not a wait */
    RL_REQUIRE(e2e_harness("pg.sh", "restart", dir) == 0);
    RL_REQUIRE(fx_settled(&t, 90000));

    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), RUNS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                               "status='completed'"),
                   RUNS);
    /* Every attempt got its outcome (no process died), and no lease
     * recorded two dispatches: a dispatch whose COMMIT went through just
     * before the crash is found again on the redo, never doubled. */
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts WHERE "
                               "outcome IS NULL"),
                   0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM (SELECT 1 FROM "
                               "attempts GROUP BY run_id, lease_epoch "
                               "HAVING count(*) > 1) d"),
                   0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   RUNS * 2);
    /* A run dispatched again is one whose lease ran out during the outage
     * (another worker took it over): each generation is visible as an
     * attempt of its own. */
    for (int i = 0; i < RUNS; i++) {
        long g = e2e_stub_generations(&t, run_ids[i]);

        if (g == 1)
            one_generation++;
        if (g != fx_attempts(&t, run_ids[i], "*"))
            invisible++;
    }
    RL_CHECK_INTEQ(invisible, 0);
    fprintf(stderr,
            "postgresql restart: %ld of %d runs with one generation, "
            "%lld taken over after their lease ran out during the outage\n",
            one_generation, RUNS,
            (long long)e2e_int(&t, "SELECT count(DISTINCT run_id) FROM "
                                   "attempts WHERE attempt_no > 1"));
    RL_CHECK_INTEQ(e2e_count_with_header(&t, t.notify, NULL, NULL) >= RUNS * 2,
                   1);
    e2e_teardown(&t);
    RL_TEST_END();
}
