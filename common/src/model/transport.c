/* Transport: the model thread drives every call's easy handle on a few
 * libcurl multi handles (shards) over one epoll set, starts the calls
 * submitted, aborts the cancelled ones and hands each result back.
 * @locality model thread */
#include "model_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "rl/clock.h"
#include "rl/log.h"

/* Socket events taken from epoll per wait. */
#define EPOLL_EVENTS 256
/* Receive buffer per easy handle: thousands of handles stay small. */
#define RECV_BUFFER_SIZE 4096L
/* Smallest upload buffer libcurl allows (it only backs large bodies). */
#define UPLOAD_BUFFER_SIZE 16384L
/* The model thread wakes at least this often even without traffic. */
#define POLL_TIMEOUT_MS 1000

static void
xfer_free(struct xfer *x)
{
    if (x->easy)
        curl_easy_cleanup(x->easy);
    free(x->body);
    free(x->resp);
    free(x->url);
    free(x);
}

static void
unlink_xfer(struct rl_model *m, struct xfer *x)
{
    if (!x->linked)
        return;
    if (x->prev)
        x->prev->next = x->next;
    else
        m->xfers = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
    x->linked = 0;
}

static void
finish(struct rl_model *m, struct xfer *x, CURLcode rc)
{
    struct rl_model_call *call = x->call;
    int cancelled;

    if (x->started) {
        curl_multi_remove_handle(x->shard->multi, x->easy);
        x->shard->calls--;
    }
    pthread_mutex_lock(&m->lock);
    unlink_xfer(m, x);
    cancelled = x->cancel;
    pthread_mutex_unlock(&m->lock);

    if (x->started) {
        long request_size = 0;

        curl_easy_getinfo(x->easy, CURLINFO_REQUEST_SIZE, &request_size);
        call->request_sent = request_size > 0;
        call->http_status = model_response_code(x);
        call->latency_ms = rl_clock_ms() - x->start_ms;
        call->retry_after_ms = x->retry_after_ms;
        call->ratelimit = x->ratelimit;
        /* A 2xx answer's "id" replaces it (model_parse_completion). */
        for (size_t i = 0;
             i < sizeof(x->request_ids) / sizeof(x->request_ids[0]); i++) {
            if (x->request_ids[i][0]) {
                snprintf(call->upstream_request_id,
                         sizeof(call->upstream_request_id), "%s",
                         x->request_ids[i]);
                break;
            }
        }
    }
    if (cancelled) {
        call->outcome = RL_MODEL_CANCELLED;
        model_call_error(m, call, "model call cancelled");
    } else {
        model_classify(m, x, rc, call);
    }
    if (x->easy && m->nspare < SPARE_EASY) {
        curl_easy_reset(x->easy);
        m->spare[m->nspare++] = x->easy;
        x->easy = NULL;
    }
    xfer_free(x);

    m->done(call, m->opaque);
    atomic_fetch_sub(&m->in_flight, 1);
}

static int on_socket(CURL *easy, curl_socket_t sock, int what, void *userp,
                     void *socketp);
static int on_timer(CURLM *multi, long timeout_ms, void *userp);

/* Sets up m->shards[m->nshards] and counts it. */
int
model_shard_add(struct rl_model *m)
{
    struct shard *s = &m->shards[m->nshards];

    s->m = m;
    s->index = (uint32_t)m->nshards;
    s->timer_due = -1;
    s->calls = 0;
    s->multi = curl_multi_init();
    if (!s->multi)
        return -1;
    curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s);
    curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(s->multi, CURLMOPT_TIMERDATA, s);
    /* 0 leaves libcurl's defaults: no limit, cache sized to the calls. */
    if (m->max_connections > 0) {
        long max = m->max_connections;

        curl_multi_setopt(s->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, max);
        curl_multi_setopt(s->multi, CURLMOPT_MAX_HOST_CONNECTIONS, max);
        curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, max);
    }
    m->nshards++;
    return 0;
}

/* The shard a new call goes to: the first one with room, a new one while
 * there may be more, else the least loaded. */
static struct shard *
pick_shard(struct rl_model *m)
{
    struct shard *least = &m->shards[0];

    for (int i = 0; i < m->nshards; i++) {
        if (m->shards[i].calls < SHARD_CALLS)
            return &m->shards[i];
        if (m->shards[i].calls < least->calls)
            least = &m->shards[i];
    }
    /* A multi handle that cannot be made costs speed, never a call. With
     * a connection limit there is one: libcurl enforces it per handle. */
    if (m->nshards < (m->max_connections > 0 ? 1 : SHARDS_MAX) &&
        model_shard_add(m) == 0)
        return &m->shards[m->nshards - 1];
    return least;
}

/* CURLOPT_READFUNCTION: the body, in the pieces libcurl asks for. There
 * is no CURLOPT_SEEKFUNCTION on purpose: libcurl re-sends a request whose
 * reused connection dies before any byte of the answer arrived
 * (Curl_retry_request), and when body bytes had left, the endpoint may
 * have generated already, so the re-send would generate twice under one
 * attempt the ledger recorded once. Without a way to rewind, libcurl fails
 * that transfer (CURLE_SEND_FAIL_REWIND), which model_classify() calls
 * ambiguous; a request none of whose body left is still re-sent. */
static size_t
read_body(char *buf, size_t size, size_t nitems, void *userdata)
{
    struct xfer *x = userdata;
    size_t n = size * nitems, left = x->body_len - x->body_sent;

    if (n > left)
        n = left;
    memcpy(buf, x->body + x->body_sent, n);
    x->body_sent += n;
    return n;
}

static int
start(struct rl_model *m, struct xfer *x)
{
    CURL *easy = m->nspare > 0 ? m->spare[--m->nspare] : curl_easy_init();
    struct shard *s;
    CURLMcode mc;
    int bad = 0;

    if (!easy) {
        snprintf(x->errbuf, sizeof(x->errbuf), "out of memory");
        return -1;
    }
    x->easy = easy;
    bad |= curl_easy_setopt(easy, CURLOPT_PRIVATE, x) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_URL,
                            x->url ? x->url
                            : x->api == RL_MODEL_API_RESPONSES
                                ? m->responses_url
                                : m->url) != CURLE_OK;
    bad |=
        curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    /* Cancelling a call still resolving its host name must not block the
     * model thread (and every other call) until getaddrinfo() returns. */
    bad |= curl_easy_setopt(easy, CURLOPT_QUICK_EXIT, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_HTTP_VERSION,
                            (long)CURL_HTTP_VERSION_1_1) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_HTTPHEADER,
                            x->trace_node.data ? &x->trace_node
                                               : &x->idem_node) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_USERAGENT, "runledger/" RL_VERSION) !=
           CURLE_OK;
    if (x->lookup) {
        bad |= curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L) != CURLE_OK;
    } else {
        x->body_len = strlen(x->body);
        x->body_sent = 0;
        bad |= curl_easy_setopt(easy, CURLOPT_POST, 1L) != CURLE_OK;
        bad |= curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                                (curl_off_t)x->body_len) != CURLE_OK;
        bad |=
            curl_easy_setopt(easy, CURLOPT_READFUNCTION, read_body) != CURLE_OK;
        bad |= curl_easy_setopt(easy, CURLOPT_READDATA, x) != CURLE_OK;
    }
    bad |= curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                            m->connect_timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                            x->timeout_ms > 0 ? x->timeout_ms
                                              : m->timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, 30L) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, 15L) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, RECV_BUFFER_SIZE) !=
           CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_UPLOAD_BUFFERSIZE,
                            UPLOAD_BUFFER_SIZE) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, x->errbuf) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, model_on_header) !=
           CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_HEADERDATA, x) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, model_on_body) !=
           CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_WRITEDATA, x) != CURLE_OK;
    if (bad) {
        snprintf(x->errbuf, sizeof(x->errbuf), "could not set up the transfer");
        return -1;
    }
    x->start_ms = rl_clock_ms();
    s = pick_shard(m);
    mc = curl_multi_add_handle(s->multi, easy);
    if (mc != CURLM_OK) {
        snprintf(x->errbuf, sizeof(x->errbuf),
                 "could not add the transfer to the multi handle: %s",
                 curl_multi_strerror(mc));
        return -1;
    }
    x->shard = s;
    s->calls++;
    x->started = 1;
    return 0;
}

/* Aborts every started call rl_model_cancel() flagged. Flagged calls not
 * started yet stay flagged and are counted again: they are still on
 * m->incoming and are handled once started. */
static void
abort_cancelled(struct rl_model *m)
{
    struct xfer *x, *next, *list = NULL;
    int waiting = 0;

    pthread_mutex_lock(&m->lock);
    if (m->cancel_requests == 0) {
        pthread_mutex_unlock(&m->lock);
        return;
    }
    for (x = m->xfers; x; x = next) {
        next = x->next;
        if (!x->cancel)
            continue;
        if (!x->started) {
            waiting++;
            continue;
        }
        unlink_xfer(m, x);
        x->next_new = list;
        list = x;
    }
    m->cancel_requests = waiting;
    pthread_mutex_unlock(&m->lock);

    for (x = list; x; x = next) {
        next = x->next_new;
        finish(m, x, CURLE_ABORTED_BY_CALLBACK);
    }
}

/* CURLMOPT_SOCKETFUNCTION: keeps the epoll set in step with what libcurl
 * wants to know about each socket of one shard. socketp marks a socket
 * already added. */
static int
on_socket(CURL *easy, curl_socket_t sock, int what, void *userp, void *socketp)
{
    struct shard *s = userp;
    struct rl_model *m = s->m;
    struct epoll_event ev = {0};

    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        /* The socket may be closed already; then the kernel dropped it. */
        epoll_ctl(m->epfd, EPOLL_CTL_DEL, sock, NULL);
        curl_multi_assign(s->multi, sock, NULL);
        return 0;
    }
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    ev.data.u64 = (uint64_t)s->index << 32 | (uint32_t)sock;
    if (socketp) {
        if (epoll_ctl(m->epfd, EPOLL_CTL_MOD, sock, &ev) == 0)
            return 0;
        /* A new socket reusing a closed one's number (maybe another
         * shard's, whose entry the MOD below takes over). */
    }
    if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, sock, &ev) != 0 &&
        epoll_ctl(m->epfd, EPOLL_CTL_MOD, sock, &ev) != 0) {
        rl_log_error(NULL, "model client: could not watch a socket");
        return -1;
    }
    curl_multi_assign(s->multi, sock, s);
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: when libcurl wants one shard to be called
 * without socket activity (timeouts, new transfers). */
static int
on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    struct shard *s = userp;

    (void)multi;
    s->timer_due = timeout_ms < 0 ? -1 : rl_clock_ms() + timeout_ms;
    return 0;
}

void
model_wake(struct rl_model *m)
{
    uint64_t one = 1;

    /* Only fails when the counter is saturated: a wake-up is pending. */
    if (write(m->wakefd, &one, sizeof(one)) < 0)
        return;
}

/* Waits for sockets, a wake-up or libcurl's timers, and lets libcurl act
 * on what happened. */
static void
drive(struct rl_model *m)
{
    struct epoll_event events[EPOLL_EVENTS];
    int64_t now = rl_clock_ms();
    long wait_ms = POLL_TIMEOUT_MS;
    int running, n;

    for (int i = 0; i < m->nshards; i++) {
        int64_t due = m->shards[i].timer_due;

        if (due >= 0 && due - now < wait_ms)
            wait_ms = due <= now ? 0 : (long)(due - now);
    }
    n = epoll_wait(m->epfd, events, EPOLL_EVENTS, (int)wait_ms);
    for (int i = 0; i < n; i++) {
        uint64_t tag = events[i].data.u64;
        uint32_t shard = (uint32_t)(tag >> 32);
        int fd = (int)(uint32_t)tag;
        int flags = 0;

        if (tag == WAKE_TAG) {
            uint64_t count;

            /* Drains the wake-ups; EAGAIN when there were none left. */
            if (read(m->wakefd, &count, sizeof(count)) < 0)
                count = 0;
            continue;
        }
        if (shard >= (uint32_t)m->nshards)
            continue;
        if (events[i].events & EPOLLIN)
            flags |= CURL_CSELECT_IN;
        if (events[i].events & EPOLLOUT)
            flags |= CURL_CSELECT_OUT;
        if (events[i].events & (EPOLLERR | EPOLLHUP))
            flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(m->shards[shard].multi, fd, flags, &running);
    }
    now = rl_clock_ms();
    for (int i = 0; i < m->nshards; i++) {
        struct shard *s = &m->shards[i];

        if (s->timer_due >= 0 && now >= s->timer_due) {
            s->timer_due = -1;
            curl_multi_socket_action(s->multi, CURL_SOCKET_TIMEOUT, 0,
                                     &running);
        }
    }
}

void *
model_thread(void *arg)
{
    struct rl_model *m = arg;
    struct xfer *x, *next, *batch;
    CURLMsg *msg;
    int left, stop;

    rl_thread_name("rl-model");
    for (;;) {
        pthread_mutex_lock(&m->lock);
        stop = m->stop;
        batch = m->incoming;
        m->incoming = m->incoming_tail = NULL;
        pthread_mutex_unlock(&m->lock);
        if (stop)
            break;

        for (x = batch; x; x = next) {
            next = x->next_new;
            x->next_new = NULL;
            if (start(m, x) != 0)
                finish(m, x, CURLE_FAILED_INIT);
        }
        /* Before libcurl acts, so a call cancelled while queued sends
         * nothing. */
        abort_cancelled(m);

        drive(m);
        for (int i = 0; i < m->nshards; i++) {
            while ((msg = curl_multi_info_read(m->shards[i].multi, &left))) {
                CURLcode rc;
                char *priv = NULL;

                if (msg->msg != CURLMSG_DONE)
                    continue;
                rc = msg->data.result;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
                finish(m, (struct xfer *)(void *)priv, rc);
            }
        }
    }

    /* Shutting down: whatever is still pending is delivered cancelled. */
    for (;;) {
        pthread_mutex_lock(&m->lock);
        m->incoming = m->incoming_tail = NULL;
        x = m->xfers;
        if (x) {
            unlink_xfer(m, x);
            x->cancel = 1;
        }
        pthread_mutex_unlock(&m->lock);
        if (!x)
            break;
        finish(m, x, CURLE_ABORTED_BY_CALLBACK);
    }
    return NULL;
}
