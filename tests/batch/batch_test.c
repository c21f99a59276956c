/* Helpers of the batch-mode tests (batch_test.h). */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_test.h"
#include "faults.h"
#include "ops.h"
#include "rltest.h"

void
bt_batch_set(struct e2e *t, const char *job, ...)
{
    const char *args[32] = {"batch", "set", "--job", job};
    size_t n = 4;
    const char *a;
    static char out[4096], err[4096];
    va_list ap;

    va_start(ap, job);
    while ((a = va_arg(ap, const char *)) != NULL && n < 31)
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    if (ops_run(t, args, NULL, NULL, out, sizeof(out), err, sizeof(err)) != 0) {
        fprintf(stderr, "batch set failed: %s\n", err);
        RL_REQUIRE(0);
    }
}

int
bt_spawn(struct e2e *t, ...)
{
    const char *env[12] = {NULL};
    size_t n = 0;
    const char *e;
    va_list ap;

    va_start(ap, t);
    while ((e = va_arg(ap, const char *)) != NULL && n < 7)
        env[n++] = e;
    va_end(ap);
    env[n++] = "RUNLEDGER_BATCH_POLL_MS=200";
    env[n++] = "RUNLEDGER_BATCH_SETTLE_MS=1000";
    env[n++] = "RUNLEDGER_BATCH_LEASE_SECONDS=5";
    /* Polls as fast as the 200 ms backoff asks, unless a test bounds them. */
    env[n++] = "RUNLEDGER_BATCH_MAX_POLLS_PER_MINUTE=600";
    /* fx_spawn takes its entries as arguments, up to the first NULL: the
     * first given wins. */
    return fx_spawn(t, "consume", env[0], env[1], env[2], env[3], env[4],
                    env[5], env[6], env[7], env[8], env[9], env[10], NULL);
}

struct grow {
    char *data;
    size_t len;
};

static size_t
grow_write(char *p, size_t size, size_t nmemb, void *arg)
{
    struct grow *g = arg;
    size_t n = size * nmemb;
    char *d = realloc(g->data, g->len + n + 1);

    if (!d)
        return 0;
    memcpy(d + g->len, p, n);
    g->len += n;
    d[g->len] = '\0';
    g->data = d;
    return n;
}

cJSON *
bt_stub_stats(struct e2e *t)
{
    char url[512];
    const char *v1 = strstr(t->model_base_url, "/v1");
    int base_len =
        v1 ? (int)(v1 - t->model_base_url) : (int)strlen(t->model_base_url);
    CURL *curl = curl_easy_init();
    struct grow g = {NULL, 0};
    cJSON *root = NULL;

    snprintf(url, sizeof(url), "%.*s/stats", base_len, t->model_base_url);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, grow_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    if (curl_easy_perform(curl) == CURLE_OK && g.data)
        root = cJSON_Parse(g.data);
    free(g.data);
    curl_easy_cleanup(curl);
    return root;
}

long
bt_stub_stat(struct e2e *t, const char *name)
{
    cJSON *root = bt_stub_stats(t);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    long n = cJSON_IsNumber(v) ? (long)v->valuedouble : -1;

    cJSON_Delete(root);
    return n;
}
