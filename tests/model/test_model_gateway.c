/* The gateway settings against a stub that insists on them, as Azure
 * OpenAI and gateways do: tests/stub/stub_model.py started here with
 * --require-header api-key=<key> --require-header X-Team=a
 * --require-query api-version=2024-10-21 on Azure's deployment path.
 * Then `runledger config` refusing a bad RUNLEDGER_MODEL_HEADERS with exit
 * 2, never printing a header's value. Needs python3 only. */

#include "model_stub.h"
#include "rl/err.h"
#include "rl/model.h"
#include "rltest.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define API_VERSION "2024-10-21"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int done_count;
static char key[96];

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

/* Starts the stub with the gateway's demands; returns its pid, sets port. */

/* One call through a client with these settings; returns its outcome and
 * copies its status. */
static enum rl_model_outcome
call_once(const char *base_url, const char *auth_header, const char *query,
          const char *headers, long *status)
{
    struct rl_model_config cfg;
    struct rl_model_call call;
    char errstr[256] = "", run_id[96];
    struct rl_model *m;
    enum rl_model_outcome outcome;
    struct timespec ts;
    int target;

    memset(&cfg, 0, sizeof(cfg));
    cfg.base_url = base_url;
    cfg.api_key = key;
    cfg.auth_header = auth_header;
    cfg.query = query;
    cfg.headers = headers;
    cfg.timeout_ms = 10000;
    m = rl_model_new(&cfg, on_done, NULL, errstr, sizeof(errstr));
    if (!m)
        fprintf(stderr, "rl_model_new: %s\n", errstr);
    RL_REQUIRE(m);
    memset(&call, 0, sizeof(call));
    snprintf(run_id, sizeof(run_id), "%s", rltest_unique("gw"));
    call.run_id = run_id;
    call.body = strdup("{\"model\":\"gpt-4o\",\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"hi\"}],\"stream\":false}");
    pthread_mutex_lock(&lock);
    target = done_count + 1;
    pthread_mutex_unlock(&lock);
    RL_REQUIRE(rl_model_submit(m, &call) == 0);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 15;
    pthread_mutex_lock(&lock);
    while (done_count < target &&
           pthread_cond_timedwait(&cond, &lock, &ts) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&lock);
    rl_model_destroy(m);
    fprintf(stderr, "  auth=%s query=%s headers=%s: %s http %ld %s\n",
            auth_header ? auth_header : "-", query ? query : "-",
            headers ? "(set)" : "-", rl_model_outcome_name(call.outcome),
            call.http_status, call.error);
    RL_CHECK(strstr(call.error, key) == NULL);
    outcome = call.outcome;
    *status = call.http_status;
    rl_model_call_clear(&call);
    return outcome;
}

static void
test_azure_settings_reach_the_endpoint(int port)
{
    char base[128];
    long status;

    snprintf(base, sizeof(base),
             "http://127.0.0.1:%d/openai/deployments/gpt4o/", port);
    RL_CHECK_INTEQ(call_once(base, "api-key", "api-version=" API_VERSION,
                             "X-Team: a, X-Env: b", &status),
                   RL_MODEL_OK);
    RL_CHECK_INTEQ(status, 200);
    /* Names are case-insensitive; extra parameters are escaped, so the
     * space and '&' inside a value cannot end api-version early. */
    RL_CHECK_INTEQ(call_once(base, "API-Key",
                             "api-version=" API_VERSION "&note=a b&c=1#2",
                             "x-team: a", &status),
                   RL_MODEL_OK);
    /* Each setting is needed: bearer auth, no query, no extra header. */
    RL_CHECK_INTEQ(
        call_once(base, NULL, "api-version=" API_VERSION, "X-Team: a", &status),
        RL_MODEL_PERMANENT);
    RL_CHECK_INTEQ(status, 401);
    RL_CHECK_INTEQ(call_once(base, "api-key", NULL, "X-Team: a", &status),
                   RL_MODEL_PERMANENT);
    RL_CHECK_INTEQ(status, 404);
    RL_CHECK_INTEQ(
        call_once(base, "api-key", "api-version=" API_VERSION, NULL, &status),
        RL_MODEL_PERMANENT);
    RL_CHECK_INTEQ(status, 401);
}

static void
test_bad_settings_refused_without_their_values(void)
{
    static const char *const bad[][2] = {
        {"X-Team: a, X-Secret sk-hidden-value-1", NULL},
        {"X-Team: a, X-Evil: sk-hidden\x01value-2", NULL},
        {"Idempotency-Key: sk-hidden-value-3", NULL},
        {"Authorization: Bearer sk-hidden-value-4", NULL},
        {"X-A: 1, x-a: sk-hidden-value-5", NULL},
        {"X-Empty:", NULL},
        {NULL, "api-version"},
        {NULL, "=x"},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct rl_model_config cfg;
        char errstr[256] = "";

        memset(&cfg, 0, sizeof(cfg));
        cfg.base_url = "http://127.0.0.1:1/v1";
        cfg.api_key = key;
        cfg.headers = bad[i][0];
        cfg.query = bad[i][1];
        RL_CHECK_INTEQ(rl_model_config_check(&cfg, errstr, sizeof(errstr)),
                       RL_ERR_INVALID);
        RL_CHECK(rl_model_new(&cfg, on_done, NULL, errstr, sizeof(errstr)) ==
                 NULL);
        fprintf(stderr, "  refused: %s\n", errstr);
        RL_CHECK(errstr[0] != '\0');
        RL_CHECK(strstr(errstr, "sk-hidden") == NULL);
    }
}

/* Runs `runledger config --effective` with name=value set; returns the
 * exit code and its output (stdout and stderr). */
static int
run_config(const char *name, const char *value, char *out, size_t out_size)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    char cmd[1024];
    FILE *fp;
    size_t n;
    int rc;

    RL_REQUIRE(bin);
    setenv(name, value, 1);
    snprintf(cmd, sizeof(cmd), "'%s' config --effective 2>&1", bin);
    fp = popen(cmd, "r");
    RL_REQUIRE(fp);
    n = fread(out, 1, out_size - 1, fp);
    out[n] = '\0';
    rc = pclose(fp);
    unsetenv(name);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void
test_config_exits_2_on_a_bad_header_and_never_prints_values(void)
{
    static char out[64 * 1024];

    RL_CHECK_INTEQ(run_config("RUNLEDGER_MODEL_HEADERS",
                              "X-Team: a, X-Key sk-hidden-value-6", out,
                              sizeof(out)),
                   2);
    RL_CHECK(strstr(out, "RUNLEDGER_MODEL_HEADERS") != NULL);
    RL_CHECK(strstr(out, "sk-hidden") == NULL);
    RL_CHECK_INTEQ(
        run_config("RUNLEDGER_MODEL_QUERY", "api-version", out, sizeof(out)),
        2);
    RL_CHECK(strstr(out, "RUNLEDGER_MODEL_QUERY") != NULL);
    RL_CHECK_INTEQ(
        run_config("RUNLEDGER_MODEL_AUTH_HEADER", "api key", out, sizeof(out)),
        2);
    RL_CHECK(strstr(out, "RUNLEDGER_MODEL_AUTH_HEADER") != NULL);
    /* A good one: in force, shown only as "(set)". */
    RL_CHECK_INTEQ(run_config("RUNLEDGER_MODEL_HEADERS",
                              "X-Team: a, Ocp-Apim-Subscription-Key: "
                              "sk-hidden-value-7",
                              out, sizeof(out)),
                   0);
    RL_CHECK(strstr(out, "| `RUNLEDGER_MODEL_HEADERS` |") != NULL);
    RL_CHECK(strstr(out, "sk-hidden") == NULL);
}

int
main(void)
{
    char header[160];
    const char *const stub_args[] = {"--require-header",
                                     header,
                                     "--require-header",
                                     "X-Team=a",
                                     "--require-query",
                                     "api-version=" API_VERSION,
                                     NULL};
    pid_t stub;
    int port = 0;

    signal(SIGPIPE, SIG_IGN);
    snprintf(key, sizeof(key), "azure-%s", rltest_unique("key"));
    snprintf(header, sizeof(header), "api-key=%s", key);
    stub = model_stub_start(stub_args, NULL, &port);
    test_azure_settings_reach_the_endpoint(port);
    model_stub_stop(stub);
    test_bad_settings_refused_without_their_values();
    test_config_exits_2_on_a_bad_header_and_never_prints_values();
    RL_TEST_END();
}
