/* `runledger audit`: the append-only audit trail of decisions and
 * operator actions (schema/040_console.sql), newest first. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/db_conn.h"
#include "rl/db_console.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger audit [--run RUN_ID] [--limit N] [--json]\n"
"\n"
"The audit trail, newest first: every approval and rejection (from the\n"
"console or `runs approve|reject`) and operator action, with who, when,\n"
"from which address and the digest a decision covered. Rows are never\n"
"changed or removed (the ledger refuses it).\n"
"\n"
"  --run RUN_ID  the rows of one run\n"
"  --limit N     at most N rows (default 100, at most 100000)\n"
"  --json        one JSON array\n"
"\n"
"The ledger is DATABASE_URL (see `runledger config`).\n"
"Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage.\n";
/* clang-format on */

static const struct rl_cli_column audit_columns[] = {
    {"ID", "id", 6},
    {"AT", "at", -32},
    {"ACTOR", "actor", -16},
    {"ACTION", "action", -12},
    {"VIA", "via", -7},
    {"RUN_ID", "run_id", -64},
    {"ADDRESS", "address", -15},
    {"DIGEST", "digest", -64},
    {"DETAIL", "detail", 0}};

static const struct rl_cli_table audit_table = {"", "  ", "-", audit_columns,
                                                RL_CLI_NCOLUMNS(audit_columns)};

int
rl_cmd_audit(int argc, char **argv)
{
    enum { OPT_RUN = 1, OPT_LIMIT, OPT_JSON };
    static const struct option options[] = {
        {"run", required_argument, NULL, OPT_RUN},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "audit",
        .usage = usage_text,
        .options = options,
    };
    const char *run_id = NULL;
    struct rl_db *db;
    char errstr[512], *json = NULL, *end;
    long limit = 100;
    int as_json = 0, err, opt, rc;

    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc, argv, &rc)) > 0) {
        switch (opt) {
        case OPT_RUN:
            run_id = optarg;
            break;
        case OPT_LIMIT:
            limit = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || limit < 1 || limit > 100000)
                return rl_cli_usage_error(
                    "audit", "--limit must be 1 to 100000, not \"%s\"", optarg);
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    rc = rl_cli_db_open("audit", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    err =
        rl_db_audit_json(db, run_id, (int)limit, &json, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err)
        return rl_cli_error("audit", err, errstr);
    rl_cli_table_print_json(&audit_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}
