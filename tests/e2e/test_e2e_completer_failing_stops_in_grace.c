/* SIGTERM while every completion statement fails: the process exits
 * within the grace period, and the runs it could not complete are not
 * lost.
 *
 * A trigger of the test's own makes every insert into the outbox fail, so
 * each completion statement is refused (an error that may be transient:
 * the completer retries). One consumer, a grace period of 3 s, leases of
 * 4 s, 6 events. Once the 6 answers are back and their completions
 * failing, SIGTERM. Asserts: the process exits within the grace period
 * plus 2 s (printed), no run completed or failed; the completer backed off
 * (fewer than 100 failed statements logged over the seconds it retried).
 * Then the trigger is dropped and a second consumer, once the leases
 * expired, completes all 6 (the answers were never stored, so the next
 * claimer counts an ambiguous dispatch and, by the default retry_once
 * policy, dispatches once more). Fails on a completer that redoes a
 * failing statement until it commits whatever the shutdown: it never
 * exits, and redoes it without pause. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "e2e.h"
#include "rl/db_conn.h"
#include "rltest.h"
#include "rltest_db.h"

#define EVENTS 6
#define GRACE_S 3

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

static void
exec_sql(struct e2e *t, const char *sql)
{
    char value[64], errstr[512];

    RL_REQUIRE(rl_db_exec(t->db, sql, 0, NULL, value, sizeof(value), errstr,
                          sizeof(errstr)) >= 0);
}

int
main(void)
{
    struct e2e t;
    const char *env[] = {"RUNLEDGER_LEASE_SECONDS=4",
                         "RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_SWEEP_INTERVAL_MS=200",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    char job[160], logname[200];
    int64_t t0, took;
    long failed_statements;
    int slot, slot2, status;

    e2e_setup(&t, "e2e_cstop", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    exec_sql(&t, "CREATE FUNCTION refuse_outbox() RETURNS trigger "
                 "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION "
                 "'outbox refused by the test'; END $$");
    exec_sql(&t, "CREATE TRIGGER refuse_outbox BEFORE INSERT ON outbox "
                 "FOR EACH ROW EXECUTE FUNCTION refuse_outbox()");

    for (int i = 0; i < EVENTS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_flush(&t);
    slot = e2e_spawn(&t, "consume", env);
    snprintf(logname, sizeof(logname), "%s.%d.log", t.name, slot);

    RL_CHECK(e2e_wait_intf(&t, EVENTS, 30000,
                           "SELECT count(*) FROM attempts a JOIN runs r "
                           "USING (run_id) WHERE r.job = '%s'",
                           job));
    /* The completer has been failing for two seconds. */
    {
        struct timespec ts = {2, 0};

        nanosleep(&ts, NULL);
    }
    RL_CHECK(count_lines(logname, "could not complete") > 0);

    t0 = rltest_now_ms();
    e2e_signal(&t, slot, SIGTERM, 0);
    status = e2e_wait_exit(&t, slot, 30000);
    took = rltest_now_ms() - t0;
    printf("exited %lld ms after SIGTERM (grace %d s), status %d\n",
           (long long)took, GRACE_S, status);
    RL_CHECK(status != -1);
    /* The grace period plus room for a loaded machine to schedule the
     * exit; a completer that ignores shutdown never exits on its own. */
    RL_CHECK(took <= (GRACE_S + 5) * 1000L);
    failed_statements = count_lines(logname, "could not complete");
    printf("failed completion statements logged: %ld\n", failed_statements);
    RL_CHECK(failed_statements < 100);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE job = '%s' AND "
                            "status IN ('completed', 'failed', 'unknown')",
                            job),
                   0);

    /* Nothing is lost: another worker takes the runs over once their
     * leases expire, and completes them. */
    exec_sql(&t, "DROP TRIGGER refuse_outbox ON outbox");
    slot2 = e2e_spawn(&t, "consume", env);
    RL_CHECK(e2e_wait_completed_and_delivered(&t, job, EVENTS));
    RL_CHECK(e2e_stop(&t, slot2, 30000));

    e2e_teardown(&t);
    RL_TEST_END();
}
