/* Invariant: the adaptive concurrency cap halves once per congestion
 * event, not once per 429. 64 calls of a model sent together and all
 * answered 429 (each worker calling rl_db_model_throttled for its own,
 * concurrently, on connections of their own) cut the cap once, from the
 * 64 in flight to 32, while each 429 still counts and extends the pause;
 * a call sent after that cut and refused cuts it again, to 16. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_model_limits.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

#define BURST 64
#define THREADS 8

struct worker {
    const char *schema;
    int first; /* calls first .. first + BURST / THREADS - 1 */
    int failed;
};

static char run_ids[BURST + 1][80];

static void *
refuse_calls(void *arg)
{
    struct worker *w = arg;
    struct rl_db *db = fixture_connect(w->schema);
    char until[64], errstr[512];
    int cap;

    for (int i = w->first; i < w->first + BURST / THREADS; i++) {
        struct rl_model_throttle t = {"burst-model", 2000,       1, BURST,
                                      "429",         run_ids[i], 1};

        w->failed |= rl_db_model_throttled(db, &t, until, sizeof(until), &cap,
                                           errstr, sizeof(errstr)) != 0;
    }
    rl_db_destroy(db);
    return NULL;
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1], errstr[512], until[64];
    struct rl_db *db = fixture_ledger(schema);
    struct worker workers[THREADS];
    pthread_t th[THREADS];
    int cap = -1;

    /* 64 calls dispatched a second ago, and one more dispatched later. */
    fixture_exec(db,
                 "INSERT INTO runs (run_id, job, tenant, scheduled_at,"
                 " version, fingerprint, request, status, attempts,"
                 " lock_owner, lock_expires_at, lease_epoch)"
                 " SELECT encode(sha256(('burst-' || i)::bytea), 'hex'),"
                 "        'burst', 't', '2026-01-01'::timestamptz"
                 "        + make_interval(mins => i), 'v1', repeat('f', 64),"
                 "        '{}', 'running', 1, 'w', now() + interval '1 hour', 1"
                 "   FROM generate_series(0, 64) i");
    fixture_exec(db, "INSERT INTO attempts (run_id, attempt_no, lease_epoch,"
                     " worker, idempotency_key, dispatched_at)"
                     " SELECT run_id, 1, 1, 'w', run_id || ':1',"
                     "        now() - interval '1 second'"
                     "   FROM runs");
    for (int i = 0; i <= BURST; i++) {
        char sql[160];
        char *id;

        snprintf(sql, sizeof(sql),
                 "SELECT encode(sha256(('burst-' || %d)::bytea), 'hex')", i);
        id = run_ids[i];
        RL_REQUIRE(rl_db_exec(db, sql, 0, NULL, id, sizeof(run_ids[i]), errstr,
                              sizeof(errstr)) == 1);
    }

    for (int k = 0; k < THREADS; k++) {
        workers[k].schema = schema;
        workers[k].first = k * (BURST / THREADS);
        workers[k].failed = 0;
        RL_REQUIRE(pthread_create(&th[k], NULL, refuse_calls, &workers[k]) ==
                   0);
    }
    for (int k = 0; k < THREADS; k++) {
        RL_REQUIRE(pthread_join(th[k], NULL) == 0);
        RL_CHECK(!workers[k].failed);
    }
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT concurrency_cap FROM model_limits"
                               " WHERE model = 'burst-model'",
                               NULL),
                   BURST / 2);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT throttles FROM model_limits"
                               " WHERE model = 'burst-model'",
                               NULL),
                   BURST);

    /* A call sent after the cut, refused too: the lower cap still
     * congests, so it halves again. */
    fixture_exec(db, "UPDATE attempts SET dispatched_at = clock_timestamp()"
                     " WHERE run_id = encode(sha256('burst-64'::bytea),"
                     " 'hex')");
    {
        struct rl_model_throttle t = {"burst-model", 2000,           1, 1,
                                      "429",         run_ids[BURST], 1};

        RL_REQUIRE(rl_db_model_throttled(db, &t, until, sizeof(until), &cap,
                                         errstr, sizeof(errstr)) == 0);
    }
    RL_CHECK_INTEQ(cap, BURST / 4);

    fixture_drop(db, schema);
    RL_TEST_END();
}
