/* `runledger batch`: which jobs are sent through the provider's batch API
 * instead of live calls, and how their runs are grouped
 * (schema/060_batch_mode.sql; the batcher: consumer/ledger/batch.c). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/db_batch.h"
#include "rl/db_conn.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger batch set --job J [--tenant T] [--window 10m]\n"
"                           [--max-runs 50000] [--max-bytes 100MB]\n"
"                           [--completion-window 24h]\n"
"                           [--on-expiry live|rebatch|fail] [--actor NAME]\n"
"       runledger batch show [--job J] [--json]\n"
"       runledger batch remove --job J [--tenant T]\n"
"\n"
"  set     the job's runs (with --tenant, that tenant's only) go to the\n"
"          provider's batch API instead of a live call: collected per\n"
"          endpoint and model for at most --window (default 10m; 500ms,\n"
"          30s, 10m, 1h), or until --max-runs runs (default 50000) or\n"
"          --max-bytes of request lines (default 100MB; KB, MB, KiB, MiB)\n"
"          are waiting, then submitted with --completion-window (default\n"
"          24h). --on-expiry (default rebatch): what a run of a batch the\n"
"          provider expired, failed or cancelled gets: the next batch\n"
"          (rebatch), a live call (live) or failed (fail); each counts as\n"
"          an attempt. A value not given takes its default.\n"
"  show    every job's batch mode\n"
"  remove  the job's runs are sent live again (those already in a batch\n"
"          stay there)\n"
"\n"
"The run ID and fingerprint do not change. Takes effect at the next\n"
"dispatch. Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage; 3 no\n"
"such setting.\n";
/* clang-format on */

static const struct rl_cli_column batch_columns[] = {
    {"JOB", "job", -24},
    {"TENANT", "tenant", -16},
    {"WINDOW_S", "window_seconds", 9},
    {"MAX_RUNS", "max_runs", 8},
    {"MAX_BYTES", "max_bytes", 10},
    {"COMPLETION", "completion_window", -10},
    {"ON_EXPIRY", "on_expiry", -9},
    {"UPDATED_BY", "updated_by", -12}};

static const struct rl_cli_table batch_table = {"", " ", "-", batch_columns,
                                                RL_CLI_NCOLUMNS(batch_columns)};

/* "500ms", "30s", "10m", "1h" (a bare number: seconds) in milliseconds;
 * -1 when it is none of them. */
static long long
parse_duration_ms(const char *text)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(text, &end);
    if (errno || end == text || v <= 0)
        return -1;
    if (strcmp(end, "ms") == 0)
        return (long long)(v + 0.5);
    if (*end == '\0' || strcmp(end, "s") == 0)
        return (long long)(v * 1000 + 0.5);
    if (strcmp(end, "m") == 0)
        return (long long)(v * 60000 + 0.5);
    if (strcmp(end, "h") == 0)
        return (long long)(v * 3600000 + 0.5);
    return -1;
}

/* "100MB", "512KiB", "1048576" in bytes; -1 when unreadable. */
static long long
parse_bytes(const char *text)
{
    static const struct {
        const char *suffix;
        double factor;
    } units[] = {{"", 1},          {"B", 1},           {"KB", 1e3},
                 {"MB", 1e6},      {"GB", 1e9},        {"KiB", 1024.0},
                 {"MiB", 1048576}, {"GiB", 1073741824}};
    char *end;
    double v;

    errno = 0;
    v = strtod(text, &end);
    if (errno || end == text || v <= 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].suffix) == 0)
            return (long long)(v * units[i].factor + 0.5);
    }
    return -1;
}

int
rl_cmd_batch(int argc, char **argv)
{
    static const char *const actions[] = {"set", "show", "remove", NULL};
    enum {
        OPT_JOB = 1,
        OPT_TENANT,
        OPT_WINDOW,
        OPT_MAX_RUNS,
        OPT_MAX_BYTES,
        OPT_COMPLETION,
        OPT_ON_EXPIRY,
        OPT_ACTOR,
        OPT_JSON
    };
    static const struct option options[] = {
        {"job", required_argument, NULL, OPT_JOB},
        {"tenant", required_argument, NULL, OPT_TENANT},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"max-runs", required_argument, NULL, OPT_MAX_RUNS},
        {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
        {"completion-window", required_argument, NULL, OPT_COMPLETION},
        {"on-expiry", required_argument, NULL, OPT_ON_EXPIRY},
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "batch",
        .usage = usage_text,
        .options = options,
        .name_errors = 1,
    };
    struct rl_batch_setting s = {.window_ms = 600000,
                                 .max_runs = 50000,
                                 .max_bytes = 100000000,
                                 .completion_window = "24h",
                                 .on_expiry = "rebatch"};
    const char *actor = getenv("USER"), *action;
    char errstr[512], what[32], *end, *json = NULL;
    struct rl_db *db;
    int as_json = 0, opt, err, rc;
    long long v;

    rc = rl_cli_action("batch", usage_text, argc, argv, actions, &action);
    if (rc >= 0)
        return rc;
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc - 1, argv + 1, &rc)) > 0) {
        switch (opt) {
        case OPT_JOB:
            s.job = optarg;
            break;
        case OPT_TENANT:
            s.tenant = optarg;
            break;
        case OPT_WINDOW:
            v = parse_duration_ms(optarg);
            if (v < 100 || v > 86400000LL)
                return rl_cli_usage_error("batch",
                                          "--window must be within 100ms..24h, "
                                          "e.g. 30s or 10m");
            s.window_ms = v;
            break;
        case OPT_MAX_RUNS:
            errno = 0;
            v = strtoll(optarg, &end, 10);
            if (errno || *end || end == optarg || v < 1 || v > 50000)
                return rl_cli_usage_error(
                    "batch", "--max-runs must be a whole number in 1..50000");
            s.max_runs = v;
            break;
        case OPT_MAX_BYTES:
            v = parse_bytes(optarg);
            if (v < 1024 || v > 209715200LL)
                return rl_cli_usage_error(
                    "batch", "--max-bytes must be within 1KiB..200MiB, "
                             "e.g. 100MB");
            s.max_bytes = v;
            break;
        case OPT_COMPLETION:
            if (strcmp(optarg, "24h") != 0)
                return rl_cli_usage_error(
                    "batch", "--completion-window must be 24h (the only "
                             "window the providers offer)");
            s.completion_window = optarg;
            break;
        case OPT_ON_EXPIRY:
            if (strcmp(optarg, "live") && strcmp(optarg, "rebatch") &&
                strcmp(optarg, "fail"))
                return rl_cli_usage_error(
                    "batch", "--on-expiry must be live, rebatch or fail");
            s.on_expiry = optarg;
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
    if (strcmp(action, "show") != 0 && (!s.job || !*s.job))
        return rl_cli_usage_error("batch", "%s needs --job", action);
    if (s.tenant && !*s.tenant)
        return rl_cli_usage_error("batch", "--tenant must not be empty");
    if (!actor || !*actor)
        actor = "operator";

    rc = rl_cli_db_open("batch", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    if (strcmp(action, "set") == 0) {
        err = rl_db_batch_setting_set(db, &s, actor, errstr, sizeof(errstr));
        if (!err)
            printf("job %s%s%s in batch mode: window %g s, %lld runs, %lld "
                   "bytes, completion window %s, on expiry %s\n",
                   s.job, s.tenant ? " tenant " : "", s.tenant ? s.tenant : "",
                   (double)s.window_ms / 1000.0, (long long)s.max_runs,
                   (long long)s.max_bytes, s.completion_window, s.on_expiry);
    } else if (strcmp(action, "remove") == 0) {
        err = rl_db_batch_setting_remove(db, s.job, s.tenant, errstr,
                                         sizeof(errstr));
        if (!err)
            printf("batch mode of job %s%s%s removed\n", s.job,
                   s.tenant ? " tenant " : "", s.tenant ? s.tenant : "");
    } else {
        err =
            rl_db_batch_settings_json(db, s.job, &json, errstr, sizeof(errstr));
    }
    rl_db_destroy(db);
    if (err) {
        snprintf(what, sizeof(what), "batch %s", action);
        return rl_cli_error(what, err, errstr);
    }
    if (json)
        rl_cli_table_print_json(&batch_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}
