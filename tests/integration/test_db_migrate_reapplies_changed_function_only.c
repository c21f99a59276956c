/* Invariant: migrate re-creates a schema/functions/ file exactly when its
 * recorded checksum differs from this build's text (or is missing), and
 * leaves every other function, view and trigger untouched; the numbered
 * migrations apply nothing meanwhile. */
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/db_migrate.h"
#include "rl/err.h"
#include "rl/migrations.h"
#include "rltest.h"
#include "test_db_fixture.h"

/* Files re-created since the clock was set back. */
static const char reapplied[] =
    "SELECT count(*) FROM schema_functions WHERE applied_at > '2000-01-01'";

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    char errstr[512];
    struct rl_db *db = fixture_ledger(schema);
    const char *file = "runs_output_write_once.sql";
    int applied = -1;

    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM schema_functions", NULL),
        rl_schema_functions_count);
    fixture_exec(db, "UPDATE schema_functions SET applied_at = '2000-01-01'");

    /* The trigger gone from the ledger and its file recorded as changed:
     * the next migrate puts it back, and only it. */
    fixture_exec(db, "DROP TRIGGER runs_output_write_once ON runs");
    fixture_exec(db, "UPDATE schema_functions SET checksum = 'changed'"
                     " WHERE name = 'runs_output_write_once.sql'");
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(applied, 0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM pg_trigger"
                               " WHERE tgname = 'runs_output_write_once'"
                               " AND tgrelid = 'runs'::regclass",
                               NULL),
                   1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM schema_functions"
                               " WHERE name = $1 AND checksum ~ "
                               "'^[0-9a-f]{64}$'"
                               " AND applied_at > '2000-01-01'",
                               file),
                   1);
    /* Everyone else still carries the time it was set back to. */
    RL_CHECK_INTEQ(fixture_int(db, reapplied, NULL), 1);

    /* A row missing altogether counts as changed too. */
    fixture_exec(db, "DELETE FROM schema_functions"
                     " WHERE name = 'rl_envelope.sql'");
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM schema_functions"
                               " WHERE name = $1",
                               "rl_envelope.sql"),
                   1);

    /* Nothing changed: nothing re-created. */
    fixture_exec(db, "UPDATE schema_functions SET applied_at = '2000-01-01'");
    RL_CHECK_INTEQ(rl_db_migrate(db, &applied, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(fixture_int(db, reapplied, NULL), 0);

    fixture_drop(db, schema);
    RL_TEST_END();
}
