/* `runledger dlq`: the operator's view of the dead-letter topic and the
 * way back from it. `list` reads RUNLEDGER_DLQ_TOPIC from the beginning
 * (or from a time) to its current end with a consumer of its own that
 * assigns partitions and commits nothing, so it never moves a group's
 * offsets and can be run any number of times. `replay` re-publishes the
 * original events of the dead letters it selects to the schedule topic,
 * validated again as `publish` validates them: a run ID is the same every
 * time, so replaying twice is acknowledged by the ledger as a duplicate.
 * The reading and the replay are dlq.c's, which the console shares. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "dlq.h"
#include "helpers.h"
#include "publish.h"
#include "rl/config.h"
#include "rl/deadletter.h"
#include "rl/err.h"
#include "rl/event.h"
#include "rl/kafka.h"
#include "rl/timefmt.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger dlq list [--reason R] [--since RFC3339] [--limit N] [--json]\n"
"       runledger dlq replay [--reason R] [--since RFC3339] [--run-id ID]\n"
"                            [--partition P --offset O] [--dry-run]\n"
"\n"
"Reads RUNLEDGER_DLQ_TOPIC from the beginning (or from --since) to its\n"
"current end, without a consumer group: nothing is committed.\n"
"\n"
"  list     one line per dead letter: partition/offset, when it was\n"
"           dead-lettered, reason, source (intake, run, outbox), run ID,\n"
"           job and tenant; --json prints one JSON object per line with\n"
"           every header and the value. Default limit 1000.\n"
"  replay   re-publishes the original events of the selected dead letters\n"
"           to RUNLEDGER_TOPIC (key = tenant), each validated again as\n"
"           `publish` does; an invalid one is reported and skipped.\n"
"           Dead letters without an event (outbox ones) are reported as\n"
"           not replayable. A failed run's event is acknowledged by the\n"
"           ledger as a duplicate of the failed run: retry the run with\n"
"           `runledger runs retry RUN_ID` instead.\n"
"\n"
"  --reason R           the reason header is R, or starts with R:\n"
"                       (--reason missing_field matches missing_field:job)\n"
"  --since RFC3339      dead-lettered at or after the time\n"
"  --run-id ID          the run_id header is ID\n"
"  --partition P --offset O\n"
"                       the one dead letter at that position\n"
"  --limit N            list at most N dead letters\n"
"  --json               JSON lines instead of the table\n"
"  --dry-run            print what would be sent; send nothing\n"
"\n"
"Kafka settings come from the environment (see `runledger config`).\n"
"Exit status: 0 ok; 1 Kafka failure; 2 bad usage, or a selected dead\n"
"letter's event is invalid (skipped; the others were sent); 3 a selected\n"
"dead letter has no event to replay.\n";
/* clang-format on */

/* 1 when the len bytes are text a JSON string can carry: UTF-8 without
 * NUL bytes. */
static int
is_text(const char *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;

        if (c == 0 || n == 0 || i + n > len)
            return 0;
        for (size_t k = 1; k < n; k++) {
            if (((unsigned char)s[i + k] & 0xC0) != 0x80)
                return 0;
        }
        i += n;
    }
    return 1;
}

/* The dead letter as one JSON object: position, broker timestamp, every
 * header, whether it can be replayed, and the value (as text, else in
 * base64). NULL on out of memory. */
static cJSON *
dead_letter_json(const rd_kafka_message_t *rkm)
{
    cJSON *obj = cJSON_CreateObject(), *hobj;
    rd_kafka_headers_t *hdrs = NULL;
    rd_kafka_timestamp_type_t tstype;
    int64_t ts = rd_kafka_message_timestamp(rkm, &tstype);
    const char *name;
    const void *val;
    size_t len;
    char at[RL_TIME_UTC_SIZE], why[256];

    if (!obj)
        return NULL;
    cJSON_AddNumberToObject(obj, "partition", rkm->partition);
    cJSON_AddNumberToObject(obj, "offset", (double)rkm->offset);
    if (ts >= 0) {
        rl_time_format_utc(ts / 1000, at);
        cJSON_AddStringToObject(obj, "timestamp", at);
    }
    hobj = cJSON_AddObjectToObject(obj, "headers");
    if (rd_kafka_message_headers(rkm, &hdrs) == 0) {
        for (size_t i = 0;
             rd_kafka_header_get_all(hdrs, i, &name, &val, &len) == 0; i++) {
            char *copy = malloc(len + 1);

            if (!copy)
                continue;
            if (val && len)
                memcpy(copy, val, len);
            copy[len] = '\0';
            cJSON_DeleteItemFromObjectCaseSensitive(hobj, name);
            cJSON_AddStringToObject(hobj, name, copy);
            free(copy);
        }
    }
    rl_cli_dlq_not_replayable(rkm, why, sizeof(why));
    cJSON_AddBoolToObject(obj, "replayable", why[0] == '\0');
    if (why[0])
        cJSON_AddStringToObject(obj, "not_replayable", why);
    if (!rkm->payload || rkm->len == 0) {
        cJSON_AddNullToObject(obj, "value");
    } else if (is_text(rkm->payload, rkm->len)) {
        char *copy = malloc(rkm->len + 1);

        if (copy) {
            memcpy(copy, rkm->payload, rkm->len);
            copy[rkm->len] = '\0';
            cJSON_AddStringToObject(obj, "value", copy);
            free(copy);
        }
    } else {
        size_t cap = 4 * ((rkm->len + 2) / 3) + 1;
        unsigned char *b64 = malloc(cap);

        cJSON_AddNullToObject(obj, "value");
        if (b64) {
            EVP_EncodeBlock(b64, rkm->payload, (int)rkm->len);
            cJSON_AddStringToObject(obj, "value_base64", (char *)b64);
            free(b64);
        }
    }
    return obj;
}

/* ---- list ------------------------------------------------------------ */

static const struct rl_cli_column list_columns[] = {
    {"POSITION", "position", -10},
    {"DEAD_LETTERED_AT", "dead_lettered_at", -24},
    {"REASON", "reason", -24},
    {"SOURCE", "source", -6},
    {"RUN_ID", "run_id", -64},
    {"JOB / TENANT", "job / tenant", 0}};

static const struct rl_cli_table list_table = {"", "  ", "-", list_columns,
                                               RL_CLI_NCOLUMNS(list_columns)};

struct list_state {
    int as_json;
    long limit, count;
    cJSON *rows;
};

static void
add_cell(cJSON *row, const rd_kafka_message_t *rkm, const char *name)
{
    char buf[512];

    rl_cli_dlq_header(rkm, name, buf, sizeof(buf));
    if (buf[0])
        cJSON_AddStringToObject(row, name, buf);
}

static int
list_one(const rd_kafka_message_t *rkm, void *opaque)
{
    struct list_state *ls = opaque;

    if (ls->as_json) {
        cJSON *obj = dead_letter_json(rkm);
        char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;

        if (text) {
            printf("%s\n", text);
            cJSON_free(text);
        }
        cJSON_Delete(obj);
    } else {
        cJSON *row = cJSON_CreateObject();
        char pos[40];

        if (row) {
            snprintf(pos, sizeof(pos), "%d/%" PRId64, (int)rkm->partition,
                     rkm->offset);
            cJSON_AddStringToObject(row, "position", pos);
            add_cell(row, rkm, "dead_lettered_at");
            add_cell(row, rkm, "reason");
            add_cell(row, rkm, "source");
            add_cell(row, rkm, "run_id");
            add_cell(row, rkm, "job");
            add_cell(row, rkm, "tenant");
            cJSON_AddItemToArray(ls->rows, row);
        }
    }
    return ++ls->count >= ls->limit;
}

/* ---- replay ---------------------------------------------------------- */

/* One line per dead letter on stdout, as documented in docs/cli.md; the
 * notes on stderr. */
static void
print_outcome(void *opaque, const char *pos, const char *outcome,
              const char *run_id, const char *detail)
{
    (void)opaque;
    if (strcmp(outcome, "failed-run") == 0) {
        fprintf(stderr,
                "runledger dlq replay: %s: run %s failed; while it is failed "
                "the ledger acknowledges its event as a duplicate: "
                "`runledger runs retry %s` retries it\n",
                pos, run_id, run_id);
    } else if (strcmp(outcome, "invalid") == 0) {
        printf("%s\tinvalid\t-\t%s\n", pos, detail);
        fprintf(stderr, "runledger dlq replay: %s: invalid event: %s\n", pos,
                detail);
    } else if (strcmp(outcome, "not-replayable") == 0) {
        printf("%s\tnot-replayable\t-\t%s\n", pos, detail);
    } else {
        printf("%s\t%s\t%s\n", pos, outcome, run_id);
    }
}

/* The exit status of a read: its note or error on stderr. */
static int
read_exit(const char *command, int err, const char *errstr)
{
    if (errstr[0])
        fprintf(stderr, "runledger %s: %s\n", command, errstr);
    if (err == RL_ERR_INVALID)
        return RL_EXIT_USAGE;
    return err ? RL_EXIT_FAILURE : RL_EXIT_OK;
}

/* ---- the command ------------------------------------------------------ */

static int
parse_long(const char *command, const char *flag, const char *text,
           long long min, long long *out)
{
    char *endp;
    long long v = strtoll(text, &endp, 10);

    if (!text[0] || *endp || v < min)
        return rl_cli_usage_error(command, "%s needs an integer >= %lld", flag,
                                  min);
    *out = v;
    return 0;
}

int
rl_cmd_dlq(int argc, char **argv)
{
    enum {
        OPT_REASON = 1,
        OPT_SINCE,
        OPT_LIMIT,
        OPT_JSON,
        OPT_RUN_ID,
        OPT_PARTITION,
        OPT_OFFSET,
        OPT_DRY_RUN
    };
    static const struct option options[] = {
        {"reason", required_argument, NULL, OPT_REASON},
        {"since", required_argument, NULL, OPT_SINCE},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"json", no_argument, NULL, OPT_JSON},
        {"run-id", required_argument, NULL, OPT_RUN_ID},
        {"partition", required_argument, NULL, OPT_PARTITION},
        {"offset", required_argument, NULL, OPT_OFFSET},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *action = argc > 1 ? argv[1] : NULL;
    const char *command;
    struct rl_cli_opts opts = {
        .usage = usage_text,
        .options = options,
        .name_errors = 1,
    };
    struct rl_cli_dlq_filter f = RL_CLI_DLQ_ALL;
    struct rl_config *cfg = NULL;
    long long limit = 1000, num = 0;
    int as_json = 0, dry_run = 0, rc = RL_EXIT_USAGE, opt;
    int is_list;

    if (action &&
        (strcmp(action, "-h") == 0 || strcmp(action, "--help") == 0)) {
        fputs(usage_text, stdout);
        return RL_EXIT_OK;
    }
    if (!action || (strcmp(action, "list") != 0 && strcmp(action, "replay")))
        return rl_cli_usage_error("dlq", "give list or replay");
    is_list = strcmp(action, "list") == 0;
    command = is_list ? "dlq list" : "dlq replay";
    opts.command = command;
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc - 1, argv + 1, &rc)) > 0) {
        switch (opt) {
        case OPT_REASON:
            f.reason = optarg;
            break;
        case OPT_SINCE: {
            int64_t epoch;
            char errstr[256];

            if (rl_time_parse(optarg, &epoch, NULL, errstr, sizeof(errstr)))
                return rl_cli_usage_error(command, "--since: %s", errstr);
            f.since_ms = epoch * 1000;
            break;
        }
        case OPT_LIMIT:
            if (!is_list)
                return rl_cli_usage_error(command, "--limit is for list");
            if (parse_long(command, "--limit", optarg, 1, &limit))
                return RL_EXIT_USAGE;
            break;
        case OPT_JSON:
            if (!is_list)
                return rl_cli_usage_error(command, "--json is for list");
            as_json = 1;
            break;
        case OPT_RUN_ID:
            if (is_list)
                return rl_cli_usage_error(command, "--run-id is for replay");
            f.run_id = optarg;
            break;
        case OPT_PARTITION:
        case OPT_OFFSET:
            if (is_list)
                return rl_cli_usage_error(command,
                                          "--partition and --offset are for "
                                          "replay");
            if (parse_long(command,
                           opt == OPT_PARTITION ? "--partition" : "--offset",
                           optarg, 0, &num))
                return RL_EXIT_USAGE;
            if (opt == OPT_PARTITION)
                f.partition = (int32_t)num;
            else
                f.offset = num;
            break;
        case OPT_DRY_RUN:
            if (is_list)
                return rl_cli_usage_error(command, "--dry-run is for replay");
            dry_run = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if ((f.partition >= 0) != (f.offset >= 0))
        return rl_cli_usage_error(command,
                                  "--partition and --offset go together");

    if (rl_cli_config_load(command, &cfg) != RL_EXIT_OK)
        return RL_EXIT_USAGE;
    rl_cli_log_init(cfg);
    if (is_list) {
        struct list_state ls = {as_json, (long)limit, 0, cJSON_CreateArray()};
        char errstr[512];
        int err;

        if (!ls.rows) {
            fprintf(stderr, "runledger %s: out of memory\n", command);
            rc = RL_EXIT_FAILURE;
            goto done;
        }
        err = rl_cli_dlq_read(cfg, &f, list_one, &ls, errstr, sizeof(errstr));
        rc = read_exit(command, err, errstr);
        if (rc == RL_EXIT_OK && !as_json)
            rl_cli_table_print(&list_table, ls.rows);
        cJSON_Delete(ls.rows);
    } else {
        struct rl_cli_dlq_replay_counts counts;
        char errstr[512];
        int err;

        err = rl_cli_dlq_replay(command, cfg, &f, dry_run, print_outcome, NULL,
                                &counts, errstr, sizeof(errstr));
        rc = read_exit(command, err, errstr);
        fprintf(stderr,
                "runledger %s: %ld %s, %ld invalid, %ld not replayable\n",
                command, counts.sent, dry_run ? "would be sent" : "sent",
                counts.invalid, counts.unreplayable);
        if (rc == RL_EXIT_OK && counts.failed)
            rc = RL_EXIT_FAILURE;
        else if (rc == RL_EXIT_OK && counts.invalid)
            rc = RL_EXIT_USAGE;
        else if (rc == RL_EXIT_OK && counts.unreplayable)
            rc = RL_EXIT_REFUSED;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "runledger %s: could not write to stdout\n", command);
        rc = RL_EXIT_FAILURE;
    }

done:
    rl_config_destroy(cfg);
    return rc;
}
