/* The heartbeat renews the leases a consumer holds and cancels the calls
 * whose lease was lost, while it holds others. One consumer with a 3 s
 * lease (a heartbeat every second) dispatches two runs whose model calls
 * take 8 s. Once both calls are in flight, run B's lease is stolen in the
 * ledger as another worker would (new owner, epoch + 1). Asserts: within a
 * few seconds the consumer logs B's lost lease and cancels its call (the
 * attempt gets outcome lease_lost long before the 8 s answer); B stays
 * running under the thief, without output or notifications; A's lease is
 * renewed past its first expiry and A completes with one attempt, the
 * epoch it was dispatched under and its two notifications; the consumer
 * never logs "could not renew" (rl_db_renew_leases returns the number of
 * leases held, which is not an error), stays up, and stops cleanly.
 * Regression: heartbeat() once tested `if (err)`, so with a lease held it
 * logged "could not renew N leases", dropped its connection each second
 * and never saw B's lease go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"
#include "rl/runid.h"
#include "rltest.h"

#define CALL_MS 8000
#define LEASE_SECONDS 3

/* Lines of the log file at path containing msg and, when not NULL, run_id
 * (-1 when the file cannot be read). */
static long
log_lines(const char *path, const char *run_id, const char *msg)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t size = 0;
    long n = 0;

    if (!f)
        return -1;
    while (getline(&line, &size, f) >= 0) {
        if (strstr(line, msg) && (!run_id || strstr(line, run_id)))
            n++;
    }
    free(line);
    fclose(f);
    return n;
}

struct log_wait {
    const char *path;
    const char *run_id;
    const char *msg;
    const char *alt; /* another message that will do, or NULL */
};

static int
logged(struct e2e *t, void *opaque)
{
    const struct log_wait *w = opaque;

    (void)t;
    return log_lines(w->path, w->run_id, w->msg) > 0 ||
           (w->alt && log_lines(w->path, w->run_id, w->alt) > 0);
}

static void
print_log(const char *path)
{
    FILE *f = fopen(path, "r");
    char buf[4096];
    size_t got;

    if (!f)
        return;
    fprintf(stderr, "--- %s ---\n", path);
    while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, got, stderr);
    fclose(f);
}

int
main(void)
{
    struct e2e t;
    char a[RL_HEX_SIZE], b[RL_HEX_SIZE], job[160], log[200], worker[160];
    char latency[64], lease[64];
    const char *env[4];
    struct log_wait cancelled, done_with_b;
    int64_t a_epoch, b_epoch, thief_epoch;
    int slot;

    e2e_setup(&t, "e2e_hb", 1);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(latency, sizeof(latency), "[[fault:latency ms=%d]]", CALL_MS);
    e2e_produce_event(&t, job, "tenant-a", 0, latency, a);
    e2e_produce_event(&t, job, "tenant-b", 1, latency, b);
    e2e_flush(&t);

    snprintf(lease, sizeof(lease), "RUNLEDGER_LEASE_SECONDS=%d", LEASE_SECONDS);
    env[0] = lease;
    env[1] = "RUNLEDGER_RELAY_INTERVAL_MS=50";
    env[2] = "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3";
    env[3] = NULL;
    slot = e2e_spawn(&t, "consume", env);
    snprintf(log, sizeof(log), "%s.%d.log", t.name, slot);
    snprintf(worker, sizeof(worker), "%s-w%d", t.name, slot);

    /* Both calls in flight: dispatched, no outcome yet. */
    RL_REQUIRE(e2e_wait_intf(&t, 2, 30000,
                             "SELECT count(*) FROM attempts WHERE run_id IN "
                             "('%s', '%s') AND outcome IS NULL",
                             a, b));
    a_epoch = e2e_intf(&t, "SELECT lease_epoch FROM runs WHERE run_id='%s'", a);
    b_epoch = e2e_intf(&t, "SELECT lease_epoch FROM runs WHERE run_id='%s'", b);
    RL_REQUIRE(a_epoch > 0 && b_epoch > 0);

    /* Another worker takes B over, as a claim after expiry would. */
    thief_epoch = e2e_intf(&t,
                           "UPDATE runs SET lock_owner='thief', "
                           "lease_epoch=lease_epoch+1, "
                           "lock_expires_at=now()+interval '1 hour' "
                           "WHERE run_id='%s' AND status='running' "
                           "RETURNING lease_epoch",
                           b);
    RL_REQUIRE(thief_epoch == b_epoch + 1);

    /* A's lease outlives its first expiry: the heartbeat renewed it. (The
     * call takes 8 s, so A is still running here.) */
    RL_CHECK(e2e_wait_intf(&t, 1, CALL_MS / 2,
                           "SELECT count(*) FROM runs r JOIN attempts a "
                           "USING (run_id) WHERE run_id='%s' AND "
                           "r.lock_owner='%s' AND r.lease_epoch=%lld AND "
                           "r.lock_expires_at > a.dispatched_at + "
                           "make_interval(secs => %d)",
                           a, worker, (long long)a_epoch, LEASE_SECONDS + 1));

    /* The next heartbeat (every lease/3 = 1 s) sees B's lease gone and
     * cancels the call: its outcome is recorded well before the answer
     * would have come. */
    cancelled = (struct log_wait){log, b, "lease lost: cancelling", NULL};
    RL_CHECK(e2e_wait(logged, &t, &cancelled, 5000));
    RL_CHECK(e2e_wait_intf(&t, 1, 5000,
                           "SELECT count(*) FROM attempts WHERE run_id='%s' "
                           "AND outcome='lease_lost' AND finished_at < "
                           "dispatched_at + make_interval(secs => %d)",
                           b, CALL_MS / 1000 - 2));

    /* A completes under the lease it was dispatched with, notified. */
    RL_CHECK(e2e_wait_intf(&t, 1, CALL_MS + 15000,
                           "SELECT count(*) FROM runs WHERE run_id='%s' AND "
                           "status='completed'",
                           a));
    RL_CHECK(e2e_wait_intf(&t, 2, 15000,
                           "SELECT count(*) FROM outbox_delivered WHERE "
                           "run_id='%s'",
                           a));
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id='%s' AND "
                            "output IS NOT NULL AND lock_owner IS NULL AND "
                            "lease_epoch=%lld",
                            a, (long long)a_epoch),
                   1);
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM attempts WHERE run_id='%s'", a), 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM attempts WHERE run_id='%s' "
                            "AND outcome='ok' AND worker='%s' AND "
                            "lease_epoch=%lld",
                            a, worker, (long long)a_epoch),
                   1);
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM outbox WHERE run_id='%s'", a), 0);

    /* B: the worker is done with it (abandoned after the cancel; the old
     * code had its completion refused), and it stays the thief's. */
    done_with_b = (struct log_wait){log, b, "lease lost during the call",
                                    "lease lost: result discarded"};
    RL_CHECK(e2e_wait(logged, &t, &done_with_b, 10000));
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT count(*) FROM runs WHERE run_id='%s' AND "
                            "status='running' AND lock_owner='thief' AND "
                            "lease_epoch=%lld AND output IS NULL AND "
                            "completed_at IS NULL",
                            b, (long long)thief_epoch),
                   1);
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM attempts WHERE run_id='%s'", b), 1);
    RL_CHECK_INTEQ(e2e_intf(&t,
                            "SELECT (SELECT count(*) FROM outbox WHERE "
                            "run_id='%s') + (SELECT count(*) FROM "
                            "outbox_delivered WHERE run_id='%s')",
                            b, b),
                   0);
    RL_CHECK_INTEQ(log_lines(log, b, "lease lost: cancelling"), 1);
    RL_CHECK_INTEQ(log_lines(log, a, "lease lost"), 0);

    /* Renewing held leases is no error: the old code said so each second. */
    RL_CHECK_INTEQ(log_lines(log, NULL, "could not renew"), 0);
    RL_CHECK(e2e_alive(&t, slot));
    RL_CHECK(e2e_stop(&t, slot, 20000));
    if (rltest_failures)
        print_log(log);
    e2e_teardown(&t);
    RL_TEST_END();
}
