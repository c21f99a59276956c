/* The model client against a real HTTP server: the stub model
 * (tests/stub/stub_model.py, reached by MODEL_BASE_URL) for every failure
 * class, plus a canned-response socket server inside this test for what
 * the stub cannot say (a body of unknown length, an error that echoes the
 * API key, HTTP-date Retry-After).
 *
 * Every case asserts the outcome class the consumer's retry policy keys on
 * (docs/design.md, "Failure classes") and the numbers it stores in `attempts`.
 *
 * Past 1,000 lines on purpose: the cases share the canned-response server
 * and the call helpers of this file. */

#include "rl/err.h"
#include "rl/model.h"
#include "rl/testing.h"
#include "rltest.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- completion bookkeeping ------------------------------------------ */

struct tcall {
    struct rl_model_call call;
    int64_t done_ms; /* when done() ran; 0 before */
};

struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
};

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

static struct waiter waiter = {PTHREAD_MUTEX_INITIALIZER,
                               PTHREAD_COND_INITIALIZER, 0};

static void
on_done(struct rl_model_call *call, void *opaque)
{
    struct waiter *w = opaque;
    struct tcall *tc = call->opaque;

    pthread_mutex_lock(&w->lock);
    tc->done_ms = rltest_now_ms();
    w->done++;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Waits until `target` calls in total have completed or timeout_ms passed.
 * Returns the number completed. */
static int
wait_done(int target, int64_t timeout_ms)
{
    struct timespec ts;
    int n;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (timeout_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&waiter.lock);
    while (waiter.done < target) {
        if (pthread_cond_timedwait(&waiter.cond, &waiter.lock, &ts) ==
            ETIMEDOUT)
            break;
    }
    n = waiter.done;
    pthread_mutex_unlock(&waiter.lock);
    return n;
}

static int
done_count(void)
{
    int n;

    pthread_mutex_lock(&waiter.lock);
    n = waiter.done;
    pthread_mutex_unlock(&waiter.lock);
    return n;
}

/* ---- fixtures ----------------------------------------------------------- */

static const char *base_url;
static char stats_url[512];
static char run_prefix[96];
static char canary_key[96];

/* Every errstr and call error produced in this test, to prove the key never
 * shows up in any of them. */
static char seen_errors[64 * 1024];

static void
remember_error(const char *e)
{
    size_t len = strlen(seen_errors);

    if (len + strlen(e) + 2 < sizeof(seen_errors)) {
        strcat(seen_errors, e);
        strcat(seen_errors, "\n");
    }
}

static struct rl_model *
model_new(const char *url, long timeout_ms, size_t max_response_bytes)
{
    struct rl_model_config cfg;
    char errstr[256] = "";
    struct rl_model *m;

    memset(&cfg, 0, sizeof(cfg));
    cfg.base_url = url;
    cfg.api_key = canary_key;
    cfg.connect_timeout_ms = 2000;
    cfg.timeout_ms = timeout_ms;
    cfg.max_response_bytes = max_response_bytes;
    m = rl_model_new(&cfg, on_done, &waiter, errstr, sizeof(errstr));
    remember_error(errstr);
    if (!m)
        fprintf(stderr, "rl_model_new: %s\n", errstr);
    RL_REQUIRE(m);
    return m;
}

/* Prepares tc for run `<prefix>-<name>` whose user message is `content`. */
static void
prepare(struct tcall *tc, char *run_id, size_t run_id_size, const char *name,
        const char *content)
{
    char errstr[256] = "";
    cJSON *req = cJSON_CreateObject();
    cJSON *r = cJSON_AddObjectToObject(req, "request");
    cJSON *msgs, *msg;
    char *req_json;

    snprintf(run_id, run_id_size, "%s-%s", run_prefix, name);
    cJSON_AddArrayToObject(req, "notify");
    cJSON_AddStringToObject(r, "model", "gpt-test");
    cJSON_AddNumberToObject(r, "temperature", 0);
    msgs = cJSON_AddArrayToObject(r, "messages");
    msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "role", "system");
    cJSON_AddStringToObject(msg, "content", "You answer briefly.");
    cJSON_AddItemToArray(msgs, msg);
    msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "role", "user");
    cJSON_AddStringToObject(msg, "content", content);
    cJSON_AddItemToArray(msgs, msg);
    req_json = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    RL_REQUIRE(req_json);

    memset(tc, 0, sizeof(*tc));
    tc->call.run_id = run_id;
    tc->call.opaque = tc;
    tc->call.body = rl_model_build_body(req_json, NULL, errstr, sizeof(errstr));
    cJSON_free(req_json);
    RL_REQUIRE(tc->call.body);
}

/* Submits one call and waits for it; returns the call for checks. */
static struct rl_model_call *
run_one(struct rl_model *m, struct tcall *tc, int64_t timeout_ms)
{
    int before = done_count();

    RL_REQUIRE(rl_model_submit(m, &tc->call) == 0);
    RL_REQUIRE(wait_done(before + 1, timeout_ms) == before + 1);
    remember_error(tc->call.error);
    fprintf(stderr, "  %s: outcome=%s http=%ld sent=%d latency=%lldms %s\n",
            tc->call.run_id, rl_model_outcome_name(tc->call.outcome),
            tc->call.http_status, tc->call.request_sent, tc->call.latency_ms,
            tc->call.error);
    return &tc->call;
}

/* ---- GET /stats from the stub ------------------------------------------ */

static size_t
collect_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    char **buf = userdata;
    size_t old = *buf ? strlen(*buf) : 0, n = size * nmemb;
    char *p = realloc(*buf, old + n + 1);

    if (!p)
        return 0;
    memcpy(p + old, data, n);
    p[old + n] = '\0';
    *buf = p;
    return n;
}

static cJSON *
get_stats(const char *query)
{
    char url[700];
    char *body = NULL;
    CURL *easy = curl_easy_init();
    cJSON *root;

    RL_REQUIRE(easy);
    snprintf(url, sizeof(url), "%s%s", stats_url, query ? query : "");
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 5000L);
    RL_REQUIRE(curl_easy_perform(easy) == CURLE_OK);
    curl_easy_cleanup(easy);
    root = body ? cJSON_Parse(body) : NULL;
    free(body);
    RL_REQUIRE(root);
    return root;
}

static long long
stats_number(const cJSON *root, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, name);

    return cJSON_IsNumber(item) ? (long long)item->valuedouble : -1;
}

/* Requests and generations the stub counted for one Idempotency-Key. */
static void
key_stats(const char *key, long long *requests, long long *generations)
{
    char query[300];
    cJSON *root;

    snprintf(query, sizeof(query), "?key=%s", key);
    root = get_stats(query);
    *requests = stats_number(root, "requests");
    *generations = stats_number(root, "generations");
    cJSON_Delete(root);
}

static long
rss_kib(void)
{
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    }
    fclose(f);
    return kib;
}

/* ---- a canned-response HTTP server inside the test -------------------- */

struct canned {
    int fd;
    int port;
    pthread_t thread;
    pthread_mutex_t lock;
    char response[1024];     /* sent as is, then the connection closes */
    size_t stream_bytes;     /* >0: after response, this many body bytes */
    char last_request[8192]; /* head of the last request received */
};

static const char *
find_ci(const char *haystack, const char *needle)
{
    size_t n = strlen(needle);

    for (; *haystack; haystack++) {
        if (strncasecmp(haystack, needle, n) == 0)
            return haystack;
    }
    return NULL;
}

static void
read_request(int conn, char *head, size_t head_size)
{
    size_t got = 0;
    long need = -1;

    for (;;) {
        char buf[4096];
        ssize_t n = recv(conn, buf, sizeof(buf), 0);
        const char *end, *cl;

        if (n <= 0)
            return;
        if (got + (size_t)n < head_size) {
            memcpy(head + got, buf, (size_t)n);
            got += (size_t)n;
            head[got] = '\0';
        }
        end = strstr(head, "\r\n\r\n");
        if (!end)
            continue;
        if (need < 0) {
            cl = find_ci(head, "\r\ncontent-length:");
            need = cl ? strtol(cl + 17, NULL, 10) : 0;
        }
        if ((long)(got - (size_t)(end + 4 - head)) >= need)
            return;
    }
}

static void *
canned_thread(void *arg)
{
    struct canned *c = arg;

    for (;;) {
        char head[8192] = "", response[1024], block[65536];
        size_t stream, sent = 0;
        int conn = accept(c->fd, NULL, NULL);

        if (conn < 0)
            return NULL; /* listener shut down */
        read_request(conn, head, sizeof(head));
        pthread_mutex_lock(&c->lock);
        memcpy(c->last_request, head, sizeof(head));
        memcpy(response, c->response, sizeof(response));
        stream = c->stream_bytes;
        pthread_mutex_unlock(&c->lock);
        send(conn, response, strlen(response), MSG_NOSIGNAL);
        memset(block, 'a', sizeof(block));
        while (sent < stream) {
            ssize_t n = send(conn, block, sizeof(block), MSG_NOSIGNAL);

            if (n <= 0)
                break; /* the client gave up, as it should */
            sent += (size_t)n;
        }
        close(conn);
    }
}

static void
canned_start(struct canned *c)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);

    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    RL_REQUIRE(c->fd >= 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    RL_REQUIRE(bind(c->fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    RL_REQUIRE(listen(c->fd, 16) == 0);
    RL_REQUIRE(getsockname(c->fd, (struct sockaddr *)&addr, &len) == 0);
    c->port = ntohs(addr.sin_port);
    RL_REQUIRE(pthread_create(&c->thread, NULL, canned_thread, c) == 0);
}

static void
canned_set(struct canned *c, const char *response, size_t stream_bytes)
{
    pthread_mutex_lock(&c->lock);
    snprintf(c->response, sizeof(c->response), "%s", response);
    c->stream_bytes = stream_bytes;
    pthread_mutex_unlock(&c->lock);
}

/* head: status line and headers without Content-Length or the blank line. */
static void
canned_set_body(struct canned *c, const char *head, const char *body)
{
    char response[1024];

    snprintf(response, sizeof(response),
             "%sConnection: close\r\nContent-Length: %zu\r\n\r\n%s", head,
             strlen(body), body);
    canned_set(c, response, 0);
}

static void
canned_stop(struct canned *c)
{
    shutdown(c->fd, SHUT_RDWR);
    close(c->fd);
    pthread_join(c->thread, NULL);
    pthread_mutex_destroy(&c->lock);
}

/* ---- cases ------------------------------------------------------------- */

static void
test_normal_call_is_ok_with_text_tokens_request_id_and_key(struct rl_model *m)
{
    char run_id[160];
    struct tcall tc;
    struct rl_model_call *call;
    long long requests, generations;
    char *output;

    prepare(&tc, run_id, sizeof(run_id), "ok", "Say hello.");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_OK);
    RL_CHECK_INTEQ(call->http_status, 200);
    RL_CHECK(call->text && strstr(call->text, "Stub model answer"));
    RL_CHECK(call->text && strstr(call->text, run_id)); /* key echoed back */
    RL_CHECK_STREQ(call->model_name, "gpt-test");
    RL_CHECK(call->prompt_tokens > 0);
    RL_CHECK(call->completion_tokens > 0);
    RL_CHECK_INTEQ(call->cached_tokens, 0);
    /* The answer's own id, not the x-request-id header beside it. */
    RL_CHECK(strncmp(call->upstream_request_id, "chatcmpl-", 9) == 0);
    RL_CHECK_INTEQ(call->request_sent, 1);
    RL_CHECK_INTEQ(call->retry_after_ms, -1);
    RL_CHECK(call->latency_ms >= 0 && call->latency_ms < 5000);
    RL_CHECK_STREQ(call->error, "");
    output = rl_model_output_json(call);
    RL_CHECK(output && strstr(output, call->upstream_request_id));
    free(output);

    /* The Idempotency-Key arrived: the stub counted this run_id. */
    key_stats(run_id, &requests, &generations);
    RL_CHECK_INTEQ(requests, 1);
    RL_CHECK_INTEQ(generations, 1);

    /* A retry of the same run carries the same key. */
    rl_model_call_clear(call);
    prepare(&tc, run_id, sizeof(run_id), "ok", "Say hello.");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_OK);
    key_stats(run_id, &requests, &generations);
    RL_CHECK_INTEQ(requests, 2);
    rl_model_call_clear(call);
}

static void
test_500_concurrent_calls_complete_in_parallel(struct rl_model *m)
{
    enum { N = 500 };
    static struct tcall tcs[N];
    static char ids[N][160];
    size_t peak = 0;
    int64_t t0, elapsed;
    int before = done_count(), ok = 0, got;
    cJSON *stats;
    long long max_in_flight;

    for (int i = 0; i < N; i++) {
        char name[32];

        snprintf(name, sizeof(name), "conc-%d", i);
        prepare(&tcs[i], ids[i], sizeof(ids[i]), name,
                "Work slowly. [[fault:latency ms=300]]");
    }
    t0 = rltest_now_ms();
    for (int i = 0; i < N; i++) {
        size_t now;

        RL_REQUIRE(rl_model_submit(m, &tcs[i].call) == 0);
        now = rl_model_in_flight(m);
        if (now > peak)
            peak = now;
    }
    got = wait_done(before + N, 60000);
    elapsed = rltest_now_ms() - t0;
    RL_CHECK_INTEQ(got - before, N);
    for (int i = 0; i < N; i++) {
        ok += tcs[i].call.outcome == RL_MODEL_OK;
        remember_error(tcs[i].call.error);
        rl_model_call_clear(&tcs[i].call);
    }
    RL_CHECK_INTEQ(ok, N);
    RL_CHECK(peak > 100);
    stats = get_stats(NULL);
    max_in_flight = stats_number(stats, "max_in_flight");
    cJSON_Delete(stats);
    RL_CHECK(max_in_flight > 100);
    /* One at a time this would take 150 s. */
    RL_CHECK(elapsed < 10000);
    fprintf(stderr,
            "  figure: %d calls x 300 ms: %lld ms wall, client in-flight "
            "peak %zu, stub max_in_flight %lld\n",
            N, (long long)elapsed, peak, max_in_flight);
}

/* More calls than one multi handle carries (model_int.h's SHARD_CALLS, 256):
 * answers, timeouts and cancels spread over every shard, each delivered on
 * time by its own shard's sockets and timers. The answers take 4 s, so a
 * timer or a cancel that only fired with its shard's next socket activity
 * would show up as a 4 s call. */
static void
test_calls_on_every_multi_handle_answer_time_out_and_cancel(struct rl_model *m)
{
    enum { N = 800, EVERY = 8 };
    static struct tcall tcs[N];
    static char ids[N][160];
    int before = done_count(), got, ok = 0, timed_out = 0, cancelled = 0;
    int64_t t0, t_cancel, slowest_timeout = 0, slowest_cancel = 0;

    for (int i = 0; i < N; i++) {
        char name[32];
        const char *content = "Work slowly. [[fault:latency ms=4000]]";

        snprintf(name, sizeof(name), "shards-%d", i);
        if (i % EVERY == 1 || i % EVERY == 5)
            content = "[[fault:hang]]";
        prepare(&tcs[i], ids[i], sizeof(ids[i]), name, content);
        /* 1 s for the hanging calls that time out, a minute for the ones
         * cancelled, and for the answers. */
        tcs[i].call.timeout_ms = i % EVERY == 1 ? 1000 : 60000;
    }
    t0 = rltest_now_ms();
    for (int i = 0; i < N; i++)
        RL_REQUIRE(rl_model_submit(m, &tcs[i].call) == 0);
    /* The calls to cancel have all reached the stub (it holds them)
     * before the cancels, so each one aborts a transfer on its shard. */
    for (int i = 5; i < N; i += EVERY) {
        int64_t end = rltest_now_ms() + 20000;
        long long requests, generations;

        key_stats(ids[i], &requests, &generations);
        while (requests < 1 && rltest_now_ms() < end) {
            sleep_ms(20);
            key_stats(ids[i], &requests, &generations);
        }
        RL_REQUIRE(requests == 1);
    }
    t_cancel = rltest_now_ms();
    for (int i = 5; i < N; i += EVERY)
        RL_CHECK_INTEQ(rl_model_cancel(m, &tcs[i].call), 0);
    got = wait_done(before + N, 60000);
    RL_CHECK_INTEQ(got - before, N);
    for (int i = 0; i < N; i++) {
        struct rl_model_call *call = &tcs[i].call;

        remember_error(call->error);
        if (i % EVERY == 1) {
            timed_out += call->outcome == RL_MODEL_AMBIGUOUS;
            if (tcs[i].done_ms - t0 > slowest_timeout)
                slowest_timeout = tcs[i].done_ms - t0;
        } else if (i % EVERY == 5) {
            cancelled += call->outcome == RL_MODEL_CANCELLED;
            if (tcs[i].done_ms - t_cancel > slowest_cancel)
                slowest_cancel = tcs[i].done_ms - t_cancel;
        } else {
            ok += call->outcome == RL_MODEL_OK;
        }
        rl_model_call_clear(call);
    }
    fprintf(stderr,
            "  figure: %d calls: slowest 1 s timeout delivered at %lld ms, "
            "slowest cancel %lld ms after it was asked\n",
            N, (long long)slowest_timeout, (long long)slowest_cancel);
    RL_CHECK_INTEQ(ok, N - 2 * (N / EVERY));
    RL_CHECK_INTEQ(timed_out, N / EVERY);
    RL_CHECK_INTEQ(cancelled, N / EVERY);
    RL_CHECK(slowest_timeout < 3000);
    RL_CHECK(slowest_cancel < 2000);
}

static void
test_429_with_retry_after_is_transient(struct rl_model *m)
{
    char run_id[160];
    struct tcall tc;
    struct rl_model_call *call;

    prepare(&tc, run_id, sizeof(run_id), "429", "[[fault:429 retry_after=2]]");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_TRANSIENT);
    RL_CHECK_INTEQ(call->http_status, 429);
    RL_CHECK_INTEQ(call->retry_after_ms, 2000);
    RL_CHECK_INTEQ(call->request_sent, 1);
    RL_CHECK(call->text == NULL);
    RL_CHECK(strstr(call->error, "429") != NULL);
    rl_model_call_clear(call);
}

static void
test_status_classes(struct rl_model *m)
{
    static const struct {
        const char *name, *directive;
        long status;
        enum rl_model_outcome outcome;
    } cases[] = {
        {"500", "[[fault:500]]", 500, RL_MODEL_TRANSIENT},
        {"503", "[[fault:503]]", 503, RL_MODEL_TRANSIENT},
        {"400", "[[fault:400]]", 400, RL_MODEL_PERMANENT},
        {"401", "[[fault:401]]", 401, RL_MODEL_PERMANENT},
        {"422", "[[fault:422]]", 422, RL_MODEL_PERMANENT},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char run_id[160];
        struct tcall tc;
        struct rl_model_call *call;

        prepare(&tc, run_id, sizeof(run_id), cases[i].name, cases[i].directive);
        call = run_one(m, &tc, 10000);
        RL_CHECK_INTEQ(call->outcome, cases[i].outcome);
        RL_CHECK_INTEQ(call->http_status, cases[i].status);
        RL_CHECK_INTEQ(call->retry_after_ms, -1);
        RL_CHECK(strstr(call->error, "stub injected fault") != NULL);
        rl_model_call_clear(call);
    }
}

static void
test_hang_past_timeout_is_ambiguous_after_send(struct rl_model *m)
{
    char run_id[160];
    struct tcall tc;
    struct rl_model_call *call;
    long long requests, generations;

    prepare(&tc, run_id, sizeof(run_id), "hang", "[[fault:hang]]");
    tc.call.timeout_ms = 1000;
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_AMBIGUOUS);
    RL_CHECK_INTEQ(call->request_sent, 1);
    RL_CHECK_INTEQ(call->http_status, 0);
    RL_CHECK(call->latency_ms >= 900 && call->latency_ms < 3000);
    /* The stub did generate: exactly why this is ambiguous. */
    key_stats(run_id, &requests, &generations);
    RL_CHECK_INTEQ(generations, 1);
    rl_model_call_clear(call);
}

static void
test_closed_port_is_not_sent(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char url[64], run_id[160];
    struct rl_model *m;
    struct tcall tc;
    struct rl_model_call *call;

    RL_REQUIRE(fd >= 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    RL_REQUIRE(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    RL_REQUIRE(getsockname(fd, (struct sockaddr *)&addr, &len) == 0);
    close(fd); /* nobody listens there now */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", ntohs(addr.sin_port));

    m = model_new(url, 5000, 0);
    prepare(&tc, run_id, sizeof(run_id), "closed", "Hello?");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_NOT_SENT);
    RL_CHECK_INTEQ(call->request_sent, 0);
    RL_CHECK_INTEQ(call->http_status, 0);
    RL_CHECK(call->error[0] != '\0');
    rl_model_call_clear(call);
    rl_model_destroy(m);
}

static void
test_close_mid_body_is_ambiguous(struct rl_model *m)
{
    char run_id[160];
    struct tcall tc;
    struct rl_model_call *call;

    prepare(&tc, run_id, sizeof(run_id), "midbody", "[[fault:close_mid_body]]");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_AMBIGUOUS);
    RL_CHECK_INTEQ(call->request_sent, 1);
    RL_CHECK(call->text == NULL);
    rl_model_call_clear(call);
}

static void
test_bad_2xx_bodies_are_invalid_output(struct rl_model *m)
{
    static const char *const cases[][2] = {
        {"empty", "[[fault:empty]]"},
        {"badjson", "[[fault:invalid_json]]"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char run_id[160];
        struct tcall tc;
        struct rl_model_call *call;

        prepare(&tc, run_id, sizeof(run_id), cases[i][0], cases[i][1]);
        call = run_one(m, &tc, 10000);
        RL_CHECK_INTEQ(call->outcome, RL_MODEL_INVALID_OUTPUT);
        RL_CHECK_INTEQ(call->http_status, 200);
        RL_CHECK(call->text == NULL);
        RL_CHECK(call->upstream_request_id[0] != '\0');
        rl_model_call_clear(call);
    }
}

static void
test_tool_call_answer_is_ok_and_no_content_is_invalid(struct rl_model *m)
{
    char run_id[160];
    struct tcall tc;
    struct rl_model_call *call;
    cJSON *out, *calls;
    char *output;

    prepare(&tc, run_id, sizeof(run_id), "toolcall",
            "Look it up. [[fault:tool_call]]");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_OK);
    RL_CHECK(call->text == NULL);
    RL_CHECK(call->tool_calls && strstr(call->tool_calls, "\"lookup\""));
    RL_CHECK_STREQ(call->model_name, "gpt-test");
    RL_CHECK(call->completion_tokens > 0);
    output = rl_model_output_json(call);
    out = output ? cJSON_Parse(output) : NULL;
    RL_REQUIRE(out);
    RL_CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(out, "text")));
    calls = cJSON_GetObjectItemCaseSensitive(out, "tool_calls");
    RL_CHECK(cJSON_IsArray(calls) && cJSON_GetArraySize(calls) == 1);
    RL_CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(
                       cJSON_GetObjectItemCaseSensitive(
                           cJSON_GetArrayItem(calls, 0), "function"),
                       "name")
                       ->valuestring,
                   "lookup");
    cJSON_Delete(out);
    free(output);
    rl_model_call_clear(call);

    prepare(&tc, run_id, sizeof(run_id), "nocontent", "[[fault:no_content]]");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_INVALID_OUTPUT);
    RL_CHECK(call->text == NULL && call->tool_calls == NULL);
    RL_CHECK(strstr(call->error, "neither") != NULL);
    RL_CHECK(rl_model_output_json(call) == NULL);
    rl_model_call_clear(call);
}

/* A gateway's or Azure's request id is kept on a failed attempt too, in
 * the documented order; a 2xx answer's own "id" beats every header. */
static void
test_request_id_from_answer_else_headers_in_order(struct canned *canned)
{
    static const struct {
        const char *head, *body, *want;
    } cases[] = {
        {"HTTP/1.1 503 Service Unavailable\r\n"
         "apim-request-id: apim-1\r\nx-litellm-call-id: lite-1\r\n",
         "", "lite-1"},
        {"HTTP/1.1 502 Bad Gateway\r\napim-request-id: apim-2\r\n"
         "Request-Id: rid-2\r\n",
         "{}", "rid-2"},
        {"HTTP/1.1 400 Bad Request\r\napim-request-id: apim-3\r\n",
         "{\"error\":{\"message\":\"bad\"}}", "apim-3"},
        {"HTTP/1.1 200 OK\r\nx-request-id: hdr-4\r\n"
         "x-litellm-call-id: lite-4\r\n",
         "{\"id\":\"chatcmpl-4\",\"choices\":[{\"message\":{\"content\":"
         "\"hi\"}}]}",
         "chatcmpl-4"},
        {"HTTP/1.1 200 OK\r\napim-request-id: apim-5\r\n",
         "{\"choices\":[{\"message\":{\"content\":\"hi\"}}]}", "apim-5"},
        {"HTTP/1.1 200 OK\r\nx-litellm-call-id: lite-6\r\n",
         "{\"id\":\"chatcmpl-6\",\"choices\":[{\"message\":{\"content\":"
         "null}}]}",
         "chatcmpl-6"},
    };
    char url[64], run_id[160];
    struct rl_model *m;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", canned->port);
    m = model_new(url, 10000, 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tcall tc;
        struct rl_model_call *call;

        canned_set_body(canned, cases[i].head, cases[i].body);
        prepare(&tc, run_id, sizeof(run_id), "reqid", "Hello");
        call = run_one(m, &tc, 10000);
        RL_CHECK(call->outcome != RL_MODEL_CANCELLED);
        RL_CHECK_STREQ(call->upstream_request_id, cases[i].want);
        rl_model_call_clear(call);
    }
    rl_model_destroy(m);
}

/* An endpoint's multi-line error stays readable (escaped, not "??"), and
 * the key it echoes right where call->error is cut leaks no prefix. */
static void
test_error_text_escaped_and_key_redacted_across_the_cut(struct canned *canned)
{
    char url[64], run_id[160], body[900], pad[300];
    struct rl_model *m;
    struct tcall tc;
    struct rl_model_call *call;
    size_t prefix = strlen("model endpoint returned http 401: ");

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", canned->port);
    m = model_new(url, 10000, 0);

    canned_set_body(canned, "HTTP/1.1 400 Bad Request\r\n",
                    "{\"error\":{\"message\":\"line one\\nline two\\r\\n"
                    "\\ttabbed \\u0001 \\u00e9t\u00e9 back\\\\slash\"}}");
    prepare(&tc, run_id, sizeof(run_id), "escaped", "Hello");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_PERMANENT);
    RL_CHECK_STREQ(call->error, "model endpoint returned http 400: line "
                                "one\\nline two\\r\\n\\ttabbed \\x01 "
                                "\u00e9t\u00e9 back\\\\slash");
    RL_CHECK(strchr(call->error, '?') == NULL);
    rl_model_call_clear(call);

    /* The key starts 6 bytes before the last byte call->error can hold:
     * cut first, "sk-can" would survive. */
    for (size_t cut = 6; cut <= 12; cut += 6) {
        size_t n = sizeof(call->error) - 1 - prefix - cut;

        memset(pad, 'p', n);
        pad[n] = '\0';
        snprintf(body, sizeof(body),
                 "{\"error\":{\"message\":\"%s%s is not a valid key\"}}", pad,
                 canary_key);
        canned_set_body(canned, "HTTP/1.1 401 Unauthorized\r\n", body);
        prepare(&tc, run_id, sizeof(run_id), "cutkey", "Hello");
        call = run_one(m, &tc, 10000);
        RL_CHECK_INTEQ(call->outcome, RL_MODEL_PERMANENT);
        RL_CHECK_INTEQ(strlen(call->error), sizeof(call->error) - 1);
        RL_CHECK(strstr(call->error, "sk-can") == NULL);
        RL_CHECK(strstr(call->error, "[redac") != NULL);
        rl_model_call_clear(call);
    }

    /* The endpoint masked the key ("sk-cana****") right at the cut: what
     * is kept ends in the key's start. */
    memset(pad, 'q', 280);
    pad[280] = '\0';
    snprintf(body, sizeof(body),
             "{\"error\":{\"message\":\"%.*s%.*s**** is not valid\"}}",
             (int)(sizeof(call->error) - 1 - prefix - 7), pad, 7, canary_key);
    canned_set_body(canned, "HTTP/1.1 401 Unauthorized\r\n", body);
    prepare(&tc, run_id, sizeof(run_id), "endkey", "Hello");
    call = run_one(m, &tc, 10000);
    RL_CHECK(strstr(call->error, "sk-cana") == NULL);
    rl_model_call_clear(call);
    rl_model_destroy(m);
}

static void
test_oversize_is_invalid_output_without_memory_growth(struct canned *canned)
{
    const size_t cap = 1024 * 1024;
    struct rl_model *m = model_new(base_url, 30000, cap);
    char run_id[160], url[64];
    struct tcall tc;
    struct rl_model_call *call;
    long before, after;

    /* Declared length over the cap (the stub sends Content-Length). */
    before = rss_kib();
    prepare(&tc, run_id, sizeof(run_id), "oversize",
            "[[fault:oversize bytes=8000000]]");
    call = run_one(m, &tc, 20000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_INVALID_OUTPUT);
    RL_CHECK(strstr(call->error, "larger than") != NULL);
    rl_model_call_clear(call);
    rl_model_destroy(m);

    /* Unknown length (no Content-Length, read to close): 64 MiB offered,
     * where libcurl 7.88's MAXFILESIZE would not help. */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", canned->port);
    m = model_new(url, 30000, cap);
    canned_set(canned,
               "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               "Connection: close\r\n\r\n",
               64u * 1024 * 1024);
    prepare(&tc, run_id, sizeof(run_id), "stream-oversize", "Hello");
    call = run_one(m, &tc, 20000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_INVALID_OUTPUT);
    RL_CHECK(strstr(call->error, "larger than") != NULL);
    rl_model_call_clear(call);
    rl_model_destroy(m);
    after = rss_kib();
    fprintf(stderr, "  figure: RSS %ld KiB -> %ld KiB across oversize cases\n",
            before, after);
    RL_CHECK(before > 0 && after > 0);
    RL_CHECK(after - before < 16 * 1024);
}

static void
test_cancel_of_hanging_call_is_prompt(struct rl_model *m)
{
    char run_id[160];
    struct tcall tc;
    int before = done_count();
    int64_t t_cancel;

    prepare(&tc, run_id, sizeof(run_id), "cancel", "[[fault:hang]]");
    tc.call.timeout_ms = 60000;
    RL_REQUIRE(rl_model_submit(m, &tc.call) == 0);
    sleep_ms(300);
    RL_CHECK_INTEQ(done_count(), before); /* still hanging */
    t_cancel = rltest_now_ms();
    RL_CHECK_INTEQ(rl_model_cancel(m, &tc.call), 0);
    RL_REQUIRE(wait_done(before + 1, 5000) == before + 1);
    fprintf(stderr, "  figure: cancel delivered in %lld ms\n",
            (long long)(tc.done_ms - t_cancel));
    RL_CHECK(tc.done_ms - t_cancel < 200);
    RL_CHECK_INTEQ(tc.call.outcome, RL_MODEL_CANCELLED);
    RL_CHECK_INTEQ(tc.call.request_sent, 1);
    RL_CHECK(tc.call.text == NULL);
    remember_error(tc.call.error);
    /* Delivered once: a second cancel finds nothing. */
    RL_CHECK_INTEQ(rl_model_cancel(m, &tc.call), RL_ERR_NOTFOUND);
    rl_model_call_clear(&tc.call);
}

static void
test_key_is_sent_but_never_echoed_into_errors(struct canned *canned)
{
    char url[64], run_id[160], response[512], last[8192];
    struct rl_model *m;
    struct tcall tc;
    struct rl_model_call *call;
    char date[64];
    time_t later = time(NULL) + 30;
    struct tm tm;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", canned->port);
    m = model_new(url, 10000, 0);

    /* An endpoint that quotes the key back in its error message. */
    snprintf(response, sizeof(response),
             "{\"error\":{\"message\":\"Incorrect API key provided: %s\"}}",
             canary_key);
    canned_set_body(canned,
                    "HTTP/1.1 401 Unauthorized\r\n"
                    "Content-Type: application/json\r\n",
                    response);
    prepare(&tc, run_id, sizeof(run_id), "canary", "Hello");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_PERMANENT);
    RL_CHECK_INTEQ(call->http_status, 401);
    RL_CHECK(strstr(call->error, "Incorrect API key provided") != NULL);
    RL_CHECK(strstr(call->error, "[redacted]") != NULL);
    RL_CHECK(strstr(call->error, canary_key) == NULL);
    pthread_mutex_lock(&canned->lock);
    memcpy(last, canned->last_request, sizeof(last));
    pthread_mutex_unlock(&canned->lock);
    /* ... while the request itself did carry it, and the run's key. */
    RL_CHECK(strstr(last, canary_key) != NULL);
    RL_CHECK(strstr(last, "Idempotency-Key: ") != NULL);
    RL_CHECK(strstr(last, run_id) != NULL);
    RL_CHECK(strstr(last, "POST /v1/chat/completions HTTP/1.1") != NULL);
    RL_CHECK(find_ci(last, "expect: 100") == NULL);
    rl_model_call_clear(call);

    /* Retry-After as an HTTP-date, 30 s ahead. */
    gmtime_r(&later, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    snprintf(response, sizeof(response),
             "HTTP/1.1 503 Service Unavailable\r\nRetry-After: %s\r\n", date);
    canned_set_body(canned, response, "");
    prepare(&tc, run_id, sizeof(run_id), "retry-date", "Hello");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_TRANSIENT);
    RL_CHECK(call->retry_after_ms >= 28000 && call->retry_after_ms <= 31000);
    rl_model_call_clear(call);

    /* A 200 whose x-request-id is missing falls back to the response id. */
    canned_set_body(
        canned, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n",
        "{\"id\":\"chatcmpl-canned\",\"model\":\"m-canned\",\"choices\":"
        "[{\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}}],"
        "\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":1,"
        "\"prompt_tokens_details\":{\"cached_tokens\":5}}}");
    prepare(&tc, run_id, sizeof(run_id), "canned-ok", "Hello");
    call = run_one(m, &tc, 10000);
    RL_CHECK_INTEQ(call->outcome, RL_MODEL_OK);
    RL_CHECK_STREQ(call->text, "hi");
    RL_CHECK_STREQ(call->upstream_request_id, "chatcmpl-canned");
    RL_CHECK_INTEQ(call->prompt_tokens, 7);
    RL_CHECK_INTEQ(call->cached_tokens, 5);
    rl_model_call_clear(call);
    rl_model_destroy(m);

    RL_CHECK(strstr(seen_errors, canary_key) == NULL);
}

int
main(void)
{
    struct canned canned;
    struct rl_model *m;
    size_t len;

    base_url = rltest_service_env("MODEL_BASE_URL");
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    /* http://host:port/v1 -> http://host:port/stats */
    snprintf(stats_url, sizeof(stats_url), "%s", base_url);
    len = strlen(stats_url);
    while (len > 0 && stats_url[len - 1] == '/')
        stats_url[--len] = '\0';
    if (len >= 3 && strcmp(stats_url + len - 3, "/v1") == 0)
        stats_url[len - 3] = '\0';
    strncat(stats_url, "/stats", sizeof(stats_url) - strlen(stats_url) - 1);

    /* Unique per process: parallel runs never share a run_id or key. */
    snprintf(run_prefix, sizeof(run_prefix), "%s", rltest_unique("mstub"));
    snprintf(canary_key, sizeof(canary_key), "sk-canary-%s",
             rltest_unique("key"));

    canned_start(&canned);
    m = model_new(base_url, 30000, 0);

    test_normal_call_is_ok_with_text_tokens_request_id_and_key(m);
    test_500_concurrent_calls_complete_in_parallel(m);
    test_calls_on_every_multi_handle_answer_time_out_and_cancel(m);
    test_429_with_retry_after_is_transient(m);
    test_status_classes(m);
    test_hang_past_timeout_is_ambiguous_after_send(m);
    test_closed_port_is_not_sent();
    test_close_mid_body_is_ambiguous(m);
    test_bad_2xx_bodies_are_invalid_output(m);
    test_cancel_of_hanging_call_is_prompt(m);
    test_oversize_is_invalid_output_without_memory_growth(&canned);
    test_key_is_sent_but_never_echoed_into_errors(&canned);
    test_tool_call_answer_is_ok_and_no_content_is_invalid(m);
    test_request_id_from_answer_else_headers_in_order(&canned);
    test_error_text_escaped_and_key_redacted_across_the_cut(&canned);

    RL_CHECK_INTEQ(rl_model_in_flight(m), 0);
    rl_model_destroy(m);
    canned_stop(&canned);
    curl_global_cleanup();
    RL_TEST_END();
}
