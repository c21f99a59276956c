#ifndef RL_MODEL_INT_H
#define RL_MODEL_INT_H

/* Model client: one thread drives every model call of the process, on a
 * few libcurl multi handles ("shards"). See rl/model.h for the contract.
 *
 * Threads: rl_model_submit() and rl_model_cancel() run anywhere and only
 * touch the queue under m->lock, then wake the model thread through an
 * eventfd; everything curl (easy handles, the multi handles, callbacks)
 * belongs to the model thread.
 *
 * The thread drives the multi handles with curl_multi_socket_action() over
 * one epoll set that libcurl's socket callbacks keep, so one wake-up costs
 * the sockets that are ready, not every call in flight: with thousands of
 * slow calls open, curl_multi_perform() + curl_multi_poll() polled every
 * socket on every completion and the model thread became the bottleneck
 * (perf: sock_poll/tcp_poll and multi_perform's walk of all handles).
 *
 * Shards: libcurl 7.88 walks a multi handle's connection cache on every
 * transfer, twice (ConnectionExists looking for a free connection, and
 * curl_multi_remove_handle looking for the connection the transfer left,
 * to close it if it was connect-only), so on one multi handle a call cost
 * more with every call in flight: at 2,048 calls of 500 ms those two walks
 * took a sixth of the process's CPU (perf, `make bench` slow). A call goes
 * to the first shard carrying fewer than SHARD_CALLS calls, so under light
 * load everything rides shard 0 and its connections, as on one handle.
 *
 * Private to common/src/model/: the client, its shards and transfers, and
 * the functions its files share, prefixed model_. */

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rl/model.h"

/* Upper bound for a Retry-After we pass on (7 days). */
#define RETRY_AFTER_MAX_MS (7LL * 24 * 3600 * 1000)
/* Extra headers at most (RUNLEDGER_MODEL_HEADERS). */
#define EXTRA_HEADERS_MAX 32
/* Secrets redacted from errors: the API key and the extra headers' values
 * of at least SECRET_MIN bytes (shorter ones, "a" or "prod", would blank
 * out ordinary words and are no credential). */
#define SECRETS_MAX (1 + EXTRA_HEADERS_MAX)
#define SECRET_MIN 8
/* Longest request id kept from a header (more is cut). */
#define REQUEST_ID_SIZE 128
/* Calls one multi handle carries before the next one takes new calls. */
#define SHARD_CALLS 256
/* Multi handles at most; beyond SHARDS_MAX * SHARD_CALLS calls the least
 * loaded one takes the next call. */
#define SHARDS_MAX 32
/* Easy handles of finished calls kept, reset, for the next ones, as
 * libcurl's documentation advises: a handle made and freed per call was
 * part of the malloc and free that took a fifth of the process's CPU in
 * `make bench` slow. A loop turn finishes about EPOLL_EVENTS calls. */
#define SPARE_EASY 256
/* epoll data of the wake-up eventfd; sockets carry (shard << 32) | fd. */
#define WAKE_TAG UINT64_MAX

struct rl_model;

/* One multi handle and its connection cache. @locality model thread (and
 * rl_model_new/rl_model_destroy while the thread is not running) */
struct shard {
    struct rl_model *m;
    CURLM *multi;
    uint32_t index;    /* in m->shards */
    int64_t timer_due; /* libcurl's timer (monotonic ms); -1: none */
    int calls;         /* transfers in this multi handle */
};

/* One submitted call while the model owns it. */
struct xfer {
    struct rl_model *m;
    struct rl_model_call *call;
    /* m->xfers (every call not yet delivered) @locks m->lock */
    struct xfer *prev, *next;
    int linked;
    /* m->incoming, then the model thread's private lists @locks m->lock */
    struct xfer *next_new;
    int cancel;            /* rl_model_cancel() asked @locks m->lock */
    int lookup;            /* GET the endpoint's record (no body) */
    enum rl_model_api api; /* the API the call speaks */
    char *url;             /* a lookup's own URL (owned); NULL: the API's */

    /* @locality model thread (and the submitter before enqueueing) */
    int started; /* easy is in shard->multi */
    struct shard *shard;
    CURL *easy;
    char *body;
    size_t body_len, body_sent; /* read_body(): the body's length and how
                                   much of it libcurl has taken */
    long timeout_ms;
    struct curl_slist idem_node; /* heads the shared header list */
    char idem_header[sizeof("Idempotency-Key: ") + RL_MODEL_RUN_ID_MAX];
    struct curl_slist trace_node; /* before idem_node when traced */
    char trace_header[sizeof("traceparent: ") + 64];
    char *resp;
    size_t resp_len, resp_cap;
    int oversize; /* 2xx body over the cap: aborted on purpose */
    int nomem;    /* could not grow resp: aborted on purpose */
    /* The request id headers, in request_id_headers' order. */
    char request_ids[4][REQUEST_ID_SIZE];
    long retry_after_ms;
    int retry_after_ms_seen; /* retry-after-ms beats Retry-After */
    struct rl_ratelimit_headers ratelimit;
    int64_t start_ms;
    char errbuf[CURL_ERROR_SIZE];
};

struct rl_model {
    struct shard shards[SHARDS_MAX]; /* [0, nshards) are set up */
    int nshards;
    long max_connections;
    CURL *spare[SPARE_EASY]; /* reset, ready for a call; model thread */
    int nspare;
    int epfd;   /* the sockets libcurl asked to watch, and wakefd */
    int wakefd; /* eventfd: submit, cancel and destroy wake the loop */
    pthread_t thread;
    pthread_mutex_t lock;
    struct xfer *xfers;    /* @locks lock */
    struct xfer *incoming; /* submitted, not yet started; FIFO @locks lock */
    struct xfer *incoming_tail;
    int cancel_requests; /* @locks lock */
    int stop;            /* @locks lock */
    atomic_size_t in_flight;

    void (*done)(struct rl_model_call *call, void *opaque);
    void *opaque;

    char *url;           /* POST {base}/chat/completions[?query] */
    char *responses_url; /* POST {base}/responses[?query] */
    char *base_url;      /* without trailing '/', for lookup URLs */
    char *query;         /* the configured query, for lookup URLs */
    /* Kept only to redact echoes of them; wiped when freed. */
    char *secrets[SECRETS_MAX];
    size_t secret_lens[SECRETS_MAX];
    size_t nsecrets;
    struct curl_slist *headers; /* shared by every call, read-only */
    long connect_timeout_ms;
    long timeout_ms;
    size_t max_response_bytes;
};

/* One "Name: value" of the extra headers, pointing into the setting. */
/* One entry of RUNLEDGER_MODEL_HEADERS: name and value point into the
 * setting's text, with their lengths. */
struct header_entry {
    const char *name, *value;
    size_t name_len, value_len;
};

/* redact.c */
void model_call_error(const struct rl_model *m, struct rl_model_call *call,
                      const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int model_add_secret(struct rl_model *m, const char *s, size_t len);
void model_wipe_free(char *s);

/* ratelimit_headers.c */
long model_parse_retry_after(const char *value);

/* response.c */
long model_response_code(struct xfer *x);
size_t model_on_header(char *buf, size_t size, size_t nitems, void *userdata);
size_t model_on_body(char *data, size_t size, size_t nmemb, void *userdata);
void model_parse_completion(const struct rl_model *m, const struct xfer *x,
                            struct rl_model_call *call);

/* responses.c */
/* Reads a Responses API object (root) into call: text, tool calls, model,
 * id and usage, and the outcome (OK or INVALID_OUTPUT). */
struct cJSON;
void model_parse_response_object(const struct rl_model *m,
                                 const struct cJSON *root,
                                 struct rl_model_call *call);
/* The id a cut 2xx Responses API body named before it ended, into
 * call->upstream_request_id (untouched when none can be read): what a
 * lookup of the ambiguous attempt asks for. */
void model_partial_response_id(const struct xfer *x,
                               struct rl_model_call *call);
void model_classify(const struct rl_model *m, struct xfer *x, CURLcode rc,
                    struct rl_model_call *call);

/* transport.c */
int model_shard_add(struct rl_model *m);
void model_wake(struct rl_model *m);
void *model_thread(void *arg);

/* config.c */
const char *model_auth_header_name(const struct rl_model_config *cfg);
int model_parse_headers(const struct rl_model_config *cfg,
                        struct header_entry *out, size_t *n, char *errstr,
                        size_t errstr_size);

/* request.c */
/* {base_url}{path}[?query][&extra]: query's names and values escaped,
 * extra appended as given (already escaped). Returns it (malloc'd) or NULL
 * with errstr set. */
char *model_build_url(const char *base_url, const char *path, const char *query,
                      const char *extra, char *errstr, size_t errstr_size);
/* The URL of a lookup call (rl_model_call.lookup): malloc'd, or NULL with
 * errstr set. */
char *model_lookup_url(const struct rl_model *m,
                       const struct rl_model_call *call, char *errstr,
                       size_t errstr_size);
struct curl_slist *model_build_headers(const struct rl_model_config *cfg,
                                       const struct header_entry *extra,
                                       size_t n_extra);

#endif /* RL_MODEL_INT_H */
