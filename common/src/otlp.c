#include "rl/otlp.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rl/buf.h"
#include "rl/clock.h"
#include "rl/err.h"
#include "rl/log.h"

/* One encoded span waiting in the queue. */
struct qspan {
    struct qspan *next;
    size_t len;
    char json[]; /* the span object of the OTLP JSON mapping */
};

struct rl_otlp {
    char *url;
    char *resource; /* the resourceSpans prefix up to "spans":[ */
    long timeout_ms;
    long schedule_delay_ms;
    size_t max_batch, max_queue, max_queue_bytes;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct qspan *head, *tail; /* @locks lock */
    size_t count, bytes;       /* @locks lock */
    int stop;                  /* @locks lock */
    CURL *easy;                /* @locality exporter thread */
    int warned;                /* @locality exporter thread */
};

static atomic_llong exported_total;
static atomic_llong dropped_total;

long long
rl_otlp_exported_total(void)
{
    return atomic_load(&exported_total);
}

long long
rl_otlp_dropped_total(void)
{
    return atomic_load(&dropped_total);
}

static void
attr_str(cJSON *attrs, const char *key, const char *value)
{
    cJSON *a, *v;

    if (!value)
        return;
    a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "key", key);
    v = cJSON_AddObjectToObject(a, "value");
    cJSON_AddStringToObject(v, "stringValue", value);
    cJSON_AddItemToArray(attrs, a);
}

/* OTLP JSON carries 64-bit integers as strings. */
static void
attr_int(cJSON *attrs, const char *key, long long value)
{
    char num[32];
    cJSON *a = cJSON_CreateObject(), *v;

    snprintf(num, sizeof(num), "%lld", value);
    cJSON_AddStringToObject(a, "key", key);
    v = cJSON_AddObjectToObject(a, "value");
    cJSON_AddStringToObject(v, "intValue", num);
    cJSON_AddItemToArray(attrs, a);
}

static char *
encode_span(const struct rl_otlp_span *s)
{
    cJSON *o = cJSON_CreateObject(), *attrs, *status;
    char num[32];
    char *text;

    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "traceId", s->trace_id);
    cJSON_AddStringToObject(o, "spanId", s->span_id);
    if (s->parent_span_id && *s->parent_span_id)
        cJSON_AddStringToObject(o, "parentSpanId", s->parent_span_id);
    cJSON_AddStringToObject(o, "name", s->name);
    cJSON_AddNumberToObject(o, "kind", s->kind);
    snprintf(num, sizeof(num), "%lld", (long long)s->start_ns);
    cJSON_AddStringToObject(o, "startTimeUnixNano", num);
    snprintf(num, sizeof(num), "%lld", (long long)s->end_ns);
    cJSON_AddStringToObject(o, "endTimeUnixNano", num);
    attrs = cJSON_AddArrayToObject(o, "attributes");
    attr_str(attrs, "runledger.run_id", s->run_id);
    attr_str(attrs, "runledger.tenant", s->tenant);
    attr_str(attrs, "runledger.job", s->job);
    if (s->attempt >= 0)
        attr_int(attrs, "runledger.attempt", s->attempt);
    if (s->lease_epoch >= 0)
        attr_int(attrs, "runledger.lease_epoch", s->lease_epoch);
    if (s->http_status > 0)
        attr_int(attrs, "http.response.status_code", s->http_status);
    attr_str(attrs, "runledger.outcome", s->outcome);
    status = cJSON_AddObjectToObject(o, "status");
    /* STATUS_CODE_ERROR = 2; UNSET (0) is the default and left out */
    if (s->error)
        cJSON_AddNumberToObject(status, "code", 2);
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

void
rl_otlp_export(struct rl_otlp *otlp, const struct rl_otlp_span *span)
{
    char *text;
    size_t len;
    struct qspan *q;
    int full;

    if (!otlp || !span || !span->trace_id || !span->span_id)
        return;
    text = encode_span(span);
    if (!text) {
        atomic_fetch_add(&dropped_total, 1);
        return;
    }
    len = strlen(text);
    q = malloc(sizeof(*q) + len + 1);
    if (!q) {
        cJSON_free(text);
        atomic_fetch_add(&dropped_total, 1);
        return;
    }
    q->next = NULL;
    q->len = len;
    memcpy(q->json, text, len + 1);
    cJSON_free(text);

    pthread_mutex_lock(&otlp->lock);
    full = otlp->count >= otlp->max_queue ||
           otlp->bytes + len > otlp->max_queue_bytes;
    if (!full) {
        if (otlp->tail)
            otlp->tail->next = q;
        else
            otlp->head = q;
        otlp->tail = q;
        otlp->count++;
        otlp->bytes += len;
        if (otlp->count >= otlp->max_batch)
            pthread_cond_signal(&otlp->cond);
    }
    pthread_mutex_unlock(&otlp->lock);
    if (full) {
        free(q);
        atomic_fetch_add(&dropped_total, 1);
    }
}

static size_t
discard_body(char *ptr, size_t size, size_t nmemb, void *opaque)
{
    (void)ptr;
    (void)opaque;
    return size * nmemb;
}

/* Posts one batch; the spans are counted exported or dropped. There is no
 * retry: a span is telemetry, and a collector that is away must cost the
 * process nothing but the spans. @locality exporter thread */
static void
send_batch(struct rl_otlp *otlp, struct qspan *list, size_t n)
{
    struct rl_buf body;
    struct curl_slist *headers = NULL;
    CURLcode rc;
    long status = 0;
    char errbuf[CURL_ERROR_SIZE] = "";

    memset(&body, 0, sizeof(body));
    rl_buf_put(&body, otlp->resource, strlen(otlp->resource));
    for (struct qspan *q = list; q; q = q->next) {
        if (q != list)
            rl_buf_put(&body, ",", 1);
        rl_buf_put(&body, q->json, q->len);
    }
    rl_buf_put(&body, "]}]}]}", 7); /* with its NUL */
    if (body.failed) {
        rl_buf_free(&body);
        atomic_fetch_add(&dropped_total, (long long)n);
        return;
    }
    if (!otlp->easy)
        otlp->easy = curl_easy_init();
    if (!otlp->easy) {
        rl_buf_free(&body);
        atomic_fetch_add(&dropped_total, (long long)n);
        return;
    }
    curl_easy_reset(otlp->easy);
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(otlp->easy, CURLOPT_URL, otlp->url);
    curl_easy_setopt(otlp->easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(otlp->easy, CURLOPT_POSTFIELDS, body.data);
    curl_easy_setopt(otlp->easy, CURLOPT_POSTFIELDSIZE_LARGE,
                     (curl_off_t)(body.len - 1));
    curl_easy_setopt(otlp->easy, CURLOPT_TIMEOUT_MS, otlp->timeout_ms);
    curl_easy_setopt(otlp->easy, CURLOPT_CONNECTTIMEOUT_MS, otlp->timeout_ms);
    curl_easy_setopt(otlp->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(otlp->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(otlp->easy, CURLOPT_WRITEFUNCTION, discard_body);
    curl_easy_setopt(otlp->easy, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(otlp->easy, CURLOPT_USERAGENT, "runledger/" RL_VERSION);
    rc = curl_easy_perform(otlp->easy);
    if (rc == CURLE_OK)
        curl_easy_getinfo(otlp->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    rl_buf_free(&body);
    if (rc == CURLE_OK && status >= 200 && status < 300) {
        atomic_fetch_add(&exported_total, (long long)n);
        otlp->warned = 0;
        return;
    }
    atomic_fetch_add(&dropped_total, (long long)n);
    /* Once per outage, not once per batch. */
    if (!otlp->warned) {
        otlp->warned = 1;
        if (rc != CURLE_OK)
            rl_log_warn(NULL, "could not export %zu spans: %s", n,
                        errbuf[0] ? errbuf : curl_easy_strerror(rc));
        else
            rl_log_warn(NULL, "could not export %zu spans: HTTP %ld", n,
                        status);
    }
}

static void
free_list(struct qspan *q)
{
    while (q) {
        struct qspan *next = q->next;

        free(q);
        q = next;
    }
}

static void *
exporter_main(void *arg)
{
    struct rl_otlp *otlp = arg;
    int final_sent = 0;

    rl_thread_name("rl-otlp");
    pthread_mutex_lock(&otlp->lock);
    for (;;) {
        struct qspan *list, *last;
        size_t n = 0, bytes = 0;

        if (otlp->count < otlp->max_batch && !otlp->stop) {
            struct timespec until =
                rl_clock_after(CLOCK_REALTIME, otlp->schedule_delay_ms);

            while (otlp->count < otlp->max_batch && !otlp->stop &&
                   pthread_cond_timedwait(&otlp->cond, &otlp->lock, &until) !=
                       ETIMEDOUT)
                ;
        }
        if (!otlp->head) {
            if (otlp->stop)
                break;
            continue;
        }
        if (otlp->stop && final_sent) {
            /* Shutdown waits for one batch at most, not for a backlog
             * sent to a collector that may be away. */
            atomic_fetch_add(&dropped_total, (long long)otlp->count);
            free_list(otlp->head);
            otlp->head = otlp->tail = NULL;
            otlp->count = otlp->bytes = 0;
            break;
        }
        final_sent = otlp->stop;
        list = last = otlp->head;
        n = 1;
        bytes = last->len;
        while (n < otlp->max_batch && last->next) {
            last = last->next;
            bytes += last->len;
            n++;
        }
        otlp->head = last->next;
        if (!otlp->head)
            otlp->tail = NULL;
        last->next = NULL;
        otlp->count -= n;
        otlp->bytes -= bytes;
        pthread_mutex_unlock(&otlp->lock);
        send_batch(otlp, list, n);
        free_list(list);
        pthread_mutex_lock(&otlp->lock);
    }
    pthread_mutex_unlock(&otlp->lock);
    return NULL;
}

static char *
resource_prefix(const char *service_name)
{
    cJSON *attrs = cJSON_CreateArray();
    char *a, *out = NULL;
    size_t len;

    attr_str(attrs, "service.name",
             service_name && *service_name ? service_name : "runledger");
    attr_str(attrs, "service.version", RL_VERSION);
    a = cJSON_PrintUnformatted(attrs);
    cJSON_Delete(attrs);
    if (!a)
        return NULL;
    len = strlen(a) + 256;
    out = malloc(len);
    if (out)
        snprintf(out, len,
                 "{\"resourceSpans\":[{\"resource\":{\"attributes\":%s},"
                 "\"scopeSpans\":[{\"scope\":{\"name\":\"runledger\","
                 "\"version\":\"%s\"},\"spans\":[",
                 a, RL_VERSION);
    cJSON_free(a);
    return out;
}

struct rl_otlp *
rl_otlp_new(const struct rl_otlp_config *cfg, char *errstr, size_t errstr_size)
{
    struct rl_otlp *otlp;
    const char *base = cfg->endpoint;
    size_t len;

    rl_set_err(errstr, errstr_size, "%s", "");
    if (!(cfg->traces_endpoint && *cfg->traces_endpoint) && !(base && *base))
        return NULL;
    otlp = calloc(1, sizeof(*otlp));
    if (!otlp)
        goto nomem;
    if (cfg->traces_endpoint && *cfg->traces_endpoint) {
        otlp->url = strdup(cfg->traces_endpoint);
    } else {
        len = strlen(base);
        while (len > 0 && base[len - 1] == '/')
            len--;
        otlp->url = malloc(len + sizeof("/v1/traces"));
        if (otlp->url)
            snprintf(otlp->url, len + sizeof("/v1/traces"), "%.*s/v1/traces",
                     (int)len, base);
    }
    otlp->resource = resource_prefix(cfg->service_name);
    if (!otlp->url || !otlp->resource)
        goto nomem;
    otlp->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 10000;
    otlp->schedule_delay_ms =
        cfg->schedule_delay_ms > 0 ? cfg->schedule_delay_ms : 1000;
    otlp->max_batch = cfg->max_batch > 0 ? cfg->max_batch : 512;
    otlp->max_queue = cfg->max_queue > 0 ? cfg->max_queue : 2048;
    otlp->max_queue_bytes =
        cfg->max_queue_bytes > 0 ? cfg->max_queue_bytes : 4 << 20;
    pthread_mutex_init(&otlp->lock, NULL);
    pthread_cond_init(&otlp->cond, NULL);
    if (pthread_create(&otlp->thread, NULL, exporter_main, otlp) != 0) {
        rl_set_err(errstr, errstr_size, "could not start the span exporter: %s",
                   strerror(errno));
        pthread_cond_destroy(&otlp->cond);
        pthread_mutex_destroy(&otlp->lock);
        free(otlp->url);
        free(otlp->resource);
        free(otlp);
        return NULL;
    }
    return otlp;

nomem:
    if (otlp) {
        free(otlp->url);
        free(otlp->resource);
        free(otlp);
    }
    rl_set_err(errstr, errstr_size,
               "could not start the span exporter: out of memory");
    return NULL;
}

void
rl_otlp_destroy(struct rl_otlp *otlp)
{
    if (!otlp)
        return;
    pthread_mutex_lock(&otlp->lock);
    otlp->stop = 1;
    pthread_cond_signal(&otlp->cond);
    pthread_mutex_unlock(&otlp->lock);
    pthread_join(otlp->thread, NULL);
    free_list(otlp->head);
    if (otlp->easy)
        curl_easy_cleanup(otlp->easy);
    pthread_cond_destroy(&otlp->cond);
    pthread_mutex_destroy(&otlp->lock);
    free(otlp->url);
    free(otlp->resource);
    free(otlp);
}
