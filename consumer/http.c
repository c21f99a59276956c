/* Health and metrics endpoint of `runledger consume` and `runledger relay`
 * (http.h). The HTTP side is libmicrohttpd's internal epoll thread; a
 * health thread of ours checks PostgreSQL on a connection of its own and
 * reads the ledger-wide gauges, so a slow database never blocks a probe:
 * probes only read flags. */
#include "http.h"
#include "http_metrics.h"
#include "mhd_log.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rl/clock.h"
#include "rl/db_conn.h"
#include "rl/db_gauges.h"
#include "rl/log.h"
#include "rl/metrics.h"
#include "rl/otlp.h"
#include "rl/runid.h"

/* The HTTP server's limits. epoll, never select(): with a thousand model
 * calls in flight every new descriptor is above FD_SETSIZE (1024), and
 * select() cannot watch it, so probes went unanswered at peak load. Idle
 * connections are shed after a few seconds, so a client that opens many
 * and sends nothing holds them briefly; one address may hold a quarter of
 * the total, so it cannot take the slots kubelet and Prometheus need,
 * while a few hundred idle connections from one address (a node's kubelet
 * and a leaky sidecar share it) still leave room for the probes. */
#define HTTP_CONNECTION_LIMIT 4096
/* A bearer token longer than this is refused when read. */
#define HTTP_TOKEN_MAX 4096

struct rl_http {
    const struct rl_config *cfg;
    int consumer; /* role "consume": readiness needs the group */
    struct rl_counters *counters;
    atomic_long *in_flight;
    struct rl_metrics *metrics;
    struct MHD_Daemon *daemon;
    int token_set;                  /* /metrics wants a bearer token */
    char token_sha256[RL_HEX_SIZE]; /* SHA-256 of it: never the token */

    atomic_llong heartbeat_ms; /* monotonic ms of the last loop turn */
    atomic_llong ledger_ms;    /* ... of the ledger thread's; 0: none yet */
    atomic_int db_ok;
    atomic_int group_joined;
    atomic_int stopping;
    pthread_mutex_t reason_lock;
    char db_reason[256]; /* @locks reason_lock */
    atomic_long dlq_undelivered;
    char dlq_reason[160]; /* @locks reason_lock */
    atomic_int ledger_failing;
    char ledger_reason[256]; /* @locks reason_lock */

    pthread_t health_tid;
    int health_started;
    pthread_mutex_t health_lock;
    pthread_cond_t health_wake;
    int health_stop; /* @locks health_lock */
};

static int
is_ready(struct rl_http *h, char *reason, size_t size)
{
    if (atomic_load(&h->stopping)) {
        snprintf(reason, size, "stopping");
        return 0;
    }
    if (!atomic_load(&h->db_ok)) {
        pthread_mutex_lock(&h->reason_lock);
        snprintf(reason, size, "%s",
                 h->db_reason[0] ? h->db_reason
                                 : "postgresql: not checked yet");
        pthread_mutex_unlock(&h->reason_lock);
        return 0;
    }
    if (atomic_load(&h->ledger_failing)) {
        pthread_mutex_lock(&h->reason_lock);
        snprintf(reason, size, "%s", h->ledger_reason);
        pthread_mutex_unlock(&h->reason_lock);
        return 0;
    }
    if (h->consumer && !atomic_load(&h->group_joined)) {
        snprintf(reason, size, "kafka: not in consumer group %s yet",
                 h->cfg->group_id);
        return 0;
    }
    if (atomic_load(&h->dlq_undelivered) > 0) {
        pthread_mutex_lock(&h->reason_lock);
        snprintf(reason, size, "kafka: %ld dead letters undelivered: %s",
                 atomic_load(&h->dlq_undelivered), h->dlq_reason);
        pthread_mutex_unlock(&h->reason_lock);
        return 0;
    }
    snprintf(reason, size, "ready");
    return 1;
}

/* Mirrors the pipeline's atomic counters into the registry; they are the
 * source of truth, the registry only renders them. */
static void
collect(struct rl_http *h)
{
    struct rl_metrics *m = h->metrics;
    struct rl_counters *c = h->counters;
    char reason[320];

    rl_metrics_set(m, "runledger_ready", NULL,
                   is_ready(h, reason, sizeof(reason)));
    rl_metrics_set(m, "runledger_postgres_up", NULL, atomic_load(&h->db_ok));
    if (h->consumer)
        rl_metrics_set(m, "runledger_kafka_group_joined", NULL,
                       atomic_load(&h->group_joined));
    if (h->in_flight)
        rl_metrics_set(m, "runledger_runs_in_flight", NULL,
                       (double)atomic_load(h->in_flight));
    rl_metrics_set(m, "runledger_spans_exported_total", NULL,
                   (double)rl_otlp_exported_total());
    rl_metrics_set(m, "runledger_spans_dropped_total", NULL,
                   (double)rl_otlp_dropped_total());
    if (!c)
        return;
    rl_metrics_set(m, "runledger_outbox_relayed_total", NULL,
                   (double)atomic_load(&c->relayed));
    if (!h->consumer)
        return;
    rl_metrics_set(m, "runledger_held_bytes", NULL,
                   (double)atomic_load(&c->held_bytes));
    rl_metrics_set(m, "runledger_events_total", NULL,
                   (double)atomic_load(&c->events));
    rl_metrics_set(m, "runledger_events_invalid_total", NULL,
                   (double)atomic_load(&c->invalid));
    rl_http_set_labelled(m, "runledger_runs_total", "outcome", "completed",
                         (double)atomic_load(&c->completed));
    rl_http_set_labelled(m, "runledger_runs_total", "outcome", "failed",
                         (double)atomic_load(&c->failed));
    rl_http_set_labelled(m, "runledger_runs_total", "outcome", "unknown",
                         (double)atomic_load(&c->unknown));
    rl_http_set_labelled(m, "runledger_runs_total", "outcome", "retried",
                         (double)atomic_load(&c->retried));
    rl_http_set_labelled(m, "runledger_claims_total", "result", "won",
                         (double)atomic_load(&c->claims_won));
    rl_http_set_labelled(m, "runledger_claims_total", "result", "lost",
                         (double)atomic_load(&c->claims_lost));
    rl_metrics_set(m, "runledger_duplicates_total", NULL,
                   (double)atomic_load(&c->duplicates));
    rl_metrics_set(m, "runledger_fingerprint_conflicts_total", NULL,
                   (double)atomic_load(&c->conflicts));
    rl_metrics_set(m, "runledger_purged_runs_redelivered_total", NULL,
                   (double)atomic_load(&c->purged_redelivered));
    rl_metrics_set(m, "runledger_partitions_read_again_total", NULL,
                   (double)atomic_load(&c->seeks_back));
    rl_metrics_set(m, "runledger_lease_lost_total", NULL,
                   (double)atomic_load(&c->lease_lost));
    rl_metrics_set(m, "runledger_queued_total", NULL,
                   (double)atomic_load(&c->queued));
    rl_metrics_set(m, "runledger_swept_total", NULL,
                   (double)atomic_load(&c->swept));
    rl_metrics_set(m, "runledger_dispatches_total", NULL,
                   (double)atomic_load(&c->dispatches));
    rl_http_set_labelled(m, "runledger_budget_deferrals_total", "until",
                         "next_window",
                         (double)atomic_load(&c->budget_deferrals));
    rl_http_set_labelled(m, "runledger_budget_deferrals_total", "until",
                         "settled", (double)atomic_load(&c->budget_waits));
    rl_metrics_set(m, "runledger_rate_limit_waits_total", NULL,
                   (double)atomic_load(&c->rate_limit_waits));
    rl_metrics_set(m, "runledger_model_throttles_total", NULL,
                   (double)atomic_load(&c->model_throttles));
    rl_http_set_labelled(m, "runledger_reconciled_attempts_total", "result",
                         "found", (double)atomic_load(&c->reconciled));
    rl_http_set_labelled(m, "runledger_reconciled_attempts_total", "result",
                         "not_found",
                         (double)atomic_load(&c->reconcile_missed));
    rl_metrics_set(m, "runledger_reconcile_lookups_total", NULL,
                   (double)atomic_load(&c->reconcile_lookups));
    rl_metrics_set(m, "runledger_reconciled_generations_total", NULL,
                   (double)atomic_load(&c->reconciled_generations));
    rl_metrics_set(m, "runledger_reconcile_foreign_records_total", NULL,
                   (double)atomic_load(&c->reconcile_foreign));
    rl_metrics_set(m, "runledger_batch_orphans_cancelled_total", NULL,
                   (double)atomic_load(&c->batch_orphans_cancelled));
}

/* ---- HTTP -----------------------------------------------------------------
 */

static enum MHD_Result
reply(struct MHD_Connection *conn, unsigned status, const char *type,
      char *body, size_t len, int owned)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;

    resp = MHD_create_response_from_buffer(
        len, body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
    if (!resp) {
        if (owned)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* Whether the request carries the bearer token /metrics wants. The
 * digests of the two are compared, in constant time: neither the token's
 * bytes nor its length show in the time an answer takes. */
static int
token_ok(const struct rl_http *h, struct MHD_Connection *conn)
{
    const char *auth = MHD_lookup_connection_value(
        conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    char sum[RL_HEX_SIZE];

    if (!auth || strncmp(auth, "Bearer ", 7) != 0)
        return 0;
    auth += 7;
    if (rl_sha256_hex(auth, strlen(auth), sum) != 0)
        return 0;
    return CRYPTO_memcmp(sum, h->token_sha256, RL_HEX_SIZE - 1) == 0;
}

/* Reads the bearer token of RUNLEDGER_METRICS_TOKEN_FILE and keeps only
 * its digest. Trailing whitespace (the newline a secret file ends with)
 * is not part of it. Returns 0, or -1 with errstr (which never holds the
 * token). */
static int
load_token(struct rl_http *h, const char *path, char *errstr,
           size_t errstr_size)
{
    char buf[HTTP_TOKEN_MAX + 2];
    size_t len;
    FILE *fp = fopen(path, "rb");

    if (!fp) {
        snprintf(errstr, errstr_size,
                 "could not read RUNLEDGER_METRICS_TOKEN_FILE %s", path);
        return -1;
    }
    len = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
                       buf[len - 1] == ' ' || buf[len - 1] == '\t'))
        len--;
    buf[len] = '\0';
    if (len == 0 || len > HTTP_TOKEN_MAX || strlen(buf) != len) {
        OPENSSL_cleanse(buf, sizeof(buf));
        snprintf(errstr, errstr_size,
                 "RUNLEDGER_METRICS_TOKEN_FILE %s holds no usable token "
                 "(empty, longer than %d bytes, or a NUL byte)",
                 path, HTTP_TOKEN_MAX);
        return -1;
    }
    if (rl_sha256_hex(buf, len, h->token_sha256) != 0) {
        OPENSSL_cleanse(buf, sizeof(buf));
        snprintf(errstr, errstr_size, "could not hash the metrics token");
        return -1;
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    h->token_set = 1;
    return 0;
}

/* The health server's address from RUNLEDGER_HTTP_ADDRESS and port, into
 * v4 or v6. Returns AF_INET, AF_INET6, or -1 for an address that is
 * neither. */
static int
bind_address(const struct rl_config *cfg, struct sockaddr_in *v4,
             struct sockaddr_in6 *v6)
{
    memset(v4, 0, sizeof(*v4));
    memset(v6, 0, sizeof(*v6));
    if (inet_pton(AF_INET, cfg->http_address, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)cfg->http_port);
        return AF_INET;
    }
    if (inet_pton(AF_INET6, cfg->http_address, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)cfg->http_port);
        return AF_INET6;
    }
    return -1;
}

/* @locality libmicrohttpd's polling thread */
static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url,
       const char *method, const char *version, const char *upload_data,
       size_t *upload_data_size, void **con_cls)
{
    struct rl_http *h = cls;
    char text[512];

    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        snprintf(text, sizeof(text), "method not allowed\n");
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", text,
                     strlen(text), 0);
    }
    if (strcmp(url, "/healthz") == 0) {
        int64_t now = rl_clock_ms();
        int64_t idle = now - atomic_load(&h->heartbeat_ms);
        int64_t ledger = atomic_load(&h->ledger_ms);
        int ok = idle <= (int64_t)h->cfg->liveness_seconds * 1000;

        snprintf(text, sizeof(text),
                 ok ? "ok\n" : "main loop stalled for %lld ms\n",
                 (long long)idle);
        /* A ledger statement stalled on PostgreSQL (a failover without a
         * reset, a lock held elsewhere) stops claims, dispatches and
         * completions while the Kafka loop turns on. */
        if (ok && ledger > 0 &&
            now - ledger > (int64_t)h->cfg->ledger_liveness_seconds * 1000) {
            ok = 0;
            snprintf(text, sizeof(text), "ledger loop stalled for %lld ms\n",
                     (long long)(now - ledger));
        }
        return reply(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                     "text/plain; charset=utf-8", text, strlen(text), 0);
    }
    if (strcmp(url, "/readyz") == 0) {
        char reason[320];
        int ok = is_ready(h, reason, sizeof(reason));

        snprintf(text, sizeof(text), "%s\n", reason);
        return reply(conn, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                     "text/plain; charset=utf-8", text, strlen(text), 0);
    }
    if (strcmp(url, "/metrics") == 0) {
        size_t len = 0;
        char *body;

        if (h->token_set && !token_ok(h, conn)) {
            struct MHD_Response *resp;
            enum MHD_Result ret;

            snprintf(text, sizeof(text),
                     "/metrics needs Authorization: Bearer <token>\n");
            resp = MHD_create_response_from_buffer(strlen(text), text,
                                                   MHD_RESPMEM_MUST_COPY);
            if (!resp)
                return MHD_NO;
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                    "text/plain");
            MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                    "Bearer realm=\"runledger\"");
            ret = MHD_queue_response(conn, MHD_HTTP_UNAUTHORIZED, resp);
            MHD_destroy_response(resp);
            return ret;
        }
        collect(h);
        body = rl_metrics_render(h->metrics, &len);
        if (!body)
            return MHD_NO;
        return reply(conn, MHD_HTTP_OK,
                     "text/plain; version=0.0.4; charset=utf-8", body, len, 1);
    }
    snprintf(text, sizeof(text),
             "not found; try /healthz, /readyz or /metrics\n");
    return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", text, strlen(text), 0);
}

/* ---- health thread --------------------------------------------------------
 */

/* What is wrong with PostgreSQL, without the host, port, user or database
 * that libpq's messages name. connected: the connection was made and the
 * health query failed. */
static const char *
db_failure_class(const char *errstr, int connected)
{
    static const struct {
        const char *needle;
        const char *what;
    } classes[] = {
        {"password authentication failed", "could not connect: "
                                           "authentication failed"},
        {"no password supplied", "could not connect: authentication failed"},
        {"no pg_hba.conf entry", "could not connect: authentication failed"},
        {"authentication", "could not connect: authentication failed"},
        {"role \"", "could not connect: authentication failed"},
        {"database \"", "could not connect: the database does not exist"},
        {"Connection refused", "could not connect: connection refused"},
        {"timeout expired", "could not connect: timed out"},
        {"timed out", "could not connect: timed out"},
        {"could not translate host name", "could not connect: "
                                          "host name not resolved"},
        {"SSL", "could not connect: tls failed"},
        {"too many clients", "could not connect: too many connections"},
        {"shutting down", "could not connect: the server is shutting down"},
        {"starting up", "could not connect: the server is starting up"},
        {"recovery", "could not connect: the server is in recovery"},
    };

    if (connected)
        return "health query failed (details in the log)";
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
        if (strstr(errstr, classes[i].needle))
            return classes[i].what;
    }
    return "could not connect (details in the log)";
}

static void *
health_main(void *arg)
{
    struct rl_http *h = arg;
    struct rl_db *db = NULL;
    char errstr[512];

    rl_thread_name("rl-health");
    pthread_mutex_lock(&h->health_lock);
    while (!h->health_stop) {
        struct rl_db_gauges g;
        struct timespec until;
        int err;

        pthread_mutex_unlock(&h->health_lock);
        if (!db)
            db = rl_db_connect_role(h->cfg, RL_DB_ROLE_HEALTH, errstr,
                                    sizeof(errstr));
        memset(&g, 0, sizeof(g));
        err = db ? rl_db_ops_gauges(db, &g, errstr, sizeof(errstr)) : -1;
        if (err == 0) {
            rl_metrics_set(h->metrics, "runledger_outbox_backlog", NULL,
                           (double)g.outbox_backlog);
            rl_metrics_set(h->metrics,
                           "runledger_outbox_oldest_pending_seconds", NULL,
                           g.oldest_pending_seconds);
            rl_metrics_set(h->metrics, "runledger_unknown_runs", NULL,
                           (double)g.unknown_runs);
            rl_metrics_set(h->metrics, "runledger_runs_awaiting_approval", NULL,
                           (double)g.awaiting_approval_runs);
            rl_metrics_set(h->metrics, "runledger_cancelled_runs", NULL,
                           (double)g.cancelled_runs);
            rl_http_set_labelled(h->metrics, "runledger_ledger_rows", "table",
                                 "runs", (double)g.runs_rows);
            rl_http_set_labelled(h->metrics, "runledger_ledger_rows", "table",
                                 "attempts", (double)g.attempts_rows);
            rl_http_set_labelled(h->metrics, "runledger_ledger_rows", "table",
                                 "outbox_delivered", (double)g.delivered_rows);
            rl_metrics_set(h->metrics, "runledger_runs_waiting", NULL,
                           (double)g.waiting_runs);
            rl_http_set_limits(h->metrics, &g, h->cfg->metrics_tenant_labels);
            rl_http_set_batches(h->metrics, db);
            if (!atomic_exchange(&h->db_ok, 1))
                rl_log_info(NULL, "health: postgresql reachable");
        } else {
            /* The full text goes to the log; /readyz, which anyone who
             * reaches the port can read, gets only its class. */
            pthread_mutex_lock(&h->reason_lock);
            snprintf(h->db_reason, sizeof(h->db_reason), "postgresql: %s",
                     db_failure_class(errstr, db != NULL));
            pthread_mutex_unlock(&h->reason_lock);
            if (atomic_exchange(&h->db_ok, 0) || !db)
                rl_log_warn(NULL, "health: %s", errstr);
            rl_db_destroy(db);
            db = NULL;
        }
        rl_db_gauges_clear(&g);

        until = rl_clock_after(CLOCK_REALTIME,
                               h->cfg->health_interval_seconds * 1000LL);
        pthread_mutex_lock(&h->health_lock);
        while (!h->health_stop &&
               pthread_cond_timedwait(&h->health_wake, &h->health_lock,
                                      &until) == 0)
            ;
    }
    pthread_mutex_unlock(&h->health_lock);
    rl_db_destroy(db);
    return NULL;
}

/* ---- public ---------------------------------------------------------------
 */

int
rl_http_start(const struct rl_config *cfg, const char *role,
              struct rl_counters *counters, atomic_long *in_flight,
              struct rl_http **out, char *errstr, size_t errstr_size)
{
    struct rl_http *h;
    char labels[128];
    struct timespec now;
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    int family;

    *out = NULL;
    if (cfg->http_port == 0)
        return 0;
    h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(errstr, errstr_size, "out of memory");
        return -1;
    }
    h->cfg = cfg;
    h->consumer = strcmp(role, "consume") == 0;
    h->counters = counters;
    h->in_flight = in_flight;
    atomic_store(&h->heartbeat_ms, rl_clock_ms());
    pthread_mutex_init(&h->reason_lock, NULL);
    pthread_mutex_init(&h->health_lock, NULL);
    pthread_cond_init(&h->health_wake, NULL);
    h->metrics = rl_metrics_new();
    if (!h->metrics || rl_http_define_families(h->metrics) != 0) {
        snprintf(errstr, errstr_size, "could not set up metrics");
        goto fail;
    }
    rl_metrics_labels(labels, sizeof(labels), "version", RL_VERSION, "role",
                      role, NULL);
    rl_metrics_set(h->metrics, "runledger_build_info", labels, 1);
    clock_gettime(CLOCK_REALTIME, &now);
    rl_metrics_set(h->metrics, "runledger_process_start_time_seconds", NULL,
                   (double)now.tv_sec);
    if (h->consumer) {
        static const char *const kinds[] = {"prompt", "completion", "cached"};

        /* Series that exist from the start, so rate() and alerts see a
         * zero instead of nothing. */
        rl_metrics_set(h->metrics, "runledger_assigned_partitions", NULL, 0);
        rl_metrics_add(h->metrics, "runledger_generations_total", NULL, 0);
        rl_metrics_add(h->metrics, "runledger_ambiguous_attempts_total", NULL,
                       0);
        for (size_t i = 0; i < 3; i++) {
            rl_metrics_labels(labels, sizeof(labels), "kind", kinds[i], NULL);
            rl_metrics_add(h->metrics, "runledger_tokens_total", labels, 0);
        }
    }

    if (pthread_create(&h->health_tid, NULL, health_main, h) != 0) {
        snprintf(errstr, errstr_size, "could not start the health thread");
        goto fail;
    }
    h->health_started = 1;
    family = bind_address(cfg, &v4, &v6);
    if (family < 0) {
        snprintf(errstr, errstr_size,
                 "RUNLEDGER_HTTP_ADDRESS %s is not an IPv4 or IPv6 address",
                 cfg->http_address);
        goto fail;
    }
    if (cfg->metrics_token_file && *cfg->metrics_token_file &&
        load_token(h, cfg->metrics_token_file, errstr, errstr_size) != 0)
        goto fail;
    /* Per address: a client that opens many connections and sends
     * nothing cannot take the slots kubelet and Prometheus need; one that
     * sends slowly is dropped after the timeout. The logger is the first
     * option: libmicrohttpd reports what the options before it do through
     * its own logger, a plain-text line on stderr. */
    h->daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
            (family == AF_INET6 ? MHD_USE_IPv6 : 0),
        (uint16_t)cfg->http_port, NULL, NULL, handle, h,
        MHD_OPTION_EXTERNAL_LOGGER, rl_mhd_log, "http", MHD_OPTION_SOCK_ADDR,
        family == AF_INET6 ? (struct sockaddr *)&v6 : (struct sockaddr *)&v4,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTION_LIMIT,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)cfg->http_per_address_conns, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg->http_client_timeout_seconds, MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(errstr, errstr_size,
                 "could not serve health and metrics on %s port %d (taken?)",
                 cfg->http_address, cfg->http_port);
        goto fail;
    }
    rl_log_info(NULL, "serving /healthz, /readyz and /metrics on %s port %d%s",
                cfg->http_address, cfg->http_port,
                h->token_set ? " (/metrics with a bearer token)" : "");
    *out = h;
    return 0;

fail:
    rl_http_stop(h);
    return -1;
}

void
rl_http_stop(struct rl_http *h)
{
    if (!h)
        return;
    if (h->daemon)
        MHD_stop_daemon(h->daemon);
    if (h->health_started) {
        pthread_mutex_lock(&h->health_lock);
        h->health_stop = 1;
        pthread_cond_signal(&h->health_wake);
        pthread_mutex_unlock(&h->health_lock);
        pthread_join(h->health_tid, NULL);
    }
    rl_metrics_destroy(h->metrics);
    pthread_cond_destroy(&h->health_wake);
    pthread_mutex_destroy(&h->health_lock);
    pthread_mutex_destroy(&h->reason_lock);
    free(h);
}

void
rl_http_heartbeat(struct rl_http *h)
{
    if (h)
        atomic_store(&h->heartbeat_ms, rl_clock_ms());
}

void
rl_http_ledger_turned(struct rl_http *h)
{
    if (h)
        atomic_store(&h->ledger_ms, rl_clock_ms());
}

void
rl_http_relay_turned(struct rl_http *h)
{
    if (h && !h->consumer)
        atomic_store(&h->heartbeat_ms, rl_clock_ms());
}

void
rl_http_group(struct rl_http *h, int joined, int partitions)
{
    char labels[64];

    if (!h)
        return;
    atomic_store(&h->group_joined, joined);
    rl_metrics_labels(labels, sizeof(labels), "type",
                      joined ? "assign" : "revoke", NULL);
    rl_metrics_add(h->metrics, "runledger_rebalances_total", labels, 1);
    rl_metrics_set(h->metrics, "runledger_assigned_partitions", NULL,
                   joined ? partitions : 0);
    if (!joined)
        rl_metrics_clear(h->metrics, "runledger_consumer_lag");
}

void
rl_http_stopping(struct rl_http *h)
{
    if (h)
        atomic_store(&h->stopping, 1);
}

static void
add_tokens(struct rl_http *h, const struct rl_model_call *call)
{
    char labels[96];

    if (call->prompt_tokens > 0) {
        rl_metrics_labels(labels, sizeof(labels), "kind", "prompt", NULL);
        rl_metrics_add(h->metrics, "runledger_tokens_total", labels,
                       (double)call->prompt_tokens);
    }
    if (call->completion_tokens > 0) {
        rl_metrics_labels(labels, sizeof(labels), "kind", "completion", NULL);
        rl_metrics_add(h->metrics, "runledger_tokens_total", labels,
                       (double)call->completion_tokens);
    }
    if (call->cached_tokens > 0) {
        rl_metrics_labels(labels, sizeof(labels), "kind", "cached", NULL);
        rl_metrics_add(h->metrics, "runledger_tokens_total", labels,
                       (double)call->cached_tokens);
    }
}

void
rl_http_reconciled(struct rl_http *h, const struct rl_model_call *call)
{
    if (h && call)
        add_tokens(h, call);
}

void
rl_http_model_call(struct rl_http *h, const struct rl_model_call *call)
{
    char labels[96];
    const char *outcome;

    if (!h || !call)
        return;
    outcome = rl_model_outcome_name(call->outcome);
    rl_metrics_labels(labels, sizeof(labels), "outcome", outcome, NULL);
    rl_metrics_add(h->metrics, "runledger_attempts_total", labels, 1);
    if (call->outcome == RL_MODEL_OK)
        rl_metrics_add(h->metrics, "runledger_generations_total", NULL, 1);
    if (call->outcome == RL_MODEL_AMBIGUOUS ||
        (call->outcome == RL_MODEL_CANCELLED && call->request_sent))
        rl_metrics_add(h->metrics, "runledger_ambiguous_attempts_total", NULL,
                       1);
    add_tokens(h, call);
    if (call->request_sent && call->latency_ms >= 0)
        rl_metrics_observe(h->metrics, "runledger_attempt_latency_seconds",
                           NULL, (double)call->latency_ms / 1000.0);
}

void
rl_http_schedules_reset(struct rl_http *h)
{
    if (h)
        rl_metrics_clear(h->metrics, "runledger_schedule_windows_missed");
}

void
rl_http_schedule_missed(struct rl_http *h, const char *schedule, double missed)
{
    if (h)
        rl_http_set_labelled(h->metrics, "runledger_schedule_windows_missed",
                             "schedule", schedule, missed);
}

void
rl_http_scheduler_state(struct rl_http *h, int active, long long published)
{
    if (!h)
        return;
    rl_metrics_set(h->metrics, "runledger_scheduler_active", NULL, active);
    rl_metrics_set(h->metrics, "runledger_scheduler_events_total", NULL,
                   (double)published);
}

void
rl_http_dead_letter(struct rl_http *h, const char *reason)
{
    char code[64], labels[128];
    size_t len;

    if (!h)
        return;
    if (!reason || !*reason)
        reason = "unspecified";
    len = strcspn(reason, ":");
    if (len >= sizeof(code))
        len = sizeof(code) - 1;
    memcpy(code, reason, len);
    code[len] = '\0';
    rl_metrics_labels(labels, sizeof(labels), "reason", code, NULL);
    rl_metrics_add(h->metrics, "runledger_dead_letters_total", labels, 1);
}

void
rl_http_outbox_dead_lettered(struct rl_http *h, const char *reason)
{
    char labels[128];

    if (!h)
        return;
    rl_metrics_labels(labels, sizeof(labels), "reason",
                      reason && *reason ? reason : "unspecified", NULL);
    rl_metrics_add(h->metrics, "runledger_outbox_dead_lettered_total", labels,
                   1);
}

void
rl_http_ledger_failing(struct rl_http *h, const char *reason)
{
    if (!h)
        return;
    if (reason) {
        pthread_mutex_lock(&h->reason_lock);
        snprintf(h->ledger_reason, sizeof(h->ledger_reason), "%s", reason);
        pthread_mutex_unlock(&h->reason_lock);
    }
    atomic_store(&h->ledger_failing, reason != NULL);
}

void
rl_http_dead_letters_undelivered(struct rl_http *h, long count,
                                 const char *reason)
{
    if (!h)
        return;
    if (reason) {
        pthread_mutex_lock(&h->reason_lock);
        snprintf(h->dlq_reason, sizeof(h->dlq_reason), "%s", reason);
        pthread_mutex_unlock(&h->reason_lock);
    }
    atomic_store(&h->dlq_undelivered, count);
    rl_metrics_set(h->metrics, "runledger_dead_letters_undelivered", NULL,
                   (double)count);
}

void
rl_http_kafka_stats(struct rl_http *h, const char *json, size_t len)
{
    cJSON *root, *topics, *topic;

    if (!h)
        return;
    root = cJSON_ParseWithLength(json, len);
    if (!root)
        return;
    topics = cJSON_GetObjectItemCaseSensitive(root, "topics");
    rl_metrics_clear(h->metrics, "runledger_consumer_lag");
    cJSON_ArrayForEach(topic, topics)
    {
        cJSON *parts = cJSON_GetObjectItemCaseSensitive(topic, "partitions");
        cJSON *part;

        cJSON_ArrayForEach(part, parts)
        {
            cJSON *id = cJSON_GetObjectItemCaseSensitive(part, "partition");
            cJSON *lag = cJSON_GetObjectItemCaseSensitive(part, "consumer_lag");
            cJSON *state =
                cJSON_GetObjectItemCaseSensitive(part, "fetch_state");
            cJSON *hi = cJSON_GetObjectItemCaseSensitive(part, "hi_offset");
            cJSON *lo = cJSON_GetObjectItemCaseSensitive(part, "lo_offset");
            char labels[256], pnum[16];
            double value;

            /* Partition -1 is librdkafka's internal UA partition. */
            if (!cJSON_IsNumber(id) || id->valuedouble < 0 ||
                (cJSON_IsString(state) &&
                 strcmp(state->valuestring, "none") == 0))
                continue;
            /* librdkafka reports -1 while the group has no committed
             * offset; the consumer then starts at the earliest offset
             * (auto.offset.reset), so everything present is lag. */
            if (cJSON_IsNumber(lag) && lag->valuedouble >= 0)
                value = lag->valuedouble;
            else if (cJSON_IsNumber(hi) && hi->valuedouble >= 0)
                value =
                    hi->valuedouble - (cJSON_IsNumber(lo) && lo->valuedouble > 0
                                           ? lo->valuedouble
                                           : 0);
            else
                continue;
            snprintf(pnum, sizeof(pnum), "%d", id->valueint);
            rl_metrics_labels(labels, sizeof(labels), "topic", topic->string,
                              "partition", pnum, NULL);
            rl_metrics_set(h->metrics, "runledger_consumer_lag", labels, value);
        }
    }
    cJSON_Delete(root);
}

void
rl_http_outbox_vacuumed(struct rl_http *h, double seconds)
{
    if (h)
        rl_metrics_observe(h->metrics, "runledger_outbox_vacuum_seconds", NULL,
                           seconds);
}

void
rl_http_relay_batch(struct rl_http *h, size_t rows, double seconds)
{
    if (!h || rows == 0)
        return;
    rl_metrics_observe(h->metrics, "runledger_outbox_delivery_latency_seconds",
                       NULL, seconds);
}
