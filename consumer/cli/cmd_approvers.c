/* `runledger approvers`: who may approve or reject the proposals of a
 * tenant's approval-required runs (schema/006_approval.sql). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/db_approval.h"
#include "rl/db_conn.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger approvers add --tenant T --actor A [--channel C] [--by NAME]\n"
"       runledger approvers remove --tenant T --actor A [--channel C]\n"
"                                  [--by NAME]\n"
"       runledger approvers list [--tenant T] [--json]\n"
"\n"
"  add     A may approve or reject proposals of tenant T (runs approve,\n"
"          the console); with --channel, only proposals whose every\n"
"          destination is a channel A was added for\n"
"  remove  A no longer may (with --channel, for that channel only);\n"
"          decisions already recorded stay\n"
"  list    the approvers, of T or of every tenant\n"
"\n"
"The audit trail records each add and remove and who made it (--by,\n"
"default $USER).\n"
"\n"
"The ledger is DATABASE_URL (see `runledger config`).\n"
"Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage; 3 no such approver.\n";
/* clang-format on */

static const struct rl_cli_column approver_columns[] = {
    {"TENANT", "tenant", -32},
    {"ACTOR", "actor", -32},
    {"CHANNEL", "channel", -24},
    {"ADDED_AT", "added_at", 0}};

static const struct rl_cli_table approver_table = {
    "", "  ", "-", approver_columns, RL_CLI_NCOLUMNS(approver_columns)};

int
rl_cmd_approvers(int argc, char **argv)
{
    enum { OPT_TENANT = 1, OPT_ACTOR, OPT_CHANNEL, OPT_BY, OPT_JSON };
    static const struct option options[] = {
        {"tenant", required_argument, NULL, OPT_TENANT},
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"channel", required_argument, NULL, OPT_CHANNEL},
        {"by", required_argument, NULL, OPT_BY},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "approvers",
        .usage = usage_text,
        .options = options,
    };
    const char *tenant = NULL, *actor = NULL, *channel = NULL, *by = NULL;
    const char *verb;
    struct rl_db *db;
    char errstr[512], command[32];
    char *json = NULL;
    int as_json = 0, added = 0, err, opt, rc;

    if (argc < 2) {
        fputs(usage_text, stderr);
        return RL_EXIT_USAGE;
    }
    verb = argv[1];
    if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0 ||
        strcmp(verb, "help") == 0) {
        fputs(usage_text, stdout);
        return RL_EXIT_OK;
    }
    if (strcmp(verb, "add") != 0 && strcmp(verb, "remove") != 0 &&
        strcmp(verb, "list") != 0)
        return rl_cli_usage_error("approvers",
                                  "unknown approvers command \"%s\"", verb);
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc - 1, argv + 1, &rc)) > 0) {
        switch (opt) {
        case OPT_TENANT:
            tenant = optarg;
            break;
        case OPT_ACTOR:
            actor = optarg;
            break;
        case OPT_CHANNEL:
            channel = optarg;
            break;
        case OPT_BY:
            by = optarg;
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if (strcmp(verb, "list") != 0) {
        if (!tenant || !*tenant || !actor || !*actor)
            return rl_cli_usage_error(
                "approvers", "approvers %s needs --tenant and --actor", verb);
        if (channel && !*channel)
            return rl_cli_usage_error("approvers",
                                      "--channel needs a channel name");
    } else if (actor || channel) {
        return rl_cli_usage_error("approvers",
                                  "approvers list takes no --actor or "
                                  "--channel");
    }

    if (!by || !*by)
        by = getenv("USER");
    if (!by || !*by)
        by = "cli";

    rc = rl_cli_db_open("approvers", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    if (strcmp(verb, "add") == 0)
        err = rl_db_approver_add(db, tenant, actor, channel, by, &added, errstr,
                                 sizeof(errstr));
    else if (strcmp(verb, "remove") == 0)
        err = rl_db_approver_remove(db, tenant, actor, channel, by, errstr,
                                    sizeof(errstr));
    else
        err = rl_db_approvers_json(db, tenant, &json, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err) {
        snprintf(command, sizeof(command), "approvers %s", verb);
        return rl_cli_error(command, err, errstr);
    }
    if (strcmp(verb, "add") == 0)
        printf("%s %s an approver of tenant %s%s%s\n", actor,
               added ? "is now" : "already was", tenant,
               channel ? " for channel " : "", channel ? channel : "");
    else if (strcmp(verb, "remove") == 0)
        printf("%s is no longer an approver of tenant %s\n", actor, tenant);
    else
        rl_cli_table_print_json(&approver_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}
