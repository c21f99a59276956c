/* `runledger publish`: produces schedule events, from flags or from JSON
 * lines on stdin, after validating every one exactly as the consumer will
 * (rl_event_parse): an event the consumer would dead-letter is refused here
 * and nothing is sent. With --now and --window the event is scheduled at
 * the start of the current window, so a scheduler (a CronJob) that fires
 * twice or late within one window publishes the same logical run. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "publish.h"
#include "rl/config.h"
#include "rl/event.h"
#include "rl/kafka.h"
#include "rl/log.h"
#include "rl/timefmt.h"
#include "rl/trace.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger publish --job JOB --tenant TENANT (--at RFC3339 | --now)\n"
"                         --version VERSION --request JSON|@FILE\n"
"                         [--window DURATION] [--input JSON|@FILE]\n"
"                         [--notify CHANNEL,...] [--topic TOPIC] [--dry-run]\n"
"                         [--traceparent VALUE]\n"
"       runledger publish --stdin [--topic TOPIC] [--dry-run]\n"
"                         [--traceparent VALUE]\n"
"\n"
"Produces schedule events to RUNLEDGER_TOPIC (key = tenant) with the\n"
"idempotent producer and waits until the broker acknowledged each one.\n"
"Every event is validated first as the consumer validates it; if any is\n"
"invalid, nothing is sent. Prints one run ID per event on stdout.\n"
"\n"
"  --job JOB            job name\n"
"  --tenant TENANT      tenant (also the Kafka key)\n"
"  --at RFC3339         scheduled time with a UTC offset\n"
"  --now                scheduled now; with --window, at the start of the\n"
"                       current window (firing twice or late within one\n"
"                       window gives the same run ID)\n"
"  --window DURATION    schedule window, e.g. PT15M, PT1H, P1D, P1W\n"
"  --version VERSION    job version (a new answer needs a new version)\n"
"  --request JSON|@F    the model request: {\"model\":...,\"messages\":[...],...}\n"
"  --input JSON|@F      the collected source data (default none)\n"
"  --notify A,B         outbox channels to notify on completion\n"
"  --stdin              read one event (a JSON object) per line from stdin\n"
"  --topic TOPIC        override RUNLEDGER_TOPIC\n"
"  --dry-run            validate and print the run IDs; send nothing\n"
"  --traceparent VALUE  W3C traceparent header sent with every event\n"
"                       (00-<32 hex trace id>-<16 hex parent id>-<2 hex\n"
"                       flags>): the runs join that trace\n"
"  -h, --help           print this help\n"
"\n"
"Kafka settings come from the environment (see `runledger config`).\n"
"Exit status: 0 every event acknowledged (or validated, with --dry-run);\n"
"1 Kafka failure (events may be partly sent: publishing again is safe,\n"
"the run ID is the same); 2 bad usage or an invalid event (nothing sent).\n";
/* clang-format on */

char *
rl_cli_value_or_file(const char *arg, char *errstr, size_t errstr_size)
{
    FILE *fp;
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (arg[0] != '@')
        return strdup(arg);
    fp = fopen(arg + 1, "rb");
    if (!fp) {
        snprintf(errstr, errstr_size, "could not open %s: %s", arg + 1,
                 strerror(errno));
        return NULL;
    }
    for (;;) {
        size_t n;

        if (cap - len < 4096) {
            char *grown = realloc(buf, cap + 65536);

            if (!grown) {
                free(buf);
                fclose(fp);
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
            }
            buf = grown;
            cap += 65536;
        }
        n = fread(buf + len, 1, cap - len - 1, fp);
        len += n;
        if (n == 0)
            break;
    }
    if (ferror(fp)) {
        snprintf(errstr, errstr_size, "could not read %s", arg + 1);
        free(buf);
        fclose(fp);
        return NULL;
    }
    fclose(fp);
    buf[len] = '\0';
    return buf;
}

/* Adds member name parsed from text (JSON) to obj. */
static int
add_json(cJSON *obj, const char *name, const char *arg, char *errstr,
         size_t errstr_size)
{
    char *text = rl_cli_value_or_file(arg, errstr, errstr_size);
    cJSON *item;

    if (!text)
        return -1;
    item = cJSON_Parse(text);
    free(text);
    if (!item) {
        snprintf(errstr, errstr_size, "invalid_json:%s: --%s is not JSON", name,
                 name);
        return -1;
    }
    cJSON_AddItemToObject(obj, name, item);
    return 0;
}

struct flags {
    const char *job, *tenant, *at, *window, *version, *input, *request;
    const char *notify;
    int now;
};

/* Builds the event JSON text from the flags; NULL with errstr set. */
static char *
event_from_flags(const struct flags *f, char *errstr, size_t errstr_size)
{
    cJSON *ev = cJSON_CreateObject();
    char at[RL_TIME_UTC_SIZE];
    char *text = NULL;

    if (!ev) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    if (f->now) {
        int64_t epoch = (int64_t)time(NULL);

        if (f->window) {
            struct rl_window win;

            if (rl_window_parse(f->window, &win, errstr, errstr_size) != 0)
                goto done;
            epoch = rl_window_floor(&win, epoch);
        }
        rl_time_format_utc(epoch, at);
    }
    cJSON_AddStringToObject(ev, "job", f->job);
    cJSON_AddStringToObject(ev, "tenant", f->tenant);
    cJSON_AddStringToObject(ev, "scheduled_at", f->now ? at : f->at);
    cJSON_AddStringToObject(ev, "version", f->version);
    if (f->window)
        cJSON_AddStringToObject(ev, "window", f->window);
    if (f->input && add_json(ev, "input", f->input, errstr, errstr_size))
        goto done;
    if (add_json(ev, "request", f->request, errstr, errstr_size))
        goto done;
    if (f->notify) {
        if (rl_event_add_notify(ev, f->notify, errstr, errstr_size) != 0)
            goto done;
    }
    text = cJSON_PrintUnformatted(ev);
    if (!text)
        snprintf(errstr, errstr_size, "out of memory");

done:
    cJSON_Delete(ev);
    if (text) {
        /* Callers free with free(); cJSON's allocator is malloc here, but
         * do not rely on it. */
        char *copy = strdup(text);

        cJSON_free(text);
        text = copy;
    }
    return text;
}

struct delivery {
    size_t acked;
    size_t failed;
    rd_kafka_resp_err_t last_err;
};

static void
dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    struct delivery *d = opaque;

    (void)rk;
    if (rkm->err) {
        d->failed++;
        d->last_err = rkm->err;
    } else {
        d->acked++;
    }
}

int
rl_cli_events_send(const char *command, const struct rl_config *cfg,
                   const char *topic, const struct rl_cli_event *evs, size_t n,
                   const char *traceparent)
{
    struct delivery d = {0, 0, RD_KAFKA_RESP_ERR_NO_ERROR};
    char errstr[512];
    rd_kafka_conf_t *conf = rl_kafka_conf_new(cfg, errstr, sizeof(errstr));
    rd_kafka_t *rk;

    if (!conf) {
        fprintf(stderr, "runledger %s: %s\n", command, errstr);
        return RL_EXIT_USAGE;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, &d);
    /* A CLI should not wait librdkafka's default five minutes for an
     * absent broker; an operator's RUNLEDGER_KAFKA_MESSAGE_TIMEOUT_MS
     * wins. */
    {
        int set = 0;

        for (size_t i = 0; i + 1 < cfg->kafka_props_count; i += 2)
            set |= strcmp(cfg->kafka_props[i], "message.timeout.ms") == 0;
        if (!set)
            rl_kafka_conf_set(conf, "message.timeout.ms", "30000", errstr,
                              sizeof(errstr));
    }
    rk = rl_kafka_producer_new(conf, 1, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "runledger %s: could not create producer: %s\n",
                command, errstr);
        return RL_EXIT_FAILURE;
    }
    for (size_t i = 0; i < n; i++) {
        rd_kafka_resp_err_t err;

        do {
            /* The event is a child of the caller's span: the consumer
             * reads this header (docs/operations.md#tracing). */
            if (traceparent)
                err = rd_kafka_producev(
                    rk, RD_KAFKA_V_TOPIC(topic),
                    RD_KAFKA_V_KEY(evs[i].ev->tenant,
                                   strlen(evs[i].ev->tenant)),
                    RD_KAFKA_V_VALUE(evs[i].value, strlen(evs[i].value)),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_HEADER("traceparent", traceparent,
                                      (ssize_t)strlen(traceparent)),
                    RD_KAFKA_V_END);
            else
                err = rd_kafka_producev(
                    rk, RD_KAFKA_V_TOPIC(topic),
                    RD_KAFKA_V_KEY(evs[i].ev->tenant,
                                   strlen(evs[i].ev->tenant)),
                    RD_KAFKA_V_VALUE(evs[i].value, strlen(evs[i].value)),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(rk, 100);
        } while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
        if (err) {
            d.failed++;
            d.last_err = err;
        }
    }
    rd_kafka_flush(rk, 60000);
    rd_kafka_destroy(rk);
    if (d.failed || d.acked != n) {
        fprintf(stderr,
                "runledger %s: %zu of %zu events not acknowledged: %s\n",
                command, n - d.acked, n,
                d.failed ? rd_kafka_err2str(d.last_err) : "timed out");
        return RL_EXIT_FAILURE;
    }
    fprintf(stderr, "runledger %s: %zu events acknowledged on %s\n", command, n,
            topic);
    return RL_EXIT_OK;
}

struct rl_event *
rl_cli_event_validate(const char *text, size_t len, size_t max_bytes,
                      char *reason, size_t reason_size, char *errstr,
                      size_t errstr_size)
{
    struct rl_event_limits limits;

    rl_event_limits_default(&limits);
    limits.max_bytes = max_bytes;
    return rl_event_parse(text, len, &limits, reason, reason_size, errstr,
                          errstr_size);
}

/* Validates text and appends it to *evs; prints why not. */
static int
add_event(struct rl_cli_event **evs, size_t *n, char *text, size_t max_bytes,
          const char *where)
{
    char reason[96], errstr[512];
    struct rl_event *ev;
    struct rl_cli_event *grown;

    ev = rl_cli_event_validate(text, strlen(text), max_bytes, reason,
                               sizeof(reason), errstr, sizeof(errstr));
    if (!ev) {
        fprintf(stderr, "runledger publish: %s%sinvalid event: %s: %s\n", where,
                where[0] ? ": " : "", reason, errstr);
        free(text);
        return -1;
    }
    grown = realloc(*evs, (*n + 1) * sizeof(**evs));
    if (!grown) {
        rl_event_destroy(ev);
        free(text);
        fprintf(stderr, "runledger publish: out of memory\n");
        return -1;
    }
    *evs = grown;
    grown[*n].value = text;
    grown[*n].ev = ev;
    (*n)++;
    return 0;
}

static int
read_stdin(struct rl_cli_event **evs, size_t *n, size_t max_bytes)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int bad = 0;

    while ((len = getline(&line, &cap, stdin)) != -1) {
        char where[48];
        char *text;

        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (strspn(line, " \t") == (size_t)len)
            continue;
        text = strdup(line);
        snprintf(where, sizeof(where), "line %ld", lineno);
        if (!text || add_event(evs, n, text, max_bytes, where) != 0)
            bad++;
    }
    free(line);
    if (ferror(stdin)) {
        fprintf(stderr, "runledger publish: could not read stdin\n");
        return -1;
    }
    return bad ? -1 : 0;
}

int
rl_cmd_publish(int argc, char **argv)
{
    enum {
        OPT_JOB = 1,
        OPT_TENANT,
        OPT_AT,
        OPT_NOW,
        OPT_WINDOW,
        OPT_VERSION,
        OPT_INPUT,
        OPT_REQUEST,
        OPT_NOTIFY,
        OPT_STDIN,
        OPT_TOPIC,
        OPT_DRY_RUN,
        OPT_TRACEPARENT
    };
    static const struct option options[] = {
        {"job", required_argument, NULL, OPT_JOB},
        {"tenant", required_argument, NULL, OPT_TENANT},
        {"at", required_argument, NULL, OPT_AT},
        {"now", no_argument, NULL, OPT_NOW},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"version", required_argument, NULL, OPT_VERSION},
        {"input", required_argument, NULL, OPT_INPUT},
        {"request", required_argument, NULL, OPT_REQUEST},
        {"notify", required_argument, NULL, OPT_NOTIFY},
        {"stdin", no_argument, NULL, OPT_STDIN},
        {"topic", required_argument, NULL, OPT_TOPIC},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"traceparent", required_argument, NULL, OPT_TRACEPARENT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "publish",
        .usage = usage_text,
        .options = options,
        .name_errors = 1,
    };
    struct flags f;
    struct rl_config *cfg = NULL;
    struct rl_cli_event *evs = NULL;
    size_t n = 0;
    const char *topic = NULL;
    const char *traceparent = NULL;
    int from_stdin = 0, dry_run = 0, any_flag = 0;
    char errstr[512];
    int rc = RL_EXIT_USAGE;
    int opt;

    memset(&f, 0, sizeof(f));
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc, argv, &rc)) > 0) {
        any_flag |= opt >= OPT_JOB && opt <= OPT_NOTIFY;
        switch (opt) {
        case OPT_JOB:
            f.job = optarg;
            break;
        case OPT_TENANT:
            f.tenant = optarg;
            break;
        case OPT_AT:
            f.at = optarg;
            break;
        case OPT_NOW:
            f.now = 1;
            break;
        case OPT_WINDOW:
            f.window = optarg;
            break;
        case OPT_VERSION:
            f.version = optarg;
            break;
        case OPT_INPUT:
            f.input = optarg;
            break;
        case OPT_REQUEST:
            f.request = optarg;
            break;
        case OPT_NOTIFY:
            f.notify = optarg;
            break;
        case OPT_STDIN:
            from_stdin = 1;
            break;
        case OPT_TOPIC:
            topic = optarg;
            break;
        case OPT_DRY_RUN:
            dry_run = 1;
            break;
        case OPT_TRACEPARENT:
            traceparent = optarg;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if (from_stdin && any_flag)
        return rl_cli_usage_error(
            "publish", "--stdin reads whole events; event flags do not "
                       "apply");
    if (!from_stdin) {
        if (!f.job || !f.tenant || !f.version || !f.request)
            return rl_cli_usage_error(
                "publish", "--job, --tenant, --version and --request are "
                           "required (or --stdin)");
        if (!!f.at == f.now)
            return rl_cli_usage_error("publish",
                                      "give exactly one of --at and --now");
    }

    if (traceparent) {
        struct rl_trace_ctx tc;

        if (rl_trace_parse(traceparent, strlen(traceparent), &tc, errstr,
                           sizeof(errstr)) != 0)
            return rl_cli_usage_error("publish", "%s", errstr);
    }

    if (rl_cli_config_load("publish", &cfg) != RL_EXIT_OK)
        return RL_EXIT_USAGE;
    rl_cli_log_init(cfg);
    if (from_stdin) {
        if (read_stdin(&evs, &n, (size_t)cfg->max_event_bytes) != 0)
            goto done;
        if (n == 0) {
            rl_cli_usage_error("publish", "no events on stdin");
            goto done;
        }
    } else {
        char *text = event_from_flags(&f, errstr, sizeof(errstr));

        if (!text) {
            fprintf(stderr, "runledger publish: invalid event: %s\n", errstr);
            goto done;
        }
        if (add_event(&evs, &n, text, (size_t)cfg->max_event_bytes, "") != 0)
            goto done;
    }

    rc = dry_run
             ? RL_EXIT_OK
             : rl_cli_events_send("publish", cfg, topic ? topic : cfg->topic,
                                  evs, n, traceparent);
    if (rc == RL_EXIT_OK) {
        for (size_t i = 0; i < n; i++)
            printf("%s\n", evs[i].ev->run_id);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "runledger publish: could not write to stdout\n");
            rc = RL_EXIT_FAILURE;
        }
    }

done:
    for (size_t i = 0; i < n; i++) {
        free(evs[i].value);
        rl_event_destroy(evs[i].ev);
    }
    free(evs);
    rl_config_destroy(cfg);
    return rc;
}
