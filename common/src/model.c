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
 * load everything rides shard 0 and its connections, as on one handle. */

#include "rl/model.h"

#include "rl/buf.h"
#include "rl/clock.h"
#include "rl/err.h"
#include "rl/json.h"
#include "rl/log.h"
#include "rl/trace.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* Receive buffer per easy handle: thousands of handles stay small. */
#define RECV_BUFFER_SIZE 4096L
/* Smallest upload buffer libcurl allows (it only backs large bodies). */
#define UPLOAD_BUFFER_SIZE 16384L
/* An error body only explains a status: keep its start, drain the rest. */
#define ERROR_BODY_KEEP 4096
/* First allocation for a 2xx body; grows by doubling up to the cap. */
#define BODY_INITIAL_SIZE 2048
/* Upper bound for a Retry-After we pass on (7 days). */
#define RETRY_AFTER_MAX_MS (7LL * 24 * 3600 * 1000)
/* The model thread wakes at least this often even without traffic. */
#define POLL_TIMEOUT_MS 1000
/* Socket events taken from epoll per wait. */
#define EPOLL_EVENTS 256
/* Extra headers at most (RUNLEDGER_MODEL_HEADERS). */
#define EXTRA_HEADERS_MAX 32
/* Secrets redacted from errors: the API key and the extra headers' values
 * of at least SECRET_MIN bytes (shorter ones, "a" or "prod", would blank
 * out ordinary words and are no credential). */
#define SECRETS_MAX (1 + EXTRA_HEADERS_MAX)
#define SECRET_MIN 8
/* A cut error ending in this many bytes of a secret's start is redacted
 * there (fewer say nothing: "sk-" is every key's start). */
#define SECRET_TAIL_MIN 4
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
    int cancel; /* rl_model_cancel() asked @locks m->lock */

    /* @locality model thread (and the submitter before enqueueing) */
    int started; /* easy is in shard->multi */
    struct shard *shard;
    CURL *easy;
    char *body;
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
    struct rl_model_ratelimit ratelimit;
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

    char *url;
    /* Kept only to redact echoes of them; wiped when freed. */
    char *secrets[SECRETS_MAX];
    size_t secret_lens[SECRETS_MAX];
    size_t nsecrets;
    struct curl_slist *headers; /* shared by every call, read-only */
    long connect_timeout_ms;
    long timeout_ms;
    size_t max_response_bytes;
};

/* Response headers naming the upstream request, most trusted first:
 * OpenAI's own, Azure's and Anthropic-style, LiteLLM's call id, then Azure
 * API Management's. */
static const char *const request_id_headers[] = {
    "x-request-id",
    "request-id",
    "x-litellm-call-id",
    "apim-request-id",
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void
curl_global_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

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
    }
    return "unknown";
}

/* Where in text (length len) the first echo of any secret starts; sets
 * *secret_len. len when there is none. */
static size_t
find_secret(const struct rl_model *m, const char *text, size_t len,
            size_t *secret_len)
{
    size_t best = len;

    for (size_t k = 0; k < m->nsecrets; k++) {
        size_t n = m->secret_lens[k];

        for (size_t i = 0; n <= len && i <= len - n && i < best; i++) {
            if (text[i] == m->secrets[k][0] &&
                memcmp(text + i, m->secrets[k], n) == 0) {
                best = i;
                *secret_len = n;
                break;
            }
        }
    }
    return best;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if none:
 * PostgreSQL refuses invalid UTF-8 in the attempts table. */
static size_t
utf8_len(const unsigned char *p, size_t n)
{
    size_t len;
    unsigned int cp;

    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        len = 2, cp = p[0] & 0x1fu;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        len = 3, cp = p[0] & 0x0fu;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        len = 4, cp = p[0] & 0x07u;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* Copies src into dst (size dst_size), every echo of a secret (the API
 * key, the extra headers' values) replaced and control bytes escaped
 * (\n, \r, \t, \\, else \xNN; so are bytes that are not UTF-8): an
 * endpoint may echo the key in an error message, and errors end up in logs
 * and the attempts table. The whole of src is scanned before anything is
 * cut, so an echo that straddles the cut is caught; a tail of dst that
 * could be the start of a secret is redacted too. */
static void
copy_redacted(const struct rl_model *m, char *dst, size_t dst_size,
              const char *src)
{
    static const char mark[] = "[redacted]";
    size_t len = strlen(src), o = 0, i = 0;
    size_t secret_len = 0, next;

    if (dst_size == 0)
        return;
    next = find_secret(m, src, len, &secret_len);
    while (i < len && o + 1 < dst_size) {
        const unsigned char c = (unsigned char)src[i];
        char esc[8];
        size_t n = 1, adv = 1;
        const char *out = esc;

        if (i == next) {
            out = mark;
            n = sizeof(mark) - 1;
            adv = secret_len;
        } else if (c == '\n' || c == '\r' || c == '\t' || c == '\\') {
            esc[0] = '\\';
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
            n = 2;
        } else if (c >= 0x20 && c < 0x7f) {
            esc[0] = (char)c;
        } else {
            size_t u = c >= 0x80
                           ? utf8_len((const unsigned char *)src + i, len - i)
                           : 0;

            /* Never step over the start of a secret. */
            if (u > 0 && i + u <= next) {
                out = src + i;
                n = adv = u;
            } else {
                snprintf(esc, sizeof(esc), "\\x%02x", c);
                n = 4;
            }
        }
        /* An escape or a character is never cut in half; the mark is. */
        if (n > dst_size - 1 - o) {
            if (out != mark)
                break;
            n = dst_size - 1 - o;
        }
        memcpy(dst + o, out, n);
        o += n;
        i += adv;
        if (i > next)
            next = i + find_secret(m, src + i, len - i, &secret_len);
    }
    dst[o] = '\0';
    if (i == len)
        return;
    /* Cut short: a secret whose start is all that fits must not show. */
    for (size_t k = 0; k < m->nsecrets; k++) {
        for (size_t p = o > m->secret_lens[k] ? o - m->secret_lens[k] : 0;
             p < o; p++) {
            size_t tail = o - p;

            if (tail < SECRET_TAIL_MIN && tail < m->secret_lens[k])
                break;
            if (memcmp(dst + p, m->secrets[k], tail) == 0) {
                size_t n = sizeof(mark) - 1;

                if (n > dst_size - 1 - p)
                    n = dst_size - 1 - p;
                memcpy(dst + p, mark, n);
                o = p + n;
                dst[o] = '\0';
                break;
            }
        }
    }
}

static void call_error(const struct rl_model *m, struct rl_model_call *call,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Formats the whole message before copy_redacted() cuts it to the size of
 * call->error: cutting first could split an echoed key and keep its
 * start. */
static void
call_error(const struct rl_model *m, struct rl_model_call *call,
           const char *fmt, ...)
{
    char small[sizeof(call->error)];
    char *raw = small;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(small)) {
        raw = malloc((size_t)n + 1);
        if (!raw) {
            /* What was kept may end in the start of an echoed key. */
            snprintf(call->error, sizeof(call->error),
                     "model call failed (out of memory formatting its "
                     "error)");
            return;
        }
        va_start(ap, fmt);
        vsnprintf(raw, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    copy_redacted(m, call->error, sizeof(call->error), raw);
    if (raw != small)
        free(raw);
}

/* Header values: printable ASCII without surrounding blanks, truncated. */
static void
copy_header_value(char *dst, size_t dst_size, const char *src, size_t len)
{
    size_t o = 0;

    while (len > 0 && (*src == ' ' || *src == '\t')) {
        src++;
        len--;
    }
    while (len > 0 && (src[len - 1] == ' ' || src[len - 1] == '\t' ||
                       src[len - 1] == '\r' || src[len - 1] == '\n'))
        len--;
    for (size_t i = 0; i < len && o + 1 < dst_size; i++)
        dst[o++] = (src[i] > 0x20 && src[i] < 0x7f) ? src[i] : '?';
    dst[o] = '\0';
}

/* Retry-After is delta-seconds or an HTTP-date (RFC 9110 10.2.3). */
static long
parse_retry_after(const char *value)
{
    long long ms;

    if (*value >= '0' && *value <= '9') {
        char *end;
        long long s = strtoll(value, &end, 10);

        if (*end != '\0' || s < 0)
            return -1;
        ms = s > RETRY_AFTER_MAX_MS / 1000 ? RETRY_AFTER_MAX_MS : s * 1000;
    } else {
        time_t when = curl_getdate(value, NULL);

        if (when == (time_t)-1)
            return -1;
        ms = ((long long)when - (long long)time(NULL)) * 1000;
        if (ms < 0)
            ms = 0;
        if (ms > RETRY_AFTER_MAX_MS)
            ms = RETRY_AFTER_MAX_MS;
    }
    return (long)ms;
}

void
rl_model_ratelimit_init(struct rl_model_ratelimit *rl)
{
    rl->remaining_requests = rl->remaining_tokens = -1;
    rl->reset_requests_ms = rl->reset_tokens_ms = -1;
    rl->retry_after_ms = -1;
    rl->retry_after_ms_seen = 0;
}

long
rl_model_parse_duration_ms(const char *value)
{
    const double day_ms = 86400000.0;
    double total = 0;
    const char *p = value;
    int parts = 0;

    if (!p)
        return -1;
    while (*p == ' ')
        p++;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        double unit;

        if (end == p || v < 0 || v != v)
            return -1;
        p = end;
        if (strncmp(p, "ms", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (strncmp(p, "us", 2) == 0 ||
                   strncmp(p, "\xc2\xb5s", 3) == 0) {
            unit = 0.001;
            p += p[0] == 'u' ? 2 : 3;
        } else if (strncmp(p, "ns", 2) == 0) {
            unit = 0.000001;
            p += 2;
        } else if (*p == 'h') {
            unit = 3600000;
            p++;
        } else if (*p == 'm') {
            unit = 60000;
            p++;
        } else if (*p == 's' || (*p == '\0' && parts == 0)) {
            /* a bare number is seconds, as in Retry-After */
            unit = 1000;
            if (*p == 's')
                p++;
        } else {
            return -1;
        }
        total += v * unit;
        parts++;
        if (total > day_ms)
            total = day_ms;
    }
    if (parts == 0)
        return -1;
    /* Round up: waiting a fraction of a millisecond too long is harmless,
     * too short earns another 429. */
    return (long)(total + 0.999);
}

static long long
parse_count(const char *value)
{
    char *end;
    long long n;

    if (*value < '0' || *value > '9')
        return -1;
    n = strtoll(value, &end, 10);
    return *end == '\0' && n >= 0 ? n : -1;
}

int
rl_model_ratelimit_header(struct rl_model_ratelimit *rl, const char *name,
                          const char *value)
{
    if (strcasecmp(name, "x-ratelimit-remaining-requests") == 0) {
        rl->remaining_requests = parse_count(value);
    } else if (strcasecmp(name, "x-ratelimit-remaining-tokens") == 0) {
        rl->remaining_tokens = parse_count(value);
    } else if (strcasecmp(name, "x-ratelimit-reset-requests") == 0) {
        rl->reset_requests_ms = rl_model_parse_duration_ms(value);
    } else if (strcasecmp(name, "x-ratelimit-reset-tokens") == 0) {
        rl->reset_tokens_ms = rl_model_parse_duration_ms(value);
    } else if (strcasecmp(name, "retry-after-ms") == 0) {
        char *end;
        double ms = strtod(value, &end);

        if (end != value && *end == '\0' && ms >= 0) {
            rl->retry_after_ms = ms > (double)RETRY_AFTER_MAX_MS
                                     ? (long)RETRY_AFTER_MAX_MS
                                     : (long)(ms + 0.999);
            rl->retry_after_ms_seen = 1;
        }
    } else if (strcasecmp(name, "retry-after") == 0) {
        if (!rl->retry_after_ms_seen)
            rl->retry_after_ms = parse_retry_after(value);
    } else {
        return 0;
    }
    return 1;
}

int
rl_model_ratelimit_published(const struct rl_model_ratelimit *rl)
{
    return rl->remaining_requests >= 0 || rl->remaining_tokens >= 0 ||
           rl->reset_requests_ms >= 0 || rl->reset_tokens_ms >= 0;
}

static long
response_code(struct xfer *x)
{
    long status = 0;

    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

static size_t
on_header(char *buf, size_t size, size_t nitems, void *userdata)
{
    struct xfer *x = userdata;
    size_t n = size * nitems;
    char name[32], value[256];
    const char *colon;
    size_t name_len;

    /* A new status line (after a 1xx) starts a new header block. */
    if (n >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        for (size_t i = 0;
             i < sizeof(x->request_ids) / sizeof(x->request_ids[0]); i++)
            x->request_ids[i][0] = '\0';
        x->retry_after_ms = -1;
        x->retry_after_ms_seen = 0;
        rl_model_ratelimit_init(&x->ratelimit);
        return n;
    }
    colon = memchr(buf, ':', n);
    if (!colon)
        return n;
    name_len = (size_t)(colon - buf);
    if (name_len == 0 || name_len >= sizeof(name))
        return n;
    memcpy(name, buf, name_len);
    name[name_len] = '\0';
    copy_header_value(value, sizeof(value), colon + 1, n - name_len - 1);

    for (size_t i = 0;
         i < sizeof(request_id_headers) / sizeof(request_id_headers[0]); i++) {
        if (strcasecmp(name, request_id_headers[i]) == 0) {
            copy_header_value(x->request_ids[i], sizeof(x->request_ids[i]),
                              colon + 1, n - name_len - 1);
            return n;
        }
    }
    rl_model_ratelimit_header(&x->ratelimit, name, value);
    if (strcasecmp(name, "retry-after-ms") == 0) {
        char *end;
        double ms = strtod(value, &end);

        if (end != value && *end == '\0' && ms >= 0) {
            x->retry_after_ms = ms > (double)RETRY_AFTER_MAX_MS
                                    ? (long)RETRY_AFTER_MAX_MS
                                    : (long)ms;
            x->retry_after_ms_seen = 1;
        }
    } else if (strcasecmp(name, "retry-after") == 0) {
        if (!x->retry_after_ms_seen)
            x->retry_after_ms = parse_retry_after(value);
    } else if (strcasecmp(name, "content-length") == 0) {
        long status = response_code(x);
        char *end;
        unsigned long long len = strtoull(value, &end, 10);

        /* Refuse a declared oversize 2xx body before reading any of it. */
        if (status >= 200 && status < 300 && end != value &&
            len > (unsigned long long)x->m->max_response_bytes) {
            x->oversize = 1;
            return 0;
        }
    }
    return n;
}

static int
append(struct xfer *x, const char *data, size_t n, size_t limit)
{
    if (x->resp_len + n + 1 > x->resp_cap) {
        size_t cap = x->resp_cap ? x->resp_cap : BODY_INITIAL_SIZE;
        char *p;

        while (cap < x->resp_len + n + 1)
            cap *= 2;
        if (cap > limit + 1)
            cap = limit + 1;
        p = realloc(x->resp, cap);
        if (!p)
            return -1;
        x->resp = p;
        x->resp_cap = cap;
    }
    memcpy(x->resp + x->resp_len, data, n);
    x->resp_len += n;
    x->resp[x->resp_len] = '\0';
    return 0;
}

/* Debian's libcurl 7.88 does not apply CURLOPT_MAXFILESIZE to a body of
 * unknown length, so the cap is enforced here, before memory grows. */
static size_t
on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct xfer *x = userdata;
    size_t n = size * nmemb;
    long status = response_code(x);

    if (status < 200 || status > 299) {
        size_t keep =
            x->resp_len < ERROR_BODY_KEEP ? ERROR_BODY_KEEP - x->resp_len : 0;

        if (keep > n)
            keep = n;
        if (keep > 0 && append(x, data, keep, ERROR_BODY_KEEP) != 0) {
            x->nomem = 1;
            return 0;
        }
        return n;
    }
    if (n > x->m->max_response_bytes - x->resp_len) {
        x->oversize = 1;
        return 0;
    }
    if (append(x, data, n, x->m->max_response_bytes) != 0) {
        x->nomem = 1;
        return 0;
    }
    return n;
}

static void
xfer_free(struct xfer *x)
{
    if (x->easy)
        curl_easy_cleanup(x->easy);
    free(x->body);
    free(x->resp);
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

/* The message an endpoint put in an error body, if it is JSON with one. */
static void
error_body_message(const struct xfer *x, char *out, size_t out_size)
{
    cJSON *root, *err, *msg = NULL;

    out[0] = '\0';
    if (!x->resp || x->resp_len == 0)
        return;
    root = cJSON_ParseWithLength(x->resp, x->resp_len);
    if (!root)
        return;
    err = cJSON_GetObjectItemCaseSensitive(root, "error");
    if (cJSON_IsObject(err))
        msg = cJSON_GetObjectItemCaseSensitive(err, "message");
    else if (cJSON_IsString(err))
        msg = err;
    else
        msg = cJSON_GetObjectItemCaseSensitive(root, "message");
    if (cJSON_IsString(msg) && msg->valuestring)
        snprintf(out, out_size, "%s", msg->valuestring);
    cJSON_Delete(root);
}

static long long
usage_number(const cJSON *obj, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);

    if (!cJSON_IsNumber(item) || item->valuedouble < 0)
        return 0;
    if (item->valuedouble > (double)LLONG_MAX / 2)
        return LLONG_MAX / 2;
    return (long long)item->valuedouble;
}

/* Reads a 2xx chat completion into call. Usage is kept even when the
 * content is unusable: those tokens were billed. */
static void
parse_completion(const struct rl_model *m, const struct xfer *x,
                 struct rl_model_call *call)
{
    cJSON *root;
    const cJSON *choices, *message, *content, *tool_calls, *model, *id, *usage;
    int has_text, has_calls;

    root = x->resp ? cJSON_ParseWithLength(x->resp, x->resp_len) : NULL;
    if (!cJSON_IsObject(root)) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        call_error(m, call, "model response is not a json object (%zu bytes)",
                   x->resp_len);
        goto done;
    }

    /* The answer names itself better than any gateway's header. */
    id = cJSON_GetObjectItemCaseSensitive(root, "id");
    if (cJSON_IsString(id) && id->valuestring && id->valuestring[0])
        copy_header_value(call->upstream_request_id,
                          sizeof(call->upstream_request_id), id->valuestring,
                          strlen(id->valuestring));
    model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (cJSON_IsString(model) && model->valuestring)
        call->model_name = strdup(model->valuestring);
    usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
    if (cJSON_IsObject(usage)) {
        const cJSON *details =
            cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens_details");

        call->prompt_tokens = usage_number(usage, "prompt_tokens");
        call->completion_tokens = usage_number(usage, "completion_tokens");
        if (cJSON_IsObject(details))
            call->cached_tokens = usage_number(details, "cached_tokens");
    }

    choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    message = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(choices, 0),
                                               "message");
    content = cJSON_GetObjectItemCaseSensitive(message, "content");
    tool_calls = cJSON_GetObjectItemCaseSensitive(message, "tool_calls");
    if (!cJSON_IsArray(choices) || !cJSON_IsObject(message)) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        call_error(m, call, "model response has no choices[0].message object");
        goto done;
    }
    /* A message that calls tools is an answer: its content is null (or
     * empty, or a preamble) and the caller acts on the calls. */
    has_text = cJSON_IsString(content) && content->valuestring &&
               content->valuestring[0] != '\0';
    has_calls = cJSON_IsArray(tool_calls) && cJSON_GetArraySize(tool_calls) > 0;
    if (!has_text && !has_calls) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        if (cJSON_IsString(content) && content->valuestring)
            call_error(m, call, "model response content is empty");
        else
            call_error(m, call,
                       "model response has neither a "
                       "choices[0].message.content string nor tool_calls");
        goto done;
    }
    if (has_text)
        call->text = strdup(content->valuestring);
    if (has_calls)
        call->tool_calls = rl_json_print(tool_calls);
    if ((has_text && !call->text) || (has_calls && !call->tool_calls)) {
        free(call->text);
        free(call->tool_calls);
        call->text = call->tool_calls = NULL;
        /* The generation happened; only this process failed to keep it. */
        call->outcome = RL_MODEL_AMBIGUOUS;
        call_error(m, call, "out of memory copying model response");
        goto done;
    }
    call->outcome = RL_MODEL_OK;

done:
    cJSON_Delete(root);
}

static int
status_is_transient(long status)
{
    return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

static void
classify_status(const struct rl_model *m, const struct xfer *x,
                struct rl_model_call *call)
{
    /* All of it: the key is redacted before the message is cut. */
    char msg[ERROR_BODY_KEEP + 1];

    call->outcome = status_is_transient(call->http_status) ? RL_MODEL_TRANSIENT
                                                           : RL_MODEL_PERMANENT;
    error_body_message(x, msg, sizeof(msg));
    if (msg[0])
        call_error(m, call, "model endpoint returned http %ld: %s",
                   call->http_status, msg);
    else
        call_error(m, call, "model endpoint returned http %ld",
                   call->http_status);
}

/* Translates how a finished transfer ended into an outcome. */
static void
classify(const struct rl_model *m, struct xfer *x, CURLcode rc,
         struct rl_model_call *call)
{
    long status = call->http_status;
    int final_status = status >= 200;

    if (x->oversize) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        call_error(m, call, "model response is larger than %zu bytes",
                   m->max_response_bytes);
        return;
    }
    if (x->nomem) {
        call->outcome =
            call->request_sent ? RL_MODEL_AMBIGUOUS : RL_MODEL_NOT_SENT;
        call_error(m, call, "out of memory reading model response");
        return;
    }
    if (rc != CURLE_OK && !(final_status && (status < 200 || status > 299))) {
        /* No verdict from the endpoint. Whether it may have generated
         * depends only on whether any request byte left this process. */
        call->outcome =
            call->request_sent ? RL_MODEL_AMBIGUOUS : RL_MODEL_NOT_SENT;
        call_error(m, call, "model call failed: %s",
                   x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
        return;
    }
    /* A non-2xx status is the endpoint's verdict even if its error body was
     * cut short. */
    if (status >= 200 && status <= 299)
        parse_completion(m, x, call);
    else
        classify_status(m, x, call);
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
        call->http_status = response_code(x);
        call->latency_ms = rl_clock_ms() - x->start_ms;
        call->retry_after_ms = x->retry_after_ms;
        call->ratelimit = x->ratelimit;
        /* A 2xx answer's "id" replaces it (parse_completion). */
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
        call_error(m, call, "model call cancelled");
    } else {
        classify(m, x, rc, call);
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
static int
shard_add(struct rl_model *m)
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
        shard_add(m) == 0)
        return &m->shards[m->nshards - 1];
    return least;
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
    bad |= curl_easy_setopt(easy, CURLOPT_URL, m->url) != CURLE_OK;
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
    bad |= curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                            (curl_off_t)strlen(x->body)) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_POSTFIELDS, x->body) != CURLE_OK;
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
    bad |=
        curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_HEADERDATA, x) != CURLE_OK;
    bad |= curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK;
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

static void
wake(struct rl_model *m)
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

static void *
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

/* One "Name: value" of the extra headers, pointing into the setting. */
struct header_entry {
    const char *name, *value;
    size_t name_len, value_len;
};

/* Headers the client sets itself: a second copy would confuse endpoints
 * (or, for Idempotency-Key, break deduplication). */
static const char *const own_headers[] = {
    "Content-Type",      "Accept",         "Expect",
    "Idempotency-Key",   "Content-Length", "Host",
    "Transfer-Encoding", "Connection",     "User-Agent",
};

/* RFC 9110 token: what a header name may be made of. */
static int
is_token(const char *s, size_t len)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c)))
            return 0;
    }
    return 1;
}

static int
name_is(const char *name, size_t len, const char *other)
{
    return strlen(other) == len && strncasecmp(name, other, len) == 0;
}

static int
is_own_header(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(own_headers) / sizeof(own_headers[0]); i++) {
        if (name_is(name, len, own_headers[i]))
            return 1;
    }
    return 0;
}

/* The name the API key goes in; "Authorization" (with "Bearer ") when
 * unset. */
static const char *
auth_header_name(const struct rl_model_config *cfg)
{
    return cfg->auth_header && *cfg->auth_header ? cfg->auth_header
                                                 : "Authorization";
}

/* Splits cfg->headers into out (EXTRA_HEADERS_MAX entries); sets *n.
 * Returns 0 or RL_ERR_INVALID with errstr naming the entry by position
 * (and by name once the name is known to be one), never by its value: a
 * value may be a credential. */
static int
parse_headers(const struct rl_model_config *cfg, struct header_entry *out,
              size_t *n, char *errstr, size_t errstr_size)
{
    const char *p = cfg->headers ? cfg->headers : "";
    const char *auth = auth_header_name(cfg);
    int has_key = cfg->api_key && *cfg->api_key;
    int pos = 0;

    *n = 0;
    while (*p) {
        const char *end = p + strcspn(p, ",\n");
        const char *colon;
        struct header_entry e;

        pos++;
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
            p++;
        if (p == end) { /* empty entry: "a: b," */
            p = *end ? end + 1 : end;
            continue;
        }
        colon = memchr(p, ':', (size_t)(end - p));
        if (!colon) {
            rl_set_err(errstr, errstr_size, "entry %d is not \"Name: value\"",
                       pos);
            return RL_ERR_INVALID;
        }
        e.name = p;
        e.name_len = (size_t)(colon - p);
        while (e.name_len > 0 &&
               (p[e.name_len - 1] == ' ' || p[e.name_len - 1] == '\t'))
            e.name_len--;
        if (!is_token(e.name, e.name_len)) {
            rl_set_err(errstr, errstr_size, "entry %d has no valid header name",
                       pos);
            return RL_ERR_INVALID;
        }
        e.value = colon + 1;
        e.value_len = (size_t)(end - e.value);
        while (e.value_len > 0 && (*e.value == ' ' || *e.value == '\t')) {
            e.value++;
            e.value_len--;
        }
        while (e.value_len > 0 && (e.value[e.value_len - 1] == ' ' ||
                                   e.value[e.value_len - 1] == '\t' ||
                                   e.value[e.value_len - 1] == '\r'))
            e.value_len--;
        if (e.value_len == 0) {
            rl_set_err(errstr, errstr_size, "header %.*s has an empty value",
                       (int)e.name_len, e.name);
            return RL_ERR_INVALID;
        }
        for (size_t i = 0; i < e.value_len; i++) {
            unsigned char c = (unsigned char)e.value[i];

            if ((c < 0x20 && c != '\t') || c >= 0x7f) {
                rl_set_err(errstr, errstr_size,
                           "header %.*s has a value that is not printable "
                           "ascii",
                           (int)e.name_len, e.name);
                return RL_ERR_INVALID;
            }
        }
        if (is_own_header(e.name, e.name_len) ||
            (has_key && name_is(e.name, e.name_len, auth))) {
            rl_set_err(errstr, errstr_size,
                       "header %.*s is one runledger sets itself",
                       (int)e.name_len, e.name);
            return RL_ERR_INVALID;
        }
        for (size_t k = 0; k < *n; k++) {
            if (out[k].name_len == e.name_len &&
                strncasecmp(out[k].name, e.name, e.name_len) == 0) {
                rl_set_err(errstr, errstr_size, "header %.*s is given twice",
                           (int)e.name_len, e.name);
                return RL_ERR_INVALID;
            }
        }
        if (*n == EXTRA_HEADERS_MAX) {
            rl_set_err(errstr, errstr_size, "more than %d headers",
                       EXTRA_HEADERS_MAX);
            return RL_ERR_INVALID;
        }
        out[(*n)++] = e;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* Checks cfg->query: name=value pairs joined by '&', each name non-empty,
 * no control characters (they are percent-encoded, never sent raw). */
static int
check_query(const char *query, char *errstr, size_t errstr_size)
{
    const char *p = query ? query : "";
    int pos = 0;

    while (*p) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);

        pos++;
        if (!eq || eq == p) {
            rl_set_err(errstr, errstr_size, "parameter %d is not name=value",
                       pos);
            return RL_ERR_INVALID;
        }
        for (size_t i = 0; i < len; i++) {
            if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
                rl_set_err(errstr, errstr_size,
                           "parameter %d has a control character", pos);
                return RL_ERR_INVALID;
            }
        }
        p += len;
        if (*p == '&')
            p++;
    }
    return 0;
}

int
rl_model_config_check(const struct rl_model_config *cfg, char *errstr,
                      size_t errstr_size)
{
    struct header_entry entries[EXTRA_HEADERS_MAX];
    char why[200];
    size_t n;
    const char *auth;

    if (!cfg) {
        rl_set_err(errstr, errstr_size, "model config is not set");
        return RL_ERR_INVALID;
    }
    if (cfg->api_key) {
        for (const char *p = cfg->api_key; *p; p++) {
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                /* Never print the key itself, not even in part. */
                rl_set_err(errstr, errstr_size,
                           "model api_key contains control characters");
                return RL_ERR_INVALID;
            }
        }
    }
    auth = auth_header_name(cfg);
    if (!is_token(auth, strlen(auth)) || is_own_header(auth, strlen(auth))) {
        rl_set_err(errstr, errstr_size,
                   "model auth header \"%s\" is not a header name runledger "
                   "can send the key in",
                   auth);
        return RL_ERR_INVALID;
    }
    if (check_query(cfg->query, why, sizeof(why)) != 0) {
        rl_set_err(errstr, errstr_size, "model query: %s", why);
        return RL_ERR_INVALID;
    }
    if (parse_headers(cfg, entries, &n, why, sizeof(why)) != 0) {
        rl_set_err(errstr, errstr_size, "model headers: %s", why);
        return RL_ERR_INVALID;
    }
    return 0;
}

/* Appends s[0..len) to b percent-encoded: everything but RFC 3986's
 * unreserved characters, so '&', '=', '#' and spaces in a value cannot
 * change the query's meaning. */
static void
put_escaped(struct rl_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
            c == '~') {
            rl_buf_put(b, (const char *)&s[i], 1);
        } else {
            char pct[3] = {'%', hex[c >> 4], hex[c & 15]};

            rl_buf_put(b, pct, 3);
        }
    }
}

static char *
build_url(const char *base_url, const char *query, char *errstr,
          size_t errstr_size)
{
    static const char path[] = "/chat/completions";
    size_t len = strlen(base_url);
    struct rl_buf b = {0};
    const char *p = query ? query : "";
    CURLU *u;
    CURLUcode uc;
    char *url;

    if (strpbrk(base_url, "?#")) {
        rl_set_err(errstr, errstr_size,
                   "invalid model base_url: it must not carry a query or "
                   "fragment (query parameters go in the model query "
                   "setting)");
        return NULL;
    }
    while (len > 0 && base_url[len - 1] == '/')
        len--;
    rl_buf_put(&b, base_url, len);
    rl_buf_put(&b, path, sizeof(path) - 1);
    while (*p) {
        size_t n = strcspn(p, "&");
        const char *eq = memchr(p, '=', n);

        rl_buf_put(&b, p == query ? "?" : "&", 1);
        put_escaped(&b, p, (size_t)(eq - p));
        rl_buf_put(&b, "=", 1);
        put_escaped(&b, eq + 1, n - (size_t)(eq - p) - 1);
        p += n;
        if (*p == '&')
            p++;
    }
    url = rl_buf_take(&b);
    if (!url) {
        rl_set_err(errstr, errstr_size, "out of memory");
        return NULL;
    }

    u = curl_url();
    if (!u) {
        free(url);
        rl_set_err(errstr, errstr_size, "out of memory");
        return NULL;
    }
    uc = curl_url_set(u, CURLUPART_URL, url, 0);
    curl_url_cleanup(u);
    if (uc != CURLUE_OK ||
        (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
        rl_set_err(errstr, errstr_size, "invalid model base_url: %s",
                   uc != CURLUE_OK ? curl_url_strerror(uc)
                                   : "scheme must be http or https");
        free(url);
        return NULL;
    }
    return url;
}

/* Appends "<name>: <value>" to list, wiping the temporary copy (the value
 * may be a credential). Returns the new list, or NULL (list untouched). */
static struct curl_slist *
append_header(struct curl_slist *list, const char *name, size_t name_len,
              const char *prefix, const char *value, size_t value_len)
{
    size_t len = name_len + 2 + strlen(prefix) + value_len + 1;
    struct curl_slist *tmp;
    char *h = malloc(len);

    if (!h)
        return NULL;
    snprintf(h, len, "%.*s: %s%.*s", (int)name_len, name, prefix,
             (int)value_len, value);
    tmp = curl_slist_append(list, h);
    for (volatile char *v = h; *v; v++)
        *v = '\0';
    free(h);
    return tmp;
}

static struct curl_slist *
build_headers(const struct rl_model_config *cfg,
              const struct header_entry *extra, size_t n_extra)
{
    static const char *const fixed[] = {
        "Content-Type: application/json",
        "Accept: application/json",
        /* libcurl would wait up to 1 s for a 100-continue on large bodies */
        "Expect:",
    };
    struct curl_slist *list = NULL, *tmp;

    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        tmp = curl_slist_append(list, fixed[i]);
        if (!tmp)
            goto fail;
        list = tmp;
    }
    if (cfg->api_key && *cfg->api_key) {
        const char *name = auth_header_name(cfg);
        int bearer = strcasecmp(name, "Authorization") == 0;

        tmp = append_header(list, name, strlen(name), bearer ? "Bearer " : "",
                            cfg->api_key, strlen(cfg->api_key));
        if (!tmp)
            goto fail;
        list = tmp;
    }
    for (size_t i = 0; i < n_extra; i++) {
        tmp = append_header(list, extra[i].name, extra[i].name_len, "",
                            extra[i].value, extra[i].value_len);
        if (!tmp)
            goto fail;
        list = tmp;
    }
    return list;

fail:
    curl_slist_free_all(list);
    return NULL;
}

/* Keeps a copy of s[0..len) to redact from errors. */
static int
add_secret(struct rl_model *m, const char *s, size_t len)
{
    char *copy = malloc(len + 1);

    if (!copy)
        return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    m->secrets[m->nsecrets] = copy;
    m->secret_lens[m->nsecrets++] = len;
    return 0;
}

static void
wipe_free(char *s)
{
    if (!s)
        return;
    /* volatile: the key should not outlive the client in freed memory */
    for (volatile char *p = s; *p; p++)
        *p = '\0';
    free(s);
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

    m->url = build_url(cfg->base_url, cfg->query, errstr, errstr_size);
    if (!m->url)
        goto fail;
    /* Checked above: cannot fail. */
    parse_headers(cfg, extra, &n_extra, errstr, errstr_size);
    if (cfg->api_key && *cfg->api_key &&
        add_secret(m, cfg->api_key, strlen(cfg->api_key)) != 0) {
        rl_set_err(errstr, errstr_size, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n_extra; i++) {
        if (extra[i].value_len >= SECRET_MIN &&
            add_secret(m, extra[i].value, extra[i].value_len) != 0) {
            rl_set_err(errstr, errstr_size, "out of memory");
            goto fail;
        }
    }
    m->headers = build_headers(cfg, extra, n_extra);
    if (!m->headers) {
        rl_set_err(errstr, errstr_size, "out of memory");
        goto fail;
    }
    if (shard_add(m) != 0) {
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
        wipe_free(m->secrets[i]);
    free(m->url);
    free(m);
    return NULL;
}

int
rl_model_submit(struct rl_model *m, struct rl_model_call *call)
{
    struct rl_trace_ctx tc;
    struct xfer *x;
    size_t len;

    if (!m || !call || !call->run_id || !call->body || call->text ||
        call->tool_calls || call->model_name)
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
    x->timeout_ms = call->timeout_ms;
    x->retry_after_ms = -1;
    rl_model_ratelimit_init(&x->ratelimit);
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
    rl_model_ratelimit_init(&call->ratelimit);
    call->prompt_tokens = call->completion_tokens = call->cached_tokens = 0;
    call->latency_ms = 0;
    call->request_sent = 0;
    call->error[0] = '\0';

    pthread_mutex_lock(&m->lock);
    if (m->stop) {
        pthread_mutex_unlock(&m->lock);
        call->body = x->body;
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

    wake(m);
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
    wake(m);
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
    wake(m);
    pthread_join(m->thread, NULL);

    for (int i = 0; i < m->nshards; i++)
        curl_multi_cleanup(m->shards[i].multi);
    for (int i = 0; i < m->nspare; i++)
        curl_easy_cleanup(m->spare[i]);
    close(m->epfd);
    close(m->wakefd);
    curl_slist_free_all(m->headers);
    for (size_t i = 0; i < m->nsecrets; i++)
        wipe_free(m->secrets[i]);
    free(m->url);
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
    rl_model_ratelimit_init(&call->ratelimit);
    call->prompt_tokens = call->completion_tokens = call->cached_tokens = 0;
    call->latency_ms = 0;
    call->request_sent = 0;
    call->error[0] = '\0';
}
