/* Invariant: a model's rate-limit horizon (model_limits.queued_until,
 * behind which a new run of the model queues) follows the runs actually
 * waiting for its bucket. A burst deferred far ahead and then cancelled
 * no longer holds the horizon: after the cancel it is the due time of
 * the last run still waiting, and with none left it is gone. A model
 * whose horizon already matches its waiting runs is left alone. */
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_model_limits.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rltest.h"
#include "test_db_fixture.h"

/* Runs a..a+n-1 of model, pending and deferred by its bucket until
 * now() + secs(i) seconds. */
static void
waiting_runs(struct rl_db *db, const char *tag, const char *model, int n,
             const char *secs)
{
    char sql[1536];

    snprintf(sql, sizeof(sql),
             "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
             " fingerprint, request, status, next_attempt_at, error_class)"
             " SELECT encode(sha256(('%s-' || i)::bytea), 'hex'), '%s', 't',"
             "        '2026-01-01'::timestamptz + make_interval(mins => i),"
             "        'v1', repeat('f', 64),"
             "        jsonb_build_object('request',"
             "                           jsonb_build_object('model', '%s')),"
             "        'pending', now() + make_interval(secs => %s),"
             "        'rate_limit'"
             "   FROM generate_series(1, %d) i",
             tag, tag, model, secs, n);
    fixture_exec(db, sql);
}

static double
horizon_secs(struct rl_db *db, const char *model)
{
    return (double)fixture_int(
        db,
        "SELECT coalesce(round(extract(epoch FROM queued_until - now())),"
        "                -1)::int8 FROM model_limits WHERE model = $1",
        model);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1], errstr[512];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_model_limit lim = {"busy-model", NULL, 60, 0, 60000};
    struct rl_cancel_filter burst = {"t", "burst", NULL, NULL, NULL, 0};
    int64_t n = 0;

    RL_REQUIRE(
        rl_db_model_limit_set(db, &lim, "alice", errstr, sizeof(errstr)) == 0);
    lim.model = "calm-model";
    RL_REQUIRE(
        rl_db_model_limit_set(db, &lim, "alice", errstr, sizeof(errstr)) == 0);
    /* A burst of 1,000 runs a second apart, behind 3 earlier ones, as the
     * bucket of 60 a minute defers them; the horizon is the last one's. */
    waiting_runs(db, "early", "busy-model", 3, "10 * i");
    waiting_runs(db, "burst", "busy-model", 1000, "30 + i");
    waiting_runs(db, "calm", "calm-model", 2, "100 * i");
    fixture_exec(db, "UPDATE model_limits SET queued_until = now() + "
                     "interval '1030 seconds' WHERE model = 'busy-model'");
    fixture_exec(db, "UPDATE model_limits SET queued_until = now() + "
                     "interval '200 seconds' WHERE model = 'calm-model'");

    /* The operator cancels the burst. */
    RL_REQUIRE(rl_db_runs_cancel(db, &burst, "alice", "runaway burst", 100, &n,
                                 errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n, 1000);
    RL_CHECK(horizon_secs(db, "busy-model") >= 29 &&
             horizon_secs(db, "busy-model") <= 31);
    RL_CHECK(horizon_secs(db, "calm-model") >= 199);

    /* One by one, the last waiting runs: the horizon goes with them. */
    {
        struct rl_cancel_filter early = {"t", "early", NULL, NULL, NULL, 0};

        RL_REQUIRE(rl_db_runs_cancel(db, &early, "alice", "not needed", 100, &n,
                                     errstr, sizeof(errstr)) == 0);
    }
    RL_CHECK_INTEQ(n, 3);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM model_limits WHERE "
                               "model = 'busy-model' AND queued_until IS NULL",
                               NULL),
                   1);

    fixture_drop(db, schema);
    RL_TEST_END();
}
