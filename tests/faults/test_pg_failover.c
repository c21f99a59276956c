/* PostgreSQL fails over under load: a private primary with one streaming
 * standby (tests/harness/pg_replica.sh), two consumers given a multi-host
 * URL with target_session_attrs=read-write, the primary killed
 * (immediate) and the standby promoted while runs are in flight.
 *
 * MODE sync: the standby is synchronous, so nothing committed is lost.
 * MODE async: the standby is asynchronous and detached before a wave of
 * events, whose registrations, completions and committed offsets then
 * exist only on the primary that dies: the failover loses them for good
 * unless the consumers read those events again.
 *
 * RESTART (with MODE async): as async, and the consumers are killed (-9) as the
 * primary dies and started again after the promotion: the new ones start
 * from the group's committed offsets, past what the new primary holds.
 *
 * QUIET: no run is in flight at the kill (every offset is committed) and
 * no event arrives after the promotion, as in an operator's quiet hour:
 * no partition delivers anything that would prompt a comparison with the
 * ledger, so the consumers
 * must find the lost registrations on their own (after their new
 * connection, or on their assignment when restarted).
 *
 * EARLY (with MODE async): the standby is detached before the first
 * wave, so the new primary has no consumed position at all for the
 * partitions the consumers registered events on. With RESTART too, the
 * new consumers know only the group's committed offsets: the ledger's
 * time since it keeps positions (positions_kept) is what shows the
 * missing rows were lost.
 *
 * Either way every event's run must complete on the new primary, once,
 * with one distinct notification per channel, and work must resume within
 * 60 s of the kill. Prints the time to resume, the runs lost and the
 * notifications doubled (the same idempotency key delivered twice). */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"
#include "rltest.h"

#ifndef MODE
#define MODE "sync"
#endif
#ifndef RESTART
#define RESTART 0
#endif
#ifndef QUIET
#define QUIET 0
#endif
#ifndef EARLY
#define EARLY 0
#endif

#define WAVE 100               /* events before the detach, and after it */
#define SLOW (QUIET ? 0 : 40)  /* in flight at the kill */
#define AFTER (QUIET ? 0 : 60) /* produced after the promotion */
#define RUNS (2 * WAVE + SLOW + AFTER)
#define CHANNELS 2

static char pair[PATH_MAX];

/* A notification as read from the topic: its idempotency key and a hash
 * of its payload (the run's output: the stub's answer names its
 * generation, so a second generation's notification differs). */
struct note {
    char key[RL_HEX_SIZE + 16];
    uint64_t payload;
};

struct notes {
    long total;
    long distinct;
    struct note *keys;
};

static void
on_note(const rd_kafka_message_t *rkm, void *opaque)
{
    struct notes *n = opaque;

    if (n->total < RUNS * CHANNELS * 4) {
        struct note *k = &n->keys[n->total];
        const unsigned char *b = rkm->payload;

        e2e_header(rkm, "idempotency-key", k->key, sizeof(k->key));
        k->payload = 1469598103934665603ULL; /* FNV-1a */
        for (size_t i = 0; i < rkm->len; i++)
            k->payload = (k->payload ^ b[i]) * 1099511628211ULL;
    }
    n->total++;
}

static int
cmp_key(const void *a, const void *b)
{
    const struct note *x = a, *y = b;

    return strcmp(x->key, y->key);
}

static void
nap_100ms(void)
{
    struct timespec ts = {0, 100 * 1000000L};

    nanosleep(&ts, NULL);
}

static void
produce_wave(struct e2e *t, const char *job, int n, int from, const char *fault)
{
    char run_id[RL_HEX_SIZE];

    for (int i = 0; i < n; i++)
        e2e_produce_event(t, job, i % 2 ? "tenant-a" : "tenant-b", from + i,
                          fault, run_id);
    e2e_flush(t);
}

int
main(void)
{
    struct e2e t;
    struct notes notes = {0, 0, NULL};
    char cwd[PATH_MAX - 64], url[1024];
    char job[4][160];
    int slot[2];
    int64_t killed_ms, resumed_ms = -1, runs, lost, again;
    long answers_differ = 0;
    struct timespec killed_wall;

    rltest_service_env("DATABASE_URL"); /* skip when services are absent */
    RL_REQUIRE(getcwd(cwd, sizeof(cwd)));
    snprintf(pair, sizeof(pair), "%s/failover-%s-%d", cwd, MODE, (int)getpid());
    e2e_replica_pair(pair, MODE, url, sizeof(url));

    e2e_setup_at(&t, "fover" MODE, 2, url, NULL);
    for (int i = 0; i < 4; i++)
        snprintf(job[i], sizeof(job[i]), "job-%s-%d", t.name, i);
    slot[0] = fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=15", NULL);
    slot[1] = fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=15", NULL);

    if (EARLY)
        RL_REQUIRE(e2e_harness("pg_replica.sh", "detach", pair) == 0);
    /* Replicated in both modes, unless EARLY. */
    produce_wave(&t, job[0], WAVE, 0, "[[fault:latency ms=50]]");
    RL_REQUIRE(e2e_wait_completed(&t, job[0], WAVE, 60000));

    /* async: from here on the primary's commits exist nowhere else. The
     * wave completes and its offsets are committed before the kill. */
    if (strncmp(MODE, "async", 5) == 0 && !EARLY)
        RL_REQUIRE(e2e_harness("pg_replica.sh", "detach", pair) == 0);
    produce_wave(&t, job[1], WAVE, WAVE, "[[fault:latency ms=50]]");
    RL_REQUIRE(e2e_wait_completed(&t, job[1], WAVE, 60000));
    RL_REQUIRE(e2e_wait_intf(&t, 1, 60000,
                             "SELECT (count(*) = %d)::int FROM "
                             "outbox_delivered",
                             2 * WAVE * CHANNELS));
    for (int64_t deadline = rltest_now_ms() + 30000;
         e2e_group_lag(&t) != 0 && rltest_now_ms() < deadline;)
        nap_100ms();
    RL_REQUIRE(e2e_group_lag(&t) == 0);

    /* Slow runs, claimed and calling the model when the primary dies.
     * QUIET has none: every event is done and its offset committed, so
     * no partition has anything to deliver again either. */
    if (SLOW > 0) {
        produce_wave(&t, job[2], SLOW, 2 * WAVE, "[[fault:latency ms=1000]]");
        RL_REQUIRE(e2e_wait_intf(&t, 1, 30000,
                                 "SELECT (count(*) = %d)::int FROM runs "
                                 "WHERE job = '%s' AND status = 'running'",
                                 SLOW, job[2]));
    }

    killed_ms = rltest_now_ms();
    clock_gettime(CLOCK_REALTIME, &killed_wall);
    if (RESTART) {
        for (int i = 0; i < 2; i++) {
            kill(t.procs[slot[i]], SIGKILL);
            RL_REQUIRE(e2e_wait_exit(&t, slot[i], 10000) != -1);
        }
    }
    RL_REQUIRE(e2e_harness("pg_replica.sh", "failover", pair) == 0);
    if (RESTART) {
        fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=15", NULL);
        fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=15", NULL);
    }
    /* The test's own connection is to the dead primary: e2e_int pings and
     * reconnects (the multi-host URL leads it to the new primary), the
     * helpers with parameters do not. */
    while (e2e_int(&t, "SELECT 1") != 1 && rltest_now_ms() - killed_ms < 30000)
        nap_100ms();
    if (AFTER > 0)
        produce_wave(&t, job[3], AFTER, 2 * WAVE + SLOW,
                     "[[fault:latency ms=50]]");
    /* Resumed: a run of the last wave completed, or, with no last wave,
     * every run. */
    while (rltest_now_ms() - killed_ms < 90000) {
        if (AFTER > 0 ? e2e_intf(&t,
                                 "SELECT count(*) FROM runs WHERE job = '%s' "
                                 "AND status = 'completed'",
                                 job[3]) > 0
                      : e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                                    "status = 'completed'") == RUNS) {
            resumed_ms = rltest_now_ms() - killed_ms;
            break;
        }
        nap_100ms();
    }
    RL_CHECK(fx_settled(&t, 90000));

    runs = e2e_int(&t, "SELECT count(*) FROM runs WHERE status = 'completed'");
    lost = RUNS - runs;
    notes.keys = calloc(RUNS * CHANNELS * 4, sizeof(notes.keys[0]));
    RL_REQUIRE(notes.keys);
    e2e_read_topic(&t, t.notify, on_note, &notes);
    if (notes.total <= RUNS * CHANNELS * 4) {
        long first = 0;
        int differs = 0;

        /* A key delivered with more than one payload counts once. */
        qsort(notes.keys, (size_t)notes.total, sizeof(notes.keys[0]), cmp_key);
        for (long i = 0; i < notes.total; i++) {
            if (i == 0 || strcmp(notes.keys[i].key, notes.keys[first].key)) {
                answers_differ += differs;
                differs = 0;
                first = i;
                notes.distinct++;
            } else if (notes.keys[i].payload != notes.keys[first].payload) {
                differs = 1;
            }
        }
        answers_differ += differs;
    }
    /* Runs of events read before the kill registered again after it:
     * their registrations were lost, and the completed ones among them
     * generated a second time. */
    again = e2e_intf(&t,
                     "SELECT count(*) FROM runs WHERE job <> '%s' AND "
                     "created_at > to_timestamp(%lld::float8 / 1000)",
                     job[3],
                     (long long)killed_wall.tv_sec * 1000 +
                         killed_wall.tv_nsec / 1000000L);
    fprintf(
        stderr,
        "failover (%s standby%s%s%s): resumed after %.1f s, %lld of %d runs "
        "lost, %lld runs registered again after the kill, %ld "
        "notifications delivered twice (same idempotency key), %ld "
        "of them with another answer (a receiver that keeps the first "
        "keeps an answer the ledger no longer holds)\n",
        MODE, RESTART ? ", consumers restarted" : "",
        QUIET ? ", no event after" : "",
        EARLY ? ", detached before any event" : "", resumed_ms / 1000.0,
        (long long)lost, RUNS, (long long)again, notes.total - notes.distinct,
        answers_differ);
    RL_CHECK(resumed_ms >= 0 && resumed_ms <= 60000);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), RUNS);
    RL_CHECK_INTEQ(lost, 0);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   RUNS * CHANNELS);
    RL_CHECK_INTEQ(notes.distinct, RUNS * CHANNELS);
    free(notes.keys);
    e2e_teardown(&t);
    RL_TEST_END();
}
