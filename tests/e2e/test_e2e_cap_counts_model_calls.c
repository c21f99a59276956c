/* RUNLEDGER_MAX_IN_FLIGHT caps the model calls in flight, not the runs a
 * process holds: a call's slot is free as soon as its answer is back,
 * while the answer waits for its completion, and the process holds at
 * most twice the cap leased. Admission does not wait for a slot: every
 * event is registered, pending, and its offset committed.
 *
 * One consumer with a cap of 4, a stub of the test's own answering after
 * 300 ms, 12 events on one partition, and the test holding the outbox
 * locked (LOCK TABLE outbox IN EXCLUSIVE MODE), so no completion can
 * commit. Asserts: 8 runs are dispatched (the first 4 calls answered and
 * waiting for their completion, 4 more sent meanwhile), none completes,
 * and no 9th is dispatched or leased while those 8 are held, while the 4
 * others are registered pending (their offsets wait for the earlier runs
 * of the partition); once
 * the lock is released, all 12 complete with one attempt each and their
 * two notifications, every offset is committed, and the stub saw at most
 * 4 calls at once, and 4. Fails on a cap that counts held runs (4
 * dispatched while the completions wait) and on a process that holds more
 * than twice the cap. */
#include <stdio.h>
#include <string.h>

#include "e2e.h"
#include "rl/db_conn.h"
#include "rltest.h"
#include "rltest_db.h"

#define CAP 4
#define EVENTS 12

/* 1 once the stub received every call the ledger recorded (a dispatch is
 * recorded before its request is sent). */
static int
stub_saw_requests(struct e2e *t, void *opaque)
{
    (void)opaque;
    return e2e_stub_stat(t, "requests") >=
           e2e_int(t, "SELECT count(*) FROM attempts");
}

/* 1 once the consumer held more than 2 * CAP runs: leased more or
 * dispatched more. */
static int
held_beyond_bound(struct e2e *t, void *opaque)
{
    (void)opaque;
    return e2e_int(t, "SELECT count(*) FROM runs WHERE status = 'running'") >
               2 * CAP ||
           e2e_int(t, "SELECT count(*) FROM attempts") > 2 * CAP;
}

int
main(void)
{
    struct e2e t;
    struct rl_db *lock_db;
    const char *stub_env[] = {"STUB_LATENCY_MS=300", NULL};
    const char *env[] = {"RUNLEDGER_MAX_IN_FLIGHT=4",
                         "RUNLEDGER_RELAY_INTERVAL_MS=50",
                         "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3", NULL};
    char job[160], value[64], errstr[512];
    int slot;

    e2e_setup(&t, "e2e_cap", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);

    /* The test's own session holds the outbox: every completion statement
     * queues its notifications there, so it waits until the lock goes. */
    lock_db = rl_db_connect(t.database_url, errstr, sizeof(errstr));
    RL_REQUIRE(lock_db != NULL);
    RL_REQUIRE(rl_db_exec(lock_db, "BEGIN", 0, NULL, value, sizeof(value),
                          errstr, sizeof(errstr)) >= 0);
    RL_REQUIRE(rl_db_exec(lock_db, "LOCK TABLE outbox IN EXCLUSIVE MODE", 0,
                          NULL, value, sizeof(value), errstr,
                          sizeof(errstr)) >= 0);

    for (int i = 0; i < EVENTS; i++)
        e2e_produce_event(&t, job, "tenant-a", i, NULL, NULL);
    e2e_flush(&t);
    slot = e2e_spawn(&t, "consume", env);

    /* The first 4 calls answered and wait for their completion; their
     * slots took 4 more calls, whose answers wait too. */
    RL_CHECK(
        e2e_wait_intf(&t, 2 * CAP, 30000, "SELECT count(*) FROM attempts"));
    RL_CHECK(e2e_wait(stub_saw_requests, &t, NULL, 10000));
    RL_CHECK(e2e_stub_stat(&t, "requests") == 2 * CAP);
    RL_CHECK_INTEQ(
        e2e_int(&t, "SELECT count(*) FROM runs WHERE status = 'completed'"), 0);

    /* Held: 8 runs, the bound. Nothing signals that a 9th will not come,
     * so the bound is watched for two seconds (six call latencies) while
     * the 4 events left are in the topic for the taking. */
    RL_CHECK(!e2e_wait(held_beyond_bound, &t, NULL, 2000));
    RL_CHECK_INTEQ(
        e2e_int(&t, "SELECT count(*) FROM runs WHERE status = 'running'"),
        2 * CAP);
    RL_CHECK_INTEQ(
        e2e_int(&t, "SELECT count(*) FROM runs WHERE status = 'pending'"),
        EVENTS - 2 * CAP);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), 2 * CAP);
    RL_CHECK(e2e_stub_stat(&t, "in_flight") == 0);

    RL_REQUIRE(rl_db_exec(lock_db, "COMMIT", 0, NULL, value, sizeof(value),
                          errstr, sizeof(errstr)) >= 0);
    rl_db_destroy(lock_db);

    RL_CHECK(e2e_wait_completed_and_delivered(&t, job, EVENTS));
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts"), EVENTS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM attempts WHERE "
                               "outcome = 'ok'"),
                   EVENTS);
    RL_CHECK(e2e_stub_stat(&t, "max_in_flight") == CAP);
    RL_CHECK(e2e_stub_stat(&t, "generations") == EVENTS);

    RL_CHECK(e2e_stop(&t, slot, 30000));
    RL_CHECK(e2e_group_lag(&t) == 0);

    e2e_teardown(&t);
    RL_TEST_END();
}
