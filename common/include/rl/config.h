#ifndef RL_CONFIG_H
#define RL_CONFIG_H

#include <stddef.h>
#include <stdio.h>

/* Process configuration, read from the environment (and optionally a file
 * named by RUNLEDGER_CONFIG_FILE holding NAME=value lines; the environment
 * wins). Every setting is one row of a declarative table in config.c: name,
 * type, default, secret or not, description. `runledger config` prints that
 * table, and README.md documents it.
 *
 * librdkafka properties pass through: RUNLEDGER_KAFKA_SECURITY_PROTOCOL=x
 * becomes security.protocol=x (lowercase, '_' -> '.'). */

enum rl_ambiguous_policy {
    RL_AMBIGUOUS_DEDUPE,     /* endpoint deduplicates: retry, same key */
    RL_AMBIGUOUS_RETRY_ONCE, /* one more attempt, then unknown */
    RL_AMBIGUOUS_PARK        /* unknown at once */
};

/* What stands between the service and PostgreSQL (RUNLEDGER_PG_POOL_MODE).
 * Transaction pooling is refused when the configuration is loaded: see
 * docs/pgbouncer.md. */
enum rl_pg_pool_mode {
    RL_PG_POOL_DIRECT,     /* PostgreSQL, or a pooler found out at connect */
    RL_PG_POOL_SESSION,    /* a pooler in session mode: settings by SET */
    RL_PG_POOL_TRANSACTION /* never accepted */
};

struct rl_config {
    char *kafka_bootstrap_servers;
    char *group_id;
    char *topic;
    char *notify_topic;
    char *dlq_topic;
    char *database_url;
    char *model_base_url;
    char *model_api_key; /* secret: never logged or printed */
    char *model_api_key_file;
    char *model_auth_header; /* header the key goes in (Azure: api-key) */
    char *model_query;       /* name=value&... added to the chat URL */
    char *model_headers;     /* secret: "Name: value, ..." on every call */
    char *worker_id;         /* default: hostname:pid */
    char *log_level;
    char *ambiguous_policy_name;
    char *kafka_assignor; /* auto, range or cooperative-sticky */
    enum rl_ambiguous_policy ambiguous_policy;
    int model_stored_completions;    /* the endpoint keeps a record of calls
                                        sent with store: true */
    char *model_api_name;            /* chat or responses */
    int model_api;                   /* enum rl_model_api of model_api_name */
    char *model_api_by_model;        /* "model=chat|responses,..." */
    int reconcile_settle_ms;         /* how long an ambiguous attempt is looked
                                        up before "not found" counts */
    int reconcile_lookup_timeout_ms; /* one lookup call's timeout */
    int batch_poll_ms;               /* first poll of a submitted batch */
    int batch_settle_ms;             /* lookup of an unanswered create */
    int batch_lease_seconds;         /* a worker's hold on a batch */
    int batch_max_polls_per_minute;  /* the group's polls of the provider */
    int max_in_flight;
    int lease_seconds;
    int max_attempts;
    int run_deadline_seconds;
    int backoff_base_ms;
    int backoff_max_ms;
    int model_connect_timeout_ms;
    int model_timeout_ms;
    int max_response_bytes;
    int max_event_bytes;
    int max_request_bytes;  /* model body after substitution */
    int max_held_bytes;     /* bytes of runs held per process */
    int complete_max_bytes; /* answer bytes per completion statement */
    int sweep_interval_ms;
    int relay_batch;
    int relay_batch_bytes;
    int relay_interval_ms;
    int relay_lease_seconds;
    int relay_vacuum_rows;
    int db_batch;
    int http_port;
    char *http_address;              /* bind address of health and metrics */
    int http_per_address_conns;      /* connections one client address holds */
    int http_client_timeout_seconds; /* idle or slow client dropped after */
    char *metrics_token_file;        /* bearer token /metrics wants; "": none */
    char *metrics_tenant_labels;     /* plain, hashed or off */
    int shutdown_grace_seconds;
    int relay_enabled;
    int model_adaptive_cap;      /* AIMD cap on 429s without published limits */
    int liveness_seconds;        /* /healthz fails when the loop stalls */
    int health_interval_seconds; /* PostgreSQL check + ledger gauges */
    int ledger_liveness_seconds; /* /healthz fails when the ledger stalls */
    int pg_statement_timeout_ms; /* service sessions; 0: none */
    int pg_lock_timeout_ms;
    int pg_idle_in_tx_timeout_ms;
    int pg_tcp_user_timeout_ms;
    char *pg_pool_mode_name;
    enum rl_pg_pool_mode pg_pool_mode;
    int budget_default_max_tokens; /* reservation when the request names no
                                      max_tokens */
    char *receiver_group_id;       /* `runledger receive` consumer group */
    /* `runledger console` (docs/console.md); its flags win over these. */
    char *console_listen;          /* ADDR:PORT; "": --listen is needed */
    char *console_base_url;        /* public URL; approval links */
    int console_secure_cookies;    /* Secure session cookie */
    int console_session_ttl;       /* seconds a sign-in lasts */
    int console_session_idle;      /* seconds a sign-in lasts unused */
    char *console_trusted_header;  /* proxy mode: the user header */
    char *console_trusted_proxies; /* proxy mode: CIDR[,CIDR] */
    char *otlp_endpoint;           /* OTLP/HTTP base URL; NULL: no export */
    char *otlp_traces_endpoint;    /* full traces URL; wins */
    char *otel_service_name;
    int otlp_timeout_ms;
    int otlp_schedule_delay_ms;
    int otlp_max_batch;
    int otlp_max_queue;
    int otlp_max_queue_bytes;
    /* librdkafka pass-through pairs, name then value, owned */
    char **kafka_props;
    size_t kafka_props_count;
};

/* Reads the configuration. Returns a new config (free with
 * rl_config_destroy) or NULL with errstr naming the bad setting, e.g.
 * "RUNLEDGER_MAX_IN_FLIGHT must be an integer in 1..100000, not \"x\"". */
struct rl_config *rl_config_load(char *errstr, size_t errstr_size);

/* Reads a RUNLEDGER_PG_POOL_MODE value (NULL or "": direct) into *mode.
 * Returns 0, or RL_ERR_INVALID with errstr saying why: an unknown value, or
 * "transaction", which the service refuses (its sessions keep state that
 * transaction pooling does not keep). */
int rl_config_pool_mode_parse(const char *value, enum rl_pg_pool_mode *mode,
                              char *errstr, size_t errstr_size);

/* Frees cfg; NULL is accepted. */
void rl_config_destroy(struct rl_config *cfg);

/* Prints the configuration table (name, default, description) as markdown;
 * with cfg, also the effective values, secrets shown as "(set)". */
void rl_config_print(FILE *out, const struct rl_config *cfg);

#endif /* RL_CONFIG_H */
