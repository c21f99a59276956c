/* `runledger report`: what the runs of a period cost, from the ledger
 * alone: runs, generations, extra generations caused by retries or
 * ambiguity, tokens. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/db_budgets.h"
#include "rl/db_conn.h"
#include "rl/db_prices.h"
#include "rl/timefmt.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger report --since RFC3339 [--by tenant|job] [--json]\n"
"       runledger report --since RFC3339 --cost [--json]\n"
"\n"
"Runs scheduled at or after --since, in total or per tenant (or per\n"
"tenant and job): runs, completed, generations (attempts that returned\n"
"an answer), extra generations (per run, attempts that may have generated\n"
"- ok, ambiguous, lease lost, or no outcome recorded - beyond the first:\n"
"what retries and ambiguity may have cost), dispatches, runs waiting for\n"
"the next budget window, prompt/completion/cached tokens.\n"
"With --cost: per model, the tokens of live calls and of batches side by\n"
"side, and their cost at the model's price (runledger prices), with what\n"
"the batch tokens would have cost live and what the batches saved.\n"
"Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage.\n";
/* clang-format on */

/* A total or group with no tenant or job is shown as "(all)" there. */
static const struct rl_cli_column report_columns[] = {
    {"TENANT", "tenant", -24},
    {"JOB", "job", -24},
    {"RUNS", "runs", 8},
    {"COMPLETED", "completed", 9},
    {"GENS", "generations", 6},
    {"EXTRA", "extra_generations", 6},
    {"DISPATCHES", "dispatches", 10},
    {"DEFERRED", "budget_deferred", 8},
    {"PROMPT_TOK", "prompt_tokens", 12},
    {"COMPL_TOK", "completion_tokens", 12},
    {"CACHED_TOK", "cached_tokens", 10}};

static const struct rl_cli_table report_table = {
    "", " ", "(all)", report_columns, RL_CLI_NCOLUMNS(report_columns)};

static const struct rl_cli_column cost_columns[] = {
    {"MODEL", "model", -20},
    {"LIVE_IN", "live_prompt_tokens", 10},
    {"LIVE_OUT", "live_completion_tokens", 10},
    {"LIVE_COST", "live_cost", 12},
    {"BATCH_IN", "batch_prompt_tokens", 10},
    {"BATCH_OUT", "batch_completion_tokens", 10},
    {"BATCH_COST", "batch_cost", 12},
    {"AT_LIVE", "batch_at_live_price", 12},
    {"SAVED", "saved", 12}};

static const struct rl_cli_table cost_table = {"", " ", "-", cost_columns,
                                               RL_CLI_NCOLUMNS(cost_columns)};

int
rl_cmd_report(int argc, char **argv)
{
    enum { OPT_SINCE = 1, OPT_BY, OPT_JSON, OPT_COST };
    static const struct option options[] = {
        {"cost", no_argument, NULL, OPT_COST},
        {"since", required_argument, NULL, OPT_SINCE},
        {"by", required_argument, NULL, OPT_BY},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "report",
        .usage = usage_text,
        .options = options,
    };
    const char *since = NULL, *by = NULL;
    char errstr[512], *json = NULL;
    struct rl_db *db;
    int64_t epoch;
    int as_json = 0, cost = 0, opt, err, rc;

    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc, argv, &rc)) > 0) {
        switch (opt) {
        case OPT_SINCE:
            if (rl_time_parse(optarg, &epoch, NULL, errstr, sizeof(errstr)) !=
                0)
                return rl_cli_usage_error("report", "--since: %s", errstr);
            since = optarg;
            break;
        case OPT_BY:
            if (strcmp(optarg, "tenant") && strcmp(optarg, "job"))
                return rl_cli_usage_error("report",
                                          "--by must be tenant or job");
            by = optarg;
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        case OPT_COST:
            cost = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if (!since)
        return rl_cli_usage_error("report", "--since is required");
    if (cost && by)
        return rl_cli_usage_error("report", "--cost is per model: no --by");

    rc = rl_cli_db_open("report", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    if (cost)
        err = rl_db_cost_report_json(db, since, &json, errstr, sizeof(errstr));
    else
        err = rl_db_report_json(db, since, by, &json, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err)
        return rl_cli_error("report", err, errstr);
    rl_cli_table_print_json(cost ? &cost_table : &report_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}
