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
    const char *env[40];
    size_t n = 0;
    const char *e;
    va_list ap;

    va_start(ap, t);
    while ((e = va_arg(ap, const char *)) != NULL && n < 32)
        env[n++] = e;
    va_end(ap);
    env[n++] = "RUNLEDGER_BATCH_POLL_MS=200";
    env[n++] = "RUNLEDGER_BATCH_SETTLE_MS=1000";
    env[n++] = "RUNLEDGER_BATCH_LEASE_SECONDS=5";
    env[n] = NULL;
    /* fx_spawn takes its entries as arguments: the first given wins. */
    switch (n) {
    case 3:
        return fx_spawn(t, "consume", env[0], env[1], env[2], NULL);
    case 4:
        return fx_spawn(t, "consume", env[0], env[1], env[2], env[3], NULL);
    case 5:
        return fx_spawn(t, "consume", env[0], env[1], env[2], env[3], env[4],
                        NULL);
    default:
        return fx_spawn(t, "consume", env[0], env[1], env[2], env[3], env[4],
                        env[5], NULL);
    }
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

long
bt_stub_stat(struct e2e *t, const char *name)
{
    char url[512];
    const char *v1 = strstr(t->model_base_url, "/v1");
    int base_len =
        v1 ? (int)(v1 - t->model_base_url) : (int)strlen(t->model_base_url);
    CURL *curl = curl_easy_init();
    struct grow g = {NULL, 0};
    long n = -1;

    snprintf(url, sizeof(url), "%.*s/stats", base_len, t->model_base_url);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, grow_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    if (curl_easy_perform(curl) == CURLE_OK && g.data) {
        cJSON *root = cJSON_Parse(g.data);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);

        if (cJSON_IsNumber(v))
            n = (long)v->valuedouble;
        cJSON_Delete(root);
    }
    free(g.data);
    curl_easy_cleanup(curl);
    return n;
}
