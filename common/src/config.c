#include "rl/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rl/err.h"
#include "rl/kafka.h"
#include "rl/model.h"

enum cfg_type { CFG_STR, CFG_INT, CFG_BOOL };

/* One setting. Adding a setting is adding a row: the loader, `runledger
 * config` and docs/configuration.md's table all come from here. */
struct cfg_row {
    const char *name;
    enum cfg_type type;
    size_t offset;
    const char *def; /* NULL: no default */
    long min, max;   /* CFG_INT bounds */
    int secret;
    const char *desc;
};

#define S(field) offsetof(struct rl_config, field)

static const struct cfg_row rows[] = {
    {"KAFKA_BOOTSTRAP_SERVERS", CFG_STR, S(kafka_bootstrap_servers),
     "127.0.0.1:9092", 0, 0, 0, "Kafka bootstrap servers (host:port,...)"},
    {"RUNLEDGER_GROUP_ID", CFG_STR, S(group_id), "runledger", 0, 0, 0,
     "consumer group of the workers"},
    {"RUNLEDGER_TOPIC", CFG_STR, S(topic), "runledger.schedules", 0, 0, 0,
     "schedule event topic (key = tenant)"},
    {"RUNLEDGER_NOTIFY_TOPIC", CFG_STR, S(notify_topic),
     "runledger.notifications", 0, 0, 0,
     "notification topic the outbox relay produces to"},
    {"RUNLEDGER_DLQ_TOPIC", CFG_STR, S(dlq_topic), "runledger.dlq", 0, 0, 0,
     "dead-letter topic for rejected events and failed runs"},
    {"DATABASE_URL", CFG_STR, S(database_url), NULL, 0, 0, 1,
     "PostgreSQL connection URI; when unset, libpq's PG* variables apply"},
    {"MODEL_BASE_URL", CFG_STR, S(model_base_url), "http://127.0.0.1:8080/v1",
     0, 0, 0, "OpenAI-compatible base URL (POST {base}/chat/completions)"},
    {"MODEL_API_KEY", CFG_STR, S(model_api_key), NULL, 0, 0, 1,
     "bearer token for the model endpoint (never logged)"},
    {"MODEL_API_KEY_FILE", CFG_STR, S(model_api_key_file), NULL, 0, 0, 0,
     "file holding the bearer token (a mounted Secret); read at start"},
    {"RUNLEDGER_MODEL_AUTH_HEADER", CFG_STR, S(model_auth_header),
     "Authorization", 0, 0, 0,
     "header that carries the model API key: Authorization sends "
     "`Bearer <key>`, any other name the bare key (Azure OpenAI: api-key)"},
    {"RUNLEDGER_MODEL_QUERY", CFG_STR, S(model_query), NULL, 0, 0, 0,
     "query parameters added to {base}/chat/completions, unescaped "
     "name=value pairs joined by & (Azure OpenAI: api-version=2024-10-21)"},
    {"RUNLEDGER_MODEL_HEADERS", CFG_STR, S(model_headers), NULL, 0, 0, 1,
     "extra headers on every model call, `Name: value` pairs separated by "
     "commas (a value cannot hold one); values are never logged"},
    {"RUNLEDGER_WORKER_ID", CFG_STR, S(worker_id), NULL, 0, 0, 0,
     "lease owner name; default hostname:pid"},
    {"RUNLEDGER_LOG_LEVEL", CFG_STR, S(log_level), "info", 0, 0, 0,
     "debug, info, warn or error"},
    {"RUNLEDGER_PARTITION_ASSIGNOR", CFG_STR, S(kafka_assignor), "auto", 0, 0,
     0,
     "the group's partition assignor: cooperative-sticky (a pod joining or "
     "leaving moves only the partitions that change owner), range (every "
     "rebalance revokes every partition), or auto: cooperative-sticky with "
     "librdkafka 2.6.1 or later, range before it"},
    {"RUNLEDGER_AMBIGUOUS_POLICY", CFG_STR, S(ambiguous_policy_name),
     "retry_once", 0, 0, 0,
     "after a timeout or reset once the request was sent: dedupe, "
     "retry_once or park"},
    {"RUNLEDGER_MODEL_STORED_COMPLETIONS", CFG_BOOL,
     S(model_stored_completions), "false", 0, 0, 0,
     "the endpoint keeps a record of the calls it answered (OpenAI's stored "
     "completions): every call is sent with store: true and metadata naming "
     "the run, attempt, installation id (the ledger's, no setting), request "
     "fingerprint and model, and an ambiguous attempt is looked up there "
     "before RUNLEDGER_AMBIGUOUS_POLICY applies, adopting only this "
     "installation's record of this request (not with dedupe)"},
    {"RUNLEDGER_RECONCILE_SETTLE_MS", CFG_INT, S(reconcile_settle_ms), "30000",
     0, 3600000, 0,
     "how long an ambiguous attempt is looked up in the endpoint's record, "
     "with backoff, before \"not found\" counts (the record is eventually "
     "consistent)"},
    {"RUNLEDGER_RECONCILE_LOOKUP_TIMEOUT_MS", CFG_INT,
     S(reconcile_lookup_timeout_ms), "10000", 100, 600000, 0,
     "timeout of one lookup in the endpoint's record"},
    {"RUNLEDGER_BATCH_POLL_MS", CFG_INT, S(batch_poll_ms), "30000", 100,
     3600000, 0,
     "batch mode: the first poll of a submitted batch comes this long after "
     "its create, each next one twice as long after the last (at most 10 "
     "minutes); one worker of the group polls a batch at a time"},
    {"RUNLEDGER_BATCH_SETTLE_MS", CFG_INT, S(batch_settle_ms), "30000", 0,
     3600000, 0,
     "batch mode: how long a batch whose create got no answer is looked up "
     "at the provider (by the local id in its metadata) before it is "
     "uploaded and created again"},
    {"RUNLEDGER_BATCH_LEASE_SECONDS", CFG_INT, S(batch_lease_seconds), "60", 5,
     3600, 0,
     "batch mode: how long a worker holds a batch while it uploads, creates "
     "or reads it; another worker takes over a batch whose lease expired"},
    {"RUNLEDGER_BATCH_MAX_POLLS_PER_MINUTE", CFG_INT,
     S(batch_max_polls_per_minute), "60", 1, 60000, 0,
     "batch mode: the most batch polls the whole consumer group sends the "
     "provider in any minute, spaced evenly (60 s / this) whatever the "
     "number of workers and open batches; a due batch waits for the next "
     "slot"},
    {"RUNLEDGER_MODEL_API", CFG_STR, S(model_api_name), "chat", 0, 0, 0,
     "the API the endpoint speaks: chat (POST {base}/chat/completions) or "
     "responses (POST {base}/responses)"},
    {"RUNLEDGER_MODEL_API_BY_MODEL", CFG_STR, S(model_api_by_model), NULL, 0, 0,
     0,
     "the API of named models over RUNLEDGER_MODEL_API: model=chat or "
     "model=responses entries separated by commas"},
    {"RUNLEDGER_MAX_IN_FLIGHT", CFG_INT, S(max_in_flight), "1024", 1, 100000, 0,
     "model calls in flight per process; the process holds at most "
     "twice as many runs and pauses its partitions there"},
    {"RUNLEDGER_LEASE_SECONDS", CFG_INT, S(lease_seconds), "30", 2, 86400, 0,
     "lease duration; renewed once a third of it has passed"},
    {"RUNLEDGER_MAX_ATTEMPTS", CFG_INT, S(max_attempts), "5", 1, 100, 0,
     "model dispatches per run before it fails"},
    {"RUNLEDGER_RUN_DEADLINE_SECONDS", CFG_INT, S(run_deadline_seconds), "3600",
     1, 31536000, 0, "a run not completed this long after registration fails"},
    {"RUNLEDGER_BACKOFF_BASE_MS", CFG_INT, S(backoff_base_ms), "1000", 1,
     3600000, 0, "first retry delay; doubles per attempt, full jitter"},
    {"RUNLEDGER_BACKOFF_MAX_MS", CFG_INT, S(backoff_max_ms), "300000", 1,
     86400000, 0, "upper bound of one retry delay"},
    {"MODEL_CONNECT_TIMEOUT_MS", CFG_INT, S(model_connect_timeout_ms), "5000",
     1, 600000, 0, "model endpoint connect timeout"},
    {"MODEL_TIMEOUT_MS", CFG_INT, S(model_timeout_ms), "120000", 1, 3600000, 0,
     "model call total timeout"},
    {"MODEL_MAX_RESPONSE_BYTES", CFG_INT, S(max_response_bytes), "4194304",
     1024, 1073741824, 0, "responses larger than this fail the run"},
    {"RUNLEDGER_MAX_EVENT_BYTES", CFG_INT, S(max_event_bytes), "1048576", 256,
     67108864, 0, "larger schedule events are dead-lettered (too_large)"},
    {"RUNLEDGER_MAX_REQUEST_BYTES", CFG_INT, S(max_request_bytes), "8388608",
     1024, 1073741824, 0,
     "a run whose model request body, after {{input}} substitution, is "
     "larger fails at once (request_too_large); measured before it is built"},
    {"RUNLEDGER_MAX_HELD_BYTES", CFG_INT, S(max_held_bytes), "268435456",
     1048576, 2147483647, 0,
     "bytes of runs one process holds (events, requests, inputs, bodies, "
     "answers); its partitions pause there and resume below three "
     "quarters; a larger run runs alone"},
    {"RUNLEDGER_COMPLETE_MAX_BYTES", CFG_INT, S(complete_max_bytes), "67108864",
     65536, 1073741824, 0,
     "most answer bytes one completion statement carries; larger batches are "
     "split"},
    {"RUNLEDGER_SWEEP_INTERVAL_MS", CFG_INT, S(sweep_interval_ms), "1000", 10,
     600000, 0, "how often due retries and expired leases are claimed"},
    {"RUNLEDGER_RELAY_BATCH", CFG_INT, S(relay_batch), "1000", 1, 100000, 0,
     "outbox rows per relay batch"},
    {"RUNLEDGER_RELAY_BATCH_BYTES", CFG_INT, S(relay_batch_bytes), "16777216",
     65536, 1073741824, 0,
     "most notification bytes one relay batch reads (and produces) at once; "
     "the rows after the one that reaches it wait for the next batch, and a "
     "larger notification goes alone"},
    {"RUNLEDGER_RELAY_LEASE_SECONDS", CFG_INT, S(relay_lease_seconds), "30", 5,
     3600, 0,
     "how long a relay holds the outbox rows of a batch while the broker "
     "acknowledges them, without a transaction open; a relay that dies "
     "leaves them due when it ends. Its producer gives up on a message after "
     "two thirds of it (message.timeout.ms; one set by "
     "RUNLEDGER_KAFKA_MESSAGE_TIMEOUT_MS lengthens the lease instead) and "
     "the row is retried"},
    {"RUNLEDGER_RELAY_INTERVAL_MS", CFG_INT, S(relay_interval_ms), "200", 1,
     600000, 0,
     "longest relay wait when the outbox is empty (queued rows wake it at "
     "once)"},
    {"RUNLEDGER_RELAY_VACUUM_ROWS", CFG_INT, S(relay_vacuum_rows), "20000", 0,
     100000000, 0,
     "the relay vacuums the outbox after delivering this many rows, and "
     "at least once a second while it delivers any, so the pending set "
     "stays a few megabytes between autovacuum's visits and its reads do "
     "not step over delivered rows' index entries "
     "(0: autovacuum only; skipped when the role owns neither the outbox "
     "nor the database)"},
    {"RUNLEDGER_DB_BATCH", CFG_INT, S(db_batch), "64", 1, 10000, 0,
     "most runs claimed per ledger statement"},
    {"RUNLEDGER_HTTP_PORT", CFG_INT, S(http_port), "9464", 0, 65535, 0,
     "health and metrics port (0: off)"},
    {"RUNLEDGER_HTTP_ADDRESS", CFG_STR, S(http_address), "0.0.0.0", 0, 0, 0,
     "address the health and metrics server binds (IPv4 or IPv6; 0.0.0.0: "
     "every interface, as kubelet probes and scrapes need in a pod; "
     "127.0.0.1 keeps it on the host)"},
    {"RUNLEDGER_HTTP_PER_ADDRESS_CONNECTIONS", CFG_INT,
     S(http_per_address_conns), "1024", 1, 65536, 0,
     "connections one client address may hold open on the health server"},
    {"RUNLEDGER_HTTP_CLIENT_TIMEOUT_SECONDS", CFG_INT,
     S(http_client_timeout_seconds), "5", 1, 3600, 0,
     "a health or metrics client idle or sending slower than this is "
     "disconnected"},
    {"RUNLEDGER_METRICS_TOKEN_FILE", CFG_STR, S(metrics_token_file), "", 0, 0,
     0,
     "file holding a bearer token /metrics requires (Authorization: Bearer "
     "...); empty: /metrics is open. Probes never need it"},
    {"RUNLEDGER_METRICS_TENANT_LABELS", CFG_STR, S(metrics_tenant_labels),
     "plain", 0, 0, 0,
     "tenant and job labels of metrics: plain, hashed (the first 12 hex "
     "digits of their SHA-256) or off (series summed over tenants)"},
    {"RUNLEDGER_SHUTDOWN_GRACE_SECONDS", CFG_INT, S(shutdown_grace_seconds),
     "25", 0, 3600, 0,
     "on SIGTERM, time to let in-flight runs finish before abandoning them"},
    {"RUNLEDGER_RELAY", CFG_BOOL, S(relay_enabled), "true", 0, 0, 0,
     "run the outbox relay thread inside `consume`"},
    {"RUNLEDGER_MODEL_ADAPTIVE_CAP", CFG_BOOL, S(model_adaptive_cap), "true", 0,
     0, 0,
     "on a 429 from a provider that publishes no rate limits, also halve the "
     "model's group-wide concurrency cap (the first from the calls in "
     "flight; grows back by one per cap's worth of answers)"},
    {"RUNLEDGER_LIVENESS_SECONDS", CFG_INT, S(liveness_seconds), "30", 1, 3600,
     0, "/healthz answers 503 when the main loop has not turned for this long"},
    {"RUNLEDGER_LEDGER_LIVENESS_SECONDS", CFG_INT, S(ledger_liveness_seconds),
     "60", 1, 86400, 0,
     "/healthz answers 503 when the ledger thread has not turned its loop "
     "for this long (a statement stalled on PostgreSQL)"},
    {"RUNLEDGER_PG_STATEMENT_TIMEOUT_MS", CFG_INT, S(pg_statement_timeout_ms),
     "30000", 0, 86400000, 0,
     "statement_timeout of the service's PostgreSQL sessions (0: none); "
     "renewals use at most a third of the lease, vacuums none"},
    {"RUNLEDGER_PG_LOCK_TIMEOUT_MS", CFG_INT, S(pg_lock_timeout_ms), "10000", 0,
     86400000, 0,
     "lock_timeout of the service's PostgreSQL sessions (0: none); renewals "
     "use at most a sixth of the lease"},
    {"RUNLEDGER_PG_IDLE_IN_TX_TIMEOUT_MS", CFG_INT, S(pg_idle_in_tx_timeout_ms),
     "60000", 0, 86400000, 0,
     "idle_in_transaction_session_timeout of the service's PostgreSQL "
     "sessions (0: none)"},
    {"RUNLEDGER_PG_TCP_USER_TIMEOUT_MS", CFG_INT, S(pg_tcp_user_timeout_ms),
     "30000", 0, 86400000, 0,
     "libpq tcp_user_timeout of the service's sessions (0: the system's); "
     "keepalives are on (idle 10 s, interval 5 s, 3 probes); DATABASE_URL "
     "wins for each parameter it sets"},
    {"RUNLEDGER_PG_POOL_MODE", CFG_STR, S(pg_pool_mode_name), "direct", 0, 0, 0,
     "what DATABASE_URL reaches: direct (PostgreSQL; a pooler that drops or "
     "refuses startup options is found out and the settings applied with "
     "SET), session (a pooler in session mode: settings always by SET) or "
     "transaction (refused, see docs/pgbouncer.md)"},
    {"RUNLEDGER_HEALTH_INTERVAL_SECONDS", CFG_INT, S(health_interval_seconds),
     "5", 1, 3600, 0,
     "how often PostgreSQL is checked for /readyz and the outbox backlog "
     "and unknown runs are counted for /metrics"},
    {"RUNLEDGER_BUDGET_DEFAULT_MAX_TOKENS", CFG_INT,
     S(budget_default_max_tokens), "1024", 1, 10000000, 0,
     "completion tokens a budget reservation assumes when the request sets "
     "no max_tokens"},
    {"RUNLEDGER_RECEIVER_GROUP_ID", CFG_STR, S(receiver_group_id),
     "runledger-receiver", 0, 0, 0,
     "consumer group of `runledger receive` on the notification topic"},
    {"RUNLEDGER_CONSOLE_LISTEN", CFG_STR, S(console_listen), "", 0, 0, 0,
     "ADDR:PORT `runledger console` serves on (--listen wins)"},
    {"RUNLEDGER_CONSOLE_BASE_URL", CFG_STR, S(console_base_url), "", 0, 0, 0,
     "the console's public URL (scheme://host[:port]): forms must come from "
     "its origin, and approval_requested notifications link to "
     "{base}/approvals/RUN_ID (empty: no such notification)"},
    {"RUNLEDGER_CONSOLE_SECURE_COOKIES", CFG_BOOL, S(console_secure_cookies),
     "false", 0, 0, 0,
     "mark the console's session cookie Secure (behind TLS; implied by an "
     "https base URL)"},
    {"RUNLEDGER_CONSOLE_SESSION_TTL_SECONDS", CFG_INT, S(console_session_ttl),
     "43200", 60, 2592000, 0, "how long a console sign-in lasts"},
    {"RUNLEDGER_CONSOLE_SESSION_IDLE_SECONDS", CFG_INT, S(console_session_idle),
     "1800", 60, 86400, 0, "how long a console sign-in lasts unused"},
    {"RUNLEDGER_CONSOLE_TRUSTED_USER_HEADER", CFG_STR,
     S(console_trusted_header), "", 0, 0, 0,
     "proxy mode: the header an authenticating proxy names the console user "
     "in (with RUNLEDGER_CONSOLE_TRUSTED_PROXY)"},
    {"RUNLEDGER_CONSOLE_TRUSTED_PROXY", CFG_STR, S(console_trusted_proxies), "",
     0, 0, 0,
     "proxy mode: CIDR[,CIDR] the user header is honoured from; from any "
     "other address it is ignored"},
    {"OTEL_EXPORTER_OTLP_ENDPOINT", CFG_STR, S(otlp_endpoint), NULL, 0, 0, 0,
     "OTLP/HTTP collector base URL: spans are POSTed as JSON to "
     "{endpoint}/v1/traces (unset: no export; traceparent is propagated "
     "either way)"},
    {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", CFG_STR, S(otlp_traces_endpoint),
     NULL, 0, 0, 0,
     "full URL spans are POSTed to; wins over OTEL_EXPORTER_OTLP_ENDPOINT"},
    {"OTEL_SERVICE_NAME", CFG_STR, S(otel_service_name), "runledger", 0, 0, 0,
     "service.name resource attribute of exported spans"},
    {"OTEL_EXPORTER_OTLP_TIMEOUT", CFG_INT, S(otlp_timeout_ms), "10000", 1,
     600000, 0,
     "one span export request, connection included (ms); a batch not "
     "accepted by then is dropped"},
    {"OTEL_BSP_SCHEDULE_DELAY", CFG_INT, S(otlp_schedule_delay_ms), "1000", 1,
     600000, 0, "longest wait before queued spans are sent (ms)"},
    {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", CFG_INT, S(otlp_max_batch), "512", 1,
     100000, 0, "spans per export request; a full batch is sent at once"},
    {"OTEL_BSP_MAX_QUEUE_SIZE", CFG_INT, S(otlp_max_queue), "2048", 1, 1000000,
     0,
     "spans waiting for export; more are dropped and counted in "
     "runledger_spans_dropped_total"},
    {"RUNLEDGER_OTLP_QUEUE_MAX_BYTES", CFG_INT, S(otlp_max_queue_bytes),
     "4194304", 65536, 1073741824, 0,
     "encoded bytes of the spans waiting for export; more are dropped"},
};

#undef S

#define KAFKA_PREFIX "RUNLEDGER_KAFKA_"

static char **
field_str(struct rl_config *cfg, const struct cfg_row *row)
{
    return (char **)(void *)((char *)cfg + row->offset);
}

static int *
field_int(struct rl_config *cfg, const struct cfg_row *row)
{
    return (int *)(void *)((char *)cfg + row->offset);
}

/* Reads NAME=value lines of the optional config file into a list that
 * lookup() consults after the environment. */
struct file_kv {
    char **kv; /* name, value, name, value ... */
    size_t count;
};

static const char *
lookup(const struct file_kv *file, const char *name)
{
    const char *env = getenv(name);

    if (env)
        return env;
    for (size_t i = 0; i + 1 < file->count; i += 2) {
        if (strcmp(file->kv[i], name) == 0)
            return file->kv[i + 1];
    }
    return NULL;
}

static void
trim(char *s)
{
    size_t len = strlen(s);
    size_t start = 0;

    while (len > 0 && isspace((unsigned char)s[len - 1]))
        s[--len] = '\0';
    while (s[start] && isspace((unsigned char)s[start]))
        start++;
    memmove(s, s + start, len - start + 1);
}

static int
kv_push(char ***kv, size_t *count, const char *name, const char *value)
{
    char **grown = realloc(*kv, (*count + 2) * sizeof(char *));

    if (!grown)
        return RL_ERR_NOMEM;
    *kv = grown;
    grown[*count] = strdup(name);
    grown[*count + 1] = strdup(value);
    *count += 2;
    if (!grown[*count - 2] || !grown[*count - 1])
        return RL_ERR_NOMEM;
    return 0;
}

static void
kv_free(char **kv, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(kv[i]);
    free(kv);
}

static int
file_load(const char *path, struct file_kv *file, char *errstr,
          size_t errstr_size)
{
    FILE *fp = fopen(path, "r");
    char line[4096];
    int lineno = 0;

    if (!fp) {
        snprintf(errstr, errstr_size, "could not open config file %s: %s", path,
                 strerror(errno));
        return RL_ERR_IO;
    }
    while (fgets(line, sizeof(line), fp)) {
        char *eq;

        lineno++;
        trim(line);
        if (line[0] == '\0' || line[0] == '#')
            continue;
        eq = strchr(line, '=');
        if (!eq) {
            snprintf(errstr, errstr_size,
                     "config file %s line %d: expected NAME=value", path,
                     lineno);
            fclose(fp);
            return RL_ERR_INVALID;
        }
        *eq = '\0';
        trim(line);
        trim(eq + 1);
        if (kv_push(&file->kv, &file->count, line, eq + 1) != 0) {
            fclose(fp);
            return RL_ERR_NOMEM;
        }
    }
    fclose(fp);
    return 0;
}

static int
parse_bool(const char *text, int *out)
{
    if (strcmp(text, "1") == 0 || strcmp(text, "true") == 0 ||
        strcmp(text, "yes") == 0 || strcmp(text, "on") == 0) {
        *out = 1;
        return 0;
    }
    if (strcmp(text, "0") == 0 || strcmp(text, "false") == 0 ||
        strcmp(text, "no") == 0 || strcmp(text, "off") == 0) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int
read_key_file(struct rl_config *cfg, char *errstr, size_t errstr_size)
{
    FILE *fp;
    char buf[8192];
    size_t n;

    if (!cfg->model_api_key_file || cfg->model_api_key)
        return 0;
    fp = fopen(cfg->model_api_key_file, "r");
    if (!fp) {
        snprintf(errstr, errstr_size,
                 "could not open MODEL_API_KEY_FILE %s: %s",
                 cfg->model_api_key_file, strerror(errno));
        return RL_ERR_IO;
    }
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    trim(buf);
    cfg->model_api_key = strdup(buf);
    return cfg->model_api_key ? 0 : RL_ERR_NOMEM;
}

/* The model client's gateway settings are refused here, at start (exit
 * 2), not at the first model call; the message names the setting but
 * never a header's value. */
static int
check_model(const struct rl_config *cfg, char *errstr, size_t errstr_size)
{
    struct rl_model_config mcfg;
    char why[256];
    const char *setting;

    /* One setting more per step, so a refusal names the one at fault. */
    memset(&mcfg, 0, sizeof(mcfg));
    setting = "MODEL_API_KEY";
    mcfg.api_key = cfg->model_api_key;
    if (rl_model_config_check(&mcfg, why, sizeof(why)) != 0)
        goto bad;
    setting = "RUNLEDGER_MODEL_AUTH_HEADER";
    mcfg.auth_header = cfg->model_auth_header;
    if (rl_model_config_check(&mcfg, why, sizeof(why)) != 0)
        goto bad;
    setting = "RUNLEDGER_MODEL_QUERY";
    mcfg.query = cfg->model_query;
    if (rl_model_config_check(&mcfg, why, sizeof(why)) != 0)
        goto bad;
    setting = "RUNLEDGER_MODEL_HEADERS";
    mcfg.headers = cfg->model_headers;
    if (rl_model_config_check(&mcfg, why, sizeof(why)) != 0)
        goto bad;
    return 0;

bad:
    snprintf(errstr, errstr_size, "%s is invalid: %s", setting, why);
    return RL_ERR_INVALID;
}

/* RUNLEDGER_KAFKA_SASL_USERNAME -> sasl.username */
static int
collect_kafka_props(struct rl_config *cfg, const struct file_kv *file)
{
    extern char **environ;
    const size_t plen = strlen(KAFKA_PREFIX);
    char name[256];

    for (char **env = environ; *env; env++) {
        const char *eq = strchr(*env, '=');
        size_t len;

        if (strncmp(*env, KAFKA_PREFIX, plen) != 0 || !eq)
            continue;
        len = (size_t)(eq - *env) - plen;
        if (len == 0 || len >= sizeof(name))
            continue;
        for (size_t i = 0; i < len; i++) {
            char c = (*env)[plen + i];
            name[i] = c == '_' ? '.' : (char)tolower((unsigned char)c);
        }
        name[len] = '\0';
        if (kv_push(&cfg->kafka_props, &cfg->kafka_props_count, name, eq + 1) !=
            0)
            return RL_ERR_NOMEM;
    }
    for (size_t i = 0; i + 1 < file->count; i += 2) {
        const char *key = file->kv[i];
        size_t len;

        if (strncmp(key, KAFKA_PREFIX, plen) != 0 || getenv(key))
            continue;
        len = strlen(key) - plen;
        if (len == 0 || len >= sizeof(name))
            continue;
        for (size_t j = 0; j < len; j++) {
            char c = key[plen + j];
            name[j] = c == '_' ? '.' : (char)tolower((unsigned char)c);
        }
        name[len] = '\0';
        if (kv_push(&cfg->kafka_props, &cfg->kafka_props_count, name,
                    file->kv[i + 1]) != 0)
            return RL_ERR_NOMEM;
    }
    return 0;
}

struct rl_config *
rl_config_load(char *errstr, size_t errstr_size)
{
    struct rl_config *cfg = calloc(1, sizeof(*cfg));
    struct file_kv file = {NULL, 0};
    const char *path = getenv("RUNLEDGER_CONFIG_FILE");
    int err = 0;

    if (!cfg) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    if (path && *path) {
        err = file_load(path, &file, errstr, errstr_size);
        if (err)
            goto done;
    }
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct cfg_row *row = &rows[i];
        const char *value = lookup(&file, row->name);
        char *end;
        long num;

        if (value && !*value)
            value = NULL;
        if (!value)
            value = row->def;
        if (!value)
            continue;
        switch (row->type) {
        case CFG_STR:
            *field_str(cfg, row) = strdup(value);
            if (!*field_str(cfg, row)) {
                err = RL_ERR_NOMEM;
                snprintf(errstr, errstr_size, "out of memory");
                goto done;
            }
            break;
        case CFG_INT:
            errno = 0;
            num = strtol(value, &end, 10);
            if (errno || *end || end == value || num < row->min ||
                num > row->max) {
                snprintf(errstr, errstr_size,
                         "%s must be an integer in %ld..%ld, not \"%s\"",
                         row->name, row->min, row->max, value);
                err = RL_ERR_INVALID;
                goto done;
            }
            *field_int(cfg, row) = (int)num;
            break;
        case CFG_BOOL:
            if (parse_bool(value, field_int(cfg, row)) != 0) {
                snprintf(errstr, errstr_size,
                         "%s must be true or false, not \"%s\"", row->name,
                         value);
                err = RL_ERR_INVALID;
                goto done;
            }
            break;
        }
    }

    if (strcmp(cfg->ambiguous_policy_name, "dedupe") == 0)
        cfg->ambiguous_policy = RL_AMBIGUOUS_DEDUPE;
    else if (strcmp(cfg->ambiguous_policy_name, "retry_once") == 0)
        cfg->ambiguous_policy = RL_AMBIGUOUS_RETRY_ONCE;
    else if (strcmp(cfg->ambiguous_policy_name, "park") == 0)
        cfg->ambiguous_policy = RL_AMBIGUOUS_PARK;
    else {
        snprintf(errstr, errstr_size,
                 "RUNLEDGER_AMBIGUOUS_POLICY must be dedupe, retry_once or "
                 "park, not \"%s\"",
                 cfg->ambiguous_policy_name);
        err = RL_ERR_INVALID;
        goto done;
    }
    {
        enum rl_model_api api;

        if (rl_model_api_parse(cfg->model_api_name, &api) != 0) {
            snprintf(errstr, errstr_size,
                     "RUNLEDGER_MODEL_API must be chat or responses, not "
                     "\"%s\"",
                     cfg->model_api_name);
            err = RL_ERR_INVALID;
            goto done;
        }
        cfg->model_api = (int)api;
    }
    if (rl_model_api_map_check(cfg->model_api_by_model, errstr, errstr_size) !=
        0) {
        err = RL_ERR_INVALID;
        goto done;
    }
    if (cfg->model_stored_completions &&
        cfg->ambiguous_policy == RL_AMBIGUOUS_DEDUPE) {
        /* The metadata names the attempt, so a retry's body differs from
         * the first one's and a deduplicating endpoint refuses it. */
        snprintf(errstr, errstr_size,
                 "RUNLEDGER_MODEL_STORED_COMPLETIONS=true needs "
                 "RUNLEDGER_AMBIGUOUS_POLICY retry_once or park, not dedupe "
                 "(an endpoint that deduplicates needs no lookup)");
        err = RL_ERR_INVALID;
        goto done;
    }
    if (strcmp(cfg->kafka_assignor, "auto") != 0 &&
        strcmp(cfg->kafka_assignor, "range") != 0 &&
        strcmp(cfg->kafka_assignor, "cooperative-sticky") != 0) {
        snprintf(errstr, errstr_size,
                 "RUNLEDGER_PARTITION_ASSIGNOR must be auto, range or "
                 "cooperative-sticky, not \"%s\"",
                 cfg->kafka_assignor);
        err = RL_ERR_INVALID;
        goto done;
    }
    if (strcmp(cfg->metrics_tenant_labels, "plain") != 0 &&
        strcmp(cfg->metrics_tenant_labels, "hashed") != 0 &&
        strcmp(cfg->metrics_tenant_labels, "off") != 0) {
        snprintf(errstr, errstr_size,
                 "RUNLEDGER_METRICS_TENANT_LABELS must be plain, hashed or "
                 "off, not \"%s\"",
                 cfg->metrics_tenant_labels);
        err = RL_ERR_INVALID;
        goto done;
    }
    err = rl_config_pool_mode_parse(cfg->pg_pool_mode_name, &cfg->pg_pool_mode,
                                    errstr, errstr_size);
    if (err)
        goto done;
    if (cfg->backoff_max_ms < cfg->backoff_base_ms) {
        snprintf(errstr, errstr_size,
                 "RUNLEDGER_BACKOFF_MAX_MS must not be below "
                 "RUNLEDGER_BACKOFF_BASE_MS");
        err = RL_ERR_INVALID;
        goto done;
    }
    if (!cfg->worker_id) {
        char host[256] = "worker";
        char id[320];

        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        snprintf(id, sizeof(id), "%s:%ld", host, (long)getpid());
        cfg->worker_id = strdup(id);
    }
    err = read_key_file(cfg, errstr, errstr_size);
    if (err)
        goto done;
    err = check_model(cfg, errstr, errstr_size);
    if (err)
        goto done;
    if (collect_kafka_props(cfg, &file) != 0) {
        err = RL_ERR_NOMEM;
        snprintf(errstr, errstr_size, "out of memory");
        goto done;
    }
    err = rl_kafka_props_check(cfg, errstr, errstr_size);

done:
    kv_free(file.kv, file.count);
    if (err) {
        rl_config_destroy(cfg);
        return NULL;
    }
    return cfg;
}

int
rl_config_pool_mode_parse(const char *value, enum rl_pg_pool_mode *mode,
                          char *errstr, size_t errstr_size)
{
    *mode = RL_PG_POOL_DIRECT;
    if (!value || !*value || strcmp(value, "direct") == 0)
        return 0;
    if (strcmp(value, "session") == 0) {
        *mode = RL_PG_POOL_SESSION;
        return 0;
    }
    if (strcmp(value, "transaction") == 0) {
        *mode = RL_PG_POOL_TRANSACTION;
        snprintf(errstr, errstr_size,
                 "RUNLEDGER_PG_POOL_MODE=transaction is not supported: the "
                 "service keeps session state (LISTEN runledger_outbox, the "
                 "migration's advisory lock, named prepared statements, "
                 "timeouts and planner settings) that a pooler in transaction "
                 "mode hands to other clients; use a session-mode pool "
                 "(RUNLEDGER_PG_POOL_MODE=session) or connect directly, see "
                 "docs/pgbouncer.md");
        return RL_ERR_INVALID;
    }
    snprintf(errstr, errstr_size,
             "RUNLEDGER_PG_POOL_MODE must be direct, session or transaction, "
             "not \"%s\"",
             value);
    return RL_ERR_INVALID;
}

void
rl_config_destroy(struct rl_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (rows[i].type == CFG_STR)
            free(*field_str(cfg, &rows[i]));
    }
    kv_free(cfg->kafka_props, cfg->kafka_props_count);
    free(cfg);
}

void
rl_config_print(FILE *out, const struct rl_config *cfg)
{
    fprintf(out, "| name | default | description |%s\n", cfg ? " value |" : "");
    fprintf(out, "|---|---|---|%s\n", cfg ? "---|" : "");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct cfg_row *row = &rows[i];

        fprintf(out, "| `%s` | %s | %s |", row->name, row->def ? row->def : "-",
                row->desc);
        if (cfg) {
            struct rl_config *c = (struct rl_config *)cfg;

            if (row->type == CFG_STR) {
                const char *v = *field_str(c, row);
                fprintf(out, " %s |", !v ? "-" : row->secret ? "(set)" : v);
            } else if (row->type == CFG_INT) {
                fprintf(out, " %d |", *field_int(c, row));
            } else {
                fprintf(out, " %s |", *field_int(c, row) ? "true" : "false");
            }
        }
        fputc('\n', out);
    }
    fprintf(out,
            "| `RUNLEDGER_KAFKA_*` | - | any librdkafka property: "
            "RUNLEDGER_KAFKA_SASL_MECHANISM=SCRAM-SHA-512 sets "
            "sasl.mechanism |%s\n",
            cfg ? " - |" : "");
}
