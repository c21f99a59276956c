/* Invariant: a committed statement that queues outbox rows wakes every
 * relay listening on that ledger, once per transaction; a statement that
 * queues none, and a ledger in another schema of the same database, wake
 * nobody (schema/009_outbox_wakeup.sql, rl_db_outbox_listen/_wait). */
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_outbox.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] = "{\"notify\":[\"email\",\"slack\"],"
                              "\"request\":{\"messages\":[],\"model\":\"m\"}}";

/* Claims a new run of job and completes it with n channels. */
static void
complete_one(struct rl_db *db, const char *job, const char *const *channels,
             size_t n)
{
    struct fixture_run run;

    fixture_complete_run(db, &run, job, request, "{\"text\":\"t\"}", channels,
                         n);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1], other[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_db *relay = fixture_connect(schema);
    struct rl_db *elsewhere = fixture_ledger(other);
    const char *const channels[2] = {"email", "slack"};
    char errstr[512];

    RL_REQUIRE(rl_db_outbox_listen(relay, errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(rl_db_outbox_wait(relay, 0, errstr, sizeof(errstr)), 0);

    /* two rows in one transaction: one wake-up */
    complete_one(db, "wake-1", channels, 2);
    RL_CHECK_INTEQ(rl_db_outbox_wait(relay, 10000, errstr, sizeof(errstr)), 1);
    RL_CHECK_INTEQ(rl_db_outbox_wait(relay, 300, errstr, sizeof(errstr)), 0);

    /* a completion without channels queues nothing */
    complete_one(db, "wake-none", NULL, 0);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 2);
    RL_CHECK_INTEQ(rl_db_outbox_wait(relay, 300, errstr, sizeof(errstr)), 0);

    /* another ledger's rows are not this relay's */
    complete_one(elsewhere, "wake-other", channels, 2);
    RL_CHECK_INTEQ(fixture_int(elsewhere, "SELECT count(*) FROM outbox", NULL),
                   2);
    RL_CHECK_INTEQ(rl_db_outbox_wait(relay, 300, errstr, sizeof(errstr)), 0);

    /* and a wake-up that came while the relay was busy is kept */
    complete_one(db, "wake-2", channels, 1);
    RL_CHECK_INTEQ(fixture_int(relay, "SELECT count(*) FROM outbox", NULL), 3);
    RL_CHECK_INTEQ(rl_db_outbox_wait(relay, 10000, errstr, sizeof(errstr)), 1);

    rl_db_destroy(relay);
    fixture_drop(elsewhere, other);
    fixture_drop(db, schema);
    RL_TEST_END();
}
