/* Trace context and span export, against tests/otlp/receiver.py, which
 * parses every export with the official OpenTelemetry protocol classes
 * (opentelemetry-proto, json_format.Parse into ExportTraceServiceRequest)
 * and writes the spans it accepted as JSON lines.
 *
 * `propagated_and_exported`: one consumer exporting to the receiver, the
 * stub model recording traceparent headers; an event with a traceparent,
 * one without, one with a malformed one. Asserts: the stored traceparent;
 * the run span carries the event's trace id and parent id, the attempt
 * span is the run span's child; the model request carried
 * 00-<trace>-<attempt span>-01; the notification's traceparent names the
 * run span; the run's log lines carry trace_id; the run without a header
 * has the trace derived from its run_id and a root run span; the malformed
 * header is ignored (run completed, no dead letter).
 *
 * `collector_down`: the endpoint refuses connections. 20 runs complete as
 * fast as with no export configured (within 30 s) and the spans are
 * counted in runledger_spans_dropped_total. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e.h"
#include "rl/buf.h"
#include "rl/runid.h"
#include "rltest.h"

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT "00f067aa0ba902b7"
#define TP "00-" TRACE "-" PARENT "-01"

extern char **environ;

static pid_t receiver_pid;

static void
stop_receiver(void)
{
    if (receiver_pid > 0) {
        kill(receiver_pid, SIGTERM);
        waitpid(receiver_pid, NULL, 0);
        receiver_pid = 0;
    }
}

/* Starts the receiver; returns its port. A receiver that cannot be
 * installed or started fails the test. */
static int
start_receiver(const char *out)
{
    const char *src = getenv("RL_SOURCE_DIR");
    char cmd[1024], python[1024] = "", script[1024], portfile[] = "otlp.port";
    char *argv[8];
    FILE *p;
    int port = 0;

    RL_REQUIRE(src != NULL);
    /* The shell expands RL_SOURCE_DIR itself, quoted: the clone's path
     * may hold a space. */
    snprintf(cmd, sizeof(cmd), "exec \"$RL_SOURCE_DIR\"/tests/otlp/venv.sh");
    p = popen(cmd, "r");
    RL_REQUIRE(p != NULL);
    if (!fgets(python, sizeof(python), p))
        python[0] = '\0';
    RL_REQUIRE(pclose(p) == 0);
    python[strcspn(python, "\n")] = '\0';
    RL_REQUIRE(python[0] != '\0');
    snprintf(script, sizeof(script), "%s/tests/otlp/receiver.py", src);
    unlink(portfile);
    unlink(out);
    argv[0] = python;
    argv[1] = script;
    argv[2] = "--port-file";
    argv[3] = portfile;
    argv[4] = "--out";
    argv[5] = (char *)out;
    argv[6] = NULL;
    RL_REQUIRE(posix_spawn(&receiver_pid, python, NULL, NULL, argv, environ) ==
               0);
    atexit(stop_receiver);
    for (int i = 0; i < 300 && port == 0; i++) {
        FILE *f = fopen(portfile, "r");
        struct timespec ts = {0, 50000000L};

        if (f) {
            if (fscanf(f, "%d", &port) != 1)
                port = 0;
            fclose(f);
        }
        if (!port)
            nanosleep(&ts, NULL);
    }
    RL_REQUIRE(port > 0);
    return port;
}

/* The span of out named name for run_id (a cJSON the caller deletes), or
 * NULL. */
static cJSON *
find_span(const char *out, const char *name, const char *run_id)
{
    char line[16384];
    FILE *f = fopen(out, "r");

    if (!f)
        return NULL;
    while (fgets(line, sizeof(line), f)) {
        cJSON *s = cJSON_Parse(line);
        cJSON *attrs = cJSON_GetObjectItem(s, "attributes");
        cJSON *rid = cJSON_GetObjectItem(attrs, "runledger.run_id");
        cJSON *n = cJSON_GetObjectItem(s, "name");

        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0 &&
            cJSON_IsString(rid) && strcmp(rid->valuestring, run_id) == 0) {
            fclose(f);
            return s;
        }
        cJSON_Delete(s);
    }
    fclose(f);
    return NULL;
}

static const char *
str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);

    return cJSON_IsString(v) ? v->valuestring : "";
}

static cJSON *
wait_span(const char *out, const char *name, const char *run_id)
{
    for (int i = 0; i < 300; i++) {
        cJSON *s = find_span(out, name, run_id);
        struct timespec ts = {0, 100000000L};

        if (s)
            return s;
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "no %s span for run %s in %s\n", name, run_id, out);
    return NULL;
}

static void
produce_with(struct e2e *t, const char *tenant, int i, const char *tp,
             char *run_id)
{
    char value[4096];
    rd_kafka_resp_err_t err;

    e2e_event(value, sizeof(value), "trace-job", tenant, i, NULL, run_id);
    if (tp)
        err = rd_kafka_producev(
            t->producer, RD_KAFKA_V_TOPIC(t->topic),
            RD_KAFKA_V_KEY(tenant, strlen(tenant)),
            RD_KAFKA_V_VALUE(value, strlen(value)),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_HEADER("traceparent", tp, (ssize_t)strlen(tp)),
            RD_KAFKA_V_END);
    else
        err = rd_kafka_producev(t->producer, RD_KAFKA_V_TOPIC(t->topic),
                                RD_KAFKA_V_KEY(tenant, strlen(tenant)),
                                RD_KAFKA_V_VALUE(value, strlen(value)),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_END);
    RL_REQUIRE(err == RD_KAFKA_RESP_ERR_NO_ERROR);
}

/* The stub's recorded traceparent values for key, as JSON text. */
static char *
stub_headers(struct e2e *t, const char *key)
{
    char url[512];
    struct rl_buf b;
    CURL *c = curl_easy_init();

    memset(&b, 0, sizeof(b));
    snprintf(url, sizeof(url), "%s", t->stub_url);
    /* MODEL_BASE_URL ends in /v1: /stats is at the root */
    if (strlen(url) > 3 && strcmp(url + strlen(url) - 3, "/v1") == 0)
        url[strlen(url) - 3] = '\0';
    snprintf(url + strlen(url), sizeof(url) - strlen(url), "/stats?key=%s",
             key);
    curl_easy_setopt(c, CURLOPT_URL, url);
    {
        FILE *mem = open_memstream(&b.data, &b.len);

        curl_easy_setopt(c, CURLOPT_WRITEDATA, mem);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_perform(c);
        fclose(mem);
    }
    curl_easy_cleanup(c);
    return b.data;
}

static long long
metric(int port, const char *name)
{
    char url[128], *text = NULL, *p;
    size_t len = 0;
    long long v = -1;
    CURL *c = curl_easy_init();
    FILE *mem = open_memstream(&text, &len);

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, mem);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_perform(c);
    fclose(mem);
    curl_easy_cleanup(c);
    for (p = text; p && (p = strstr(p, name)); p += strlen(name)) {
        if ((p == text || p[-1] == '\n') && p[strlen(name)] == ' ') {
            v = atoll(p + strlen(name) + 1);
            break;
        }
    }
    free(text);
    return v;
}

static char want_notify_tp[64];
static const char *notify_run;
static int notify_ok, notify_seen;

static void
check_notification(const rd_kafka_message_t *rkm, void *opaque)
{
    char run_id[128], tp[128];

    (void)opaque;
    e2e_header(rkm, "run_id", run_id, sizeof(run_id));
    if (strcmp(run_id, notify_run) != 0)
        return;
    e2e_header(rkm, "traceparent", tp, sizeof(tp));
    notify_seen++;
    if (strcmp(tp, want_notify_tp) == 0)
        notify_ok++;
    else
        fprintf(stderr, "notification traceparent %s, want %s\n", tp,
                want_notify_tp);
}

static void
propagated_and_exported(void)
{
    struct e2e t;
    char run1[RL_HEX_SIZE], run2[RL_HEX_SIZE], run3[RL_HEX_SIZE];
    char endpoint[128], logname[256], want[128], derived[33];
    const char *out = "spans.jsonl";
    int port = start_receiver(out);
    cJSON *run_span, *attempt_span, *root_span;
    char *hdrs;
    const char *const stub_env[] = {"STUB_RECORD_HEADERS=traceparent", NULL};

    e2e_setup(&t, "trace", 1);
    e2e_stub_start(&t, stub_env);
    snprintf(endpoint, sizeof(endpoint),
             "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", port);
    {
        const char *env[] = {endpoint, "OTEL_BSP_SCHEDULE_DELAY=200",
                             "RUNLEDGER_LOG_LEVEL=debug", NULL};

        e2e_spawn(&t, "consume", env);
    }
    produce_with(&t, "acme", 1, TP, run1);
    produce_with(&t, "acme", 2, NULL, run2);
    produce_with(&t, "acme", 3, "00-" TRACE "-0000000000000000-01", run3);
    e2e_flush(&t);
    RL_CHECK(e2e_wait_intf(&t, 3, 60000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));

    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT coalesce(traceparent, '') FROM runs "
                             "WHERE run_id = '%s'",
                             run1),
                   TP);
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT coalesce(traceparent, 'none') FROM runs "
                             "WHERE run_id = '%s'",
                             run3),
                   "none");

    run_span = wait_span(out, "runledger.run", run1);
    attempt_span = wait_span(out, "runledger.attempt", run1);
    RL_REQUIRE(run_span && attempt_span);
    RL_CHECK_STREQ(str(run_span, "trace_id"), TRACE);
    RL_CHECK_STREQ(str(run_span, "parent_span_id"), PARENT);
    RL_CHECK_STREQ(str(run_span, "service"), "runledger");
    RL_CHECK_STREQ(
        str(cJSON_GetObjectItem(run_span, "attributes"), "runledger.outcome"),
        "completed");
    RL_CHECK_STREQ(str(attempt_span, "trace_id"), TRACE);
    RL_CHECK_STREQ(str(attempt_span, "parent_span_id"),
                   str(run_span, "span_id"));
    RL_CHECK(strcmp(str(attempt_span, "span_id"), str(run_span, "span_id")));

    /* the model request carried the attempt span as parent */
    snprintf(want, sizeof(want), "\"00-%s-%s-01\"", TRACE,
             str(attempt_span, "span_id"));
    hdrs = stub_headers(&t, run1);
    RL_CHECK(hdrs && strstr(hdrs, want) != NULL);
    if (!hdrs || !strstr(hdrs, want))
        fprintf(stderr, "stub saw %s, want %s\n", hdrs ? hdrs : "(null)", want);
    free(hdrs);

    /* the notification names the run span */
    snprintf(want_notify_tp, sizeof(want_notify_tp), "00-%s-%s-01", TRACE,
             str(run_span, "span_id"));
    notify_run = run1;
    for (int i = 0; i < 100 && notify_seen < 2; i++) {
        struct timespec ts = {0, 100000000L};

        notify_seen = notify_ok = 0;
        e2e_read_topic(&t, t.notify, check_notification, NULL);
        if (notify_seen < 2)
            nanosleep(&ts, NULL);
    }
    RL_CHECK_INTEQ(notify_seen, 2); /* email and slack */
    RL_CHECK_INTEQ(notify_ok, notify_seen);

    /* logs of the run carry its trace id */
    {
        char line[16384], needle[64];
        long n = 0;
        FILE *f;

        snprintf(logname, sizeof(logname), "%s.0.log", t.name);
        snprintf(needle, sizeof(needle), "\"trace_id\":\"%s\"", TRACE);
        f = fopen(logname, "r");
        RL_REQUIRE(f != NULL);
        while (fgets(line, sizeof(line), f))
            n += strstr(line, needle) && strstr(line, run1);
        fclose(f);
        RL_CHECK(n > 0);
    }

    /* no header: the trace derived from the run id, a root run span */
    root_span = wait_span(out, "runledger.run", run2);
    RL_REQUIRE(root_span);
    snprintf(derived, sizeof(derived), "%.32s", run2);
    RL_CHECK_STREQ(str(root_span, "trace_id"), derived);
    RL_CHECK_STREQ(str(root_span, "parent_span_id"), "");
    cJSON_Delete(root_span);
    /* a malformed header: ignored, not dead-lettered */
    root_span = wait_span(out, "runledger.run", run3);
    RL_REQUIRE(root_span);
    snprintf(derived, sizeof(derived), "%.32s", run3);
    RL_CHECK_STREQ(str(root_span, "trace_id"), derived);
    cJSON_Delete(root_span);
    RL_CHECK_INTEQ(e2e_count_with_header(&t, t.dlq, "run_id", run3), 0);

    cJSON_Delete(run_span);
    cJSON_Delete(attempt_span);
    e2e_teardown(&t);
}

static void
collector_down(void)
{
    struct e2e t;
    char endpoint[128], http[64];
    int http_port = rltest_free_port();
    int64_t start;
    long long dropped;

    e2e_setup(&t, "tracedown", 1);
    snprintf(endpoint, sizeof(endpoint),
             "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d",
             rltest_free_port());
    snprintf(http, sizeof(http), "RUNLEDGER_HTTP_PORT=%d", http_port);
    {
        const char *env[] = {endpoint, http, "OTEL_BSP_SCHEDULE_DELAY=100",
                             "OTEL_EXPORTER_OTLP_TIMEOUT=2000", NULL};

        e2e_spawn(&t, "consume", env);
    }
    start = rltest_now_ms();
    for (int i = 0; i < 20; i++)
        produce_with(&t, "acme", i, TP, NULL);
    e2e_flush(&t);
    RL_CHECK(e2e_wait_intf(&t, 20, 30000,
                           "SELECT count(*) FROM runs WHERE status = "
                           "'completed'"));
    fprintf(stderr, "20 runs completed in %lld ms with the collector down\n",
            (long long)(rltest_now_ms() - start));
    for (int i = 0; i < 100; i++) {
        struct timespec ts = {0, 100000000L};

        dropped = metric(http_port, "runledger_spans_dropped_total");
        if (dropped >= 40)
            break;
        nanosleep(&ts, NULL);
    }
    RL_CHECK(dropped >= 40); /* a run span and an attempt span per run */
    RL_CHECK_INTEQ(metric(http_port, "runledger_spans_exported_total"), 0);
    e2e_teardown(&t);
}

int
main(int argc, char **argv)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (argc > 1 && strcmp(argv[1], "collector_down") == 0)
        collector_down();
    else
        propagated_and_exported();
    stop_receiver();
    RL_TEST_END();
}
