/* Invariant: while runs a model's bucket deferred wait for their turn, a
 * run not deferred before queues behind them even when the bucket has
 * room again: that room is kept for the run due. Model m has 60 requests
 * per minute (a burst of 1, one request refilled every 60000/59 ms). A
 * takes the burst; B1, B2, B3 are deferred, one refill apart. Once B1 is
 * due (the bucket holds a request again), a newcomer C is deferred behind
 * B3, and B1, claimed again, is dispatched. Without the rule (schema/021)
 * C takes the request, B1 finds the bucket empty and goes to the back of
 * the queue, a second deferral that moves the model's horizon one more
 * refill ahead of the bucket: over 3,000 runs that left 6 % of the limit
 * unused (make bench ratelimit). */
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

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

/* Claims run (a new one, or a pending one due again) for worker w1 and
 * records its dispatch in a statement of its own; returns the dispatch's
 * status. */
static enum rl_dispatch_status
claim_and_dispatch(struct rl_db *db, struct fixture_run *run)
{
    struct rl_claim claim;
    struct rl_dispatch_req req;
    struct rl_dispatch_res res;
    char errstr[512];

    memset(&claim, 0, sizeof(claim));
    RL_REQUIRE(rltest_db_claim(db, &run->reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    req = (struct rl_dispatch_req){
        .run_id = run->run_id,
        .lease_epoch = claim.lease_epoch,
        .idempotency_key = run->run_id,
        .estimate = 0,
    };
    RL_REQUIRE(rl_db_dispatch_runs(db, &req, 1, "w1", 100, &res, errstr,
                                   sizeof(errstr)) == 0);
    RL_REQUIRE(res.err == 0);
    rl_claim_clear(&claim);
    return res.status;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run a, b[3], c;
    struct rl_model_limit lim = {
        .model = "m", .rpm = 60, .tpm = 0, .window_ms = 60000};
    char errstr[512], job[32];
    int64_t deadline;

    RL_REQUIRE(rl_db_model_limit_set(db, &lim, "ops", errstr, sizeof(errstr)) ==
               0);
    fixture_run_init(&a, "newcomer-a", request, NULL);
    RL_CHECK_INTEQ(claim_and_dispatch(db, &a), RL_DISPATCH_RECORDED);
    for (int i = 0; i < 3; i++) {
        snprintf(job, sizeof(job), "newcomer-b%d", i + 1);
        fixture_run_init(&b[i], job, request, NULL);
        RL_CHECK_INTEQ(claim_and_dispatch(db, &b[i]), RL_DISPATCH_RATE_LIMITED);
    }

    /* B1's turn: its due time has passed on the database's clock. */
    deadline = rltest_now_ms() + 10000;
    while (fixture_int(db,
                       "SELECT (now() >= next_attempt_at)::int FROM runs "
                       "WHERE run_id = $1",
                       b[0].run_id) != 1) {
        RL_REQUIRE(rltest_now_ms() < deadline);
        fixture_int(db, "SELECT 1 FROM pg_sleep(0.02)", NULL);
    }

    fixture_run_init(&c, "newcomer-c", request, NULL);
    RL_CHECK_INTEQ(claim_and_dispatch(db, &c), RL_DISPATCH_RATE_LIMITED);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT (c.next_attempt_at > b.next_attempt_at)"
                               "::int FROM runs c, runs b WHERE c.run_id = $1 "
                               "AND b.job = 'newcomer-b3'",
                               c.run_id),
                   1);
    RL_CHECK_INTEQ(claim_and_dispatch(db, &b[0]), RL_DISPATCH_RECORDED);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT waits FROM model_limits", NULL), 4);

    fixture_drop(db, schema);
    RL_TEST_END();
}
