/* A three-node Kafka cluster of the test's own (replication factor 3,
 * min.insync.replicas 2), topics of 6 partitions, three `runledger
 * consume` processes (each with its relay thread, as deployed) and a stub
 * model of the test's own answering in 200-400 ms. Schedule events are
 * published at a steady 60 a second all along. Under that load:
 *
 *   1. the node leading the busiest partitions (the most messages, from
 *      metadata and the high watermarks) is killed with SIGKILL; the test
 *      waits until progress resumes, then restarts it and waits until
 *      every replica is back in sync;
 *   2. the node coordinating the consumer group (DescribeConsumerGroups)
 *      is killed the same way, awaited, restarted.
 *
 * Progress has resumed when, for every schedule partition the dead node
 * led, a run from an offset written after the kill completed and its
 * notification was delivered, every notification partition it led grew
 * (the relays write to its new leader), and the group committed offsets
 * past those it had committed at the kill. All must hold within 30 s of
 * the kill.
 *
 * Then publishing stops and, once idle, the test asserts: every event is
 * one run completed exactly once in the ledger (one accepted attempt),
 * each run's two notifications are in the outbox's delivered rows and on
 * the notification topic exactly once (read back whole, counted by the
 * idempotency-key header the relay sets), the group committed every
 * offset. It prints one figure line: events, the node and time to resume
 * after each kill, lost, doubled notifications, extra model calls. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "rltest.h"

#define PARTITIONS 6
#define RATE_PER_S 60
#define MIN_EVENTS 2400
#define RESUME_LIMIT_MS 30000
#define CONSUMERS 3

static const char *const consumer_env[] = {
    "RUNLEDGER_LOG_LEVEL=info",
    "RUNLEDGER_KAFKA_AUTO_COMMIT_INTERVAL_MS=1000",
    NULL,
};

static const char *const stub_env[] = {
    "STUB_LATENCY_MS=200",
    "STUB_LATENCY_JITTER_MS=200",
    NULL,
};

struct kill_figures {
    const char *what;
    int node;
    int npart; /* schedule partitions the node led */
    long consume_ms, commit_ms, notify_ms, resume_ms;
};

static struct e2e t;
static char job[160];
static int produced;
static int64_t started;

static void
nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Publishes what the steady rate says is due by now. */
static void
pace(void)
{
    int64_t due = (rltest_now_ms() - started) * RATE_PER_S / 1000;

    cluster_produce_until(&t, job, &produced, (int)due);
}

/* Waits, publishing all along, until ms have passed. */
static void
pace_for(long ms)
{
    int64_t until = rltest_now_ms() + ms;

    while (rltest_now_ms() < until) {
        pace();
        nap_ms(50);
    }
}

/* 1 when every notification partition with a high watermark recorded
 * (>= 0) has a leader other than dead and has grown past it. (librdkafka
 * 2.0's watermark query does not keep its timeout while the leader it
 * asks is dead: only a live leader is asked.) */
static int
notes_advanced(const int64_t *high, int n, int dead)
{
    int leader[CLUSTER_MAX_PARTITIONS], isr[CLUSTER_MAX_PARTITIONS];

    if (cluster_leaders(t.producer, t.notify, leader, isr,
                        CLUSTER_MAX_PARTITIONS) != n)
        return 0;
    for (int p = 0; p < n; p++) {
        int64_t lo, hi;

        if (high[p] < 0)
            continue;
        if (leader[p] < 1 || leader[p] == dead)
            return 0;
        if (rd_kafka_query_watermark_offsets(t.producer, t.notify, p, &lo, &hi,
                                             1000) != 0 ||
            hi <= high[p])
            return 0;
    }
    return 1;
}

/* Kills node, then measures until progress resumes (see the file's
 * comment), for at most twice the limit so a slow resume still gets a
 * figure. The schedule partitions it leads and their high watermarks at
 * the kill are what "written after the kill" means. */
static void
kill_and_await(struct kill_figures *kf)
{
    int leader[CLUSTER_MAX_PARTITIONS], isr[CLUSTER_MAX_PARTITIONS];
    char parts[256] = "{", highs[512] = "{";
    size_t po = 1, ho = 1;
    int64_t committed_at_kill, killed, deadline;
    int64_t note_high[CLUSTER_MAX_PARTITIONS];
    int note_leader[CLUSTER_MAX_PARTITIONS];
    int n, nnote;

    n = cluster_leaders(t.producer, t.topic, leader, isr,
                        CLUSTER_MAX_PARTITIONS);
    RL_REQUIRE(n == PARTITIONS);
    kf->npart = 0;
    for (int p = 0; p < n; p++) {
        int64_t lo, hi;

        if (leader[p] != kf->node)
            continue;
        RL_REQUIRE(rd_kafka_query_watermark_offsets(t.producer, t.topic, p, &lo,
                                                    &hi, 5000) == 0);
        po += (size_t)snprintf(parts + po, sizeof(parts) - po, "%s%d",
                               kf->npart ? "," : "", p);
        ho += (size_t)snprintf(highs + ho, sizeof(highs) - ho, "%s%lld",
                               kf->npart ? "," : "", (long long)hi);
        kf->npart++;
    }
    snprintf(parts + po, sizeof(parts) - po, "}");
    snprintf(highs + ho, sizeof(highs) - ho, "}");
    /* The notification partitions it leads: relays write to them again
     * once their leadership moved. */
    nnote = cluster_leaders(t.producer, t.notify, note_leader, isr,
                            CLUSTER_MAX_PARTITIONS);
    RL_REQUIRE(nnote == PARTITIONS);
    for (int p = 0; p < nnote; p++) {
        int64_t lo;

        note_high[p] = -1;
        if (note_leader[p] == kf->node)
            RL_REQUIRE(rd_kafka_query_watermark_offsets(t.producer, t.notify, p,
                                                        &lo, &note_high[p],
                                                        5000) == 0);
    }
    committed_at_kill = cluster_committed_sum(&t, 10000);
    RL_REQUIRE(committed_at_kill >= 0);

    fprintf(stderr,
            "cluster: %s: kill -9 node %d (leads schedule partitions %s, "
            "high watermarks %s) after %d events\n",
            kf->what, kf->node, parts, highs, produced);
    RL_REQUIRE(cluster_node("kill", kf->node) == 0);
    killed = rltest_now_ms();
    kf->consume_ms = kf->commit_ms = kf->notify_ms = -1;
    deadline = killed + 2 * RESUME_LIMIT_MS;
    while (rltest_now_ms() < deadline &&
           (kf->consume_ms < 0 || kf->commit_ms < 0 || kf->notify_ms < 0)) {
        pace();
        if (kf->consume_ms < 0 &&
            e2e_intf(&t,
                     "SELECT count(*) FROM unnest('%s'::int[], "
                     "'%s'::bigint[]) AS k(p, h) WHERE EXISTS (SELECT 1 "
                     "FROM runs r JOIN outbox_delivered d USING (run_id) "
                     "WHERE r.source_partition = k.p AND r.source_offset "
                     ">= k.h)",
                     parts, highs) == kf->npart)
            kf->consume_ms = (long)(rltest_now_ms() - killed);
        if (kf->notify_ms < 0 && notes_advanced(note_high, nnote, kf->node))
            kf->notify_ms = (long)(rltest_now_ms() - killed);
        if (kf->commit_ms < 0 &&
            cluster_committed_sum(&t, 1000) > committed_at_kill)
            kf->commit_ms = (long)(rltest_now_ms() - killed);
        nap_ms(100);
    }
    kf->resume_ms = -1;
    if (kf->consume_ms >= 0 && kf->commit_ms >= 0 && kf->notify_ms >= 0) {
        kf->resume_ms = kf->consume_ms;
        if (kf->commit_ms > kf->resume_ms)
            kf->resume_ms = kf->commit_ms;
        if (kf->notify_ms > kf->resume_ms)
            kf->resume_ms = kf->notify_ms;
    }
    fprintf(stderr,
            "cluster: %s: node %d: consumption of its partitions resumed "
            "after %ld ms, offset commits after %ld ms, notifications to "
            "its partitions after %ld ms\n",
            kf->what, kf->node, kf->consume_ms, kf->commit_ms, kf->notify_ms);
}

static void
restart_and_sync(int node)
{
    int64_t t0 = rltest_now_ms();

    RL_REQUIRE(cluster_node("restart", node) == 0);
    /* The next kill must find three replicas in sync, or acks=all writes
     * wait for the one restarted. */
    RL_CHECK(cluster_wait_in_sync(&t, 60000));
    fprintf(stderr, "cluster: node %d restarted and in sync after %lld ms\n",
            node, (long long)(rltest_now_ms() - t0));
}

int
main(void)
{
    char cwd[PATH_MAX - 64], dir[PATH_MAX], servers[256];
    struct kill_figures leader_kill = {"leader", 0, 0, -1, -1, -1, -1};
    struct kill_figures coord_kill = {"coordinator", 0, 0, -1, -1, -1, -1};
    int64_t high[CLUSTER_MAX_PARTITIONS];
    int npart, slot[CONSUMERS];
    int64_t completed, ok_runs, doubled_ledger, delivered, extra, lag;
    long total = 0, distinct = 0, doubled = 0, lost;

    RL_REQUIRE(getcwd(cwd, sizeof(cwd)));
    snprintf(dir, sizeof(dir), "%s/cluster-kafka-%d", cwd, (int)getpid());
    cluster_start(dir, servers, sizeof(servers));
    e2e_setup_at(&t, "cluster", PARTITIONS, NULL, servers);
    cluster_grow_topic(&t, t.notify, PARTITIONS);
    cluster_plain_publisher(&t);
    e2e_stub_start(&t, stub_env);
    snprintf(job, sizeof(job), "job-%s", t.name);
    for (int i = 0; i < CONSUMERS; i++)
        slot[i] = e2e_spawn(&t, "consume", consumer_env);

    started = rltest_now_ms();
    /* Steady state first: runs completing and offsets committed. */
    while (e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                       "'completed'") < 300) {
        RL_REQUIRE(rltest_now_ms() - started < 60000);
        pace();
        nap_ms(100);
    }
    RL_REQUIRE(cluster_wait_in_sync(&t, 30000));

    leader_kill.node = cluster_busiest_leader(&t, high, &npart);
    kill_and_await(&leader_kill);
    restart_and_sync(leader_kill.node);
    pace_for(2000);

    coord_kill.node = cluster_coordinator(&t, t.name, 15000);
    RL_REQUIRE(coord_kill.node >= 1);
    kill_and_await(&coord_kill);
    restart_and_sync(coord_kill.node);

    while (produced < MIN_EVENTS) {
        pace();
        nap_ms(50);
    }
    e2e_flush(&t);
    fprintf(stderr, "cluster: %d events published in %lld ms; settling\n",
            produced, (long long)(rltest_now_ms() - started));

    /* Idle: every event a run in a final state, the outbox empty, every
     * offset committed. */
    RL_CHECK(e2e_wait_intf(&t, 1, 90000,
                           "SELECT ((SELECT count(*) FROM runs WHERE status "
                           "IN ('completed','failed','unknown')) = %d AND "
                           "(SELECT count(*) FROM outbox) = 0)::int",
                           produced));
    for (int64_t deadline = rltest_now_ms() + 30000;
         (lag = e2e_group_lag(&t)) != 0 && rltest_now_ms() < deadline;)
        nap_ms(250);
    for (int i = 0; i < CONSUMERS; i++)
        RL_CHECK(e2e_alive(&t, slot[i]));

    completed = e2e_int(&t, "SELECT count(*) FROM runs WHERE status = "
                            "'completed'");
    ok_runs = e2e_int(&t, "SELECT count(DISTINCT run_id) FROM attempts "
                          "WHERE outcome = 'ok'");
    doubled_ledger = e2e_int(&t, "SELECT count(*) FROM (SELECT run_id FROM "
                                 "attempts WHERE outcome = 'ok' GROUP BY "
                                 "run_id HAVING count(*) > 1) d");
    delivered = e2e_int(&t, "SELECT count(DISTINCT (run_id, channel)) FROM "
                            "outbox_delivered");
    extra = cluster_extra_generations(&t);
    cluster_count_notifications(&t, &total, &distinct, &doubled);
    lost = (long)(produced - completed);
    if (distinct < 2L * produced)
        lost += 2L * produced - distinct;

    printf("cluster: events=%d leader_node=%d leader_partitions=%d "
           "leader_resume_ms=%ld coordinator_node=%d "
           "coordinator_partitions=%d coordinator_resume_ms=%ld lost=%ld "
           "doubled_notifications=%ld doubled_completions=%lld "
           "extra_generations=%lld notifications=%ld distinct=%ld\n",
           produced, leader_kill.node, leader_kill.npart, leader_kill.resume_ms,
           coord_kill.node, coord_kill.npart, coord_kill.resume_ms, lost,
           doubled, (long long)doubled_ledger, (long long)extra, total,
           distinct);

    RL_CHECK(leader_kill.resume_ms >= 0 &&
             leader_kill.resume_ms <= RESUME_LIMIT_MS);
    RL_CHECK(coord_kill.resume_ms >= 0 &&
             coord_kill.resume_ms <= RESUME_LIMIT_MS);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM runs"), produced);
    RL_CHECK_INTEQ(completed, produced);
    RL_CHECK_INTEQ(ok_runs, produced);
    RL_CHECK_INTEQ(doubled_ledger, 0);
    RL_CHECK_INTEQ(delivered, 2L * produced);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered"),
                   2L * produced);
    RL_CHECK_INTEQ(distinct, 2L * produced);
    RL_CHECK_INTEQ(doubled, 0);
    RL_CHECK_INTEQ(total, distinct);
    RL_CHECK_INTEQ(lost, 0);
    RL_CHECK_INTEQ(lag, 0);
    e2e_teardown(&t);
    RL_TEST_END();
}
