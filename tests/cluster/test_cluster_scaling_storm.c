/* A scaling storm on a three-node Kafka cluster of the test's own
 * (replication factor 3, min.insync.replicas 2, topics of 6 partitions):
 * schedule events are published at a steady 50 a second while the
 * `runledger consume` processes go 1 -> 2 -> 4 -> 6 -> 5 -> 3 -> 2, one
 * change every 5 to 10 s (seeded by RL_STORM_SEED, default 20261204), as
 * an autoscaler makes them: new pods start, leaving pods get SIGTERM (the
 * newest first, as a ReplicaSet scales down) and are left to exit on
 * their own. Every change rebalances the group; each member revokes its
 * partitions while runs are in flight.
 *
 * At each change the test records the runs in flight (leased, status
 * running in the ledger): the most it sees from the change until the next
 * one or 5 s, whichever is first. Publishing stops at the last change;
 * the test waits until the group's lag is 0 and every run is final.
 *
 * Asserts: nothing lost (every event one completed run, its two
 * notifications delivered and on the topic exactly once, counted by the
 * relay's idempotency-key header), model calls beyond one per run (the
 * stub's generations against the ledger's completions) <= the runs in
 * flight at the revocations summed, lag 0 within 60 s of the last change,
 * and every pod sent SIGTERM exited 0 within the shutdown grace and a
 * margin. Prints one figure line. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "rltest.h"

#define PARTITIONS 6
#define RATE_PER_S 50
#define LAG_LIMIT_MS 60000
#define GRACE_S 25
#define EXIT_LIMIT_MS ((GRACE_S + 10) * 1000L)
#define WINDOW_MS 5000

static const int members[] = {1, 2, 4, 6, 5, 3, 2};
#define STEPS ((int)(sizeof(members) / sizeof(members[0])))

static const char *const consumer_env[] = {
    "RUNLEDGER_LOG_LEVEL=info",
    "RUNLEDGER_KAFKA_AUTO_COMMIT_INTERVAL_MS=1000",
    "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=25",
    NULL,
};

static const char *const stub_env[] = {
    "STUB_LATENCY_MS=300",
    "STUB_LATENCY_JITTER_MS=400",
    NULL,
};

static struct e2e t;
static char job[160];
static int produced;
static int64_t started;

/* Pods: running (oldest first) and sent SIGTERM, not yet exited. */
static int running[8], nrunning;
static struct leaving {
    int slot;
    int64_t since;
} leaving[16];
static int nleaving, exits_bad;
static long max_exit_ms;

static void
nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static void
pace(int stop)
{
    int64_t due = (rltest_now_ms() - started) * RATE_PER_S / 1000;

    if (!stop)
        cluster_produce_until(&t, job, &produced, (int)due);
}

/* Reaps pods that exited after SIGTERM: each must exit 0 within the
 * grace and a margin. */
static void
reap_leaving(void)
{
    for (int i = 0; i < nleaving;) {
        int status = e2e_wait_exit(&t, leaving[i].slot, 0);
        long took = (long)(rltest_now_ms() - leaving[i].since);

        if (status < 0 && took <= EXIT_LIMIT_MS) {
            i++;
            continue;
        }
        if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr,
                    "storm: pod in slot %d after SIGTERM: status %d after "
                    "%ld ms\n",
                    leaving[i].slot, status, took);
            exits_bad++;
            if (status < 0)
                e2e_signal(&t, leaving[i].slot, SIGKILL, 1);
        }
        if (took > max_exit_ms)
            max_exit_ms = took;
        leaving[i] = leaving[--nleaving];
    }
}

/* 1 when the group's lag (in *lag) is 0, every event is a run in a final
 * state and the outbox is empty. */
static int
idle(int64_t *lag)
{
    *lag = e2e_group_lag(&t);
    return *lag == 0 &&
           e2e_intf(&t,
                    "SELECT ((SELECT count(*) FROM runs WHERE status IN "
                    "('completed','failed','unknown')) = %d AND (SELECT "
                    "count(*) FROM outbox) = 0)::int",
                    produced) == 1;
}

static void
scale_to(int n)
{
    while (nrunning < n)
        running[nrunning++] = e2e_spawn(&t, "consume", consumer_env);
    while (nrunning > n) {
        int slot = running[--nrunning];

        RL_REQUIRE(nleaving < (int)(sizeof(leaving) / sizeof(leaving[0])));
        e2e_signal(&t, slot, SIGTERM, 0);
        leaving[nleaving].slot = slot;
        leaving[nleaving].since = rltest_now_ms();
        nleaving++;
    }
}

int
main(void)
{
    char cwd[PATH_MAX - 64], dir[PATH_MAX], servers[256], path[64];
    const char *seed_env = getenv("RL_STORM_SEED");
    unsigned seed =
        seed_env ? (unsigned)strtoul(seed_env, NULL, 10) : 20261204u;
    int64_t in_flight[STEPS] = {0}, bound = 0;
    int64_t last_change, lag = -1, completed, extra, lag_zero_ms = -1;
    long total = 0, distinct = 0, doubled = 0, lost;
    size_t po = 0;

    fprintf(stderr, "storm seed %u (set RL_STORM_SEED to replay)\n", seed);
    RL_REQUIRE(getcwd(cwd, sizeof(cwd)));
    snprintf(dir, sizeof(dir), "%s/storm-kafka-%d", cwd, (int)getpid());
    cluster_start(dir, servers, sizeof(servers));
    e2e_setup_at(&t, "storm", PARTITIONS, NULL, servers);
    cluster_grow_topic(&t, t.notify, PARTITIONS);
    cluster_plain_publisher(&t);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);

    scale_to(members[0]);
    started = rltest_now_ms();
    /* Under load before the first change: runs completing. */
    while (e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                       "'completed'") < 100) {
        RL_REQUIRE(rltest_now_ms() - started < 60000);
        pace(0);
        nap_ms(100);
    }

    last_change = rltest_now_ms();
    for (int step = 1; step < STEPS; step++) {
        int64_t changed, next;

        scale_to(members[step]);
        changed = rltest_now_ms();
        last_change = changed;
        next = changed +
               (step + 1 < STEPS ? 5000 + rand_r(&seed) % 5001 : WINDOW_MS);
        fprintf(stderr, "storm: %d -> %d consumers after %d events\n",
                members[step - 1], members[step], produced);
        if (step + 1 == STEPS)
            e2e_flush(&t);
        while (rltest_now_ms() < next) {
            int64_t r;

            pace(step + 1 == STEPS);
            reap_leaving();
            r = e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                            "'running'");
            if (rltest_now_ms() - changed <= WINDOW_MS && r > in_flight[step])
                in_flight[step] = r;
            if (step + 1 == STEPS && idle(&lag)) {
                lag_zero_ms = rltest_now_ms() - last_change;
                break;
            }
            nap_ms(100);
        }
        bound += in_flight[step];
    }

    /* Lag back to 0: every offset committed, every run final. */
    while (lag_zero_ms < 0 &&
           rltest_now_ms() - last_change < LAG_LIMIT_MS + 30000) {
        reap_leaving();
        if (idle(&lag))
            lag_zero_ms = rltest_now_ms() - last_change;
        else
            nap_ms(250);
    }
    while (nleaving > 0) {
        reap_leaving();
        nap_ms(100);
    }
    for (int i = 0; i < nrunning; i++)
        RL_CHECK(e2e_alive(&t, running[i]));

    completed = e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                            "'completed'");
    extra = cluster_extra_generations(&t);
    cluster_count_notifications(&t, &total, &distinct, &doubled);
    lost = (long)(produced - completed);
    if (distinct < 2L * produced)
        lost += 2L * produced - distinct;
    for (int step = 1; step < STEPS; step++)
        po += (size_t)snprintf(path + po, sizeof(path) - po, "%s%lld",
                               step > 1 ? "," : "", (long long)in_flight[step]);

    printf("storm: events=%d members=1>2>4>6>5>3>2 "
           "in_flight_at_changes=%s bound=%lld extra_generations=%lld "
           "lost=%ld doubled_notifications=%ld lag_zero_ms=%lld "
           "max_exit_ms=%ld bad_exits=%d\n",
           produced, path, (long long)bound, (long long)extra, lost, doubled,
           (long long)lag_zero_ms, max_exit_ms, exits_bad);

    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), produced);
    RL_CHECK_INTEQ(completed, produced);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   2L * produced);
    RL_CHECK_INTEQ(distinct, 2L * produced);
    RL_CHECK_INTEQ(doubled, 0);
    RL_CHECK_INTEQ(lost, 0);
    RL_CHECK(extra >= 0 && extra <= bound);
    RL_CHECK(lag_zero_ms >= 0 && lag_zero_ms <= LAG_LIMIT_MS);
    RL_CHECK_INTEQ(lag, 0);
    RL_CHECK_INTEQ(exits_bad, 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
