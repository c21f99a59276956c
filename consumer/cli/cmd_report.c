/* `runledger report`: what the runs of a period cost, from the ledger
 * alone: runs, generations, extra generations caused by retries or
 * ambiguity, tokens. */
#include <cjson/cJSON.h>
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
#include "rl/timefmt.h"

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: runledger report --since RFC3339 [--by tenant|job] "
            "[--json]\n"
            "\n"
            "Runs scheduled at or after --since, in total or per tenant (or "
            "per\n"
            "tenant and job): runs, completed, generations (attempts that "
            "returned\n"
            "an answer), extra generations (per run, attempts that may have "
            "generated\n"
            "- ok, ambiguous, lease lost, or no outcome recorded - beyond "
            "the first:\n"
            "what retries and ambiguity may have cost), dispatches, runs "
            "waiting for\n"
            "the next budget window, prompt/completion/cached tokens.\n"
            "Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage.\n");
}

int
rl_cmd_report(int argc, char **argv)
{
    enum { OPT_SINCE = 1, OPT_BY, OPT_JSON };
    static const struct option options[] = {
        {"since", required_argument, NULL, OPT_SINCE},
        {"by", required_argument, NULL, OPT_BY},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *since = NULL, *by = NULL;
    char errstr[512], *json = NULL;
    struct rl_config *cfg;
    struct rl_db *db;
    int64_t epoch;
    int as_json = 0, opt, err;
    cJSON *arr;
    const cJSON *row;

    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
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
        case 'h':
            usage(stdout);
            return RL_EXIT_OK;
        default:
            return rl_cli_usage_error("report", "bad option %s",
                                      argv[optind - 1]);
        }
    }
    if (optind < argc)
        return rl_cli_usage_error("report", "unexpected argument \"%s\"",
                                  argv[optind]);
    if (!since)
        return rl_cli_usage_error("report", "--since is required");

    cfg = rl_config_load(errstr, sizeof(errstr));
    if (!cfg) {
        fprintf(stderr, "runledger report: %s\n", errstr);
        return RL_EXIT_USAGE;
    }
    db = rl_db_connect(cfg->database_url, errstr, sizeof(errstr));
    rl_config_destroy(cfg);
    if (!db) {
        fprintf(stderr, "runledger report: %s\n", errstr);
        return RL_EXIT_FAILURE;
    }
    err = rl_db_report_json(db, since, by, &json, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err) {
        fprintf(stderr, "runledger report: %s\n", errstr);
        return err == RL_ERR_INVALID ? RL_EXIT_USAGE : RL_EXIT_FAILURE;
    }
    if (as_json) {
        printf("%s\n", json);
        free(json);
        return RL_EXIT_OK;
    }
    arr = cJSON_Parse(json);
    free(json);
    printf("%-24s %-24s %8s %9s %6s %6s %10s %8s %12s %12s %10s\n", "TENANT",
           "JOB", "RUNS", "COMPLETED", "GENS", "EXTRA", "DISPATCHES",
           "DEFERRED", "PROMPT_TOK", "COMPL_TOK", "CACHED_TOK");
    cJSON_ArrayForEach(row, arr)
    {
        char b[11][32];

        printf("%-24s %-24s %8s %9s %6s %6s %10s %8s %12s %12s %10s\n",
               rl_cli_json_text(row, "tenant", "(all)", b[0], 32),
               rl_cli_json_text(row, "job", "(all)", b[1], 32),
               rl_cli_json_text(row, "runs", "(all)", b[2], 32),
               rl_cli_json_text(row, "completed", "(all)", b[3], 32),
               rl_cli_json_text(row, "generations", "(all)", b[4], 32),
               rl_cli_json_text(row, "extra_generations", "(all)", b[5], 32),
               rl_cli_json_text(row, "dispatches", "(all)", b[6], 32),
               rl_cli_json_text(row, "budget_deferred", "(all)", b[7], 32),
               rl_cli_json_text(row, "prompt_tokens", "(all)", b[8], 32),
               rl_cli_json_text(row, "completion_tokens", "(all)", b[9], 32),
               rl_cli_json_text(row, "cached_tokens", "(all)", b[10], 32));
    }
    cJSON_Delete(arr);
    return RL_EXIT_OK;
}
