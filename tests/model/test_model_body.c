/* Unit tests of the model client without any service: the body POSTed for a
 * run, the output stored for it, outcome names, config and argument checks,
 * and that destroy delivers every pending call as cancelled. */

#include "rl/err.h"
#include "rl/model.h"
#include "rl/testing.h"
#include "rltest.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

static const char *const REQUEST =
    "{\"notify\":[\"email\",\"slack\"],"
    "\"request\":{\"model\":\"gpt-test\",\"temperature\":0,"
    "\"messages\":["
    "{\"role\":\"system\",\"content\":\"You summarise.\"},"
    "{\"role\":\"user\",\"content\":\"Summarise {{input}} then {{input}}.\"}"
    "],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}}";

static const char *const REQUEST_NO_PLACEHOLDER =
    "{\"notify\":[],\"request\":{\"model\":\"m\",\"messages\":["
    "{\"role\":\"user\",\"content\":\"Summarise the input.\"}]}}";

/* The parsed body, or NULL; the test owns it. */
static cJSON *
body_of(const char *request, const char *raw, char *errstr, size_t size)
{
    char *body = rl_model_build_body(request, raw, errstr, size);
    cJSON *root;

    if (!body)
        return NULL;
    root = cJSON_Parse(body);
    free(body);
    return root;
}

static const char *
message_content(const cJSON *body, int i)
{
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(body, "messages");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(messages, i), "content");

    return cJSON_IsString(content) ? content->valuestring : NULL;
}

static int
message_count(const cJSON *body)
{
    return cJSON_GetArraySize(
        cJSON_GetObjectItemCaseSensitive(body, "messages"));
}

static void
test_placeholder_is_replaced_everywhere_and_nothing_appended(void)
{
    char errstr[256] = "";
    cJSON *body = body_of(REQUEST, "{\"q\":\"x\"}", errstr, sizeof(errstr));

    RL_REQUIRE(body);
    RL_CHECK_INTEQ(message_count(body), 2);
    RL_CHECK_STREQ(message_content(body, 0), "You summarise.");
    RL_CHECK_STREQ(message_content(body, 1),
                   "Summarise {\"q\":\"x\"} then {\"q\":\"x\"}.");
    RL_CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(body, "stream")));
    /* the "request" object only: notify stays out of the body */
    RL_CHECK(!cJSON_GetObjectItemCaseSensitive(body, "notify"));
    RL_CHECK(!cJSON_GetObjectItemCaseSensitive(body, "request"));
    RL_CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(body, "model")->valuestring,
                   "gpt-test");
    RL_CHECK(
        cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(body, "temperature")));
    RL_CHECK_INTEQ(
        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(body, "tools")), 1);
    cJSON_Delete(body);
}

static void
test_input_without_placeholder_is_appended_as_last_user_message(void)
{
    char errstr[256] = "";
    cJSON *body =
        body_of(REQUEST_NO_PLACEHOLDER, "[1,2,3]", errstr, sizeof(errstr));
    const cJSON *last;

    RL_REQUIRE(body);
    RL_CHECK_INTEQ(message_count(body), 2);
    last = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(body, "messages"), 1);
    RL_CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(last, "role")->valuestring,
                   "user");
    RL_CHECK_STREQ(message_content(body, 1), "Input:\n[1,2,3]");
    cJSON_Delete(body);
}

static void
test_null_input_appends_nothing(void)
{
    const char *raws[] = {NULL, "null", "  null\n"};

    for (size_t i = 0; i < sizeof(raws) / sizeof(raws[0]); i++) {
        char errstr[256] = "";
        cJSON *body =
            body_of(REQUEST_NO_PLACEHOLDER, raws[i], errstr, sizeof(errstr));

        RL_REQUIRE(body);
        RL_CHECK_INTEQ(message_count(body), 1);
        cJSON_Delete(body);
    }
}

static void
test_placeholder_with_null_input_becomes_null(void)
{
    char errstr[256] = "";
    cJSON *body = body_of(REQUEST, NULL, errstr, sizeof(errstr));

    RL_REQUIRE(body);
    RL_CHECK_STREQ(message_content(body, 1), "Summarise null then null.");
    RL_CHECK_INTEQ(message_count(body), 2);
    cJSON_Delete(body);
}

static void
test_stream_is_forced_false_and_stream_options_dropped(void)
{
    const char *req = "{\"request\":{\"model\":\"m\",\"stream\":true,"
                      "\"stream_options\":{\"include_usage\":true},"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}}";
    char errstr[256] = "";
    cJSON *body = body_of(req, NULL, errstr, sizeof(errstr));

    RL_REQUIRE(body);
    RL_CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(body, "stream")));
    RL_CHECK(!cJSON_GetObjectItemCaseSensitive(body, "stream_options"));
    cJSON_Delete(body);
}

static void
test_text_parts_are_substituted_other_parts_untouched(void)
{
    const char *req =
        "{\"request\":{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"A {{input}} B\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"{{input}}\"}}]}]}}";
    char errstr[256] = "";
    cJSON *body = body_of(req, "42", errstr, sizeof(errstr));
    const cJSON *parts;

    RL_REQUIRE(body);
    RL_CHECK_INTEQ(message_count(body), 1); /* found: nothing appended */
    parts = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(body, "messages"),
                           0),
        "content");
    RL_CHECK_STREQ(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(parts, 0), "text")
            ->valuestring,
        "A 42 B");
    RL_CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(
                       cJSON_GetObjectItemCaseSensitive(
                           cJSON_GetArrayItem(parts, 1), "image_url"),
                       "url")
                       ->valuestring,
                   "{{input}}");
    cJSON_Delete(body);
}

static void
test_input_with_quotes_newlines_and_utf8_round_trips(void)
{
    const char *raw =
        "{\"s\":\"a \\\"q\\\"\\nb\",\"u\":\"caf\xc3\xa9 \xe2\x82\xac\"}";
    char errstr[256] = "", expect[256];
    cJSON *body = body_of(REQUEST, raw, errstr, sizeof(errstr));

    RL_REQUIRE(body);
    snprintf(expect, sizeof(expect), "Summarise %s then %s.", raw, raw);
    RL_CHECK_STREQ(message_content(body, 1), expect);
    cJSON_Delete(body);
}

static void
test_same_inputs_give_the_same_bytes(void)
{
    char errstr[256] = "";
    char *a = rl_model_build_body(REQUEST, "{\"k\":1}", errstr, sizeof(errstr));
    char *b = rl_model_build_body(REQUEST, "{\"k\":1}", errstr, sizeof(errstr));

    RL_CHECK_STREQ(a, b);
    free(a);
    free(b);
}

static void
test_bad_requests_are_rejected_with_a_reason(void)
{
    const char *bad[] = {
        NULL,
        "not json",
        "{\"notify\":[]}",
        "{\"request\":[]}",
        "{\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}}",
        "{\"request\":{\"model\":\"\",\"messages\":[{\"role\":\"user\"}]}}",
        "{\"request\":{\"model\":\"m\"}}",
        "{\"request\":{\"model\":\"m\",\"messages\":[]}}",
        "{\"request\":{\"model\":\"m\",\"messages\":[\"hi\"]}}",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char errstr[256] = "";
        char *body = rl_model_build_body(bad[i], "1", errstr, sizeof(errstr));

        RL_CHECK(body == NULL);
        RL_CHECK(errstr[0] >= 'a' && errstr[0] <= 'z');
        free(body);
    }
}

static void
test_output_json_has_text_model_request_id_and_usage(void)
{
    struct rl_model_call call;
    char *json;
    cJSON *out, *usage;

    memset(&call, 0, sizeof(call));
    call.outcome = RL_MODEL_OK;
    call.text = strdup("the answer \"quoted\"\n");
    call.model_name = strdup("gpt-test-2026");
    snprintf(call.upstream_request_id, sizeof(call.upstream_request_id),
             "req-123");
    call.prompt_tokens = 1200;
    call.completion_tokens = 34;
    call.cached_tokens = 1024;
    json = rl_model_output_json(&call);
    RL_REQUIRE(json);
    out = cJSON_Parse(json);
    RL_REQUIRE(out);
    RL_CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(out, "text")->valuestring,
                   "the answer \"quoted\"\n");
    RL_CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(out, "model")->valuestring,
                   "gpt-test-2026");
    RL_CHECK_STREQ(cJSON_GetObjectItemCaseSensitive(out, "upstream_request_id")
                       ->valuestring,
                   "req-123");
    usage = cJSON_GetObjectItemCaseSensitive(out, "usage");
    RL_CHECK_INTEQ(
        cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens")->valuedouble,
        1200);
    RL_CHECK_INTEQ(cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens")
                       ->valuedouble,
                   34);
    RL_CHECK_INTEQ(
        cJSON_GetObjectItemCaseSensitive(usage, "cached_tokens")->valuedouble,
        1024);
    /* integers stay integers in the stored text */
    RL_CHECK(strstr(json, "\"prompt_tokens\":1200,") != NULL);
    cJSON_Delete(out);
    free(json);

    /* unknown model and request id are null, not "" */
    free(call.model_name);
    call.model_name = NULL;
    call.upstream_request_id[0] = '\0';
    json = rl_model_output_json(&call);
    RL_REQUIRE(json);
    out = cJSON_Parse(json);
    RL_CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(out, "model")));
    RL_CHECK(cJSON_IsNull(
        cJSON_GetObjectItemCaseSensitive(out, "upstream_request_id")));
    cJSON_Delete(out);
    free(json);

    rl_model_call_clear(&call);
    RL_CHECK(call.text == NULL && call.model_name == NULL);
    RL_CHECK_INTEQ(call.retry_after_ms, -1);
}

static void
test_output_json_is_null_unless_ok(void)
{
    struct rl_model_call call;

    memset(&call, 0, sizeof(call));
    call.outcome = RL_MODEL_OK;
    RL_CHECK(rl_model_output_json(&call) == NULL); /* no text */
    call.text = strdup("x");
    call.outcome = RL_MODEL_AMBIGUOUS;
    RL_CHECK(rl_model_output_json(&call) == NULL);
    RL_CHECK(rl_model_output_json(NULL) == NULL);
    rl_model_call_clear(&call);
    rl_model_call_clear(NULL);
}

static void
test_outcome_names_are_stable(void)
{
    RL_CHECK_STREQ(rl_model_outcome_name(RL_MODEL_OK), "ok");
    RL_CHECK_STREQ(rl_model_outcome_name(RL_MODEL_TRANSIENT), "transient");
    RL_CHECK_STREQ(rl_model_outcome_name(RL_MODEL_PERMANENT), "permanent");
    RL_CHECK_STREQ(rl_model_outcome_name(RL_MODEL_NOT_SENT), "not_sent");
    RL_CHECK_STREQ(rl_model_outcome_name(RL_MODEL_AMBIGUOUS), "ambiguous");
    RL_CHECK_STREQ(rl_model_outcome_name(RL_MODEL_INVALID_OUTPUT),
                   "invalid_output");
    RL_CHECK_STREQ(rl_model_outcome_name(RL_MODEL_CANCELLED), "cancelled");
    RL_CHECK_STREQ(rl_model_outcome_name((enum rl_model_outcome)99), "unknown");
}

static void
ignore_done(struct rl_model_call *call, void *opaque)
{
    (void)call;
    (void)opaque;
}

static void
test_bad_config_is_refused_and_key_never_echoed(void)
{
    static const char canary[] = "sk-canary\r\nX-Evil: 1";
    struct rl_model_config cfg;
    char errstr[256];

    memset(&cfg, 0, sizeof(cfg));
    errstr[0] = '\0';
    RL_CHECK(rl_model_new(&cfg, ignore_done, NULL, errstr, sizeof(errstr)) ==
             NULL);
    RL_CHECK(strstr(errstr, "base_url") != NULL);

    cfg.base_url = "ftp://127.0.0.1/v1";
    RL_CHECK(rl_model_new(&cfg, ignore_done, NULL, errstr, sizeof(errstr)) ==
             NULL);
    RL_CHECK(strstr(errstr, "base_url") != NULL);

    cfg.base_url = "http://127.0.0.1:1/v1";
    cfg.api_key = canary;
    RL_CHECK(rl_model_new(&cfg, ignore_done, NULL, errstr, sizeof(errstr)) ==
             NULL);
    RL_CHECK(errstr[0] != '\0');
    RL_CHECK(strstr(errstr, "sk-canary") == NULL);

    cfg.api_key = NULL;
    cfg.timeout_ms = -1;
    RL_CHECK(rl_model_new(&cfg, ignore_done, NULL, errstr, sizeof(errstr)) ==
             NULL);
    cfg.timeout_ms = 0;
    RL_CHECK(rl_model_new(&cfg, NULL, NULL, errstr, sizeof(errstr)) == NULL);
    rl_model_destroy(NULL);
}

struct collected {
    pthread_mutex_t lock;
    int n;
    int cancelled;
};

static void
collect_done(struct rl_model_call *call, void *opaque)
{
    struct collected *c = opaque;

    pthread_mutex_lock(&c->lock);
    c->n++;
    c->cancelled += call->outcome == RL_MODEL_CANCELLED;
    pthread_mutex_unlock(&c->lock);
}

/* A listening socket nobody accepts on: the kernel completes the
 * handshake and takes the request, no answer ever comes. */
static int
silent_listener(int *port)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    RL_REQUIRE(fd >= 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    RL_REQUIRE(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    RL_REQUIRE(listen(fd, 64) == 0);
    RL_REQUIRE(getsockname(fd, (struct sockaddr *)&addr, &len) == 0);
    *port = ntohs(addr.sin_port);
    return fd;
}

static void
test_submit_rejects_bad_calls_and_leaves_body_with_caller(void)
{
    struct collected c = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    struct rl_model_config cfg;
    struct rl_model_call call;
    struct rl_model *m;
    char errstr[256];
    char long_id[RL_MODEL_RUN_ID_MAX + 2];

    memset(&cfg, 0, sizeof(cfg));
    cfg.base_url = "http://127.0.0.1:1/v1/";
    m = rl_model_new(&cfg, collect_done, &c, errstr, sizeof(errstr));
    RL_REQUIRE(m);

    memset(&call, 0, sizeof(call));
    call.body = strdup("{}");
    RL_CHECK_INTEQ(rl_model_submit(m, &call), RL_ERR_INVALID); /* no run_id */
    call.run_id = "run\r\nX-Injected: 1";
    RL_CHECK_INTEQ(rl_model_submit(m, &call), RL_ERR_INVALID);
    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    call.run_id = long_id;
    RL_CHECK_INTEQ(rl_model_submit(m, &call), RL_ERR_INVALID);
    call.run_id = "r1";
    call.text = strdup("left over");
    RL_CHECK_INTEQ(rl_model_submit(m, &call), RL_ERR_INVALID);
    RL_CHECK(call.body != NULL); /* still the caller's */
    RL_CHECK_INTEQ(rl_model_cancel(m, &call), RL_ERR_NOTFOUND);
    RL_CHECK_INTEQ(rl_model_in_flight(m), 0);
    rl_model_call_clear(&call);
    RL_CHECK(call.body == NULL);

    rl_model_destroy(m);
    RL_CHECK_INTEQ(c.n, 0);
}

static void
test_destroy_delivers_every_pending_call_cancelled(void)
{
    enum { N = 20 };
    struct collected c = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    struct rl_model_config cfg;
    struct rl_model_call calls[N];
    struct rl_model *m;
    char errstr[256], url[64];
    int port, fd = silent_listener(&port);

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", port);
    memset(&cfg, 0, sizeof(cfg));
    cfg.base_url = url;
    cfg.timeout_ms = 60000;
    m = rl_model_new(&cfg, collect_done, &c, errstr, sizeof(errstr));
    RL_REQUIRE(m);
    memset(calls, 0, sizeof(calls));
    for (int i = 0; i < N; i++) {
        calls[i].run_id = "destroy-test";
        calls[i].body = strdup("{\"model\":\"m\",\"messages\":[]}");
        RL_CHECK_INTEQ(rl_model_submit(m, &calls[i]), 0);
        RL_CHECK(calls[i].body == NULL); /* ownership moved */
    }
    RL_CHECK_INTEQ(rl_model_in_flight(m), N);
    sleep_ms(100);
    RL_CHECK_INTEQ(c.n, 0);
    rl_model_destroy(m);
    RL_CHECK_INTEQ(c.n, N);
    RL_CHECK_INTEQ(c.cancelled, N);
    for (int i = 0; i < N; i++) {
        RL_CHECK_INTEQ(calls[i].outcome, RL_MODEL_CANCELLED);
        RL_CHECK(calls[i].text == NULL);
        rl_model_call_clear(&calls[i]);
    }
    close(fd);
}

/* The measured size is the built body's length, to the byte, whatever
 * the escapes, the number of placeholders and where they stand. */
static void
test_measured_size_is_the_built_body_length(void)
{
    static const char *const requests[] = {
        REQUEST,
        REQUEST_NO_PLACEHOLDER,
        "{\"request\":{\"model\":\"m\",\"stream\":true,\"stream_options\":{},"
        "\"messages\":[{\"role\":\"user\",\"content\":["
        "{\"type\":\"text\",\"text\":\"a {{input}} b {{input}}{{input}}\"},"
        "{\"type\":\"image_url\",\"text\":\"{{input}}\"}]}]}}",
        "{\"request\":{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
        "\"content\":\"{{input}}\\n\\t\\\"q\\\" {{input\"}]}}",
    };
    static const char *const inputs[] = {
        NULL,
        "null",
        "{\"k\":1}",
        "{\"s\":\"quote \\\" back \\\\ nl \\n tab \\t ctl \\u0001 \xc3\xa9\"}",
        "\"{{input}}\"",
    };
    char errstr[256];

    for (size_t r = 0; r < sizeof(requests) / sizeof(requests[0]); r++) {
        for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
            char *body = rl_model_build_body(requests[r], inputs[i], errstr,
                                             sizeof(errstr));
            size_t size = 0;

            RL_CHECK(body != NULL);
            RL_CHECK_INTEQ(rl_model_body_size(requests[r], inputs[i], &size,
                                              errstr, sizeof(errstr)),
                           RL_OK);
            if (body)
                RL_CHECK_INTEQ((long)size, (long)strlen(body));
            free(body);
        }
    }
    RL_CHECK_INTEQ(rl_model_body_size("{\"request\":{}}", "1", &(size_t){0},
                                      errstr, sizeof(errstr)),
                   RL_ERR_INVALID);
}

/* A prompt of 20,000 placeholders over a 200 KB input is 4 GB once
 * substituted: measuring it allocates nothing of that size. The process's
 * peak resident size may grow by the measurement's own bookkeeping, never
 * by anything near the substituted body. */
static void
test_placeholder_bomb_is_measured_without_building_it(void)
{
    const size_t n_ph = 20000, in_len = 200000;
    const char *head = "{\"request\":{\"model\":\"m\",\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"";
    const char *tail = "\"}]}}";
    char *request = malloc(strlen(head) + n_ph * 9 + strlen(tail) + 1);
    char *input = malloc(in_len + 3);
    struct rusage before, after;
    size_t size = 0;
    char errstr[256];
    char *p;

    RL_CHECK(request && input);
    if (!request || !input)
        goto done;
    p = request + sprintf(request, "%s", head);
    for (size_t i = 0; i < n_ph; i++)
        p += sprintf(p, "{{input}}");
    strcpy(p, tail);
    input[0] = '"';
    memset(input + 1, 'x', in_len);
    strcpy(input + 1 + in_len, "\"");
    getrusage(RUSAGE_SELF, &before);
    RL_CHECK_INTEQ(
        rl_model_body_size(request, input, &size, errstr, sizeof(errstr)),
        RL_OK);
    getrusage(RUSAGE_SELF, &after);
    /* each placeholder becomes the input, quotes escaped */
    RL_CHECK(size > n_ph * in_len);
    /* ru_maxrss is in KiB: the peak grew by less than 64 MiB */
    RL_CHECK(after.ru_maxrss - before.ru_maxrss < 64 * 1024);
done:
    free(request);
    free(input);
}

int
main(void)
{
    test_placeholder_is_replaced_everywhere_and_nothing_appended();
    test_input_without_placeholder_is_appended_as_last_user_message();
    test_null_input_appends_nothing();
    test_placeholder_with_null_input_becomes_null();
    test_stream_is_forced_false_and_stream_options_dropped();
    test_text_parts_are_substituted_other_parts_untouched();
    test_input_with_quotes_newlines_and_utf8_round_trips();
    test_same_inputs_give_the_same_bytes();
    test_bad_requests_are_rejected_with_a_reason();
    test_output_json_has_text_model_request_id_and_usage();
    test_output_json_is_null_unless_ok();
    test_outcome_names_are_stable();
    test_bad_config_is_refused_and_key_never_echoed();
    test_submit_rejects_bad_calls_and_leaves_body_with_caller();
    test_destroy_delivers_every_pending_call_cancelled();
    test_measured_size_is_the_built_body_length();
    test_placeholder_bomb_is_measured_without_building_it();
    RL_TEST_END();
}
