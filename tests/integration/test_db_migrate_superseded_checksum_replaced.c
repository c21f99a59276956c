/* Invariant: an applied migration whose stored checksum is that of an
 * earlier text of its file (changed since in comments only) migrates
 * cleanly and ends with the checksum this build records; any other checksum, a
 * superseded one stored under another file's name included, is still
 * refused with RL_ERR_CHECKSUM and changes nothing. */
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_migrate.h"
#include "rl/err.h"
#include "rl/migrations.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

/* SHA-256 of the three files as they were before their header comments
 * changed (`git show e66f5c2:schema/<name> | sha256sum`). */
static const struct {
    const char *name;
    const char *checksum;
} old_texts[] = {
    {"001_init.sql",
     "812a088b84f5b8dc4c7a7e123dc7c785fc0c7882e913ef24189d5db54f2d0b3a"},
    {"004_budgets.sql",
     "8e608a9b94b133d7c4513cf3cf210b9b38c68391c74c5bba16ffadd4b0e8b40a"},
    {"006_approval.sql",
     "e62373f8ae7d3229bcc7c7ae3829f45af2b91865ea648019207f3a18c301c5cf"},
};
#define N_OLD (sizeof(old_texts) / sizeof(old_texts[0]))

static void
set_checksum(struct rl_db *db, const char *name, const char *checksum)
{
    const char *params[2] = {name, checksum};
    char errstr[512];

    RL_REQUIRE(rl_db_exec(db,
                          "UPDATE schema_migrations SET checksum = $2 "
                          "WHERE name = $1",
                          2, params, NULL, 0, errstr, sizeof(errstr)) == 1);
}

static void
stored_checksum(struct rl_db *db, const char *name, char *out, size_t size)
{
    const char *params[1] = {name};
    char errstr[512];

    RL_REQUIRE(rl_db_exec(db,
                          "SELECT checksum FROM schema_migrations "
                          "WHERE name = $1",
                          1, params, out, size, errstr, sizeof(errstr)) == 1);
}

/* The checksum this build records for the migration called name. */
static void
current_checksum(const char *name, char *out)
{
    for (size_t i = 0; i < rl_migrations_count; i++) {
        if (strcmp(rl_migrations[i].name, name) == 0) {
            char errstr[512];

            RL_REQUIRE(rl_migration_checksum(&rl_migrations[i], out,
                                             RL_HEX_SIZE, errstr,
                                             sizeof(errstr)) == 0);
            return;
        }
    }
    RL_REQUIRE(!"migration not in this build");
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    char errstr[512];
    char stored[RL_HEX_SIZE];
    char current[RL_HEX_SIZE];
    struct rl_db *db = fixture_ledger(schema);
    int applied = -1;

    /* A ledger migrated by the build before the comments changed. */
    for (size_t k = 0; k < N_OLD; k++) {
        current_checksum(old_texts[k].name, current);
        RL_CHECK(strcmp(current, old_texts[k].checksum) != 0);
        set_checksum(db, old_texts[k].name, old_texts[k].checksum);
    }
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(applied, 0);
    for (size_t k = 0; k < N_OLD; k++) {
        current_checksum(old_texts[k].name, current);
        stored_checksum(db, old_texts[k].name, stored, sizeof(stored));
        RL_CHECK_STREQ(stored, current);
    }
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(applied, 0);

    /* One unknown checksum among superseded ones: refused, and the
     * superseded one is not replaced either. */
    set_checksum(db, old_texts[0].name, old_texts[0].checksum);
    set_checksum(db, old_texts[1].name, "unknown-checksum");
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)),
                   RL_ERR_CHECKSUM);
    RL_CHECK(strstr(errstr, old_texts[1].name) != NULL);
    stored_checksum(db, old_texts[0].name, stored, sizeof(stored));
    RL_CHECK_STREQ(stored, old_texts[0].checksum);

    /* A superseded checksum counts for its own file only. */
    set_checksum(db, old_texts[1].name, old_texts[0].checksum);
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)),
                   RL_ERR_CHECKSUM);
    RL_CHECK(strstr(errstr, old_texts[1].name) != NULL);

    fixture_drop(db, schema);
    RL_TEST_END();
}
