/* `runledger budgets`: daily token budgets per tenant (optionally per job),
 * enforced before every model dispatch (schema/004_budgets.sql). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/config.h"
#include "rl/db.h"
#include "rl/err.h"

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: runledger budgets set --tenant T [--job J] --tokens N\n"
            "                             [--actor NAME]\n"
            "       runledger budgets remove --tenant T [--job J]\n"
            "       runledger budgets show [--tenant T] [--json]\n"
            "\n"
            "  set     the tenant's token budget per UTC day (prompt + "
            "completion\n"
            "          tokens); with --job, a budget of that job alone. "
            "Both apply\n"
            "          when both exist. Takes effect at the next dispatch.\n"
            "  remove  drop a budget (the tenant or job is unlimited again)\n"
            "  show    every budget with today's reserved, spent and left "
            "tokens,\n"
            "          deferrals and runs waiting for the next window\n"
            "\n"
            "Before each model call a worker reserves the estimated prompt "
            "tokens plus\n"
            "max_tokens (or RUNLEDGER_BUDGET_DEFAULT_MAX_TOKENS); the "
            "attempt's real\n"
            "usage settles it. A run that does not fit waits, without "
            "spending an\n"
            "attempt, until 00:00 UTC the next day (error_class budget).\n"
            "Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage; 3 no such "
            "budget.\n");
}

int
rl_cmd_budgets(int argc, char **argv)
{
    enum { OPT_TENANT = 1, OPT_JOB, OPT_TOKENS, OPT_ACTOR, OPT_JSON };
    static const struct option options[] = {
        {"tenant", required_argument, NULL, OPT_TENANT},
        {"job", required_argument, NULL, OPT_JOB},
        {"tokens", required_argument, NULL, OPT_TOKENS},
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *tenant = NULL, *job = NULL, *actor = getenv("USER");
    const char *action;
    long long tokens = -1;
    char errstr[512], *end, *json = NULL;
    struct rl_config *cfg = NULL;
    struct rl_db *db = NULL;
    int as_json = 0, opt, err, rc = RL_EXIT_OK;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? RL_EXIT_USAGE : RL_EXIT_OK;
    }
    action = argv[1];
    if (strcmp(action, "set") && strcmp(action, "show") &&
        strcmp(action, "remove"))
        return rl_cli_usage_error("budgets", "unknown action \"%s\"", action);
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc - 1, argv + 1, ":h", options, NULL)) != -1) {
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
        case OPT_JSON:
            as_json = 1;
            break;
        case 'h':
            usage(stdout);
            return RL_EXIT_OK;
        default:
            return rl_cli_usage_error("budgets", "bad option %s", argv[optind]);
        }
    }
    if (optind < argc - 1)
        return rl_cli_usage_error("budgets", "unexpected argument \"%s\"",
                                  argv[optind + 1]);
    if (strcmp(action, "show") != 0 && (!tenant || !*tenant))
        return rl_cli_usage_error("budgets", "%s needs --tenant", action);
    if (strcmp(action, "set") == 0 && tokens < 0)
        return rl_cli_usage_error("budgets", "set needs --tokens");
    if (job && !*job)
        return rl_cli_usage_error("budgets", "--job must not be empty");

    cfg = rl_config_load(errstr, sizeof(errstr));
    if (!cfg) {
        fprintf(stderr, "runledger budgets: %s\n", errstr);
        return RL_EXIT_USAGE;
    }
    db = rl_db_connect(cfg->database_url, errstr, sizeof(errstr));
    rl_config_destroy(cfg);
    if (!db) {
        fprintf(stderr, "runledger budgets: %s\n", errstr);
        return RL_EXIT_FAILURE;
    }
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
    } else {
        err = rl_db_budgets_json(db, tenant, &json, errstr, sizeof(errstr));
    }
    rl_db_destroy(db);
    if (err) {
        fprintf(stderr, "runledger budgets %s: %s\n", action, errstr);
        return rl_cli_exit_code(err);
    }
    if (json && as_json) {
        printf("%s\n", json);
    } else if (json) {
        cJSON *arr = cJSON_Parse(json);
        const cJSON *row;

        printf("%-24s %-24s %-10s %12s %10s %10s %10s %9s %8s\n", "TENANT",
               "JOB", "DAY", "DAILY", "RESERVED", "SPENT", "LEFT", "DEFERRALS",
               "WAITING");
        cJSON_ArrayForEach(row, arr)
        {
            char b[8][32];
            const cJSON *j = cJSON_GetObjectItemCaseSensitive(row, "job");

            printf("%-24s %-24s %-10s %12s %10s %10s %10s %9s %8s\n",
                   rl_cli_json_text(row, "tenant", "-", b[0], 32),
                   cJSON_IsString(j) && *j->valuestring ? j->valuestring
                                                        : "(all)",
                   rl_cli_json_text(row, "day", "-", b[1], 32),
                   rl_cli_json_text(row, "daily_tokens", "-", b[2], 32),
                   rl_cli_json_text(row, "reserved", "-", b[3], 32),
                   rl_cli_json_text(row, "spent", "-", b[4], 32),
                   rl_cli_json_text(row, "left", "-", b[5], 32),
                   rl_cli_json_text(row, "deferrals", "-", b[6], 32),
                   rl_cli_json_text(row, "deferred_runs", "-", b[7], 32));
        }
        cJSON_Delete(arr);
    }
    free(json);
    return rc;
}
