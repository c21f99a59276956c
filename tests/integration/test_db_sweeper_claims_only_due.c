/* Invariant: retries come from the database. A released run is not due
 * until next_attempt_at (the claim of a duplicate event says NOT_DUE, the
 * sweeper skips it); once due, exactly one of several sweepers claims it
 * with a higher epoch; parked runs are never claimed. */
#include <pthread.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

enum { SWEEPERS = 6, DUE_RUNS = 30 };

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

struct sweeper {
    const char *schema;
    pthread_barrier_t *start;
    char worker[16];
    size_t n;
    int err;
    char errstr[512];
    char run_ids[DUE_RUNS][RL_HEX_SIZE];
};

static void *
sweep_thread(void *arg)
{
    struct sweeper *s = arg;
    struct rl_db *db = fixture_connect(s->schema);
    struct rl_claim claims[DUE_RUNS];

    pthread_barrier_wait(s->start);
    s->err = rl_db_claim_due(db,
                             &(struct rl_claim_opts){.worker = s->worker,
                                                     .lease_seconds = 30,
                                                     .max = (long)DUE_RUNS},
                             claims, &s->n, s->errstr, sizeof(s->errstr));
    for (size_t i = 0; s->err == 0 && i < s->n; i++) {
        memcpy(s->run_ids[i], claims[i].run_id, RL_HEX_SIZE);
        rl_claim_clear(&claims[i]);
    }
    rl_db_destroy(db);
    return NULL;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    static struct fixture_run runs[DUE_RUNS];
    static struct rl_run_reg regs[DUE_RUNS];
    static struct rl_claim claims[DUE_RUNS];
    static struct sweeper sweepers[SWEEPERS];
    struct fixture_run later, parked;
    struct rl_claim claim, due[4];
    pthread_t threads[SWEEPERS];
    pthread_barrier_t start;
    char errstr[512];
    char job[32];
    size_t n = 0, total = 0;

    /* one run released for an hour, one parked */
    fixture_run_init(&later, "later", request, NULL);
    RL_REQUIRE(rltest_db_claim(db, &later.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(rl_db_release(db,
                                 &(struct rl_lease){.run_id = later.run_id,
                                                    .worker = "w1",
                                                    .epoch = claim.lease_epoch},
                                 3600 * 1000, "transient", "HTTP 503", errstr,
                                 sizeof(errstr)),
                   0);
    rl_claim_clear(&claim);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT (next_attempt_at > now() + "
                               "interval '59 minutes')::int FROM runs "
                               "WHERE run_id = $1",
                               later.run_id),
                   1);
    RL_CHECK_INTEQ(rltest_db_claim(db, &later.reg, "w2", 30, &claim, errstr,
                                   sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_NOT_DUE);
    RL_CHECK_INTEQ(claim.run_status, RL_RUN_PENDING);
    rl_claim_clear(&claim);

    fixture_run_init(&parked, "parked", request, NULL);
    RL_REQUIRE(rltest_db_claim(db, &parked.reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(rl_db_fail(db,
                              &(struct rl_lease){.run_id = parked.run_id,
                                                 .worker = "w1",
                                                 .epoch = claim.lease_epoch},
                              RL_RUN_UNKNOWN, "ambiguous", "timeout after send",
                              errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(rl_db_fail(db,
                              &(struct rl_lease){.run_id = parked.run_id,
                                                 .worker = "w1",
                                                 .epoch = claim.lease_epoch},
                              RL_RUN_COMPLETED, "x", "y", errstr,
                              sizeof(errstr)),
                   RL_ERR_INVALID);
    rl_claim_clear(&claim);
    RL_CHECK_INTEQ(rltest_db_claim(db, &parked.reg, "w2", 30, &claim, errstr,
                                   sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_PARKED);
    RL_CHECK_INTEQ(claim.run_status, RL_RUN_UNKNOWN);
    rl_claim_clear(&claim);

    RL_CHECK_INTEQ(rl_db_claim_due(db,
                                   &(struct rl_claim_opts){.worker = "sweeper",
                                                           .lease_seconds = 30,
                                                           .max = 4},
                                   due, &n, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n, 0);

    /* DUE_RUNS runs released with no delay: due at once */
    for (int i = 0; i < DUE_RUNS; i++) {
        snprintf(job, sizeof(job), "due-%02d", i);
        fixture_run_init(&runs[i], job, request, NULL);
        regs[i] = runs[i].reg;
    }
    RL_REQUIRE(rl_db_register_claim_some(
                   db, regs, DUE_RUNS,
                   &(struct rl_claim_opts){
                       .worker = "w1", .lease_seconds = 30, .max = -1},
                   claims, errstr, sizeof(errstr)) == 0);
    for (int i = 0; i < DUE_RUNS; i++) {
        RL_REQUIRE(claims[i].status == RL_CLAIM_WON);
        RL_CHECK_INTEQ(
            rl_db_release(db,
                          &(struct rl_lease){.run_id = runs[i].run_id,
                                             .worker = "w1",
                                             .epoch = claims[i].lease_epoch},
                          0, "transient", "HTTP 429", errstr, sizeof(errstr)),
            0);
        rl_claim_clear(&claims[i]);
    }

    pthread_barrier_init(&start, NULL, SWEEPERS);
    for (int s = 0; s < SWEEPERS; s++) {
        memset(&sweepers[s], 0, sizeof(sweepers[s]));
        sweepers[s].schema = schema;
        sweepers[s].start = &start;
        snprintf(sweepers[s].worker, sizeof(sweepers[s].worker), "s%d", s);
        RL_REQUIRE(
            pthread_create(&threads[s], NULL, sweep_thread, &sweepers[s]) == 0);
    }
    for (int s = 0; s < SWEEPERS; s++) {
        pthread_join(threads[s], NULL);
        if (sweepers[s].err != 0)
            fprintf(stderr, "sweeper %d: %s\n", s, sweepers[s].errstr);
        RL_CHECK_INTEQ(sweepers[s].err, 0);
        total += sweepers[s].n;
    }
    pthread_barrier_destroy(&start);
    RL_CHECK_INTEQ(total, DUE_RUNS);
    for (int i = 0; i < DUE_RUNS; i++) {
        int seen = 0;

        for (int s = 0; s < SWEEPERS; s++) {
            for (size_t k = 0; k < sweepers[s].n; k++)
                seen += strcmp(sweepers[s].run_ids[k], runs[i].run_id) == 0;
        }
        RL_CHECK_INTEQ(seen, 1);
    }
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE job LIKE "
                               "'due-%' AND status = 'running' AND "
                               "lease_epoch = 2 AND lock_owner LIKE 's%' "
                               "AND last_error = 'HTTP 429'",
                               NULL),
                   DUE_RUNS);
    /* nothing left for a late sweeper */
    RL_CHECK_INTEQ(rl_db_claim_due(db,
                                   &(struct rl_claim_opts){.worker = "late",
                                                           .lease_seconds = 30,
                                                           .max = 4},
                                   due, &n, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n, 0);
    fixture_drop(db, schema);
    RL_TEST_END();
}
