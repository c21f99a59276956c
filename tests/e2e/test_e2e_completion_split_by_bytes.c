/* A completion statement carries at most RUNLEDGER_COMPLETE_MAX_BYTES of
 * answers: a batch over it is split, and every run completes.
 *
 * One consumer with a cap of 64 KiB, 8 events whose answers are 30,000
 * bytes each, and the test holding the outbox locked while they come back,
 * so they wait for their completion together. Asserts: once the lock goes,
 * the consumer logs a split, all 8 runs complete with one attempt each and
 * their notifications, and none fails. Fails on a completer that sends
 * every waiting answer in one statement whatever its size. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "e2e.h"
#include "rl/db_conn.h"
#include "rltest.h"
#include "rltest_db.h"

#define EVENTS 8

static long
count_lines(const char *path, const char *needle)
{
    char line[8192];
    long n = 0;
    FILE *f = fopen(path, "r");

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, needle))
            n++;
    }
    fclose(f);
    return n;
}

int
main(void)
{
    struct e2e t;
    struct rl_db *lock_db;
    const char *env[] = {"RUNLEDGER_COMPLETE_MAX_BYTES=65536",
                         "RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    char job[160], value[64], errstr[512], logname[200];
    struct timespec ts = {1, 0};
    int slot;

    e2e_setup(&t, "e2e_csplit", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    lock_db = rl_db_connect(t.database_url, errstr, sizeof(errstr));
    RL_REQUIRE(lock_db != NULL);
    RL_REQUIRE(rl_db_exec(lock_db, "BEGIN", 0, NULL, value, sizeof(value),
                          errstr, sizeof(errstr)) >= 0);
    RL_REQUIRE(rl_db_exec(lock_db, "LOCK TABLE outbox IN EXCLUSIVE MODE", 0,
                          NULL, value, sizeof(value), errstr,
                          sizeof(errstr)) >= 0);
    for (int i = 0; i < EVENTS; i++)
        e2e_produce_event(&t, job, "tenant-a", i,
                          "[[fault:oversize bytes=30000]]", NULL);
    e2e_flush(&t);
    slot = e2e_spawn(&t, "consume", env);
    snprintf(logname, sizeof(logname), "%s.%d.log", t.name, slot);

    RL_CHECK(e2e_wait_intf(&t, EVENTS, 30000,
                           "SELECT count(*) FROM attempts a JOIN runs r "
                           "USING (run_id) WHERE r.job = '%s'",
                           job));
    nanosleep(&ts, NULL); /* the answers are back and wait */
    RL_REQUIRE(rl_db_exec(lock_db, "COMMIT", 0, NULL, value, sizeof(value),
                          errstr, sizeof(errstr)) >= 0);
    rl_db_destroy(lock_db);

    RL_CHECK(e2e_wait_completed_and_delivered(&t, job, EVENTS));
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts a JOIN runs r "
                            "USING (run_id) WHERE r.job = '%s'",
                            job),
                   EVENTS);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT min(length(output->>'text')) FROM runs "
                            "WHERE job = '%s'",
                            job),
                   30000);
    RL_CHECK(e2e_stop(&t, slot, 30000));
    printf("splits logged: %ld\n", count_lines(logname, "splitting"));
    RL_CHECK(count_lines(logname, "splitting") > 0);

    e2e_teardown(&t);
    RL_TEST_END();
}
