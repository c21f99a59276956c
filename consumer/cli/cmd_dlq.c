/* `runledger dlq`: the operator's view of the dead-letter topic and the
 * way back from it. `list` reads RUNLEDGER_DLQ_TOPIC from the beginning
 * (or from a time) to its current end with a consumer of its own that
 * assigns partitions and commits nothing, so it never moves a group's
 * offsets and can be run any number of times. `replay` re-publishes the
 * original events of the dead letters it selects to the schedule topic,
 * validated again as `publish` validates them: a run ID is the same every
 * time, so replaying twice is acknowledged by the ledger as a duplicate.
 * The headers it reads are those of rl/deadletter.h. */
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
#include "helpers.h"
#include "publish.h"
#include "rl/clock.h"
#include "rl/config.h"
#include "rl/deadletter.h"
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

/* How long one read of the topic may go without a message before it gives
 * up: the end it reads to was known when it started. */
#define DLQ_IDLE_TIMEOUT_MS 30000
#define DLQ_META_TIMEOUT_MS 10000

/* Which dead letters a command selects. */
struct filter {
    const char *reason;
    const char *run_id;
    int64_t since_ms;  /* -1: all */
    int32_t partition; /* -1: all */
    int64_t offset;    /* -1: all (with partition) */
};

/* Called for each selected dead letter; returns 1 to stop reading. */
typedef int(dlq_fn)(const rd_kafka_message_t *rkm, void *opaque);

static void
header(const rd_kafka_message_t *rkm, const char *name, char *buf, size_t size)
{
    rd_kafka_headers_t *hdrs = NULL;
    const void *val = NULL;
    size_t len = 0;

    buf[0] = '\0';
    if (rd_kafka_message_headers(rkm, &hdrs) != 0 ||
        rd_kafka_header_get_last(hdrs, name, &val, &len) != 0 || !val)
        return;
    if (len >= size)
        len = size - 1;
    memcpy(buf, val, len);
    buf[len] = '\0';
}

static int
selected(const struct filter *f, const rd_kafka_message_t *rkm)
{
    char buf[256];

    if (f->reason) {
        size_t n = strlen(f->reason);

        header(rkm, "reason", buf, sizeof(buf));
        if (strncmp(buf, f->reason, n) != 0 || (buf[n] && buf[n] != ':'))
            return 0;
    }
    if (f->run_id) {
        header(rkm, "run_id", buf, sizeof(buf));
        if (strcmp(buf, f->run_id) != 0)
            return 0;
    }
    if (f->since_ms >= 0) {
        rd_kafka_timestamp_type_t tstype;
        int64_t ts = rd_kafka_message_timestamp(rkm, &tstype);

        if (ts >= 0 && ts < f->since_ms)
            return 0;
    }
    return 1;
}

/* Reads the dead-letter topic from the start the filter asks for to the
 * high watermarks it finds first, calling fn for each selected record.
 * Returns RL_EXIT_OK or RL_EXIT_FAILURE (the reason on stderr). */
static int
dlq_read(const char *command, const struct rl_config *cfg,
         const struct filter *f, dlq_fn *fn, void *opaque)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rl_kafka_conf_new(cfg, errstr, sizeof(errstr));
    rd_kafka_t *rk = NULL;
    rd_kafka_topic_t *rkt = NULL;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_partition_list_t *parts = NULL;
    int64_t *end = NULL;
    int nparts = 0, remaining = 0, rc = RL_EXIT_FAILURE;
    rd_kafka_resp_err_t err;
    int64_t idle_since;

    if (!conf) {
        fprintf(stderr, "runledger %s: %s\n", command, errstr);
        return RL_EXIT_USAGE;
    }
    /* A group id only because librdkafka's consumer wants one: nothing is
     * subscribed, stored or committed under it. */
    if (rl_kafka_conf_set(conf, "group.id", "runledger-dlq-cli", errstr,
                          sizeof(errstr)) != 0 ||
        rl_kafka_conf_set(conf, "enable.auto.commit", "false", errstr,
                          sizeof(errstr)) != 0 ||
        rl_kafka_conf_set(conf, "enable.auto.offset.store", "false", errstr,
                          sizeof(errstr)) != 0) {
        rd_kafka_conf_destroy(conf);
        fprintf(stderr, "runledger %s: %s\n", command, errstr);
        return RL_EXIT_USAGE;
    }
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        fprintf(stderr, "runledger %s: could not create consumer: %s\n",
                command, errstr);
        return RL_EXIT_FAILURE;
    }
    rd_kafka_poll_set_consumer(rk);
    rkt = rd_kafka_topic_new(rk, cfg->dlq_topic, NULL);
    err = rkt ? rd_kafka_metadata(rk, 0, rkt, &md, DLQ_META_TIMEOUT_MS)
              : rd_kafka_last_error();
    if (!err && md->topic_cnt == 1)
        err = md->topics[0].err;
    if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        fprintf(stderr,
                "runledger %s: topic %s does not exist: no dead "
                "letters\n",
                command, cfg->dlq_topic);
        rc = RL_EXIT_OK;
        goto done;
    }
    if (err || md->topic_cnt != 1) {
        fprintf(stderr, "runledger %s: could not read the metadata of %s: %s\n",
                command, cfg->dlq_topic,
                rd_kafka_err2str(err ? err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
        goto done;
    }
    nparts = md->topics[0].partition_cnt;
    end = calloc((size_t)nparts + 1, sizeof(*end));
    parts = rd_kafka_topic_partition_list_new(nparts > 0 ? nparts : 1);
    if (!end || !parts) {
        fprintf(stderr, "runledger %s: out of memory\n", command);
        goto done;
    }
    for (int i = 0; i < nparts; i++) {
        int32_t p = md->topics[0].partitions[i].id;
        int64_t lo = 0, hi = 0;

        if (f->partition >= 0 && p != f->partition)
            continue;
        err = rd_kafka_query_watermark_offsets(rk, cfg->dlq_topic, p, &lo, &hi,
                                               DLQ_META_TIMEOUT_MS);
        if (err) {
            fprintf(stderr,
                    "runledger %s: could not read the end of %s [%d]: %s\n",
                    command, cfg->dlq_topic, (int)p, rd_kafka_err2str(err));
            goto done;
        }
        if (f->offset >= 0) {
            if (f->offset < lo || f->offset >= hi)
                continue;
            lo = f->offset;
            hi = f->offset + 1;
        } else if (f->since_ms >= 0) {
            lo = f->since_ms; /* offsets_for_times turns it into an offset */
        }
        if (p >= 0 && p < nparts)
            end[p] = hi;
        if (hi > 0)
            rd_kafka_topic_partition_list_add(parts, cfg->dlq_topic, p)
                ->offset = lo;
    }
    if (f->since_ms >= 0 && f->offset < 0 && parts->cnt > 0) {
        err = rd_kafka_offsets_for_times(rk, parts, DLQ_META_TIMEOUT_MS);
        if (err) {
            fprintf(stderr,
                    "runledger %s: could not find the offsets of %s at "
                    "--since: %s\n",
                    command, cfg->dlq_topic, rd_kafka_err2str(err));
            goto done;
        }
    }
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &parts->elems[i];

        /* -1: nothing at or after --since in this partition. */
        if (tp->err || tp->offset < 0 || tp->offset >= end[tp->partition]) {
            end[tp->partition] = -1;
            tp->offset = RD_KAFKA_OFFSET_END;
            continue;
        }
        remaining++;
    }
    if (remaining == 0) {
        rc = RL_EXIT_OK;
        goto done;
    }
    err = rd_kafka_assign(rk, parts);
    if (err) {
        fprintf(stderr, "runledger %s: could not assign %s: %s\n", command,
                cfg->dlq_topic, rd_kafka_err2str(err));
        goto done;
    }
    idle_since = rl_clock_ms();
    while (remaining > 0) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rk, 500);
        int32_t p;
        int stop = 0;

        if (!rkm) {
            if (rl_clock_ms() - idle_since > DLQ_IDLE_TIMEOUT_MS) {
                fprintf(stderr,
                        "runledger %s: timed out reading %s: no record for "
                        "%d s before its end\n",
                        command, cfg->dlq_topic, DLQ_IDLE_TIMEOUT_MS / 1000);
                goto done;
            }
            continue;
        }
        idle_since = rl_clock_ms();
        if (rkm->err) {
            if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                fprintf(stderr, "runledger %s: reading %s: %s\n", command,
                        cfg->dlq_topic, rd_kafka_message_errstr(rkm));
            rd_kafka_message_destroy(rkm);
            continue;
        }
        p = rkm->partition;
        if (p >= 0 && p < nparts && end[p] > 0 && rkm->offset < end[p]) {
            if (selected(f, rkm))
                stop = fn(rkm, opaque);
            if (rkm->offset + 1 >= end[p]) {
                end[p] = -1;
                remaining--;
            }
        }
        rd_kafka_message_destroy(rkm);
        if (stop)
            break;
    }
    rc = RL_EXIT_OK;

done:
    if (parts)
        rd_kafka_topic_partition_list_destroy(parts);
    free(end);
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

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

static void not_replayable(const rd_kafka_message_t *rkm, char *why,
                           size_t size);

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
    not_replayable(rkm, why, sizeof(why));
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

/* Why the dead letter cannot be replayed ("" when it can). */
static void
not_replayable(const rd_kafka_message_t *rkm, char *why, size_t size)
{
    char source[32], kind[32], trunc[32];

    header(rkm, "source", source, sizeof(source));
    header(rkm, "value_kind", kind, sizeof(kind));
    header(rkm, "truncated_from", trunc, sizeof(trunc));
    why[0] = '\0';
    if (strcmp(source, "outbox") == 0)
        snprintf(why, size,
                 "an outbox dead letter carries no event (the notification "
                 "stays in outbox_dead)");
    else if (strcmp(kind, "none") == 0 || !rkm->payload || rkm->len == 0)
        snprintf(why, size, "the dead letter carries no event");
    else if (trunc[0])
        snprintf(why, size, "the event was cut from %s bytes", trunc);
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

    header(rkm, name, buf, sizeof(buf));
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

/* Events are sent in batches, so memory stays bounded however many dead
 * letters are selected. */
#define REPLAY_BATCH_EVENTS 256
#define REPLAY_BATCH_BYTES (32L * 1024 * 1024)

struct replay_state {
    const struct rl_config *cfg;
    int dry_run;
    struct rl_cli_event batch[REPLAY_BATCH_EVENTS];
    char pos[REPLAY_BATCH_EVENTS][40];
    size_t n;
    long bytes;
    long sent, invalid, unreplayable;
    int failed; /* a batch was not acknowledged: stop */
};

static void
replay_flush(struct replay_state *rs)
{
    int rc = RL_EXIT_OK;

    if (rs->n == 0)
        return;
    if (!rs->dry_run)
        rc = rl_cli_events_send("dlq replay", rs->cfg, rs->cfg->topic,
                                rs->batch, rs->n, NULL);
    for (size_t i = 0; i < rs->n; i++) {
        if (rc == RL_EXIT_OK) {
            printf("%s\t%s\t%s\n", rs->pos[i],
                   rs->dry_run ? "would-send" : "sent",
                   rs->batch[i].ev->run_id);
            rs->sent++;
        }
        free(rs->batch[i].value);
        rl_event_destroy(rs->batch[i].ev);
    }
    if (rc != RL_EXIT_OK)
        rs->failed = 1;
    rs->n = 0;
    rs->bytes = 0;
}

static int
replay_one(const rd_kafka_message_t *rkm, void *opaque)
{
    struct replay_state *rs = opaque;
    char pos[40], why[256], reason[96], errstr[512], source[32];
    struct rl_event *ev;
    char *value;

    snprintf(pos, sizeof(pos), "%d/%" PRId64, (int)rkm->partition, rkm->offset);
    not_replayable(rkm, why, sizeof(why));
    if (why[0]) {
        printf("%s\tnot-replayable\t-\t%s\n", pos, why);
        rs->unreplayable++;
        return 0;
    }
    ev = rl_cli_event_validate(rkm->payload, rkm->len,
                               (size_t)rs->cfg->max_event_bytes, reason,
                               sizeof(reason), errstr, sizeof(errstr));
    if (!ev) {
        printf("%s\tinvalid\t-\t%s: %s\n", pos, reason, errstr);
        fprintf(stderr, "runledger dlq replay: %s: invalid event: %s: %s\n",
                pos, reason, errstr);
        rs->invalid++;
        return 0;
    }
    header(rkm, "source", source, sizeof(source));
    if (strcmp(source, "run") == 0)
        fprintf(stderr,
                "runledger dlq replay: %s: run %s failed; while it is failed "
                "the ledger acknowledges its event as a duplicate: "
                "`runledger runs retry %s` retries it\n",
                pos, ev->run_id, ev->run_id);
    value = malloc(rkm->len + 1);
    if (!value) {
        rl_event_destroy(ev);
        fprintf(stderr, "runledger dlq replay: out of memory\n");
        rs->failed = 1;
        return 1;
    }
    memcpy(value, rkm->payload, rkm->len);
    value[rkm->len] = '\0';
    rs->batch[rs->n].value = value;
    rs->batch[rs->n].ev = ev;
    snprintf(rs->pos[rs->n], sizeof(rs->pos[rs->n]), "%s", pos);
    rs->n++;
    rs->bytes += (long)rkm->len;
    if (rs->n == REPLAY_BATCH_EVENTS || rs->bytes >= REPLAY_BATCH_BYTES)
        replay_flush(rs);
    return rs->failed;
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
    struct filter f = {NULL, NULL, -1, -1, -1};
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

        if (!ls.rows) {
            fprintf(stderr, "runledger %s: out of memory\n", command);
            rc = RL_EXIT_FAILURE;
            goto done;
        }
        rc = dlq_read(command, cfg, &f, list_one, &ls);
        if (rc == RL_EXIT_OK && !as_json)
            rl_cli_table_print(&list_table, ls.rows);
        cJSON_Delete(ls.rows);
    } else {
        struct replay_state *rs = calloc(1, sizeof(*rs));

        if (!rs) {
            fprintf(stderr, "runledger %s: out of memory\n", command);
            rc = RL_EXIT_FAILURE;
            goto done;
        }
        rs->cfg = cfg;
        rs->dry_run = dry_run;
        rc = dlq_read(command, cfg, &f, replay_one, rs);
        if (!rs->failed)
            replay_flush(rs);
        else
            for (size_t i = 0; i < rs->n; i++) {
                free(rs->batch[i].value);
                rl_event_destroy(rs->batch[i].ev);
            }
        fprintf(stderr,
                "runledger %s: %ld %s, %ld invalid, %ld not replayable\n",
                command, rs->sent, dry_run ? "would be sent" : "sent",
                rs->invalid, rs->unreplayable);
        if (rc == RL_EXIT_OK && rs->failed)
            rc = RL_EXIT_FAILURE;
        else if (rc == RL_EXIT_OK && rs->invalid)
            rc = RL_EXIT_USAGE;
        else if (rc == RL_EXIT_OK && rs->unreplayable)
            rc = RL_EXIT_REFUSED;
        free(rs);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "runledger %s: could not write to stdout\n", command);
        rc = RL_EXIT_FAILURE;
    }

done:
    rl_config_destroy(cfg);
    return rc;
}
