/* Invariant: a relay's batch holds no transaction while the broker is
 * asked. The rows it takes are leased (due again when the lease ends) and
 * the statement commits: its session is idle, not idle in transaction, and
 * another relay does not take the rows. Once a lease has run out, another
 * relay takes the rows again, and the first relay's outcome, recorded
 * late, changes nothing of them (they carry another ctid): the second
 * relay's outcome counts, and each row is delivered once in the audit. */
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_outbox.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

enum { RUNS = 3 };

static const char request[] = "{\"notify\":[\"email\",\"slack\"],"
                              "\"request\":{\"messages\":[],\"model\":\"m\"}}";

static const char *
session_state(struct rl_db *db, struct rl_db *of, char *state, size_t size)
{
    char pid[32], errstr[512];
    const char *params[1] = {pid};

    RL_REQUIRE(rl_db_exec(of, "SELECT pg_backend_pid()::text", 0, NULL, pid,
                          sizeof(pid), errstr, sizeof(errstr)) == 1);
    RL_REQUIRE(rl_db_exec(db,
                          "SELECT state FROM pg_stat_activity WHERE pid = "
                          "$1::int4",
                          1, params, state, size, errstr, sizeof(errstr)) == 1);
    return state;
}

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
    char errstr[512], state[64], job[32];
    size_t n1 = 0, n2 = 0;

    for (int i = 0; i < RUNS; i++) {
        snprintf(job, sizeof(job), "lease-%d", i);
        fixture_complete_run(db, &runs[i], job, request, "{\"text\":\"t\"}",
                             channels, 2);
    }

    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay1, 100, 0, 60000, &rows1, &n1,
                                             NULL, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n1, 2 * RUNS);
    /* What the relay does while it waits for the broker's reports. */
    RL_CHECK_STREQ(session_state(db, relay1, state, sizeof(state)), "idle");
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox WHERE due_at > "
                               "now() + interval '50 s'",
                               NULL),
                   2 * RUNS);
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay2, 100, 0, 60000, &rows2, &n2,
                                             NULL, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n2, 0);

    /* The lease runs out (relay1 stalled); relay2 takes the rows. */
    RL_REQUIRE(fixture_int(db,
                           "WITH u AS (UPDATE outbox SET due_at = now() - "
                           "interval '1 s' RETURNING 1) SELECT count(*) "
                           "FROM u",
                           NULL) == 2 * RUNS);
    RL_REQUIRE(rl_db_outbox_lock_batch_bytes(relay2, 100, 0, 60000, &rows2, &n2,
                                             NULL, errstr,
                                             sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(n2, 2 * RUNS);

    /* relay1's late outcome (a failure) touches none of them. */
    RL_CHECK_INTEQ(
        rltest_db_outbox_finish(relay1, rows1, n1, 0, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox WHERE "
                               "delivery_count = 0 AND due_at > now()",
                               NULL),
                   2 * RUNS);
    RL_CHECK_INTEQ(
        rltest_db_outbox_finish(relay2, rows2, n2, 1, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 0);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM outbox_delivered", NULL),
        2 * RUNS);
    RL_CHECK_STREQ(session_state(db, relay2, state, sizeof(state)), "idle");

    rl_db_outbox_rows_free(rows1, n1);
    rl_db_outbox_rows_free(rows2, n2);
    rl_db_destroy(relay1);
    rl_db_destroy(relay2);
    fixture_drop(db, schema);
    RL_TEST_END();
}
