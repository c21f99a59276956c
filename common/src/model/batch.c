/* batch.c: the provider's batch API (/files, /batches) for the batcher,
 * synchronous on the caller's thread: JSON requests, the multipart upload
 * of a request file, paginated lists, and output files read line by line
 * within a bounded buffer. A line's answer is read by the parser of live
 * answers (response.c, responses.c), so a batch answer and a live one
 * become the same result. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model_int.h"
#include "rl/buf.h"
#include "rl/err.h"
#include "rl/model_batch.h"

/* A list page or a JSON answer held at most (a batch object, a page of
 * 100 of them). */
#define JSON_MAX ((size_t)8 * 1024 * 1024)
/* Pages a lookup reads at most: 100 objects each. */
#define PAGES_MAX 1000

struct rl_model_batches {
    /* Only its secrets and response bound are used: for redaction and for
     * the parser of answers. */
    struct rl_model m;
    char *base_url;
    char *query;
    struct curl_slist *json_headers;
    struct curl_slist *upload_headers;
    CURL *easy;
    long connect_timeout_ms;
    long timeout_ms;
    /* rl_model_batches_set_tick: asked about once a second while a call
     * runs whether to go on; aborted marks a call it ended. */
    int (*tick)(void *arg);
    void *tick_arg;
    int aborted;
};

void
rl_model_batches_set_tick(struct rl_model_batches *mb, int (*tick)(void *arg),
                          void *arg)
{
    mb->tick = tick;
    mb->tick_arg = arg;
}

/* libcurl's progress callback: a call the caller no longer wants (its
 * lease is gone, its worker stops) ends at once, however long its
 * timeout. */
static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
            curl_off_t ulnow)
{
    struct rl_model_batches *mb = arg;

    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    if (mb->tick && mb->tick(mb->tick_arg) != 0) {
        mb->aborted = 1;
        return 1;
    }
    return 0;
}

/* The options every call of mb's handle shares: the tick, as progress. */
static void
set_progress(struct rl_model_batches *mb, CURL *easy)
{
    mb->aborted = 0;
    if (!mb->tick)
        return;
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, mb);
}

struct rl_model_batches *
rl_model_batches_new(const struct rl_model_config *cfg, char *errstr,
                     size_t errstr_size)
{
    struct rl_model_batches *mb;
    struct header_entry extra[EXTRA_HEADERS_MAX];
    size_t n_extra = 0;

    if (!cfg || !cfg->base_url || !*cfg->base_url) {
        rl_set_err(errstr, errstr_size, "model base_url is not set");
        return NULL;
    }
    if (rl_model_config_check(cfg, errstr, errstr_size) != 0)
        return NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        rl_set_err(errstr, errstr_size, "could not initialize libcurl");
        return NULL;
    }
    mb = calloc(1, sizeof(*mb));
    if (!mb)
        goto nomem;
    mb->m.max_response_bytes = cfg->max_response_bytes > 0
                                   ? cfg->max_response_bytes
                                   : RL_MODEL_DEFAULT_MAX_RESPONSE_BYTES;
    mb->connect_timeout_ms = cfg->connect_timeout_ms > 0
                                 ? cfg->connect_timeout_ms
                                 : RL_MODEL_DEFAULT_CONNECT_TIMEOUT_MS;
    mb->timeout_ms =
        cfg->timeout_ms > 0 ? cfg->timeout_ms : RL_MODEL_DEFAULT_TIMEOUT_MS;
    mb->base_url = strdup(cfg->base_url);
    mb->query = strdup(cfg->query ? cfg->query : "");
    if (!mb->base_url || !mb->query)
        goto nomem;
    /* Checked by rl_model_config_check: cannot fail. */
    model_parse_headers(cfg, extra, &n_extra, errstr, errstr_size);
    if (cfg->api_key && *cfg->api_key &&
        model_add_secret(&mb->m, cfg->api_key, strlen(cfg->api_key)) != 0)
        goto nomem;
    for (size_t i = 0; i < n_extra; i++) {
        if (extra[i].value_len >= SECRET_MIN &&
            model_add_secret(&mb->m, extra[i].value, extra[i].value_len) != 0)
            goto nomem;
    }
    mb->json_headers = model_build_headers(cfg, extra, n_extra);
    if (!mb->json_headers)
        goto nomem;
    /* The upload's Content-Type is libcurl's, with the form's boundary. */
    for (struct curl_slist *h = mb->json_headers; h; h = h->next) {
        struct curl_slist *tmp;

        if (strncasecmp(h->data, "Content-Type:", 13) == 0)
            continue;
        tmp = curl_slist_append(mb->upload_headers, h->data);
        if (!tmp)
            goto nomem;
        mb->upload_headers = tmp;
    }
    mb->easy = curl_easy_init();
    if (!mb->easy)
        goto nomem;
    return mb;

nomem:
    rl_set_err(errstr, errstr_size, "out of memory");
    rl_model_batches_destroy(mb);
    return NULL;
}

void
rl_model_batches_destroy(struct rl_model_batches *mb)
{
    if (!mb)
        return;
    for (size_t i = 0; i < mb->m.nsecrets; i++)
        model_wipe_free(mb->m.secrets[i]);
    /* The header lists hold the key too. */
    for (struct curl_slist *h = mb->json_headers; h; h = h->next)
        memset(h->data, 0, strlen(h->data));
    for (struct curl_slist *h = mb->upload_headers; h; h = h->next)
        memset(h->data, 0, strlen(h->data));
    curl_slist_free_all(mb->json_headers);
    curl_slist_free_all(mb->upload_headers);
    if (mb->easy)
        curl_easy_cleanup(mb->easy);
    free(mb->base_url);
    free(mb->query);
    free(mb);
}

/* An answer's body, held up to its bound. */
struct sink {
    struct rl_buf buf;
    size_t max;
    int over;
};

static size_t
on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    struct sink *s = arg;
    size_t n = size * nmemb;

    if (s->buf.len + n > s->max) {
        s->over = 1;
        return 0;
    }
    rl_buf_put(&s->buf, data, n);
    return s->buf.failed ? 0 : n;
}

/* errstr: what failed, the provider's message redacted and cut. */
static void
http_err(const struct rl_model_batches *mb, char *errstr, size_t errstr_size,
         const char *what, long status, const char *body)
{
    struct rl_model_call tmp;
    cJSON *root = body ? cJSON_Parse(body) : NULL;
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "error"), "message");

    memset(&tmp, 0, sizeof(tmp));
    model_call_error(&mb->m, &tmp, "%s: provider answered %ld%s%s", what,
                     status, cJSON_IsString(msg) ? ": " : "",
                     cJSON_IsString(msg) ? msg->valuestring : "");
    rl_set_err(errstr, errstr_size, "%s", tmp.error);
    cJSON_Delete(root);
}

/* A 4xx other than 408 and 429: the same request is refused again. */
static int
refused(long status)
{
    return status >= 400 && status < 500 && status != 408 && status != 429;
}

/* A JSON body handed to libcurl piece by piece. No seek callback on
 * purpose: libcurl re-sends a request whose reused connection died before
 * any byte of the answer, and a create the provider had read would then
 * be made twice; without a way to rewind, libcurl fails the transfer
 * instead, and the batcher looks the batch up. */
struct body_src {
    const char *data;
    size_t len, sent;
};

static size_t
read_body(char *buf, size_t size, size_t nitems, void *arg)
{
    struct body_src *b = arg;
    size_t n = size * nitems;

    if (n > b->len - b->sent)
        n = b->len - b->sent;
    memcpy(buf, b->data + b->sent, n);
    b->sent += n;
    return n;
}

/* One request: method "GET" or "POST" (with json body or mime form) to
 * {base}{path}[?query&extra]; the answer's body parsed into *out when it is
 * 2xx. Returns RL_OK, RL_ERR_HTTP (an error status), RL_ERR_IO (no
 * answer) or RL_ERR_NOMEM. */
static int
request(struct rl_model_batches *mb, const char *method, const char *path,
        const char *extra_query, const char *json, curl_mime *form,
        const char *fault, cJSON **out, char *errstr, size_t errstr_size)
{
    CURL *easy = mb->easy;
    struct sink s = {.max = JSON_MAX};
    struct curl_slist *headers = form ? mb->upload_headers : mb->json_headers;
    struct curl_slist *fault_node = NULL;
    struct body_src src = {json ? json : "{}", strlen(json ? json : "{}"), 0};
    char *url, fault_header[96];
    long status = 0;
    CURLcode rc;
    int err = RL_OK;

    *out = NULL;
    url = model_build_url(mb->base_url, path, mb->query, extra_query, errstr,
                          errstr_size);
    if (!url)
        return RL_ERR_INVALID;
    curl_easy_reset(easy);
    if (fault) {
        snprintf(fault_header, sizeof(fault_header), "X-Stub-Fault: %s", fault);
        fault_node = curl_slist_append(NULL, fault_header);
        if (!fault_node) {
            free(url);
            return RL_ERR_NOMEM;
        }
        fault_node->next = headers;
        headers = fault_node;
    }
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, mb->connect_timeout_ms);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, mb->timeout_ms);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &s);
    set_progress(mb, easy);
    if (form) {
        curl_easy_setopt(easy, CURLOPT_MIMEPOST, form);
        /* A large file takes longer than one call's timeout: only a
         * stalled transfer is given up. */
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 0L);
        curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME,
                         mb->timeout_ms / 1000 + 1);
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(easy, CURLOPT_POST, 1L);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)src.len);
        curl_easy_setopt(easy, CURLOPT_READFUNCTION, read_body);
        curl_easy_setopt(easy, CURLOPT_READDATA, &src);
    }
    rc = curl_easy_perform(easy);
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (fault_node) {
        fault_node->next = NULL;
        curl_slist_free_all(fault_node);
    }
    rl_buf_put(&s.buf, "", 1);
    if (s.buf.failed) {
        rl_set_err(errstr, errstr_size, "%s %s: out of memory", method, path);
        err = RL_ERR_NOMEM;
    } else if (rc != CURLE_OK && mb->aborted) {
        rl_set_err(errstr, errstr_size,
                   "%s %s: given up (the batch's lease is gone or the worker "
                   "stops)",
                   method, path);
        err = RL_ERR_IO;
    } else if (rc != CURLE_OK && !s.over) {
        rl_set_err(errstr, errstr_size, "%s %s: %s", method, path,
                   curl_easy_strerror(rc));
        err = RL_ERR_IO;
    } else if (status < 200 || status > 299) {
        http_err(mb, errstr, errstr_size, path, status, s.buf.data);
        err = refused(status) ? RL_ERR_INVALID : RL_ERR_HTTP;
    } else if (s.over) {
        rl_set_err(errstr, errstr_size, "%s %s: answer over %zu bytes", method,
                   path, s.max);
        err = RL_ERR_IO;
    } else {
        *out = cJSON_Parse(s.buf.data);
        if (!cJSON_IsObject(*out)) {
            cJSON_Delete(*out);
            *out = NULL;
            rl_set_err(errstr, errstr_size,
                       "%s %s: answer is not a json "
                       "object",
                       method, path);
            err = RL_ERR_IO;
        }
    }
    rl_buf_free(&s.buf);
    free(url);
    return err;
}

/* A string member of obj copied into dst; 0 when it is there. */
static int
copy_string(const cJSON *obj, const char *name, char *dst, size_t size)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    if (!cJSON_IsString(v) || !v->valuestring) {
        if (size)
            dst[0] = '\0';
        return -1;
    }
    snprintf(dst, size, "%s", v->valuestring);
    return 0;
}

/* Whether a list answer has a next page; its cursor (last_id) copied into
 * after, which goes into the next URL: an id of the provider's alphabet
 * only. */
static int
next_page(const cJSON *answer, char *after, size_t after_size)
{
    const cJSON *more = cJSON_GetObjectItemCaseSensitive(answer, "has_more");

    return cJSON_IsTrue(more) &&
           copy_string(answer, "last_id", after, after_size) == 0 &&
           strspn(after, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789-_") == strlen(after);
}

/* Reads the upload from the caller's file. */
static size_t
read_file(char *buf, size_t size, size_t nitems, void *arg)
{
    return fread(buf, 1, size * nitems, (FILE *)arg);
}

int
rl_model_batches_upload(struct rl_model_batches *mb, FILE *jsonl,
                        const char *filename, char *file_id,
                        size_t file_id_size, char *errstr, size_t errstr_size)
{
    curl_mime *form = curl_mime_init(mb->easy);
    curl_mimepart *part;
    cJSON *answer = NULL;
    long start = ftell(jsonl);
    curl_off_t size;
    int err;

    if (!form || start < 0 || fseek(jsonl, 0, SEEK_END) != 0) {
        curl_mime_free(form);
        rl_set_err(errstr, errstr_size, "could not prepare the upload");
        return RL_ERR_IO;
    }
    size = (curl_off_t)(ftell(jsonl) - start);
    fseek(jsonl, start, SEEK_SET);
    part = curl_mime_addpart(form);
    curl_mime_name(part, "purpose");
    curl_mime_data(part, "batch", CURL_ZERO_TERMINATED);
    part = curl_mime_addpart(form);
    curl_mime_name(part, "file");
    curl_mime_filename(part, filename);
    curl_mime_type(part, "application/jsonl");
    curl_mime_data_cb(part, size, read_file, NULL, NULL, jsonl);
    err = request(mb, "POST", "/files", NULL, NULL, form, NULL, &answer, errstr,
                  errstr_size);
    curl_mime_free(form);
    if (err == RL_OK && copy_string(answer, "id", file_id, file_id_size)) {
        rl_set_err(errstr, errstr_size, "POST /files: answer names no id");
        err = RL_ERR_IO;
    }
    cJSON_Delete(answer);
    return err;
}

/* Walks every page of GET path (?limit=100&after=...) and returns the
 * first object match() accepts, copying its "id" into id. */
static int
find_in_pages(struct rl_model_batches *mb, const char *path, const char *filter,
              int (*match)(const cJSON *, const char *), const char *want,
              char *id, size_t id_size, char *errstr, size_t errstr_size)
{
    char extra[512], after[256] = "";

    for (int page = 0; page < PAGES_MAX; page++) {
        cJSON *answer = NULL;
        const cJSON *data, *obj;
        int err;

        snprintf(extra, sizeof(extra), "limit=100%s%s%s%s", filter ? "&" : "",
                 filter ? filter : "", *after ? "&after=" : "", after);
        err = request(mb, "GET", path, extra, NULL, NULL, NULL, &answer, errstr,
                      errstr_size);
        if (err)
            return err;
        data = cJSON_GetObjectItemCaseSensitive(answer, "data");
        cJSON_ArrayForEach(obj, data)
        {
            if (match(obj, want) && copy_string(obj, "id", id, id_size) == 0) {
                cJSON_Delete(answer);
                return RL_OK;
            }
        }
        if (!next_page(answer, after, sizeof(after))) {
            cJSON_Delete(answer);
            break;
        }
        cJSON_Delete(answer);
    }
    rl_set_err(errstr, errstr_size, "not found at the provider");
    return RL_ERR_NOTFOUND;
}

static int
file_named(const cJSON *obj, const char *filename)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "filename");

    return cJSON_IsString(name) && strcmp(name->valuestring, filename) == 0;
}

int
rl_model_batches_find_file(struct rl_model_batches *mb, const char *filename,
                           char *file_id, size_t file_id_size, char *errstr,
                           size_t errstr_size)
{
    return find_in_pages(mb, "/files", "purpose=batch", file_named, filename,
                         file_id, file_id_size, errstr, errstr_size);
}

/* The string metadata[key] of a batch object; NULL when it has none. */
static const char *
batch_meta(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(obj, "metadata"), key);

    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

static int
batch_named(const cJSON *obj, const char *local_id)
{
    const char *v = batch_meta(obj, RL_MODEL_META_BATCH);

    return v && strcmp(v, local_id) == 0;
}

/* Whether a batch object's status is one the provider may still run to
 * its end (and bill): a cancel stops it. */
static int
batch_live(const cJSON *obj)
{
    char status[32];

    copy_string(obj, "status", status, sizeof(status));
    return strcmp(status, "validating") == 0 ||
           strcmp(status, "in_progress") == 0 ||
           strcmp(status, "finalizing") == 0;
}

int
rl_model_batches_find(struct rl_model_batches *mb, const char *local_id,
                      char *batch_id, size_t batch_id_size, char *errstr,
                      size_t errstr_size)
{
    return find_in_pages(mb, "/batches", NULL, batch_named, local_id, batch_id,
                         batch_id_size, errstr, errstr_size);
}

int
rl_model_batches_create(struct rl_model_batches *mb, const char *input_file_id,
                        const char *endpoint, const char *completion_window,
                        const char *local_id, const char *installation_id,
                        const char *cluster_id, const char *fault,
                        char *batch_id, size_t batch_id_size, char *errstr,
                        size_t errstr_size)
{
    cJSON *req = cJSON_CreateObject(), *meta, *answer = NULL;
    char *json;
    int err;

    meta = cJSON_AddObjectToObject(req, "metadata");
    cJSON_AddStringToObject(req, "input_file_id", input_file_id);
    cJSON_AddStringToObject(req, "endpoint", endpoint);
    cJSON_AddStringToObject(req, "completion_window", completion_window);
    cJSON_AddStringToObject(meta, RL_MODEL_META_BATCH, local_id);
    /* So that the orphan sweep of this ledger, and of no other sharing
     * the provider project (a copy restored from a pg_dump keeps the
     * installation id, never the cluster), finds the batch when its
     * intent is lost. */
    if (installation_id && *installation_id)
        cJSON_AddStringToObject(meta, RL_MODEL_META_INSTALLATION,
                                installation_id);
    if (cluster_id && *cluster_id)
        cJSON_AddStringToObject(meta, RL_MODEL_META_CLUSTER, cluster_id);
    json = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!json) {
        rl_set_err(errstr, errstr_size, "out of memory");
        return RL_ERR_NOMEM;
    }
    err = request(mb, "POST", "/batches", NULL, json, NULL, fault, &answer,
                  errstr, errstr_size);
    cJSON_free(json);
    if (err == RL_OK && copy_string(answer, "id", batch_id, batch_id_size)) {
        rl_set_err(errstr, errstr_size, "POST /batches: answer names no id");
        err = RL_ERR_IO;
    }
    cJSON_Delete(answer);
    return err;
}

/* "/batches/<id>[/suffix]" for an id the provider gave; -1 when the id
 * holds anything a path must not. */
static int
batch_path(char *path, size_t size, const char *prefix, const char *id,
           const char *suffix)
{
    if (!*id || strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                           "XYZ0123456789-_.") != strlen(id))
        return -1;
    snprintf(path, size, "%s/%s%s", prefix, id, suffix);
    return 0;
}

int
rl_model_batches_get(struct rl_model_batches *mb, const char *batch_id,
                     struct rl_model_batch_state *st, char *errstr,
                     size_t errstr_size)
{
    char path[320];
    cJSON *answer = NULL;
    int err;

    memset(st, 0, sizeof(*st));
    if (batch_path(path, sizeof(path), "/batches", batch_id, "") != 0) {
        rl_set_err(errstr, errstr_size, "bad batch id");
        return RL_ERR_INVALID;
    }
    err = request(mb, "GET", path, NULL, NULL, NULL, NULL, &answer, errstr,
                  errstr_size);
    if (err == RL_OK) {
        copy_string(answer, "status", st->status, sizeof(st->status));
        copy_string(answer, "output_file_id", st->output_file_id,
                    sizeof(st->output_file_id));
        copy_string(answer, "error_file_id", st->error_file_id,
                    sizeof(st->error_file_id));
    }
    cJSON_Delete(answer);
    return err;
}

int
rl_model_batches_cancel(struct rl_model_batches *mb, const char *batch_id,
                        char *errstr, size_t errstr_size)
{
    char path[320];
    cJSON *answer = NULL;
    int err;

    if (batch_path(path, sizeof(path), "/batches", batch_id, "/cancel") != 0) {
        rl_set_err(errstr, errstr_size, "bad batch id");
        return RL_ERR_INVALID;
    }
    err = request(mb, "POST", path, NULL, "{}", NULL, NULL, &answer, errstr,
                  errstr_size);
    cJSON_Delete(answer);
    return err;
}

int
rl_model_batches_cancel_strays(struct rl_model_batches *mb,
                               const char *local_id, const char *keep_id,
                               int *cancelled, char *errstr, size_t errstr_size)
{
    char extra[512], after[256] = "", id[128];

    *cancelled = 0;
    for (int page = 0; page < PAGES_MAX; page++) {
        cJSON *answer = NULL;
        const cJSON *obj;
        int err;

        snprintf(extra, sizeof(extra), "limit=100%s%s", *after ? "&after=" : "",
                 after);
        err = request(mb, "GET", "/batches", extra, NULL, NULL, NULL, &answer,
                      errstr, errstr_size);
        if (err)
            return err;
        cJSON_ArrayForEach(obj,
                           cJSON_GetObjectItemCaseSensitive(answer, "data"))
        {
            if (!batch_named(obj, local_id) ||
                copy_string(obj, "id", id, sizeof(id)) != 0 ||
                strcmp(id, keep_id) == 0 || !batch_live(obj))
                continue;
            err = rl_model_batches_cancel(mb, id, errstr, errstr_size);
            if (err) {
                cJSON_Delete(answer);
                return err;
            }
            (*cancelled)++;
        }
        if (!next_page(answer, after, sizeof(after))) {
            cJSON_Delete(answer);
            break;
        }
        cJSON_Delete(answer);
    }
    return RL_OK;
}

int
rl_model_batches_list_live(struct rl_model_batches *mb,
                           const char *installation_id, const char *cluster_id,
                           long long created_after,
                           struct rl_model_batch_ref **refs, size_t *n,
                           char *errstr, size_t errstr_size)
{
    char extra[512], after[256] = "";
    struct rl_model_batch_ref *out = NULL;
    size_t cap = 0;
    int err = RL_OK;

    *refs = NULL;
    *n = 0;
    if (!installation_id || !*installation_id || !cluster_id || !*cluster_id) {
        rl_set_err(errstr, errstr_size, "no installation id or cluster id");
        return RL_ERR_INVALID;
    }
    for (int page = 0; page < PAGES_MAX; page++) {
        cJSON *answer = NULL;
        const cJSON *obj;
        int more, recent = 0;

        snprintf(extra, sizeof(extra), "limit=100%s%s", *after ? "&after=" : "",
                 after);
        err = request(mb, "GET", "/batches", extra, NULL, NULL, NULL, &answer,
                      errstr, errstr_size);
        if (err)
            break;
        cJSON_ArrayForEach(obj,
                           cJSON_GetObjectItemCaseSensitive(answer, "data"))
        {
            const char *inst = batch_meta(obj, RL_MODEL_META_INSTALLATION);
            const char *cluster = batch_meta(obj, RL_MODEL_META_CLUSTER);
            const char *local = batch_meta(obj, RL_MODEL_META_BATCH);
            const cJSON *created =
                cJSON_GetObjectItemCaseSensitive(obj, "created_at");
            struct rl_model_batch_ref *ref;

            /* A batch without its creation time may be recent. */
            if (!cJSON_IsNumber(created) ||
                created->valuedouble >= (double)created_after)
                recent = 1;

            /* Only this ledger's: another installation's intents are not
             * in this ledger, nor are those a copy of this ledger (same
             * installation, another cluster) made since the copy; and a
             * batch of a release that named neither cannot be told from
             * another's. */
            if (!inst || strcmp(inst, installation_id) != 0 || !cluster ||
                strcmp(cluster, cluster_id) != 0 || !local || !*local ||
                strlen(local) >= sizeof(ref->local_id) || !batch_live(obj))
                continue;
            if (*n == cap) {
                size_t grown = cap ? cap * 2 : 16;
                struct rl_model_batch_ref *tmp =
                    realloc(out, grown * sizeof(*out));

                if (!tmp) {
                    err = RL_ERR_NOMEM;
                    break;
                }
                out = tmp;
                cap = grown;
            }
            ref = &out[*n];
            if (copy_string(obj, "id", ref->id, sizeof(ref->id)) != 0)
                continue;
            snprintf(ref->local_id, sizeof(ref->local_id), "%s", local);
            (*n)++;
        }
        /* A page of only old batches: the rest are older, ended long
         * since (a whole history is not read at every sweep). */
        more = !err && recent && next_page(answer, after, sizeof(after));
        cJSON_Delete(answer);
        if (!more)
            break;
    }
    if (err == RL_ERR_NOMEM)
        rl_set_err(errstr, errstr_size, "GET /batches: out of memory");
    if (err || *n == 0) {
        free(out);
        *n = 0;
        return err;
    }
    *refs = out;
    return RL_OK;
}

/* A file's lines as they arrive, at most max bytes held. */
struct lines {
    struct rl_buf buf;
    size_t max;
    int (*on_line)(char *line, size_t len, void *arg);
    void *arg;
    int too_long;
    int stopped;
};

static int
emit(struct lines *l, size_t end)
{
    l->buf.data[end] = '\0';
    if (end > 0 && l->buf.data[end - 1] == '\r')
        l->buf.data[--end] = '\0';
    if (end == 0)
        return 0;
    return l->on_line(l->buf.data, end, l->arg);
}

static size_t
on_lines(char *data, size_t size, size_t nmemb, void *arg)
{
    struct lines *l = arg;
    size_t n = size * nmemb, i = 0;

    while (i < n) {
        char *nl = memchr(data + i, '\n', n - i);
        size_t take = nl ? (size_t)(nl - (data + i)) : n - i;

        if (l->buf.len + take + 1 > l->max) {
            l->too_long = 1;
            return 0;
        }
        rl_buf_put(&l->buf, data + i, take);
        if (l->buf.failed)
            return 0;
        i += take;
        if (!nl)
            break;
        i++;
        rl_buf_put(&l->buf, "", 1); /* room for the NUL */
        if (l->buf.failed)
            return 0;
        if (emit(l, l->buf.len - 1) != 0) {
            l->stopped = 1;
            return 0;
        }
        l->buf.len = 0;
    }
    return n;
}

int
rl_model_batches_read(struct rl_model_batches *mb, const char *file_id,
                      size_t max_line,
                      int (*on_line)(char *line, size_t len, void *arg),
                      void *arg, char *errstr, size_t errstr_size)
{
    struct lines l = {.max = max_line, .on_line = on_line, .arg = arg};
    char path[320], *url;
    CURL *easy = mb->easy;
    long status = 0;
    CURLcode rc;
    int err = RL_OK;

    if (batch_path(path, sizeof(path), "/files", file_id, "/content") != 0) {
        rl_set_err(errstr, errstr_size, "bad file id");
        return RL_ERR_INVALID;
    }
    url = model_build_url(mb->base_url, path, mb->query, NULL, errstr,
                          errstr_size);
    if (!url)
        return RL_ERR_INVALID;
    curl_easy_reset(easy);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, mb->json_headers);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, mb->connect_timeout_ms);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, mb->timeout_ms / 1000 + 1);
    curl_easy_setopt(easy, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_lines);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &l);
    set_progress(mb, easy);
    rc = curl_easy_perform(easy);
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_OK && l.buf.len > 0) {
        /* The last line has no newline. */
        rl_buf_put(&l.buf, "", 1);
        if (!l.buf.failed && emit(&l, l.buf.len - 1) != 0)
            l.stopped = 1;
    }
    if (l.buf.failed) {
        rl_set_err(errstr, errstr_size, "reading file %s: out of memory",
                   file_id);
        err = RL_ERR_NOMEM;
    } else if (l.too_long) {
        rl_set_err(errstr, errstr_size,
                   "reading file %s: a line is longer than %zu bytes", file_id,
                   max_line);
        err = RL_ERR_INVALID;
    } else if (l.stopped) {
        rl_set_err(errstr, errstr_size, "stopped");
        err = RL_ERR_IO;
    } else if (rc != CURLE_OK && mb->aborted) {
        rl_set_err(errstr, errstr_size,
                   "reading file %s: given up (the batch's lease is gone or "
                   "the worker stops)",
                   file_id);
        err = RL_ERR_IO;
    } else if (rc != CURLE_OK) {
        rl_set_err(errstr, errstr_size, "reading file %s: %s (status %ld)",
                   file_id, curl_easy_strerror(rc), status);
        /* Gone or refused (an expired file, a key that no longer reads
         * it) is refused again: RL_ERR_INVALID, as for any call. */
        err = refused(status) ? RL_ERR_INVALID
              : status >= 400 ? RL_ERR_HTTP
                              : RL_ERR_IO;
    }
    rl_buf_free(&l.buf);
    free(url);
    return err;
}

void
rl_model_batches_answer(const struct rl_model_batches *mb, const char *body,
                        size_t len, enum rl_model_api api,
                        struct rl_model_call *call)
{
    struct xfer x;

    memset(&x, 0, sizeof(x));
    x.resp = (char *)body;
    x.resp_len = len;
    x.api = api;
    call->outcome = RL_MODEL_OK;
    call->http_status = 200;
    call->retry_after_ms = -1;
    call->request_sent = 1;
    model_parse_completion(&mb->m, &x, call);
}

void
rl_model_batches_line_error(const struct rl_model_batches *mb, long status,
                            const char *body, size_t len,
                            struct rl_model_call *call)
{
    struct xfer x;

    memset(&x, 0, sizeof(x));
    x.resp = (char *)(body ? body : "");
    x.resp_len = body ? len : 0;
    call->http_status = status;
    call->retry_after_ms = -1;
    call->request_sent = 1;
    /* A line's status is the endpoint's verdict, as a live reply's is:
     * the same classification and the same redacted message. */
    model_classify(&mb->m, &x, CURLE_OK, call);
}
