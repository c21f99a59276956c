/* `runledger budgets`: daily token budgets per tenant (optionally per job),
 * enforced before every model dispatch (schema/004_budgets.sql). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/db_budgets.h"
#include "rl/db_conn.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger budgets set --tenant T [--job J] --tokens N\n"
"                             [--actor NAME]\n"
"       runledger budgets remove --tenant T [--job J]\n"
"       runledger budgets show [--tenant T] [--json]\n"
"       runledger budgets wake --tenant T [--job J] [--actor NAME]\n"
"                              [--reason TEXT]\n"
"\n"
"  set     the tenant's token budget per UTC day (prompt + completion\n"
"          tokens); with --job, a budget of that job alone. Both apply\n"
"          when both exist. Takes effect at the next dispatch.\n"
"  remove  drop a budget (the tenant or job is unlimited again)\n"
"  show    every budget with today's reserved, spent and left tokens,\n"
"          deferrals and runs waiting for the next window\n"
"  wake    make the tenant's (job's) budget-deferred runs due now, e.g.\n"
"          after raising its budget, and print how many; each is recorded\n"
"          as a 'wake' decision (runs show). A run that still does not fit\n"
"          is deferred again. --actor defaults to $USER.\n"
"\n"
"Before each model call a worker reserves the estimated prompt tokens plus\n"
"max_tokens (or RUNLEDGER_BUDGET_DEFAULT_MAX_TOKENS); the attempt's real\n"
"usage settles it. A run that does not fit waits, without spending an\n"
"attempt, until 00:00 UTC the next day (error_class budget).\n"
"Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage; 3 no such budget.\n";
/* clang-format on */

static const struct rl_cli_column budget_columns[] = {
    {"TENANT", "tenant", -24},
    {"JOB", "job", -24},
    {"DAY", "day", -10},
    {"DAILY", "daily_tokens", 12},
    {"RESERVED", "reserved", 10},
    {"SPENT", "spent", 10},
    {"LEFT", "left", 10},
    {"DEFERRALS", "deferrals", 9},
    {"WAITING", "deferred_runs", 8}};

static const struct rl_cli_table budget_table = {
    "", " ", "-", budget_columns, RL_CLI_NCOLUMNS(budget_columns)};

int
rl_cmd_budgets(int argc, char **argv)
{
    static const char *const actions[] = {"set", "show", "remove", "wake",
                                          NULL};
    enum {
        OPT_TENANT = 1,
        OPT_JOB,
        OPT_TOKENS,
        OPT_ACTOR,
        OPT_REASON,
        OPT_JSON
    };
    static const struct option options[] = {
        {"tenant", required_argument, NULL, OPT_TENANT},
        {"job", required_argument, NULL, OPT_JOB},
        {"tokens", required_argument, NULL, OPT_TOKENS},
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"reason", required_argument, NULL, OPT_REASON},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "budgets",
        .usage = usage_text,
        .options = options,
    };
    const char *tenant = NULL, *job = NULL, *actor = getenv("USER");
    const char *action, *reason = "made due now by budgets wake";
    long long tokens = -1;
    int64_t woken = 0;
    char errstr[512], command[32], *end, *json = NULL;
    struct rl_db *db;
    int as_json = 0, opt, err, rc;

    rc = rl_cli_action("budgets", usage_text, argc, argv, actions, &action);
    if (rc >= 0)
        return rc;
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc - 1, argv + 1, &rc)) > 0) {
        switch (opt) {
        case OPT_TENANT:
            tenant = optarg;
            break;
        case OPT_JOB:
            job = optarg;
            break;
        case OPT_TOKENS:
            errno = 0;
            tokens = strtoll(optarg, &end, 10);
            if (errno || *end || end == optarg || tokens < 0)
                return rl_cli_usage_error(
                    "budgets", "--tokens must be a whole number >= 0");
            break;
        case OPT_ACTOR:
            actor = optarg;
            break;
        case OPT_REASON:
            reason = optarg;
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if (strcmp(action, "show") != 0 && (!tenant || !*tenant))
        return rl_cli_usage_error("budgets", "%s needs --tenant", action);
    if (strcmp(action, "set") == 0 && tokens < 0)
        return rl_cli_usage_error("budgets", "set needs --tokens");
    if (job && !*job)
        return rl_cli_usage_error("budgets", "--job must not be empty");
    if (!actor || !*actor)
        actor = "operator";
    if (!*reason)
        return rl_cli_usage_error("budgets", "--reason must not be empty");

    rc = rl_cli_db_open("budgets", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    if (strcmp(action, "set") == 0) {
        err = rl_db_budget_set(db, tenant, job, tokens, actor, errstr,
                               sizeof(errstr));
        if (!err)
            printf("budget of %s%s%s: %lld tokens per UTC day\n", tenant,
                   job ? " job " : "", job ? job : "", tokens);
    } else if (strcmp(action, "remove") == 0) {
        err = rl_db_budget_remove(db, tenant, job, errstr, sizeof(errstr));
        if (!err)
            printf("budget of %s%s%s removed\n", tenant, job ? " job " : "",
                   job ? job : "");
    } else if (strcmp(action, "wake") == 0) {
        err = rl_db_budget_wake(db, tenant, job, actor, reason, &woken, errstr,
                                sizeof(errstr));
        if (!err)
            printf("%lld deferred runs of %s%s%s made due now\n",
                   (long long)woken, tenant, job ? " job " : "",
                   job ? job : "");
    } else {
        err = rl_db_budgets_json(db, tenant, &json, errstr, sizeof(errstr));
    }
    rl_db_destroy(db);
    if (err) {
        snprintf(command, sizeof(command), "budgets %s", action);
        return rl_cli_error(command, err, errstr);
    }
    if (json)
        rl_cli_table_print_per_job(&budget_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}
