/* `runledger limits`: concurrency limits and weights per tenant and per
 * job, honoured group-wide when workers claim runs
 * (schema/018_fair_claims.sql). With --model, the model rate limits
 * (rl_cmd_limits_model, cmd_limits_model.c). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/db_conn.h"
#include "rl/db_limits.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger limits set --tenant T [--job J] [--concurrency N]\n"
"                            [--weight W]\n"
"       runledger limits remove --tenant T [--job J]\n"
"       runledger limits show [--tenant T] [--json]\n"
"       runledger limits ... --model M   (model rate limits)\n"
"\n"
"  set     --concurrency N: at most N runs of the tenant (with --job, of\n"
"          that job) run at once across every worker; a run over it stays\n"
"          pending and is claimed, by any worker, when a slot of its\n"
"          tenant frees. 0 holds the tenant's runs. --weight W (tenant\n"
"          only, default 1): the tenant's share of free slots when several\n"
"          tenants' runs wait. A value not given is kept.\n"
"  remove  drop a limit (the tenant or job is unlimited, weight 1 again)\n"
"  show    every limit with its runs running and waiting (pending, due)\n"
"\n"
"Takes effect at the next claim. Exit status: 0 ok; 1 PostgreSQL failed;\n"
"2 bad usage; 3 no such limit.\n";
/* clang-format on */

static const struct rl_cli_column limit_columns[] = {
    {"TENANT", "tenant", -24},          {"JOB", "job", -24},
    {"CONCURRENCY", "concurrency", 11}, {"WEIGHT", "weight", 6},
    {"RUNNING", "running", 8},          {"WAITING", "waiting", 8}};

static const struct rl_cli_table limit_table = {"", " ", "-", limit_columns,
                                                RL_CLI_NCOLUMNS(limit_columns)};

/* `limits ... --model M` is the model rate limits' command
 * (rl_cmd_limits_model, cmd_limits_model.c). */
static int
wants_model(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 ||
            strncmp(argv[i], "--model=", 8) == 0)
            return 1;
    }
    return 0;
}

static int
parse_count(const char *text, int min, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno || *end || end == text || v < min || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

int
rl_cmd_limits(int argc, char **argv)
{
    static const char *const actions[] = {"set", "show", "remove", NULL};
    enum { OPT_TENANT = 1, OPT_JOB, OPT_CONCURRENCY, OPT_WEIGHT, OPT_JSON };
    static const struct option options[] = {
        {"tenant", required_argument, NULL, OPT_TENANT},
        {"job", required_argument, NULL, OPT_JOB},
        {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
        {"weight", required_argument, NULL, OPT_WEIGHT},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "limits",
        .usage = usage_text,
        .options = options,
    };
    const char *tenant = NULL, *job = NULL, *action;
    int concurrency = -1, weight = 0;
    char errstr[512], command[32], *json = NULL;
    struct rl_db *db;
    int as_json = 0, opt, err, rc;

    if (wants_model(argc, argv))
        return rl_cmd_limits_model(argc, argv);
    rc = rl_cli_action("limits", usage_text, argc, argv, actions, &action);
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
        case OPT_CONCURRENCY:
            if (parse_count(optarg, 0, &concurrency) != 0)
                return rl_cli_usage_error(
                    "limits", "--concurrency must be a whole number >= 0");
            break;
        case OPT_WEIGHT:
            if (parse_count(optarg, 1, &weight) != 0)
                return rl_cli_usage_error(
                    "limits", "--weight must be a whole number >= 1");
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if (strcmp(action, "show") != 0 && (!tenant || !*tenant))
        return rl_cli_usage_error("limits", "%s needs --tenant", action);
    if (job && !*job)
        return rl_cli_usage_error("limits", "--job must not be empty");
    if (strcmp(action, "set") == 0 && concurrency < 0 && weight == 0)
        return rl_cli_usage_error("limits",
                                  "set needs --concurrency or --weight");
    if (job && weight > 0)
        return rl_cli_usage_error("limits",
                                  "--weight is a tenant's, not a job's");

    rc = rl_cli_db_open("limits", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    if (strcmp(action, "set") == 0) {
        err = rl_db_limit_set(db, tenant, job, concurrency, weight, errstr,
                              sizeof(errstr));
        if (!err)
            printf("limit of %s%s%s set\n", tenant, job ? " job " : "",
                   job ? job : "");
    } else if (strcmp(action, "remove") == 0) {
        err = rl_db_limit_remove(db, tenant, job, errstr, sizeof(errstr));
        if (!err)
            printf("limit of %s%s%s removed\n", tenant, job ? " job " : "",
                   job ? job : "");
    } else {
        err = rl_db_limits_json(db, tenant, &json, errstr, sizeof(errstr));
    }
    rl_db_destroy(db);
    if (err) {
        snprintf(command, sizeof(command), "limits %s", action);
        return rl_cli_error(command, err, errstr);
    }
    if (json)
        rl_cli_table_print_per_job(&limit_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}
