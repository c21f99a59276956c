/* The model client's public face: creating it (configuration checked,
 * URL and headers built, secrets kept for redaction, the model thread
 * started), submitting and cancelling calls, and tearing it down. The
 * threads and shards are described in model_int.h. */
#include "model_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rl/err.h"
#include "rl/testing.h"
#include "rl/trace.h"

const char *
rl_model_outcome_name(enum rl_model_outcome outcome)
{
    switch (outcome) {
    case RL_MODEL_OK:
        return "ok";
    case RL_MODEL_TRANSIENT:
        return "transient";
    case RL_MODEL_PERMANENT:
        return "permanent";
    case RL_MODEL_NOT_SENT:
        return "not_sent";
    case RL_MODEL_AMBIGUOUS:
        return "ambiguous";
    case RL_MODEL_INVALID_OUTPUT:
        return "invalid_output";
    case RL_MODEL_CANCELLED:
        return "cancelled";
    case RL_MODEL_NOT_FOUND:
        return "not_found";
    }
    return "unknown";
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void
curl_global_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct rl_model *
rl_model_new(const struct rl_model_config *cfg,
             void (*done)(struct rl_model_call *call, void *opaque),
             void *opaque, char *errstr, size_t errstr_size)
{
    struct rl_model *m = NULL;
    struct header_entry extra[EXTRA_HEADERS_MAX];
    size_t n_extra = 0;
    sigset_t all, old;
    int rc, mutex_ok = 0;

    if (!cfg || !cfg->base_url || !*cfg->base_url) {
        rl_set_err(errstr, errstr_size, "model base_url is not set");
        return NULL;
    }
    if (!done) {
        rl_set_err(errstr, errstr_size, "model completion callback is not set");
        return NULL;
    }
    if (cfg->connect_timeout_ms < 0 || cfg->timeout_ms < 0 ||
        cfg->max_connections < 0) {
        rl_set_err(errstr, errstr_size,
                   "model timeouts and max_connections must not be negative");
        return NULL;
    }
    if (rl_model_config_check(cfg, errstr, errstr_size) != 0)
        return NULL;
    pthread_once(&curl_once, curl_global_once);
    if (curl_init_rc != CURLE_OK) {
        rl_set_err(errstr, errstr_size, "could not initialize libcurl: %s",
                   curl_easy_strerror(curl_init_rc));
        return NULL;
    }

    m = calloc(1, sizeof(*m));
    if (!m) {
        rl_set_err(errstr, errstr_size, "out of memory");
        return NULL;
    }
    m->done = done;
    m->opaque = opaque;
    m->epfd = m->wakefd = -1;
    m->max_connections = cfg->max_connections;
    atomic_init(&m->in_flight, 0);
    m->connect_timeout_ms = cfg->connect_timeout_ms > 0
                                ? cfg->connect_timeout_ms
                                : RL_MODEL_DEFAULT_CONNECT_TIMEOUT_MS;
    m->timeout_ms =
        cfg->timeout_ms > 0 ? cfg->timeout_ms : RL_MODEL_DEFAULT_TIMEOUT_MS;
    m->max_response_bytes = cfg->max_response_bytes > 0
                                ? cfg->max_response_bytes
                                : RL_MODEL_DEFAULT_MAX_RESPONSE_BYTES;

    m->url = model_build_url(cfg->base_url, "/chat/completions", cfg->query,
                             NULL, errstr, errstr_size);
    if (!m->url)
        goto fail;
    m->responses_url = model_build_url(cfg->base_url, "/responses", cfg->query,
                                       NULL, errstr, errstr_size);
    if (!m->responses_url)
        goto fail;
    m->base_url = strdup(cfg->base_url);
    m->query = strdup(cfg->query ? cfg->query : "");
    if (!m->base_url || !m->query) {
        rl_set_err(errstr, errstr_size, "out of memory");
        goto fail;
    }
    /* Checked above: cannot fail. */
    model_parse_headers(cfg, extra, &n_extra, errstr, errstr_size);
    if (cfg->api_key && *cfg->api_key &&
        model_add_secret(m, cfg->api_key, strlen(cfg->api_key)) != 0) {
        rl_set_err(errstr, errstr_size, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n_extra; i++) {
        if (extra[i].value_len >= SECRET_MIN &&
            model_add_secret(m, extra[i].value, extra[i].value_len) != 0) {
            rl_set_err(errstr, errstr_size, "out of memory");
            goto fail;
        }
    }
    m->headers = model_build_headers(cfg, extra, n_extra);
    if (!m->headers) {
        rl_set_err(errstr, errstr_size, "out of memory");
        goto fail;
    }
    if (model_shard_add(m) != 0) {
        rl_set_err(errstr, errstr_size, "could not create curl multi handle");
        goto fail;
    }
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    m->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->epfd < 0 || m->wakefd < 0) {
        rl_set_err(errstr, errstr_size,
                   "could not create the model's event loop: %s",
                   strerror(errno));
        goto fail;
    }
    {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = WAKE_TAG};

        if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->wakefd, &ev) != 0) {
            rl_set_err(errstr, errstr_size,
                       "could not create the model's event loop: %s",
                       strerror(errno));
            goto fail;
        }
    }
    rc = pthread_mutex_init(&m->lock, NULL);
    if (rc != 0) {
        rl_set_err(errstr, errstr_size, "could not create model lock: %s",
                   strerror(rc));
        goto fail;
    }
    mutex_ok = 1;

    /* Signals belong to the main thread, never the model thread. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&m->thread, NULL, model_thread, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        rl_set_err(errstr, errstr_size, "could not start model thread: %s",
                   strerror(rc));
        goto fail;
    }
    return m;

fail:
    if (mutex_ok)
        pthread_mutex_destroy(&m->lock);
    for (int i = 0; i < m->nshards; i++)
        curl_multi_cleanup(m->shards[i].multi);
    if (m->epfd >= 0)
        close(m->epfd);
    if (m->wakefd >= 0)
        close(m->wakefd);
    curl_slist_free_all(m->headers);
    for (size_t i = 0; i < m->nsecrets; i++)
        model_wipe_free(m->secrets[i]);
    free(m->url);
    free(m->responses_url);
    free(m->base_url);
    free(m->query);
    free(m);
    return NULL;
}

int
rl_model_submit(struct rl_model *m, struct rl_model_call *call)
{
    struct rl_trace_ctx tc;
    struct xfer *x;
    size_t len;

    if (!m || !call || !call->run_id || call->text || call->tool_calls ||
        call->model_name)
        return RL_ERR_INVALID;
    if (call->lookup
            ? call->body != NULL || (call->api == RL_MODEL_API_RESPONSES
                                         ? !call->lookup_id || !*call->lookup_id
                                         : call->attempt_no <= 0)
            : !call->body)
        return RL_ERR_INVALID;
    len = strlen(call->run_id);
    if (len == 0 || len > RL_MODEL_RUN_ID_MAX)
        return RL_ERR_INVALID;
    for (size_t i = 0; i < len; i++) {
        /* Visible ASCII only: a header value must not smuggle CR/LF. */
        if (call->run_id[i] <= 0x20 || call->run_id[i] >= 0x7f)
            return RL_ERR_INVALID;
    }
    x = calloc(1, sizeof(*x));
    if (!x)
        return RL_ERR_NOMEM;
    x->m = m;
    x->call = call;
    x->body = call->body;
    x->lookup = call->lookup;
    x->api = call->api;
    if (call->lookup) {
        char errstr[256];

        x->url = model_lookup_url(m, call, errstr, sizeof(errstr));
        if (!x->url) {
            free(x);
            return RL_ERR_INVALID;
        }
    }
    x->timeout_ms = call->timeout_ms;
    x->retry_after_ms = -1;
    rl_ratelimit_headers_init(&x->ratelimit);
    snprintf(x->idem_header, sizeof(x->idem_header), "Idempotency-Key: %s",
             call->run_id);
    /* The per-call header heads the shared list: no copy per call. */
    x->idem_node.data = x->idem_header;
    x->idem_node.next = m->headers;
    /* Sent only when it parses as a traceparent: a header value can then
     * never smuggle CR/LF. */
    if (call->traceparent &&
        rl_trace_parse(call->traceparent, strlen(call->traceparent), &tc, NULL,
                       0) == 0) {
        snprintf(x->trace_header, sizeof(x->trace_header), "traceparent: %s",
                 call->traceparent);
        x->trace_node.data = x->trace_header;
        x->trace_node.next = &x->idem_node;
    }

    /* Everything the caller sees changes before the model can see the call:
     * done() may run (and free call) before this function returns. */
    call->body = NULL;
    call->outcome = RL_MODEL_CANCELLED;
    call->http_status = 0;
    call->upstream_request_id[0] = '\0';
    call->retry_after_ms = -1;
    rl_ratelimit_headers_init(&call->ratelimit);
    call->prompt_tokens = call->completion_tokens = call->cached_tokens = 0;
    call->latency_ms = 0;
    call->request_sent = 0;
    call->error[0] = '\0';

    pthread_mutex_lock(&m->lock);
    if (m->stop) {
        pthread_mutex_unlock(&m->lock);
        call->body = x->body;
        free(x->url);
        free(x);
        return RL_ERR_INVALID;
    }
    x->next = m->xfers;
    if (m->xfers)
        m->xfers->prev = x;
    m->xfers = x;
    x->linked = 1;
    if (m->incoming_tail)
        m->incoming_tail->next_new = x;
    else
        m->incoming = x;
    m->incoming_tail = x;
    atomic_fetch_add(&m->in_flight, 1);
    pthread_mutex_unlock(&m->lock);

    model_wake(m);
    return RL_OK;
}

int
rl_model_cancel(struct rl_model *m, struct rl_model_call *call)
{
    int found = 0;

    if (!m || !call)
        return RL_ERR_NOTFOUND;
    pthread_mutex_lock(&m->lock);
    for (struct xfer *x = m->xfers; x; x = x->next) {
        if (x->call != call)
            continue;
        if (!x->cancel) {
            x->cancel = 1;
            m->cancel_requests++;
        }
        found = 1;
        break;
    }
    pthread_mutex_unlock(&m->lock);
    if (!found)
        return RL_ERR_NOTFOUND;
    model_wake(m);
    return RL_OK;
}

size_t
rl_model_in_flight(const struct rl_model *m)
{
    return m ? atomic_load(&m->in_flight) : 0;
}

void
rl_model_destroy(struct rl_model *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->stop = 1;
    pthread_mutex_unlock(&m->lock);
    model_wake(m);
    pthread_join(m->thread, NULL);

    for (int i = 0; i < m->nshards; i++)
        curl_multi_cleanup(m->shards[i].multi);
    for (int i = 0; i < m->nspare; i++)
        curl_easy_cleanup(m->spare[i]);
    close(m->epfd);
    close(m->wakefd);
    curl_slist_free_all(m->headers);
    for (size_t i = 0; i < m->nsecrets; i++)
        model_wipe_free(m->secrets[i]);
    free(m->url);
    free(m->responses_url);
    free(m->base_url);
    free(m->query);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void
rl_model_call_clear(struct rl_model_call *call)
{
    if (!call)
        return;
    free(call->body);
    free(call->text);
    free(call->tool_calls);
    free(call->model_name);
    call->body = call->text = call->tool_calls = call->model_name = NULL;
    call->outcome = RL_MODEL_OK;
    call->http_status = 0;
    call->upstream_request_id[0] = '\0';
    call->retry_after_ms = -1;
    rl_ratelimit_headers_init(&call->ratelimit);
    call->prompt_tokens = call->completion_tokens = call->cached_tokens = 0;
    call->latency_ms = 0;
    call->request_sent = 0;
    call->found_attempt = call->found_records = call->foreign_records = 0;
    call->found_extra_prompt_tokens = call->found_extra_completion_tokens =
        call->found_extra_cached_tokens = 0;
    call->error[0] = '\0';
}
