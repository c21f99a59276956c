/* Invariant: each outbox row is delivered at least once and then leaves
 * the pending set for the insert-only audit, still one row per (run,
 * channel); a failed batch stays pending with its delivery count raised;
 * two relays never hold the same row. */
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_outbox.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

enum { RUNS = 5 };

static const char request[] = "{\"notify\":[\"email\",\"slack\"],"
                              "\"request\":{\"messages\":[],\"model\":\"m\"}}";

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_db *relay1 = fixture_connect(schema);
    struct rl_db *relay2 = fixture_connect(schema);
    struct fixture_run runs[RUNS];
    struct rl_outbox_row *rows1 = NULL, *rows2 = NULL;
    const char *channels[2] = {"email", "slack"};
    char errstr[512];
    char job[32];
    size_t n1 = 0, n2 = 0;
    int completed = 0;

    for (int i = 0; i < RUNS; i++) {
        snprintf(job, sizeof(job), "notify-%d", i);
        fixture_complete_run(db, &runs[i], job, request, "{\"text\":\"t\"}",
                             channels, 2);
    }
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL),
                   2 * RUNS);

    /* two relays at once split the rows */
    RL_CHECK_INTEQ(rl_db_outbox_lock_batch_bytes(relay1, 4, 0, 60000, &rows1,
                                                 &n1, NULL, errstr,
                                                 sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n1, 4);
    RL_CHECK_INTEQ(rl_db_outbox_lock_batch_bytes(relay2, 100, 0, 60000, &rows2,
                                                 &n2, NULL, errstr,
                                                 sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n2, 2 * RUNS - 4);
    for (size_t i = 0; i < n1; i++) {
        for (size_t k = 0; k < n2; k++) {
            RL_CHECK(strcmp(rows1[i].run_id, rows2[k].run_id) != 0 ||
                     strcmp(rows1[i].channel, rows2[k].channel) != 0);
        }
    }
    if (n1 > 0) {
        RL_CHECK_STREQ(rows1[0].tenant, "workspace-acme");
        RL_CHECK(strncmp(rows1[0].job, "notify-", 7) == 0);
        RL_CHECK(strstr(rows1[0].payload, "\"output\"") != NULL);
        RL_CHECK_INTEQ(rows1[0].delivery_count, 0);
    }

    /* relay1 delivered; relay2's broker failed */
    RL_CHECK_INTEQ(
        rltest_db_outbox_finish(relay1, rows1, n1, 1, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(
        rltest_db_outbox_finish(relay2, rows2, n2, 0, errstr, sizeof(errstr)),
        0);
    rl_db_outbox_rows_free(rows1, n1);
    rl_db_outbox_rows_free(rows2, n2);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL),
                   2 * RUNS - 4);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM outbox_delivered", NULL), 4);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox "
                               "WHERE delivery_count = 1",
                               NULL),
                   2 * RUNS - 4);

    /* the retry delivers the rest */
    RL_CHECK_INTEQ(rl_db_outbox_lock_batch_bytes(relay2, 100, 0, 60000, &rows2,
                                                 &n2, NULL, errstr,
                                                 sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n2, 2 * RUNS - 4);
    if (n2 > 0)
        RL_CHECK_INTEQ(rows2[0].delivery_count, 1);
    RL_CHECK_INTEQ(
        rltest_db_outbox_finish(relay2, rows2, n2, 1, errstr, sizeof(errstr)),
        0);
    rl_db_outbox_rows_free(rows2, n2);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox_delivered "
                               "WHERE delivered_at IS NOT NULL",
                               NULL),
                   2 * RUNS);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT max(delivery_count) FROM "
                               "outbox_delivered",
                               NULL),
                   2);

    /* empty: nothing returned, nothing left open */
    RL_CHECK_INTEQ(rl_db_outbox_lock_batch_bytes(relay1, 10, 0, 60000, &rows1,
                                                 &n1, NULL, errstr,
                                                 sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(n1, 0);
    RL_CHECK(rows1 == NULL);
    RL_CHECK_INTEQ(
        rltest_db_outbox_finish(relay1, NULL, 0, 0, errstr, sizeof(errstr)), 0);

    /* a completed run whose rows were delivered gets no second row */
    {
        struct rl_claim claim;

        RL_REQUIRE(rltest_db_claim(db, &runs[0].reg, "w9", 30, &claim, errstr,
                                   sizeof(errstr)) == 0);
        RL_CHECK_INTEQ(claim.status, RL_CLAIM_COMPLETED);
        RL_CHECK_INTEQ(rltest_db_complete(db, runs[0].run_id, "w1",
                                          claim.lease_epoch, NULL,
                                          "{\"text\":\"u\"}", channels, 2,
                                          &completed, errstr, sizeof(errstr)),
                       0);
        RL_CHECK_INTEQ(completed, 0);
        rl_claim_clear(&claim);
    }
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 0);
    rl_db_destroy(relay1);
    rl_db_destroy(relay2);
    fixture_drop(db, schema);
    RL_TEST_END();
}
