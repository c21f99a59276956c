/* `runledger limits ... --model` (for now also `runledger model-limits`):
 * requests and tokens per minute per model, shared by every worker of the
 * group (schema/019_model_rate_limits.sql). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/db_conn.h"
#include "rl/db_model_limits.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger limits set --model M [--endpoint E] [--rpm N] [--tpm N]\n"
"                            [--window-seconds S] [--actor NAME]\n"
"       runledger limits show --model [M] [--json]\n"
"       runledger limits remove --model M\n"
"\n"
"  set     the model's limits: requests (--rpm) and tokens (--tpm, the\n"
"          estimate a budget reserves: body bytes / 4 + max_tokens) per\n"
"          window of S seconds (default 60), for every worker together;\n"
"          at least one of them. Takes effect at the next dispatch.\n"
"  show    every model's limits (or M's) with its bucket, the provider's\n"
"          pause, the adaptive concurrency cap, runs deferred (WAITS),\n"
"          429s (THROTTLES) and runs waiting now\n"
"  remove  drop the model's row: no limit, no pause, no cap\n"
"\n"
"A run whose model has no room waits, without spending an attempt, until\n"
"the bucket has room (error_class rate_limit, shown by runs show). A 429\n"
"from the provider pauses the model for every worker until its reset.\n"
"Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage; 3 no such model.\n";
/* clang-format on */

static const struct rl_cli_column limit_columns[] = {
    {"MODEL", "model", -24},
    {"RPM", "rpm", 8},
    {"TPM", "tpm", 10},
    {"WINDOW_S", "window_seconds", 8},
    {"REQ_LEFT", "requests_left", 8},
    {"TOK_LEFT", "tokens_left", 9},
    {"PAUSED_UNTIL", "paused_until", -25},
    {"CAP", "concurrency_cap", 5},
    {"WAITS", "waits", 8},
    {"THROTTLES", "throttles", 9},
    {"WAITING", "waiting_runs", 8}};

static const struct rl_cli_table limit_table = {"", " ", "-", limit_columns,
                                                RL_CLI_NCOLUMNS(limit_columns)};

static int
parse_count(const char *command, const char *flag, const char *arg,
            long long *out)
{
    char *end;

    errno = 0;
    *out = strtoll(arg, &end, 10);
    if (errno || *end || end == arg || *out <= 0)
        return rl_cli_usage_error(command, "%s must be a whole number > 0",
                                  flag);
    return RL_EXIT_OK;
}

int
rl_cmd_limits_model(int argc, char **argv)
{
    static const char *const actions[] = {"set", "show", "remove", NULL};
    enum {
        OPT_MODEL = 1,
        OPT_ENDPOINT,
        OPT_RPM,
        OPT_TPM,
        OPT_WINDOW,
        OPT_ACTOR,
        OPT_JSON
    };
    static const struct option options[] = {
        {"model", optional_argument, NULL, OPT_MODEL},
        {"endpoint", required_argument, NULL, OPT_ENDPOINT},
        {"rpm", required_argument, NULL, OPT_RPM},
        {"tpm", required_argument, NULL, OPT_TPM},
        {"window-seconds", required_argument, NULL, OPT_WINDOW},
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *command = argc > 0 && argv[0] ? argv[0] : "limits";
    struct rl_cli_opts opts = {
        .command = command,
        .usage = usage_text,
        .options = options,
    };
    struct rl_model_limit lim = {.window_ms = 60000};
    const char *model = NULL, *actor = getenv("USER"), *action;
    long long rpm = 0, tpm = 0;
    double window = 60;
    char errstr[512], what[64], *end, *json = NULL;
    struct rl_db *db;
    int as_json = 0, opt, err, rc;

    rc = rl_cli_action(command, usage_text, argc, argv, actions, &action);
    if (rc >= 0)
        return rc;
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc - 1, argv + 1, &rc)) > 0) {
        switch (opt) {
        case OPT_MODEL:
            /* "--model M" as well as "--model=M"; show takes a bare one */
            if (optarg)
                model = optarg;
            else if (optind < argc - 1 && argv[1 + optind][0] != '-')
                model = argv[1 + optind++];
            else
                model = "";
            break;
        case OPT_ENDPOINT:
            lim.endpoint = optarg;
            break;
        case OPT_RPM:
            rc = parse_count(command, "--rpm", optarg, &rpm);
            if (rc != RL_EXIT_OK)
                return rc;
            break;
        case OPT_TPM:
            rc = parse_count(command, "--tpm", optarg, &tpm);
            if (rc != RL_EXIT_OK)
                return rc;
            break;
        case OPT_WINDOW:
            errno = 0;
            window = strtod(optarg, &end);
            if (errno || *end || end == optarg || window < 0.1 ||
                window > 86400)
                return rl_cli_usage_error(
                    command, "--window-seconds must be within 0.1..86400");
            break;
        case OPT_ACTOR:
            actor = optarg;
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if (!model)
        return rl_cli_usage_error(command, "%s needs --model", action);
    if (strcmp(action, "show") != 0 && !*model)
        return rl_cli_usage_error(command, "%s needs --model M", action);
    if (strcmp(action, "set") == 0 && rpm <= 0 && tpm <= 0)
        return rl_cli_usage_error(command, "set needs --rpm or --tpm");
    if (!actor || !*actor)
        actor = "operator";

    rc = rl_cli_db_open(command, &db);
    if (rc != RL_EXIT_OK)
        return rc;
    if (strcmp(action, "set") == 0) {
        lim.model = model;
        lim.rpm = rpm;
        lim.tpm = tpm;
        lim.window_ms = (int64_t)(window * 1000 + 0.5);
        err = rl_db_model_limit_set(db, &lim, actor, errstr, sizeof(errstr));
        if (!err)
            printf("limits of model %s: %lld requests, %lld tokens per %g s "
                   "(0: none)\n",
                   model, rpm, tpm, window);
    } else if (strcmp(action, "remove") == 0) {
        err = rl_db_model_limit_remove(db, model, errstr, sizeof(errstr));
        if (!err)
            printf("limits of model %s removed\n", model);
    } else {
        err = rl_db_model_limits_json(db, model, &json, errstr, sizeof(errstr));
    }
    rl_db_destroy(db);
    if (err) {
        snprintf(what, sizeof(what), "%s %s", command, action);
        return rl_cli_error(what, err, errstr);
    }
    if (json)
        rl_cli_table_print_json(&limit_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}
