/* Invariants of the claim that hands out model slots (rl_claim_due,
 * schema/018_fair_claims.sql):
 *   - fair: when several tenants' runs are due, claims go round-robin
 *     across tenants, counting what each already runs, not first-come
 *     over the whole backlog (a burst registered first does not take
 *     every slot); a weighted tenant gets its share and an unweighted one
 *     still progresses;
 *   - within limits: under six sweepers claiming at once, round after
 *     round (each round but the first starts with the limited runs
 *     finished, so that every round has room to overshoot), a tenant
 *     limited to 3 never has more than 3 runs running, a job limited to 2
 *     never more than 2, while an unlimited tenant and
 *     the unlimited job of the limited tenant are claimed in full; a claim
 *     from Kafka (rl_db_register_claim_some) never claims a limited run;
 *     once a limited run is released, exactly one more is claimed;
 *   - the gauges of /metrics count the runs waiting and each limit's
 *     running runs, and `runs show` of a waiting run names the limit. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_gauges.h"
#include "rl/db_lease.h"
#include "rl/db_limits.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rl/runid.h"
#include "rltest.h"
#include "test_db_fixture.h"

enum { SWEEPERS = 6, ROUNDS = 8, MAXRUNS = 128 };

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

static struct fixture_run runs[MAXRUNS];
static char tenants[MAXRUNS][32];
static int nruns;

/* Registers n runs of tenant/job pending and due (claimed by no one). */
static void
add_runs(struct rl_db *db, const char *tenant, const char *job, int n)
{
    struct rl_run_reg regs[MAXRUNS];
    struct rl_claim claims[MAXRUNS];
    char errstr[512], id[128];

    RL_REQUIRE(nruns + n <= MAXRUNS);
    for (int i = 0; i < n; i++) {
        struct fixture_run *run = &runs[nruns];

        fixture_run_init(run, job, request, NULL);
        /* a logical run of its own: (job, tenant, scheduled_at, version) */
        snprintf(run->scheduled_at, sizeof(run->scheduled_at),
                 "2026-08-07T%02u:%02u:00+00:00", (unsigned)nruns / 60 % 24,
                 (unsigned)nruns % 60);
        snprintf(id, sizeof(id), "%s|%s|%d", tenant, job, nruns);
        RL_REQUIRE(rl_sha256_hex(id, strlen(id), run->run_id) == 0);
        snprintf(tenants[nruns], sizeof(tenants[0]), "%s", tenant);
        run->reg.tenant = tenants[nruns];
        regs[i] = run->reg;
        nruns++;
    }
    RL_REQUIRE(rl_db_register_claim_some(
                   db, regs, (size_t)n,
                   &(struct rl_claim_opts){
                       .worker = "kafka", .lease_seconds = 30, .max = 0},
                   claims, errstr, sizeof(errstr)) == 0);
    for (int i = 0; i < n; i++) {
        RL_CHECK_INTEQ(claims[i].status, RL_CLAIM_QUEUED);
        rl_claim_clear(&claims[i]);
    }
}

/* Claims up to limit due runs as worker; returns how many of tenant. */
static int
claim_count(struct rl_db *db, const char *worker, size_t limit,
            const char *tenant, size_t *total)
{
    struct rl_claim claims[64];
    char errstr[512];
    size_t n = 0;
    int of = 0;

    RL_REQUIRE(limit <= 64);
    RL_REQUIRE(rl_db_claim_due(db,
                               &(struct rl_claim_opts){.worker = worker,
                                                       .lease_seconds = 30,
                                                       .max = (long)limit},
                               claims, &n, errstr, sizeof(errstr)) == 0);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(claims[i].tenant, tenant) == 0)
            of++;
        rl_claim_clear(&claims[i]);
    }
    if (total)
        *total = n;
    return of;
}

static int64_t
running(struct rl_db *db, const char *tenant)
{
    return fixture_int(db,
                       "SELECT count(*) FROM runs WHERE status = 'running' "
                       "AND tenant = $1",
                       tenant);
}

static void
test_round_robin(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    size_t total = 0;
    int a;

    nruns = 0;
    /* A's burst is registered first: first-come would give A every slot. */
    add_runs(db, "tenant-a", "ja", 40);
    add_runs(db, "tenant-b", "jb", 5);
    a = claim_count(db, "w1", 6, "tenant-a", &total);
    RL_CHECK_INTEQ(total, 6);
    RL_CHECK_INTEQ(a, 3);
    /* B's 2 left go before A's next, as A runs as many as B. */
    a = claim_count(db, "w2", 4, "tenant-a", &total);
    RL_CHECK_INTEQ(total, 4);
    RL_CHECK_INTEQ(a, 2);
    RL_CHECK_INTEQ(running(db, "tenant-b"), 5);
    /* B has nothing left: A alone takes what B leaves idle. */
    a = claim_count(db, "w3", 10, "tenant-a", &total);
    RL_CHECK_INTEQ(a, 10);
    printf("round-robin: A %lld running, B %lld\n",
           (long long)running(db, "tenant-a"),
           (long long)running(db, "tenant-b"));
    fixture_drop(db, schema);
}

static void
test_weighted(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    char errstr[512];
    int c = 0, d = 0;

    nruns = 0;
    add_runs(db, "tenant-c", "jc", 40);
    add_runs(db, "tenant-d", "jd", 40);
    RL_REQUIRE(rl_db_limit_set(db, "tenant-c", NULL, -1, 3, errstr,
                               sizeof(errstr)) == 0);
    for (int i = 0; i < 4; i++) {
        size_t total = 0;
        int of = claim_count(db, "w", 8, "tenant-c", &total);

        c += of;
        d += (int)total - of;
    }
    printf("weighted 3:1: C %d, D %d of 32\n", c, d);
    /* 3:1 of 32 slots: 24 and 8. */
    RL_CHECK(c >= 22 && c <= 26);
    RL_CHECK(d >= 6);
    fixture_drop(db, schema);
}

struct sweeper {
    const char *schema;
    pthread_barrier_t *start;
    char worker[16];
    int err;
};

static void *
sweep_thread(void *arg)
{
    struct sweeper *s = arg;
    struct rl_db *db = fixture_connect(s->schema);
    struct rl_claim claims[10];
    char errstr[512];
    size_t n = 0;

    pthread_barrier_wait(s->start);
    s->err = rl_db_claim_due(db,
                             &(struct rl_claim_opts){.worker = s->worker,
                                                     .lease_seconds = 30,
                                                     .max = 10},
                             claims, &n, errstr, sizeof(errstr));
    if (s->err)
        fprintf(stderr, "%s: %s\n", s->worker, errstr);
    for (size_t i = 0; s->err == 0 && i < n; i++)
        rl_claim_clear(&claims[i]);
    rl_db_destroy(db);
    return NULL;
}

static void
test_limits_concurrent(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct sweeper sweepers[SWEEPERS];
    pthread_t threads[SWEEPERS];
    pthread_barrier_t start;
    struct rl_run_reg reg;
    struct rl_claim claim;
    struct rl_db_gauges g;
    char errstr[512], epoch[32];
    int64_t max_l = 0, max_m1 = 0, id_epoch;
    const char *released = NULL, *waiting = NULL;
    char *report = NULL;

    nruns = 0;
    RL_REQUIRE(rl_db_limit_set(db, "tenant-l", NULL, 3, 0, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(rl_db_limit_set(db, "tenant-m", "m1", 2, 0, errstr,
                               sizeof(errstr)) == 0);
    add_runs(db, "tenant-l", "jl", 40);
    add_runs(db, "tenant-m", "m1", 20);
    add_runs(db, "tenant-m", "m2", 5);
    add_runs(db, "tenant-u", "ju", 20);

    /* A claim from Kafka with slots to spare claims no limited run. */
    reg = runs[0].reg;
    RL_REQUIRE(rl_db_register_claim_some(
                   db, &reg, 1,
                   &(struct rl_claim_opts){
                       .worker = "kafka", .lease_seconds = 30, .max = 100},
                   &claim, errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_QUEUED);
    rl_claim_clear(&claim);

    for (int round = 0; round < ROUNDS; round++) {
        int64_t l, m1;

        /* The limited runs of the last round end: the limits have room
         * again, which the sweepers below race for. */
        if (round > 0)
            RL_REQUIRE(fixture_int(db,
                                   "WITH f AS (UPDATE runs SET status = "
                                   "'failed', lock_owner = NULL, "
                                   "lock_expires_at = NULL WHERE status = "
                                   "'running' AND (tenant = $1 OR job = "
                                   "'m1') RETURNING 1) SELECT count(*) "
                                   "FROM f",
                                   "tenant-l") > 0);
        pthread_barrier_init(&start, NULL, SWEEPERS);
        for (int i = 0; i < SWEEPERS; i++) {
            sweepers[i] = (struct sweeper){.schema = schema, .start = &start};
            snprintf(sweepers[i].worker, sizeof(sweepers[i].worker), "s%d", i);
            pthread_create(&threads[i], NULL, sweep_thread, &sweepers[i]);
        }
        for (int i = 0; i < SWEEPERS; i++) {
            pthread_join(threads[i], NULL);
            RL_CHECK_INTEQ(sweepers[i].err, 0);
        }
        pthread_barrier_destroy(&start);
        l = running(db, "tenant-l");
        m1 = fixture_int(db,
                         "SELECT count(*) FROM runs WHERE status = 'running' "
                         "AND tenant = 'tenant-m' AND job = $1",
                         "m1");
        max_l = l > max_l ? l : max_l;
        max_m1 = m1 > max_m1 ? m1 : max_m1;
    }
    printf("6 sweepers x %d rounds: tenant-l max %lld running (limit 3), "
           "tenant-m/m1 max %lld (limit 2)\n",
           ROUNDS, (long long)max_l, (long long)max_m1);
    RL_CHECK_INTEQ(max_l, 3);
    RL_CHECK_INTEQ(max_m1, 2);
    RL_CHECK_INTEQ(running(db, "tenant-u"), 20);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE status = "
                               "'running' AND job = $1",
                               "m2"),
                   5);

    /* The gauges of /metrics: runs waiting, and each limit's use. */
    RL_CHECK_INTEQ(rl_db_ops_gauges(db, &g, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(g.waiting_runs,
                   fixture_int(db,
                               "SELECT count(*) FROM runs WHERE status = $1 "
                               "AND next_attempt_at <= now()",
                               "pending"));
    RL_CHECK(g.waiting_runs > 0);
    RL_CHECK_INTEQ(g.nlimits, 2);
    if (g.nlimits == 2) {
        RL_CHECK_STREQ(g.limits[0].tenant, "tenant-l");
        RL_CHECK_STREQ(g.limits[0].job, "");
        RL_CHECK_INTEQ(g.limits[0].concurrency, 3);
        RL_CHECK_INTEQ(g.limits[0].running, 3);
        RL_CHECK_STREQ(g.limits[1].tenant, "tenant-m");
        RL_CHECK_STREQ(g.limits[1].job, "m1");
        RL_CHECK_INTEQ(g.limits[1].running, 2);
    }
    rl_db_gauges_clear(&g);

    /* `runs show` of a due run of tenant-l says what it waits for. */
    for (int i = 0; i < nruns && !waiting; i++) {
        if (strcmp(tenants[i], "tenant-l") == 0 &&
            fixture_int(db,
                        "SELECT (status = 'pending')::int FROM runs WHERE "
                        "run_id = $1",
                        runs[i].run_id) == 1)
            waiting = runs[i].run_id;
    }
    RL_REQUIRE(waiting != NULL);
    RL_REQUIRE(rl_db_run_report_json(db, waiting, &report, errstr,
                                     sizeof(errstr)) == 0);
    RL_CHECK(strstr(report, "waiting for a slot: tenant tenant-l at its "
                            "limit of 3 running") != NULL);
    free(report);

    /* A slot of tenant-l frees (a run released for later): exactly one
     * more of it is claimed, and then none. */
    for (int i = 0; i < nruns && !released; i++) {
        if (strcmp(tenants[i], "tenant-l") != 0)
            continue;
        id_epoch = fixture_int(db,
                               "SELECT CASE WHEN status = 'running' THEN "
                               "lease_epoch ELSE -1 END FROM runs WHERE "
                               "run_id = $1",
                               runs[i].run_id);
        for (int w = 0; id_epoch >= 0 && w < SWEEPERS && !released; w++) {
            snprintf(epoch, sizeof(epoch), "s%d", w);
            if (rl_db_release(db,
                              &(struct rl_lease){.run_id = runs[i].run_id,
                                                 .worker = epoch,
                                                 .epoch = id_epoch},
                              3600000, "transient", "test", errstr,
                              sizeof(errstr)) == 0)
                released = runs[i].run_id;
        }
    }
    RL_REQUIRE(released != NULL);
    RL_CHECK_INTEQ(running(db, "tenant-l"), 2);
    RL_CHECK_INTEQ(claim_count(db, "w9", 10, "tenant-l", NULL), 1);
    RL_CHECK_INTEQ(claim_count(db, "w9", 10, "tenant-l", NULL), 0);
    RL_CHECK_INTEQ(running(db, "tenant-l"), 3);
    fixture_drop(db, schema);
}

int
main(void)
{
    test_round_robin();
    test_weighted();
    test_limits_concurrent();
    RL_TEST_END();
}
