/* `runledger id`: the run ID of one logical run, computed exactly as the
 * consumer computes it for an event, so an operator can find a run's row,
 * attempts and outbox entries from the schedule alone. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/event.h"
#include "rl/runid.h"
#include "rl/timefmt.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger id --job JOB --tenant TENANT --at RFC3339 --version VERSION\n"
"                    [--window DURATION] [--json]\n"
"\n"
"Prints the run ID of one logical run: the SHA-256 of\n"
"job|tenant|scheduled_at in UTC (floored to the window)|version.\n"
"\n"
"  --job JOB           job name (surrounding whitespace is ignored)\n"
"  --tenant TENANT     tenant (surrounding whitespace is ignored)\n"
"  --at RFC3339        scheduled time with a utc offset, e.g.\n"
"                      2026-08-07T09:00:00+00:00\n"
"  --version VERSION   job version (surrounding whitespace is ignored)\n"
"  --window DURATION   schedule window, e.g. PT15M, PT1H, P1D, P1W, P1M\n"
"  --json              print {\"run_id\":...,\"scheduled_at\":...}\n"
"  -h, --help          print this help\n"
"\n"
"Exit status: 0 printed, 2 bad arguments or invalid input.\n";
/* clang-format on */

/* Refuses what rl_event_parse() would refuse for these fields, so the CLI
 * never prints an ID the consumer can not produce. */
static int
check_field(const char *name, const char *value)
{
    struct rl_event_limits limits;
    size_t len;
    const char *text = rl_strip(value, &len);

    rl_event_limits_default(&limits);
    if (len == 0) {
        fprintf(stderr, "runledger id: empty_field:%s: %s is empty\n", name,
                name);
        return -1;
    }
    if (len > limits.max_field_len) {
        fprintf(stderr,
                "runledger id: field_too_long:%s: %s is %zu bytes, more than "
                "the limit of %zu\n",
                name, name, len, limits.max_field_len);
        return -1;
    }
    if (memchr(text, '|', len)) {
        fprintf(stderr,
                "runledger id: invalid_field:%s: %s contains '|', the run "
                "identity separator\n",
                name, name);
        return -1;
    }
    return 0;
}

int
rl_cmd_id(int argc, char **argv)
{
    enum { OPT_JOB = 1, OPT_TENANT, OPT_AT, OPT_VERSION, OPT_WINDOW, OPT_JSON };
    static const struct option options[] = {
        {"job", required_argument, NULL, OPT_JOB},
        {"tenant", required_argument, NULL, OPT_TENANT},
        {"at", required_argument, NULL, OPT_AT},
        {"version", required_argument, NULL, OPT_VERSION},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "id",
        .usage = usage_text,
        .options = options,
        .name_errors = 1,
    };
    static const char *const names[] = {NULL,   "--job",     "--tenant",
                                        "--at", "--version", "--window"};
    const char *values[6] = {NULL};
    struct rl_run_identity id;
    char run_id[RL_HEX_SIZE];
    char utc[RL_TIME_UTC_SIZE];
    char errstr[512];
    char window[256];
    size_t window_len;
    const char *reason = NULL;
    int json = 0;
    int opt, rc;

    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc, argv, &rc)) > 0) {
        switch (opt) {
        case OPT_JOB:
        case OPT_TENANT:
        case OPT_AT:
        case OPT_VERSION:
        case OPT_WINDOW:
            /* A repeated option is more likely a mistake than an override
             * and would silently change the ID. */
            if (values[opt])
                return rl_cli_usage_error("id", "%s given more than once",
                                          names[opt]);
            values[opt] = optarg;
            break;
        case OPT_JSON:
            json = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    for (int i = OPT_JOB; i <= OPT_VERSION; i++) {
        if (!values[i])
            return rl_cli_usage_error("id", "missing %s", names[i]);
    }
    if (check_field("job", values[OPT_JOB]) ||
        check_field("tenant", values[OPT_TENANT]) ||
        check_field("version", values[OPT_VERSION]))
        return RL_EXIT_USAGE;
    /* The consumer strips the window as it strips the names. */
    if (values[OPT_WINDOW]) {
        const char *text = rl_strip(values[OPT_WINDOW], &window_len);

        if (window_len >= sizeof(window)) {
            fprintf(stderr, "runledger id: field_too_long:window: window is "
                            "too long\n");
            return RL_EXIT_USAGE;
        }
        memcpy(window, text, window_len);
        window[window_len] = '\0';
    }

    id.job = values[OPT_JOB];
    id.tenant = values[OPT_TENANT];
    id.scheduled_at = values[OPT_AT];
    id.version = values[OPT_VERSION];
    id.window = values[OPT_WINDOW] ? window : NULL;
    if (rl_runid_compute(&id, run_id, utc, &reason, errstr, sizeof(errstr))) {
        fprintf(stderr, "runledger id: %s: %s\n", reason ? reason : "invalid",
                errstr);
        return RL_EXIT_USAGE;
    }

    if (json)
        printf("{\"run_id\":\"%s\",\"scheduled_at\":\"%s\"}\n", run_id, utc);
    else
        printf("%s\n", run_id);
    /* A closed or full stdout must not pass for a printed ID. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "runledger id: could not write to stdout\n");
        return RL_EXIT_FAILURE;
    }
    return RL_EXIT_OK;
}
