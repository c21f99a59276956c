/* Invariant: migrating an up-to-date ledger applies nothing, changes
 * nothing, and two migrators racing on one fresh schema apply each file
 * exactly once (the advisory lock). */
#include <pthread.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_migrate.h"
#include "rl/err.h"
#include "rl/migrations.h"
#include "rltest.h"
#include "test_db_fixture.h"

struct racer {
    const char *schema;
    int err;
    int applied;
    char errstr[512];
};

static void *
race_migrate(void *arg)
{
    struct racer *r = arg;
    struct rl_db *db = fixture_connect(r->schema);

    r->err = rl_db_migrate(db, &r->applied, r->errstr, sizeof(r->errstr));
    rl_db_destroy(db);
    return NULL;
}

static void
migrate_twice_applies_nothing_the_second_time(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    char errstr[512];
    struct rl_db *db = fixture_ledger(schema);
    int applied = -1;

    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM schema_migrations", NULL),
        rl_migrations_count);
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(applied, 0);
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(applied, 0);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM schema_migrations", NULL),
        rl_migrations_count);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM schema_migrations "
                               "WHERE checksum ~ '^[0-9a-f]{64}$'",
                               NULL),
                   rl_migrations_count);
    /* The tables exist and are usable. */
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM runs", NULL), 0);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM outbox_delivered", NULL), 0);
    fixture_drop(db, schema);
}

static void
racing_migrators_apply_each_file_once(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct racer racers[4];
    pthread_t threads[4];
    struct rl_db *db;
    int total = 0;

    snprintf(schema, sizeof(schema), "%s", rltest_unique("rl_test_race"));
    for (int i = 0; i < 4; i++) {
        memset(&racers[i], 0, sizeof(racers[i]));
        racers[i].schema = schema;
        RL_REQUIRE(
            pthread_create(&threads[i], NULL, race_migrate, &racers[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        if (racers[i].err != 0)
            fprintf(stderr, "racer %d: %s\n", i, racers[i].errstr);
        RL_CHECK_INTEQ(racers[i].err, 0);
        total += racers[i].applied;
    }
    RL_CHECK_INTEQ(total, rl_migrations_count);
    db = fixture_connect(schema);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM schema_migrations", NULL),
        rl_migrations_count);
    fixture_drop(db, schema);
}

int
main(void)
{
    migrate_twice_applies_nothing_the_second_time();
    racing_migrators_apply_each_file_once();
    RL_TEST_END();
}
