/* Invariant: the runs a model's bucket defers come back one refill apart,
 * however many statements and workers deferred them. Model m has 60
 * requests per minute: a burst of 1, refilled one request every 60000/59
 * ms. The first run takes the burst. Then three workers, each on a
 * connection of its own, dispatch two runs each in three separate
 * statements against the empty bucket: all six are deferred, pending with
 * error_class rate_limit, and their next_attempt_at are six distinct
 * times, each at least one request's refill time after the one before,
 * and the last no more than six refills (and some slack) from now. The
 * bucket still decides: no attempt is recorded for a deferred run. Fails
 * without the model's queue horizon (schema/021): each statement spaces
 * only its own deferrals, so the three statements' first runs are all due
 * about one refill from now, milliseconds apart. */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_dispatch.h"
#include "rl/db_model_limits.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

#define WORKERS 3
#define PER_BATCH 2
#define DEFERRED (WORKERS * PER_BATCH)

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_db *conns[WORKERS];
    struct fixture_run first, runs[DEFERRED];
    struct rl_claim claims[DEFERRED];
    struct rl_model_limit lim = {
        .model = "m", .rpm = 60, .tpm = 0, .window_ms = 60000};
    char errstr[512], job[64], worker[16], n_deferred[16];
    int attempt_no = 0;

    RL_REQUIRE(rl_db_model_limit_set(db, &lim, "ops", errstr, sizeof(errstr)) ==
               0);

    /* The first run takes the bucket's only request. */
    {
        struct rl_claim claim;

        fixture_run_init(&first, "spread-first", request, NULL);
        RL_REQUIRE(rltest_db_claim(db, &first.reg, "w0", 30, &claim, errstr,
                                   sizeof(errstr)) == 0);
        RL_REQUIRE(claim.status == RL_CLAIM_WON);
        RL_CHECK_INTEQ(rltest_db_dispatch(db, first.run_id, "w0",
                                          claim.lease_epoch, "k", &attempt_no,
                                          errstr, sizeof(errstr)),
                       0);
        rl_claim_clear(&claim);
    }

    for (int w = 0; w < WORKERS; w++) {
        struct rl_dispatch_req reqs[PER_BATCH];
        struct rl_dispatch_res res[PER_BATCH];

        conns[w] = fixture_connect(schema);
        snprintf(worker, sizeof(worker), "w%d", w + 1);
        for (int k = 0; k < PER_BATCH; k++) {
            int i = w * PER_BATCH + k;

            snprintf(job, sizeof(job), "spread-%d", i);
            fixture_run_init(&runs[i], job, request, NULL);
            RL_REQUIRE(rltest_db_claim(conns[w], &runs[i].reg, worker, 30,
                                       &claims[i], errstr,
                                       sizeof(errstr)) == 0);
            RL_REQUIRE(claims[i].status == RL_CLAIM_WON);
            reqs[k] = (struct rl_dispatch_req){
                .run_id = runs[i].run_id,
                .lease_epoch = claims[i].lease_epoch,
                .idempotency_key = "k",
                .estimate = 0,
            };
        }
        /* One statement per worker: the spacing must not depend on the
         * runs sharing one. */
        RL_REQUIRE(rl_db_dispatch_runs(conns[w], reqs, PER_BATCH, worker, 100,
                                       res, errstr, sizeof(errstr)) == 0);
        for (int k = 0; k < PER_BATCH; k++) {
            RL_CHECK_INTEQ(res[k].err, 0);
            RL_CHECK_INTEQ(res[k].status, RL_DISPATCH_RATE_LIMITED);
            rl_claim_clear(&claims[w * PER_BATCH + k]);
        }
    }

    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE status = "
                               "'pending' AND error_class = 'rate_limit' AND "
                               "attempts = 0 AND lock_owner IS NULL",
                               NULL),
                   DEFERRED);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(DISTINCT next_attempt_at) FROM "
                               "runs WHERE error_class = 'rate_limit'",
                               NULL),
                   DEFERRED);
    /* One request refills in 60000 / 59 ms: every due time is at least
     * that long after the one before. */
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM (SELECT next_attempt_at "
                               "- lag(next_attempt_at) OVER (ORDER BY "
                               "next_attempt_at) AS gap FROM runs WHERE "
                               "error_class = 'rate_limit') g WHERE gap < "
                               "interval '1 ms' * 60000 / 59.0",
                               NULL),
                   0);
    /* ... and no more than a refill apart: the queue does not leave room
     * unused between them. */
    snprintf(n_deferred, sizeof(n_deferred), "%d", DEFERRED);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT (max(next_attempt_at) - now() < "
                               "interval '1 ms' * 60000 / 59.0 * $1::int + "
                               "interval '2 s')::int FROM runs WHERE "
                               "error_class = 'rate_limit'",
                               n_deferred),
                   1);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT waits FROM model_limits", NULL),
                   DEFERRED);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM attempts", NULL), 1);

    for (int w = 0; w < WORKERS; w++)
        rl_db_destroy(conns[w]);
    fixture_drop(db, schema);
    RL_TEST_END();
}
