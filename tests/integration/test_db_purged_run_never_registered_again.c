/* Invariant: a purged run is never registered again. Its registration,
 * through the claim the service runs, answers RL_CLAIM_PURGED (same
 * fingerprint: acknowledged, no run, no call) or RL_CLAIM_CONFLICT
 * (another fingerprint), and inserts no run: for a completed run, for a
 * run an operator cancelled before it ran, and for a registration that
 * raced the purge (its INSERT waited on the row the purge deleted and
 * went ahead once the purge committed). The tombstone keeps the final
 * status; the purge removes the run's counted model calls. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_purge.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rltest.h"
#include "test_db_fixture.h"

static const enum rl_run_status finished[] = {RL_RUN_COMPLETED, RL_RUN_FAILED,
                                              RL_RUN_CANCELLED};

static enum rl_claim_status
register_one(struct rl_db *db, const struct fixture_run *run)
{
    struct rl_claim claim;
    char errstr[512];
    enum rl_claim_status status;

    memset(&claim, 0, sizeof(claim));
    RL_REQUIRE(rl_db_register_claim_some(
                   db, &run->reg, 1,
                   &(struct rl_claim_opts){
                       .worker = "w2", .lease_seconds = 30, .max = -1},
                   &claim, errstr, sizeof(errstr)) == 0);
    status = claim.status;
    rl_claim_clear(&claim);
    return status;
}

/* Purges every finished run (aged first), one batch. */
static void
purge_all(struct rl_db *db, struct rl_purge_counts *counts)
{
    char cutoff[RL_DB_TIME_SIZE], errstr[512];

    fixture_exec(db, "UPDATE runs SET updated_at = now() - interval '40 days'"
                     " WHERE status IN ('completed', 'failed', 'cancelled')");
    RL_REQUIRE(rl_db_purge_cutoff(db, 30 * 86400, cutoff, sizeof(cutoff),
                                  errstr, sizeof(errstr)) == 0);
    RL_REQUIRE(rl_db_purge_batch(db, finished, 3, cutoff, 100, counts, errstr,
                                 sizeof(errstr)) == 0);
}

struct racer {
    const char *schema;
    const struct fixture_run *run;
    enum rl_claim_status status;
};

static void *
race_register(void *arg)
{
    struct racer *r = arg;
    struct rl_db *db = fixture_connect(r->schema);

    r->status = register_one(db, r->run);
    rl_db_destroy(db);
    return NULL;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1], errstr[512];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run done, cancelled, other, raced;
    struct rl_decision decision;
    struct rl_purge_counts counts;
    struct racer racer;
    pthread_t th;
    const char *channels[] = {"email"};

    /* A completed run with a counted model call, and a run cancelled
     * before it ran. */
    fixture_complete_run(db, &done, "purged-job", "{\"p\":1}", "{\"a\":1}",
                         channels, 1);
    fixture_exec(db, "DELETE FROM outbox");
    /* As a dispatch of a rate-limited model leaves them. */
    fixture_exec(db, "INSERT INTO attempts (run_id, attempt_no, lease_epoch,"
                     " worker, idempotency_key, dispatched_at, outcome,"
                     " finished_at)"
                     " SELECT run_id, 1, 1, 'w1', run_id || ':1', now(), 'ok',"
                     " now() FROM runs");
    fixture_exec(db, "INSERT INTO model_calls (run_id, attempt_no, model)"
                     " SELECT run_id, 1, 'm' FROM runs");
    fixture_run_init_at(&cancelled, "purged-job", "2026-08-08T09:00:00+00:00",
                        "{\"p\":2}", NULL);
    RL_CHECK_INTEQ(register_one(db, &cancelled), RL_CLAIM_WON);
    RL_REQUIRE(rl_db_run_cancel(db, cancelled.run_id, "alice", "not wanted",
                                &decision, errstr, sizeof(errstr)) == 0);

    purge_all(db, &counts);
    RL_CHECK_INTEQ(counts.runs, 2);
    RL_CHECK_INTEQ(counts.tombstones, 2);
    RL_CHECK_INTEQ(counts.model_calls, 1);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM model_calls", NULL),
                   0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM run_tombstones WHERE "
                               "run_id = $1 AND final_status = 'cancelled'",
                               cancelled.run_id),
                   1);

    /* Their events again: acknowledged, never registered. */
    RL_CHECK_INTEQ(register_one(db, &done), RL_CLAIM_PURGED);
    RL_CHECK_INTEQ(register_one(db, &cancelled), RL_CLAIM_PURGED);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM runs", NULL), 0);

    /* The same run ID with another request: a conflict, nothing stored. */
    fixture_run_init(&other, "purged-job", "{\"p\":\"changed\"}", NULL);
    RL_REQUIRE(strcmp(other.run_id, done.run_id) == 0);
    RL_CHECK_INTEQ(register_one(db, &other), RL_CLAIM_CONFLICT);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM runs", NULL), 0);

    /* A registration that races the purge: the purge holds its
     * transaction open after deleting the run; the registration's INSERT
     * waits on that row, then goes ahead when the purge commits. */
    fixture_complete_run(db, &raced, "raced-job", "{\"p\":3}", "{\"a\":3}",
                         channels, 1);
    fixture_exec(db, "DELETE FROM outbox");
    fixture_exec(db, "BEGIN");
    purge_all(db, &counts);
    RL_CHECK_INTEQ(counts.runs, 1);
    racer.schema = schema;
    racer.run = &raced;
    RL_REQUIRE(pthread_create(&th, NULL, race_register, &racer) == 0);
    /* Until the registration waits on a lock of this transaction (the
     * activity view is a snapshot per transaction: cleared each time). */
    {
        int waiting = 0;

        for (int i = 0; i < 500 && !waiting; i++) {
            waiting = fixture_int(db,
                                  "SELECT count(*) FROM"
                                  " (SELECT pg_stat_clear_snapshot()) c,"
                                  " pg_stat_activity"
                                  " WHERE wait_event_type = 'Lock'"
                                  "   AND pid <> pg_backend_pid()"
                                  "   AND query LIKE '%rl_claim_runs%'",
                                  NULL) > 0;
            if (!waiting)
                fixture_exec(db, "SELECT pg_sleep(0.01)");
        }
        RL_REQUIRE(waiting);
    }
    fixture_exec(db, "COMMIT");
    RL_REQUIRE(pthread_join(th, NULL) == 0);
    RL_CHECK_INTEQ(racer.status, RL_CLAIM_PURGED);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM runs", NULL), 0);

    fixture_drop(db, schema);
    RL_TEST_END();
}
