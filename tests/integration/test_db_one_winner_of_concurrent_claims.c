/* Invariant: however many workers claim one run at the same moment (each
 * on its own connection), exactly one wins the lease; batches claiming
 * overlapping runs in different orders never deadlock and every run has
 * exactly one winner. */
#include <pthread.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "test_db_fixture.h"

enum { CLAIMERS = 16, ROUNDS = 5, BATCH_THREADS = 8, BATCH_RUNS = 40 };

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

struct claimer {
    const char *schema;
    pthread_barrier_t *start;
    const struct rl_run_reg *regs;
    size_t n;
    char worker[32];
    int err;
    char errstr[512];
    int won[BATCH_RUNS];
    int leased[BATCH_RUNS];
};

static void *
claim_thread(void *arg)
{
    struct claimer *c = arg;
    struct rl_db *db = fixture_connect(c->schema);
    struct rl_claim claims[BATCH_RUNS];

    pthread_barrier_wait(c->start);
    c->err = rl_db_register_claim_some(
        db, c->regs, c->n,
        &(struct rl_claim_opts){
            .worker = c->worker, .lease_seconds = 30, .max = -1},
        claims, c->errstr, sizeof(c->errstr));
    for (size_t i = 0; c->err == 0 && i < c->n; i++) {
        c->won[i] = claims[i].status == RL_CLAIM_WON;
        c->leased[i] = claims[i].status == RL_CLAIM_LEASED;
        rl_claim_clear(&claims[i]);
    }
    rl_db_destroy(db);
    return NULL;
}

static void
sixteen_claimers_one_winner(const char *schema, struct rl_db *db, int round)
{
    static struct claimer claimers[CLAIMERS];
    pthread_t threads[CLAIMERS];
    pthread_barrier_t start;
    struct fixture_run run;
    char job[32];
    int won = 0, leased = 0;

    snprintf(job, sizeof(job), "contended-%d", round);
    fixture_run_init(&run, job, request, "{\"n\":1}");
    pthread_barrier_init(&start, NULL, CLAIMERS);
    for (int i = 0; i < CLAIMERS; i++) {
        memset(&claimers[i], 0, sizeof(claimers[i]));
        claimers[i].schema = schema;
        claimers[i].start = &start;
        claimers[i].regs = &run.reg;
        claimers[i].n = 1;
        snprintf(claimers[i].worker, sizeof(claimers[i].worker), "w%d", i);
        RL_REQUIRE(
            pthread_create(&threads[i], NULL, claim_thread, &claimers[i]) == 0);
    }
    for (int i = 0; i < CLAIMERS; i++) {
        pthread_join(threads[i], NULL);
        if (claimers[i].err != 0)
            fprintf(stderr, "claimer %d: %s\n", i, claimers[i].errstr);
        RL_CHECK_INTEQ(claimers[i].err, 0);
        won += claimers[i].won[0];
        leased += claimers[i].leased[0];
    }
    pthread_barrier_destroy(&start);
    RL_CHECK_INTEQ(won, 1);
    RL_CHECK_INTEQ(leased, CLAIMERS - 1);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM runs WHERE job = $1", job), 1);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT lease_epoch FROM runs WHERE job = $1", job), 1);
}

static void
overlapping_batches_never_deadlock(const char *schema)
{
    static struct fixture_run runs[BATCH_RUNS];
    static struct rl_run_reg regs[BATCH_THREADS][BATCH_RUNS];
    static struct claimer claimers[BATCH_THREADS];
    pthread_t threads[BATCH_THREADS];
    pthread_barrier_t start;
    char job[32];

    for (int i = 0; i < BATCH_RUNS; i++) {
        snprintf(job, sizeof(job), "overlap-%02d", i);
        fixture_run_init(&runs[i], job, request, NULL);
    }
    pthread_barrier_init(&start, NULL, BATCH_THREADS);
    for (int t = 0; t < BATCH_THREADS; t++) {
        /* each thread sees the runs in its own rotated, reversed order */
        for (int i = 0; i < BATCH_RUNS; i++) {
            int k = (t % 2) ? (BATCH_RUNS - 1 - i) : i;

            regs[t][i] = runs[(k + t * 7) % BATCH_RUNS].reg;
        }
        memset(&claimers[t], 0, sizeof(claimers[t]));
        claimers[t].schema = schema;
        claimers[t].start = &start;
        claimers[t].regs = regs[t];
        claimers[t].n = BATCH_RUNS;
        snprintf(claimers[t].worker, sizeof(claimers[t].worker), "b%d", t);
        RL_REQUIRE(
            pthread_create(&threads[t], NULL, claim_thread, &claimers[t]) == 0);
    }
    for (int t = 0; t < BATCH_THREADS; t++)
        pthread_join(threads[t], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < BATCH_RUNS; i++) {
        int won = 0;

        for (int t = 0; t < BATCH_THREADS; t++) {
            if (claimers[t].err != 0)
                continue;
            for (int j = 0; j < BATCH_RUNS; j++) {
                if (claimers[t].won[j] &&
                    strcmp(regs[t][j].run_id, runs[i].run_id) == 0)
                    won++;
            }
        }
        RL_CHECK_INTEQ(won, 1);
    }
    for (int t = 0; t < BATCH_THREADS; t++) {
        if (claimers[t].err != 0)
            fprintf(stderr, "batch %d: %s\n", t, claimers[t].errstr);
        RL_CHECK_INTEQ(claimers[t].err, 0);
    }
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);

    for (int round = 0; round < ROUNDS; round++)
        sixteen_claimers_one_winner(schema, db, round);
    overlapping_batches_never_deadlock(schema);
    fixture_drop(db, schema);
    RL_TEST_END();
}
