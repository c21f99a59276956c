/* Invariant: a batch's request file holds no more than its max_bytes, the
 * per-line envelope included, and no line of a run cancelled while it
 * waited. Through the statements the batcher runs: four runs of a job
 * with max_bytes 1 KiB and 430-byte bodies are parked (rl_db_batch_park);
 * one is cancelled (rl_db_run_cancel); rl_db_batch_form then forms
 * batches of one run each (two bodies fit in 1 KiB, two lines with their
 * custom_id, method and url do not) at once, as full ones, none holding
 * the cancelled run (the last run waits for its window), and
 * each file rl_db_batch_write_requests writes is at most 1 KiB with the
 * size the ledger counted for it. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rl/db_batch.h"
#include "rl/db_batch_handoff.h"
#include "rl/db_batch_lease.h"
#include "rl/db_batch_submit.h"
#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_runs.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

#define RUNS 4
#define CANCELLED 2 /* the index of the run cancelled while waiting */

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run runs[RUNS];
    struct rl_batch_park_req reqs[RUNS];
    enum rl_batch_park_status status[RUNS];
    struct rl_batch batches[RUNS + 1];
    struct rl_decision decision;
    char body[431], errstr[512], when[64];
    size_t n = 0;
    int formed = 0;

    /* a 430-byte body: {"model":"m","input":"xxx..."} */
    memset(body, 'x', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    memcpy(body, "{\"model\":\"m\",\"input\":\"", 22);
    body[sizeof(body) - 3] = '"';
    body[sizeof(body) - 2] = '}';

    RL_REQUIRE(rl_db_batch_setting_set(
                   db,
                   &(struct rl_batch_setting){.job = "bytes",
                                              .tenant = NULL,
                                              .window_ms = 3600000,
                                              .max_runs = 100,
                                              .max_bytes = 1024,
                                              .completion_window = "24h",
                                              .on_expiry = "rebatch"},
                   "test", errstr, sizeof(errstr)) == 0);
    for (int i = 0; i < RUNS; i++) {
        struct rl_claim claim;
        int attempt_no = 0;

        snprintf(when, sizeof(when), "2026-08-07T0%d:00:00+00:00", i);
        fixture_run_init_at(&runs[i], "bytes", when, request, NULL);
        RL_REQUIRE(rltest_db_claim(db, &runs[i].reg, "w1", 300, &claim, errstr,
                                   sizeof(errstr)) == 0);
        RL_REQUIRE(claim.status == RL_CLAIM_WON);
        RL_REQUIRE(rltest_db_dispatch(db, runs[i].run_id, "w1",
                                      claim.lease_epoch, runs[i].run_id,
                                      &attempt_no, errstr,
                                      sizeof(errstr)) == 0);
        reqs[i] = (struct rl_batch_park_req){.run_id = runs[i].run_id,
                                             .lease_epoch = claim.lease_epoch,
                                             .attempt_no = attempt_no,
                                             .endpoint = "/v1/chat/completions",
                                             .model = "m",
                                             .body = body};
        rl_claim_clear(&claim);
    }
    RL_REQUIRE(rl_db_batch_park(db, "w1", reqs, RUNS, status, errstr,
                                sizeof(errstr)) == 0);
    for (int i = 0; i < RUNS; i++)
        RL_CHECK_INTEQ(status[i], RL_BATCH_PARKED);

    RL_CHECK_INTEQ(rl_db_run_cancel(db, runs[CANCELLED].run_id, "alice",
                                    "not needed", &decision, errstr,
                                    sizeof(errstr)),
                   0);

    /* due at once: the waiting lines hold more than max_bytes. One batch
     * of a group per call: formed until nothing is left. */
    for (int k = 0, more = 1; more && k < 2 * RUNS; k++) {
        int now = 0;

        RL_CHECK_INTEQ(
            rl_db_batch_form(db, RUNS + 1, &now, errstr, sizeof(errstr)), 0);
        formed += now;
        more = now > 0;
    }
    /* two full batches; the last run waits for its window (an hour) */
    RL_CHECK_INTEQ(formed, RUNS - 2);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM batch_runs WHERE "
                               "state = 'waiting'",
                               NULL),
                   1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM batch_runs WHERE "
                               "run_id = $1 AND batch_id IS NULL AND state "
                               "= 'ignored'",
                               runs[CANCELLED].run_id),
                   1);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT max(runs) FROM batches", NULL), 1);

    RL_REQUIRE(rl_db_batch_take(db, "batcher", 60000, batches, RUNS + 1, &n,
                                errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n, RUNS - 2);
    for (size_t k = 0; k < n; k++) {
        char file[4096];
        FILE *f = fmemopen(file, sizeof(file), "w");
        int64_t bytes = -1;

        RL_REQUIRE(f != NULL);
        RL_CHECK_INTEQ(rl_db_batch_write_requests(db, &batches[k], f, &bytes,
                                                  errstr, sizeof(errstr)),
                       0);
        fclose(f);
        RL_CHECK(bytes > 430 && bytes <= 1024);
        RL_CHECK(strstr(file, runs[CANCELLED].run_id) == NULL);
        RL_CHECK_INTEQ(
            fixture_int(db, "SELECT bytes FROM batches WHERE batch_id = $1",
                        batches[k].batch_id),
            bytes);
    }
    fixture_drop(db, schema);
    RL_TEST_END();
}
