/* runledger migrate: applies the schema migrations compiled into this
 * binary to the ledger database. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/db_migrate.h"
#include "rl/err.h"

/* An applied migration differs from this build's text: an operator has to
 * look, so it gets its own exit code. */
#define MIGRATE_EXIT_CHECKSUM 3

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger migrate [--database-url URL] [--schema NAME]\n"
"\n"
"Applies the pending ledger migrations (schema/NNN_*.sql, compiled in),\n"
"each in its own transaction, under an advisory lock. Running it again\n"
"is a no-op. It first creates the database roles runledger_owner,\n"
"runledger_worker, runledger_console, runledger_relay and\n"
"runledger_readonly where missing (a login that may not create roles\n"
"needs them made beforehand: docs/deploying.md, Database roles), makes\n"
"its login a member of runledger_owner and works as that role, so it\n"
"owns every table and function.\n"
"\n"
"  --database-url URL  PostgreSQL connection string (default: DATABASE_URL,\n"
"                      else libpq's PG* variables)\n"
"  --schema NAME       create and use this schema instead of the\n"
"                      search_path default\n"
"\n"
"exit status: 0 applied or up to date, 1 failure, 2 bad usage,\n"
"3 an applied migration was changed (checksum mismatch)\n";
/* clang-format on */

int
rl_cmd_migrate(int argc, char **argv)
{
    const char *url = NULL;
    const char *schema = NULL;
    char errstr[1024];
    struct rl_db *db;
    enum rl_pg_pool_mode mode;
    int applied = 0;
    int err;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return RL_EXIT_OK;
        } else if (strcmp(argv[i], "--database-url") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else if (strncmp(argv[i], "--database-url=", 15) == 0) {
            url = argv[i] + 15;
        } else if (strcmp(argv[i], "--schema") == 0 && i + 1 < argc) {
            schema = argv[++i];
        } else if (strncmp(argv[i], "--schema=", 9) == 0) {
            schema = argv[i] + 9;
        } else {
            /* Never echo the argument: it may be a URL with a password. */
            fprintf(stderr,
                    "runledger migrate: unknown or incomplete option "
                    "(argument %d)\n",
                    i);
            fputs(usage_text, stderr);
            return RL_EXIT_USAGE;
        }
    }

    /* The migration lock is a session's: a transaction pool would let it
     * go with the first statement's transaction. */
    if (rl_config_pool_mode_parse(getenv("RUNLEDGER_PG_POOL_MODE"), &mode,
                                  errstr, sizeof(errstr)) != 0) {
        fprintf(stderr, "runledger migrate: %s\n", errstr);
        return RL_EXIT_USAGE;
    }
    db = rl_db_connect_schema(url, schema, errstr, sizeof(errstr));
    if (!db) {
        fprintf(stderr, "runledger migrate: %s\n", errstr);
        return RL_EXIT_FAILURE;
    }
    err = rl_db_migrate(db, &applied, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err == RL_ERR_CHECKSUM) {
        fprintf(stderr, "runledger migrate: %s\n", errstr);
        return MIGRATE_EXIT_CHECKSUM;
    }
    if (err != 0) {
        fprintf(stderr, "runledger migrate: %s\n", errstr);
        return RL_EXIT_FAILURE;
    }
    if (applied == 0)
        printf("schema is up to date\n");
    else
        printf("applied %d migrations\n", applied);
    return RL_EXIT_OK;
}
