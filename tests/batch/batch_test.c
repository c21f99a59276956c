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

/* The stub's own path (not under /v1) at the model base URL's host. */
static void
stub_admin_url(struct e2e *t, const char *path, char *url, size_t size)
{
    const char *v1 = strstr(t->model_base_url, "/v1");
    int base_len =
        v1 ? (int)(v1 - t->model_base_url) : (int)strlen(t->model_base_url);

    snprintf(url, size, "%.*s%s", base_len, t->model_base_url, path);
}

cJSON *
bt_stub_get(struct e2e *t, const char *path)
{
    char url[512];
    CURL *curl = curl_easy_init();
    struct grow g = {NULL, 0};
    cJSON *root = NULL;

    if (!curl)
        return NULL;
    stub_admin_url(t, path, url, sizeof(url));
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

cJSON *
bt_stub_stats(struct e2e *t)
{
    return bt_stub_get(t, "/stats");
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

int
bt_stub_reset(struct e2e *t)
{
    char url[512];
    CURL *curl = curl_easy_init();
    struct grow g = {NULL, 0};
    long status = 0;
    int rc = -1;

    stub_admin_url(t, "/admin/reset", url, sizeof(url));
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, grow_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    if (curl_easy_perform(curl) == CURLE_OK &&
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
        status == 200)
        rc = 0;
    free(g.data);
    curl_easy_cleanup(curl);
    return rc;
}

long
bt_stub_call(struct e2e *t, const char *method, const char *path,
             const char *body)
{
    char url[512];
    CURL *curl = curl_easy_init();
    struct grow g = {NULL, 0};
    struct curl_slist *h = NULL;
    long status = -1;

    if (!curl)
        return -1;
    stub_admin_url(t, path, url, sizeof(url));
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, grow_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    if (curl_easy_perform(curl) != CURLE_OK ||
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
        status = -1;
    curl_slist_free_all(h);
    free(g.data);
    curl_easy_cleanup(curl);
    return status;
}

/* The answer's "id" of a POST the curl handle is set up for, into id.
 * Returns 0 when the stub answered 200 with an id. */
static int
post_for_id(CURL *curl, const char *url, char *id, size_t id_size)
{
    struct grow g = {NULL, 0};
    long status = 0;
    int rc = -1;

    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, grow_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    if (curl_easy_perform(curl) == CURLE_OK &&
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
        status == 200 && g.data) {
        cJSON *root = cJSON_Parse(g.data);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "id");

        if (cJSON_IsString(v)) {
            snprintf(id, id_size, "%s", v->valuestring);
            rc = 0;
        }
        cJSON_Delete(root);
    }
    free(g.data);
    return rc;
}

int
bt_stub_upload(struct e2e *t, const char *filename, const char *jsonl,
               char *file_id, size_t file_id_size)
{
    char url[512];
    CURL *curl = curl_easy_init();
    curl_mime *form = curl_mime_init(curl);
    curl_mimepart *part = curl_mime_addpart(form);
    int rc;

    curl_mime_name(part, "purpose");
    curl_mime_data(part, "batch", CURL_ZERO_TERMINATED);
    part = curl_mime_addpart(form);
    curl_mime_name(part, "file");
    curl_mime_filename(part, filename);
    curl_mime_data(part, jsonl, CURL_ZERO_TERMINATED);
    curl_easy_setopt(curl, CURLOPT_MIMEPOST, form);
    snprintf(url, sizeof(url), "%s/files", t->model_base_url);
    rc = post_for_id(curl, url, file_id, file_id_size);
    curl_mime_free(form);
    curl_easy_cleanup(curl);
    return rc;
}

int
bt_stub_create_batch(struct e2e *t, const char *file_id, const char *local_id,
                     char *batch_id, size_t batch_id_size)
{
    char meta[256];

    snprintf(meta, sizeof(meta), "{\"runledger_batch\":\"%s\"}", local_id);
    return bt_stub_create_batch_meta(t, file_id, meta, batch_id, batch_id_size);
}

int
bt_stub_create_batch_meta(struct e2e *t, const char *file_id,
                          const char *metadata, char *batch_id,
                          size_t batch_id_size)
{
    char url[512], body[1024];
    CURL *curl = curl_easy_init();
    struct curl_slist *headers =
        curl_slist_append(NULL, "Content-Type: application/json");
    int rc;

    snprintf(body, sizeof(body),
             "{\"input_file_id\":\"%s\",\"endpoint\":"
             "\"/v1/chat/completions\",\"completion_window\":\"24h\","
             "\"metadata\":%s}",
             file_id, metadata);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    snprintf(url, sizeof(url), "%s/batches", t->model_base_url);
    rc = post_for_id(curl, url, batch_id, batch_id_size);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return rc;
}

/* GET of the stub's base URL + path, parsed; NULL when it failed. */
static cJSON *
stub_get_json(struct e2e *t, const char *path, const char *id)
{
    char url[512];
    CURL *curl = curl_easy_init();
    struct grow g = {NULL, 0};
    cJSON *root = NULL;

    snprintf(url, sizeof(url), "%s/%s/%s", t->model_base_url, path, id);
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

cJSON *
bt_stub_file(struct e2e *t, const char *file_id)
{
    return stub_get_json(t, "files", file_id);
}

cJSON *
bt_stub_batch(struct e2e *t, const char *batch_id)
{
    return stub_get_json(t, "batches", batch_id);
}

void
bt_count_strays(struct e2e *t, const char *adopted, int *others, int *cancelled)
{
    cJSON *list = bt_stub_batch(t, "");
    const cJSON *obj;

    *others = *cancelled = 0;
    RL_REQUIRE(list != NULL);
    cJSON_ArrayForEach(obj, cJSON_GetObjectItemCaseSensitive(list, "data"))
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "id");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");

        if (!cJSON_IsString(id) || strcmp(id->valuestring, adopted) == 0)
            continue;
        (*others)++;
        if (cJSON_IsString(st) && strcmp(st->valuestring, "cancelled") == 0)
            (*cancelled)++;
        else
            printf("batch %s not adopted, left %s\n", id->valuestring,
                   cJSON_IsString(st) ? st->valuestring : "?");
    }
    cJSON_Delete(list);
}

void
bt_check_answered_once(struct e2e *t, char (*ids)[RL_HEX_SIZE], int n)
{
    char key[RL_HEX_SIZE + 8];

    for (int i = 0; i < n; i++) {
        fx_check_completed_once(t, ids[i]);
        snprintf(key, sizeof(key), "%.64s:1", ids[i]);
        RL_CHECK_INTEQ(e2e_stub_generations(t, key), 1);
    }
}
