/* The model client reading the endpoint's record of the calls it
 * answered, against a private stub (tests/stub/stub_model.py, its stored
 * completions visible STUB_STORE_LAG_MS = 300 ms after they were made):
 * - a chat call stored with its run and attempt in the metadata is not
 *   found at once (the record lags), then found by a lookup with the
 *   answer, model, id and usage the call itself returned; another attempt
 *   of the same run is not found; a lookup is never a generation;
 * - a Responses API call (POST /responses) is parsed: output_text, the
 *   response id, input and output tokens; GET /responses/{id} finds it, an
 *   unknown id is not found;
 * - a Responses API reply cut mid-body is ambiguous and names the id it
 *   had sent before the cut;
 * - a call whose reused keep-alive connection is reset after the request
 *   went out is ambiguous with the one generation the stub made: libcurl
 *   does not re-send it on a fresh connection (which would generate a
 *   second time under the same attempt). Needs python3 only. */

#include "model_stub.h"
#include "rl/err.h"
#include "rl/model.h"
#include "rltest.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int done_count;

static void
on_done(struct rl_model_call *call, void *opaque)
{
    (void)call;
    (void)opaque;
    pthread_mutex_lock(&lock);
    done_count++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

/* Submits call and waits (15 s at most) until it is done. */
static void
run(struct rl_model *m, struct rl_model_call *call)
{
    struct timespec ts;
    int target;

    pthread_mutex_lock(&lock);
    target = done_count + 1;
    pthread_mutex_unlock(&lock);
    RL_REQUIRE(rl_model_submit(m, call) == 0);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 15;
    pthread_mutex_lock(&lock);
    while (done_count < target &&
           pthread_cond_timedwait(&cond, &lock, &ts) != ETIMEDOUT)
        ;
    RL_REQUIRE(done_count >= target);
    pthread_mutex_unlock(&lock);
}

/* The body of attempt attempt_no of run_id as the ledger sends it, from
 * installation "inst-a" with fingerprint "fp-a". */
static char *
body_for(const char *run_id, int attempt_no, enum rl_model_api api)
{
    static const char chat[] =
        "{\"model\":\"stub-1\",\"stream\":false,\"messages\":[{\"role\":"
        "\"user\",\"content\":\"summarise the record\"}]}";
    struct rl_model_body_opts opts = {.api = api,
                                      .store = 1,
                                      .run_id = run_id,
                                      .attempt_no = attempt_no,
                                      .installation_id = "inst-a",
                                      .fingerprint = "fp-a"};
    enum rl_model_api got;
    char errstr[256];
    char *body =
        rl_model_body_prepare(chat, &opts, &got, errstr, sizeof(errstr));

    RL_REQUIRE(body && got == api);
    return body;
}

static void
lookup(struct rl_model *m, struct rl_model_call *call, const char *run_id,
       int attempt_no, enum rl_model_api api, const char *id)
{
    rl_model_call_clear(call);
    memset(call, 0, sizeof(*call));
    call->run_id = run_id;
    call->lookup = 1;
    call->api = api;
    call->attempt_no = attempt_no;
    call->lookup_id = id;
    run(m, call);
}

static void
test_stored_chat_completion_found_after_its_lag(struct rl_model *m)
{
    struct rl_model_call call, found;
    char run_id[96], *text;
    int64_t deadline;

    snprintf(run_id, sizeof(run_id), "%s", rltest_unique("rec"));
    memset(&call, 0, sizeof(call));
    memset(&found, 0, sizeof(found));
    call.run_id = run_id;
    call.body = body_for(run_id, 1, RL_MODEL_API_CHAT);
    run(m, &call);
    RL_CHECK_INTEQ(call.outcome, RL_MODEL_OK);
    RL_REQUIRE(call.text);
    text = strdup(call.text);

    lookup(m, &found, run_id, 1, RL_MODEL_API_CHAT, NULL);
    RL_CHECK_INTEQ(found.outcome, RL_MODEL_NOT_FOUND);
    RL_CHECK(found.text == NULL);
    deadline = rltest_now_ms() + 5000;
    while (found.outcome != RL_MODEL_OK && rltest_now_ms() < deadline) {
        struct timespec ts = {0, 50000000L};

        nanosleep(&ts, NULL);
        lookup(m, &found, run_id, 1, RL_MODEL_API_CHAT, NULL);
    }
    RL_CHECK_INTEQ(found.outcome, RL_MODEL_OK);
    RL_CHECK_STREQ(found.text ? found.text : "", text);
    RL_CHECK_STREQ(found.upstream_request_id, call.upstream_request_id);
    RL_CHECK_STREQ(found.model_name ? found.model_name : "", "stub-1");
    RL_CHECK_INTEQ(found.prompt_tokens, call.prompt_tokens);
    RL_CHECK_INTEQ(found.completion_tokens, call.completion_tokens);

    lookup(m, &found, run_id, 2, RL_MODEL_API_CHAT, NULL);
    RL_CHECK_INTEQ(found.outcome, RL_MODEL_NOT_FOUND);

    /* Adopted only by the ledger it names: another installation, another
     * request fingerprint or another model finds it foreign. */
    {
        static const char *const wrong[][3] = {{"inst-b", "fp-a", "stub-1"},
                                               {"inst-a", "fp-b", "stub-1"},
                                               {"inst-a", "fp-a", "stub-2"},
                                               {"inst-a", "fp-a", NULL}};

        for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
            rl_model_call_clear(&found);
            memset(&found, 0, sizeof(found));
            found.run_id = run_id;
            found.lookup = 1;
            found.attempt_no = 1;
            found.lookup_installation = wrong[i][0];
            found.lookup_fingerprint = wrong[i][1];
            found.lookup_model = wrong[i][2];
            run(m, &found);
            if (wrong[i][2]) {
                RL_CHECK_INTEQ(found.outcome, RL_MODEL_NOT_FOUND);
                RL_CHECK_INTEQ(found.foreign_records, 1);
            } else {
                RL_CHECK_INTEQ(found.outcome, RL_MODEL_OK);
                RL_CHECK_INTEQ(found.found_records, 1);
                RL_CHECK_INTEQ(found.found_attempt, 1);
                RL_CHECK_INTEQ(found.foreign_records, 0);
            }
        }
    }
    free(text);
    rl_model_call_clear(&call);
    rl_model_call_clear(&found);
}

static void
test_responses_api_answer_and_lookup_by_id(struct rl_model *m)
{
    struct rl_model_call call, found;
    char run_id[96], id[128];

    snprintf(run_id, sizeof(run_id), "%s", rltest_unique("resp"));
    memset(&call, 0, sizeof(call));
    memset(&found, 0, sizeof(found));
    call.run_id = run_id;
    call.api = RL_MODEL_API_RESPONSES;
    call.body = body_for(run_id, 1, RL_MODEL_API_RESPONSES);
    run(m, &call);
    RL_CHECK_INTEQ(call.outcome, RL_MODEL_OK);
    RL_CHECK(call.text && strncmp(call.text, "Stub model response ", 20) == 0);
    RL_CHECK(strncmp(call.upstream_request_id, "resp_", 5) == 0);
    RL_CHECK(call.prompt_tokens > 0);
    RL_CHECK(call.completion_tokens > 0);
    snprintf(id, sizeof(id), "%s", call.upstream_request_id);

    lookup(m, &found, run_id, 1, RL_MODEL_API_RESPONSES, id);
    RL_CHECK_INTEQ(found.outcome, RL_MODEL_OK);
    RL_CHECK_STREQ(found.text ? found.text : "", call.text ? call.text : "-");
    RL_CHECK_STREQ(found.upstream_request_id, id);
    lookup(m, &found, run_id, 1, RL_MODEL_API_RESPONSES, "resp_nope");
    RL_CHECK_INTEQ(found.outcome, RL_MODEL_NOT_FOUND);
    rl_model_call_clear(&call);
    rl_model_call_clear(&found);
}

static void
test_cut_responses_reply_names_its_id(const char *base_url)
{
    struct rl_model_config cfg;
    struct rl_model_call call;
    struct rl_model *m;
    char run_id[96], errstr[256];

    memset(&cfg, 0, sizeof(cfg));
    cfg.base_url = base_url;
    cfg.timeout_ms = 10000;
    cfg.headers = "X-Stub-Fault: close_mid_body";
    m = rl_model_new(&cfg, on_done, NULL, errstr, sizeof(errstr));
    RL_REQUIRE(m);
    snprintf(run_id, sizeof(run_id), "%s", rltest_unique("cut"));
    memset(&call, 0, sizeof(call));
    call.run_id = run_id;
    call.api = RL_MODEL_API_RESPONSES;
    call.body = body_for(run_id, 1, RL_MODEL_API_RESPONSES);
    run(m, &call);
    RL_CHECK_INTEQ(call.outcome, RL_MODEL_AMBIGUOUS);
    RL_CHECK(call.text == NULL);
    RL_CHECK(strncmp(call.upstream_request_id, "resp_", 5) == 0);
    rl_model_call_clear(&call);
    rl_model_destroy(m);
}

static size_t
collect(char *data, size_t size, size_t nmemb, void *userdata)
{
    char *buf = userdata;
    size_t have = strlen(buf), n = size * nmemb;

    if (have + n < 4096) {
        memcpy(buf + have, data, n);
        buf[have + n] = '\0';
    }
    return size * nmemb;
}

/* The stub's generations for key (GET /stats?key=), -1 when unreadable. */
static long
generations(int port, const char *key)
{
    char url[256], body[4096] = "";
    CURL *easy = curl_easy_init();
    cJSON *root, *gen;
    long n = -1;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/stats?key=%s", port, key);
    RL_REQUIRE(easy);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, (void *)body);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 5000L);
    if (curl_easy_perform(easy) == CURLE_OK) {
        root = cJSON_Parse(body);
        gen = cJSON_GetObjectItemCaseSensitive(root, "generations");
        if (cJSON_IsNumber(gen))
            n = (long)gen->valuedouble;
        cJSON_Delete(root);
    }
    curl_easy_cleanup(easy);
    return n;
}

static void
test_reset_on_a_reused_connection_is_not_sent_again(struct rl_model *m,
                                                    int port)
{
    struct rl_model_call warm, call;
    char warm_id[96], run_id[96];

    /* One connection at most: the second call rides the first's. */
    snprintf(warm_id, sizeof(warm_id), "%s", rltest_unique("warm"));
    memset(&warm, 0, sizeof(warm));
    warm.run_id = warm_id;
    warm.body = strdup("{\"model\":\"stub-1\",\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"warm up\"}]}");
    run(m, &warm);
    RL_CHECK_INTEQ(warm.outcome, RL_MODEL_OK);

    snprintf(run_id, sizeof(run_id), "%s", rltest_unique("reset"));
    memset(&call, 0, sizeof(call));
    call.run_id = run_id;
    call.body = strdup("{\"model\":\"stub-1\",\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"[[fault:reset times=1]]\"}]}");
    run(m, &call);
    fprintf(stderr, "  reset on a reused connection: %s (%s)\n",
            rl_model_outcome_name(call.outcome), call.error);
    RL_CHECK_INTEQ(call.outcome, RL_MODEL_AMBIGUOUS);
    RL_CHECK_INTEQ(generations(port, run_id), 1);
    rl_model_call_clear(&warm);
    rl_model_call_clear(&call);
}

int
main(void)
{
    struct rl_model_config cfg;
    struct rl_model *m;
    char base_url[128], errstr[256];
    const char *const stub_env[] = {"STUB_STORE_LAG_MS=300", NULL};
    pid_t stub;
    int port = 0;

    stub = model_stub_start(NULL, stub_env, &port);
    snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d/v1", port);
    memset(&cfg, 0, sizeof(cfg));
    cfg.base_url = base_url;
    cfg.timeout_ms = 10000;
    m = rl_model_new(&cfg, on_done, NULL, errstr, sizeof(errstr));
    RL_REQUIRE(m);
    test_stored_chat_completion_found_after_its_lag(m);
    test_responses_api_answer_and_lookup_by_id(m);
    rl_model_destroy(m);
    cfg.max_connections = 1;
    m = rl_model_new(&cfg, on_done, NULL, errstr, sizeof(errstr));
    RL_REQUIRE(m);
    test_reset_on_a_reused_connection_is_not_sent_again(m, port);
    rl_model_destroy(m);
    test_cut_responses_reply_names_its_id(base_url);
    model_stub_stop(stub);
    RL_TEST_END();
}
