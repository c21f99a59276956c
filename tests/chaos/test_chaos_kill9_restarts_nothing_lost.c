/* Chaos: 3 consumer processes, 2 relays and the reference receiver
 * (`runledger receive`) over 5,000 schedule events
 * (4,000 logical runs and 1,000 duplicates: re-published, or the same run
 * with whitespace around its names), on a PostgreSQL and a Kafka broker of
 * the test's own and a stub model of its own. Every 1.5 to 3 s one of the
 * six processes is killed with SIGKILL and started again; once a quarter
 * of the runs completed the broker is killed and restarted, at 60 %
 * PostgreSQL is stopped with -m immediate and restarted. Some runs meet
 * transient faults (500, 429 with Retry-After), some a permanent 400.
 * The schedule (which process, when, which events and faults) comes from
 * RL_CHAOS_SEED (default 20261129), so a failure is reproducible.
 *
 * Then the killing stops, every process runs again, and the test waits
 * until idle and prints one figure line:
 *   events runs completed unknown failed duplicates_suppressed
 *   generations_beyond_one outbox_rows notification_deliveries
 *   distinct_notifications lost
 * Asserts: lost = 0 (every logical run has exactly one row in a final
 * state, every completed run one accepted output and one delivered outbox
 * row per channel, every outbox row on the topic), failed runs are only
 * runs given a 400 and no such run completes, completed outputs per run 1,
 * receiver rows = outbox rows (same keys, same payloads; redeliveries
 * ignored as duplicates), distinct notifications =
 * outbox rows, every generation has an attempt row (extra generations are
 * visible), and the group committed every offset.
 *
 * It takes about 4 minutes on 2 cores, the longest test of the suite:
 * 5,000 events is what makes each of the ~100 kills land on work in
 * flight, and every kill of a group member costs a rebalance (a 6 s
 * session), the broker's and PostgreSQL's restarts more. The sanitizer
 * pass leaves it out (the fault tests run the same crash paths
 * sanitized). */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "e2e.h"
#include "rl/runid.h"
#include "rltest.h"

#define RUNS 4000
#define DUPLICATES 1000
#define EVENTS (RUNS + DUPLICATES)
#define CHANNELS 2

static const char *const consumer_env[] = {
    "RUNLEDGER_RELAY=false",
    "RUNLEDGER_LEASE_SECONDS=3",
    "RUNLEDGER_SWEEP_INTERVAL_MS=200",
    "RUNLEDGER_BACKOFF_BASE_MS=100",
    "RUNLEDGER_BACKOFF_MAX_MS=1000",
    "RUNLEDGER_MAX_ATTEMPTS=8",
    "RUNLEDGER_MAX_IN_FLIGHT=256",
    "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3",
    "RUNLEDGER_KAFKA_SESSION_TIMEOUT_MS=6000",
    "RUNLEDGER_KAFKA_HEARTBEAT_INTERVAL_MS=500",
    "RUNLEDGER_KAFKA_AUTO_COMMIT_INTERVAL_MS=200",
    "MODEL_TIMEOUT_MS=5000",
    "RUNLEDGER_LOG_LEVEL=warn",
    NULL,
};

static const char *const relay_env[] = {
    "RUNLEDGER_RELAY_BATCH=200",
    "RUNLEDGER_RELAY_INTERVAL_MS=50",
    "RUNLEDGER_LOG_LEVEL=warn",
    NULL,
};

#define NPROCS 6 /* slots 0..2 consumers, 3..4 relays, 5 the receiver */

static char receiver_group[160];
/* The receiver is a group member killed with SIGKILL like the others: the
 * same short session lets its successor take the partitions over quickly
 * (with librdkafka's 45 s default each kill would stall it that long). */
static const char *receiver_env[] = {
    receiver_group,
    "RUNLEDGER_KAFKA_SESSION_TIMEOUT_MS=6000",
    "RUNLEDGER_KAFKA_HEARTBEAT_INTERVAL_MS=500",
    "RUNLEDGER_KAFKA_AUTO_COMMIT_INTERVAL_MS=200",
    "RUNLEDGER_LOG_LEVEL=warn",
    NULL,
};

static char run_ids[RUNS][RL_HEX_SIZE];
static int given_400[RUNS];

struct notes {
    long total;
    long distinct;
    long bad;
    char (*keys)[RL_HEX_SIZE + 16];
};

static int
cmp_key(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void
on_note(const rd_kafka_message_t *rkm, void *opaque)
{
    struct notes *n = opaque;
    char key[RL_HEX_SIZE + 16], run_id[RL_HEX_SIZE + 4];

    e2e_header(rkm, "idempotency-key", key, sizeof(key));
    e2e_header(rkm, "run_id", run_id, sizeof(run_id));
    if (strncmp(key, run_id, RL_HEX_SIZE - 1) != 0)
        n->bad++;
    if (n->total < RUNS * CHANNELS * 4)
        snprintf(n->keys[n->total], sizeof(n->keys[0]), "%s", key);
    n->total++;
}

static int
spawn_role(struct e2e *t, int role)
{
    if (role == 5)
        return e2e_spawn(t, "receive", receiver_env);
    return e2e_spawn(t, role < 3 ? "consume" : "relay",
                     role < 3 ? consumer_env : relay_env);
}

static void
nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static const char *
directive_for(unsigned *seed, int i)
{
    int r = rand_r(seed) % 1000;

    given_400[i] = 0;
    if (r < 5) {
        given_400[i] = 1;
        return "[[fault:400]]";
    }
    if (r < 25)
        return "[[fault:500 times=1]]";
    if (r < 35)
        return "[[fault:429 retry_after=1 times=1]]";
    return "[[fault:latency ms=40]]";
}

int
main(void)
{
    struct e2e t;
    char cwd[PATH_MAX - 64], pg_dir[PATH_MAX], kafka_dir[PATH_MAX];
    char pg_url[512], servers[256], job[160], spaced[170], tenant[32];
    static char value[2048];
    static const char *directives[RUNS];
    const char *seed_env = getenv("RL_CHAOS_SEED");
    unsigned seed =
        seed_env ? (unsigned)strtoul(seed_env, NULL, 10) : 20261129u;
    unsigned kill_seed;
    int slot[NPROCS];
    int broker_restarted = 0, pg_restarted = 0;
    long kills = 0;
    int64_t started, next_kill;
    struct notes notes = {0, 0, 0, NULL};
    int64_t runs, completed, unknown, failed, outbox_rows, gens_total = 0;
    int64_t beyond = 0, lost = 0, attempts, ok_outputs, expect_failed = 0;

    fprintf(stderr, "chaos seed %u (set RL_CHAOS_SEED to replay)\n", seed);
    kill_seed = seed * 2654435761u;
    notes.keys = calloc(RUNS * CHANNELS * 4, sizeof(notes.keys[0]));
    RL_REQUIRE(notes.keys);
    RL_REQUIRE(getcwd(cwd, sizeof(cwd)));
    snprintf(pg_dir, sizeof(pg_dir), "%s/chaos-pg-%d", cwd, (int)getpid());
    snprintf(kafka_dir, sizeof(kafka_dir), "%s/chaos-kafka-%d", cwd,
             (int)getpid());
    e2e_private_pg(pg_dir, pg_url, sizeof(pg_url));
    e2e_private_kafka(kafka_dir, servers, sizeof(servers));
    e2e_setup_at(&t, "chaos", 4, pg_url, servers);
    snprintf(receiver_group, sizeof(receiver_group),
             "RUNLEDGER_RECEIVER_GROUP_ID=%s-receiver", t.name);
    e2e_stub_start(&t, NULL);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(spaced, sizeof(spaced), " %s ", job);

    for (int i = 0; i < NPROCS; i++)
        slot[i] = spawn_role(&t, i);
    started = rltest_now_ms();

    /* 4,000 runs, and 1,000 duplicates of earlier ones mixed in. */
    for (int i = 0, dups = 0; i < RUNS; i++) {
        snprintf(tenant, sizeof(tenant), "tenant-%d", i % 13);
        directives[i] = directive_for(&seed, i);
        e2e_event(value, sizeof(value), job, tenant, i, directives[i],
                  run_ids[i]);
        e2e_produce(&t, tenant, value);
        if (dups < DUPLICATES && i > 0 && (i % 4 == 3 || RUNS - i <= 1)) {
            int j = rand_r(&seed) % (i + 1);

            snprintf(tenant, sizeof(tenant), "tenant-%d", j % 13);
            e2e_event(value, sizeof(value), rand_r(&seed) % 2 ? job : spaced,
                      tenant, j, directives[j], NULL);
            e2e_produce(&t, tenant, value);
            dups++;
        }
    }
    e2e_flush(&t);
    for (int i = 0; i < RUNS; i++)
        expect_failed += given_400[i];

    /* The chaos. */
    next_kill = rltest_now_ms() + 1500 + rand_r(&kill_seed) % 1500;
    for (;;) {
        int64_t now = rltest_now_ms();
        int64_t done = e2e_int(&t, "SELECT count(*) FROM runs WHERE status "
                                   "IN ('completed','failed','unknown')");

        if (!broker_restarted && done >= RUNS / 4) {
            fprintf(stderr, "chaos: broker kill -9 at %lld done\n",
                    (long long)done);
            RL_REQUIRE(e2e_harness("kafka.sh", "kill", kafka_dir) == 0);
            nap_ms(1000);
            RL_REQUIRE(e2e_harness("kafka.sh", "restart", kafka_dir) == 0);
            broker_restarted = 1;
        }
        if (!pg_restarted && done >= RUNS * 6 / 10) {
            fprintf(stderr,
                    "chaos: postgresql stop -m immediate at %lld "
                    "done\n",
                    (long long)done);
            RL_REQUIRE(e2e_harness("pg.sh", "kill", pg_dir) == 0);
            nap_ms(1000);
            RL_REQUIRE(e2e_harness("pg.sh", "restart", pg_dir) == 0);
            pg_restarted = 1;
        }
        if (broker_restarted && pg_restarted && done >= RUNS * 9 / 10)
            break;
        if (now - started > 240000) {
            fprintf(stderr, "chaos: still not done after 240 s (%lld)\n",
                    (long long)done);
            break;
        }
        if (now >= next_kill) {
            int victim = rand_r(&kill_seed) % NPROCS;

            e2e_signal(&t, slot[victim], SIGKILL, 1);
            slot[victim] = spawn_role(&t, victim);
            kills++;
            next_kill = now + 1500 + rand_r(&kill_seed) % 1500;
        }
        nap_ms(100);
    }
    fprintf(stderr, "chaos: %ld kills in %lld ms; settling\n", kills,
            (long long)(rltest_now_ms() - started));

    /* Settle: every process alive again, then idle. */
    for (int i = 0; i < NPROCS; i++) {
        if (!e2e_alive(&t, slot[i]))
            slot[i] = spawn_role(&t, i);
    }
    {
        int64_t deadline = rltest_now_ms() + 150000;
        int idle = 0;

        while (!idle && rltest_now_ms() < deadline) {
            idle = e2e_int(&t, "SELECT count(*) FROM runs WHERE status IN "
                               "('pending','running')") == 0 &&
                   e2e_int(&t, "SELECT count(*) FROM outbox") == 0 &&
                   e2e_int(&t, "SELECT count(*) FROM runs") == RUNS &&
                   e2e_group_lag(&t) == 0;
            if (!idle)
                nap_ms(250);
        }
        RL_CHECK(idle);
    }

    /* The receiver catches up with every delivered notification. */
    RL_CHECK(e2e_wait_intf(&t, 1, 120000,
                           "SELECT ((SELECT count(*) FROM "
                           "received_notifications) = (SELECT count(*) FROM "
                           "outbox_delivered))::int"));

    runs = e2e_int(&t, "SELECT count(*) FROM runs");
    completed = e2e_int(&t, "SELECT count(*) FROM runs WHERE "
                            "status='completed'");
    unknown = e2e_int(&t, "SELECT count(*) FROM runs WHERE status='unknown'");
    failed = e2e_int(&t, "SELECT count(*) FROM runs WHERE status='failed'");
    outbox_rows = e2e_int(&t, "SELECT count(*) FROM outbox_delivered") +
                  e2e_int(&t, "SELECT count(*) FROM outbox");
    attempts = e2e_int(&t, "SELECT count(*) FROM attempts");
    /* One accepted output per completed run, produced by one ok attempt. */
    ok_outputs = e2e_int(&t, "SELECT count(DISTINCT r.run_id) FROM runs r "
                             "JOIN attempts a USING (run_id) WHERE "
                             "r.status='completed' AND a.outcome='ok' AND "
                             "a.upstream_request_id = "
                             "r.output->>'upstream_request_id'");
    for (int i = 0; i < RUNS; i++) {
        long g = e2e_stub_generations(&t, run_ids[i]);
        const char *st = e2e_textf(&t,
                                   "SELECT coalesce((SELECT status FROM "
                                   "runs WHERE run_id='%s'), 'missing')",
                                   run_ids[i]);

        if (strcmp(st, "completed") != 0 && strcmp(st, "failed") != 0 &&
            strcmp(st, "unknown") != 0)
            lost++;
        if (g > 0)
            gens_total += g;
        if (g > 1)
            beyond += g - 1;
    }
    e2e_read_topic(&t, t.notify, on_note, &notes);
    if (notes.total <= RUNS * CHANNELS * 4) {
        qsort(notes.keys, (size_t)notes.total, sizeof(notes.keys[0]), cmp_key);
        for (long i = 0; i < notes.total; i++) {
            if (i == 0 || strcmp(notes.keys[i], notes.keys[i - 1]) != 0)
                notes.distinct++;
        }
    }
    /* A completed run whose notifications are missing is lost too. */
    if (outbox_rows < completed * CHANNELS)
        lost += completed * CHANNELS - outbox_rows;
    if (notes.distinct < outbox_rows)
        lost += outbox_rows - notes.distinct;

    printf("chaos: events=%d runs=%lld completed=%lld unknown=%lld "
           "failed=%lld duplicates_suppressed=%lld "
           "generations_beyond_one=%lld outbox_rows=%lld "
           "notification_deliveries=%ld distinct_notifications=%ld "
           "lost=%lld\n",
           EVENTS, (long long)runs, (long long)completed, (long long)unknown,
           (long long)failed, (long long)(EVENTS - runs), (long long)beyond,
           (long long)outbox_rows, notes.total, notes.distinct,
           (long long)lost);
    fprintf(stderr,
            "chaos: seed=%s kills=%ld attempts=%lld generations=%lld "
            "elapsed_ms=%lld\n",
            seed_env ? seed_env : "20261129", kills, (long long)attempts,
            (long long)gens_total, (long long)(rltest_now_ms() - started));

    RL_CHECK_INTEQ(lost, 0);
    RL_CHECK_INTEQ(runs, RUNS);
    RL_CHECK_INTEQ(completed + unknown + failed, RUNS);
    /* A run given a 400 fails at once, unless kills hit its call twice:
     * then its outcome was never recorded and retry_once parks it in
     * unknown. So: no other run fails, and no 400 run completes. */
    {
        static char ids400[RUNS * RL_HEX_SIZE + 8];
        size_t o = 0;

        ids400[o++] = '{';
        for (int i = 0; i < RUNS; i++) {
            if (given_400[i])
                o += (size_t)snprintf(ids400 + o, sizeof(ids400) - o, "%s%s",
                                      o > 1 ? "," : "", run_ids[i]);
        }
        snprintf(ids400 + o, sizeof(ids400) - o, "}");
        RL_CHECK(failed <= expect_failed);
        RL_CHECK_INTEQ(e2e_intf(&t,
                                "SELECT count(*) FROM runs WHERE status = "
                                "'failed' AND NOT (run_id = ANY(%s::text[]))",
                                ids400),
                       0);
        RL_CHECK_INTEQ(e2e_intf(&t,
                                "SELECT count(*) FROM runs WHERE run_id = "
                                "ANY(%s::text[]) AND status NOT IN "
                                "('failed', 'unknown')",
                                ids400),
                       0);
    }
    RL_CHECK_INTEQ(ok_outputs, completed);
    RL_CHECK_INTEQ(notes.distinct, outbox_rows);
    /* Downstream: one receiver row per outbox row, same key and payload;
     * every redelivery was ignored as a duplicate. */
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM received_notifications"),
                   outbox_rows);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM outbox_delivered d JOIN "
                               "received_notifications n ON "
                               "n.idempotency_key = d.run_id || ':' || "
                               "d.channel AND n.payload = "
                               "rl_payload_as_sent(d.run_id, d.channel, "
                               "d.explicit_payload)"),
                   outbox_rows);
    RL_CHECK_INTEQ(e2e_int(&t, "SELECT count(*) FROM receiver_conflicts"), 0);
    RL_CHECK(e2e_int(&t,
                     "SELECT coalesce(sum(duplicates), 0) FROM "
                     "received_notifications") >= notes.total - notes.distinct);
    RL_CHECK_INTEQ(outbox_rows, completed * CHANNELS);
    RL_CHECK(notes.total >= notes.distinct);
    RL_CHECK_INTEQ(notes.bad, 0);
    RL_CHECK(gens_total <= attempts); /* extra generations are visible */
    RL_CHECK_INTEQ(e2e_group_lag(&t), 0);
    free(notes.keys);
    e2e_teardown(&t);
    RL_TEST_END();
}
