/* The response: libcurl's header and body callbacks, the completion
 * parsed out of a 2xx body, and every result classified into one
 * failure class (rl/model.h). @locality model thread */
#include "model_int.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rl/json.h"
#include "rl/testing.h"

/* An error body only explains a status: keep its start, drain the rest. */
#define ERROR_BODY_KEEP 4096
/* First allocation for a 2xx body; grows by doubling up to the cap. */
#define BODY_INITIAL_SIZE 2048

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

/* Response headers naming the upstream request, most trusted first:
 * OpenAI's own, Azure's and Anthropic-style, LiteLLM's call id, then Azure
 * API Management's. */
static const char *const request_id_headers[] = {
    "x-request-id",
    "request-id",
    "x-litellm-call-id",
    "apim-request-id",
};

long
model_response_code(struct xfer *x)
{
    long status = 0;

    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

size_t
model_on_header(char *buf, size_t size, size_t nitems, void *userdata)
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
        rl_ratelimit_headers_init(&x->ratelimit);
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
    rl_ratelimit_headers_read(&x->ratelimit, name, value);
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
            x->retry_after_ms = model_parse_retry_after(value);
    } else if (strcasecmp(name, "content-length") == 0) {
        long status = model_response_code(x);
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
size_t
model_on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct xfer *x = userdata;
    size_t n = size * nmemb;
    long status = model_response_code(x);

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

static void parse_chat_object(const struct rl_model *m, const cJSON *root,
                              struct rl_model_call *call);

/* The string metadata[key] of a stored record, or NULL. */
static const char *
meta_string(const cJSON *record, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(record, "metadata"), key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* want NULL or "": anything goes; else got is it. */
static int
same(const char *want, const char *got)
{
    return !want || !*want || (got && strcmp(want, got) == 0);
}

/* The record answered for the model the run asked for: the same name, or
 * a dated snapshot of it ("gpt-4o" is answered as "gpt-4o-2024-08-06",
 * "gpt-4" as "gpt-4-0613"). */
static int
same_model(const char *want, const char *got)
{
    const char *date;
    size_t n;

    if (!want || !*want)
        return 1;
    if (!got)
        return 0;
    n = strlen(want);
    if (strncmp(want, got, n) != 0)
        return 0;
    if (got[n] == '\0')
        return 1;
    if (got[n] != '-')
        return 0;
    /* A date of digits and dashes, not another model of the family whose
     * name goes on with a digit ("claude-3" is not "claude-3-5-sonnet-
     * 20241022", "gpt-4" not "gpt-4-32k"). */
    date = got + n + 1;
    if (*date < '0' || *date > '9')
        return 0;
    for (; *date; date++) {
        if ((*date < '0' || *date > '9') && *date != '-')
            return 0;
    }
    return date[-1] != '-';
}

static int
looked_up(const struct rl_model_call *call, int attempt)
{
    if (!call->lookup_attempts || call->lookup_nattempts <= 0)
        return attempt == call->attempt_no;
    for (int i = 0; i < call->lookup_nattempts; i++)
        if (call->lookup_attempts[i] == attempt)
            return 1;
    return 0;
}

/* Of a list page of the run's stored completions, the one to adopt: the
 * earliest ("created", then the list's order, which is oldest first) of
 * those naming an attempt looked up, this installation, the run's
 * fingerprint and its model. Every such record is a
 * generation (an attempt sent twice, by a transport or a gateway,
 * stores two): call->found_records counts them and found_extra_* holds
 * the usage of those not adopted. A record naming the run but another
 * installation, fingerprint or model is another ledger's (run IDs are
 * deterministic) or another request's: counted in foreign_records,
 * never adopted. NULL when none matches. */
const cJSON *
rl_model_pick_stored(const cJSON *data, struct rl_model_call *call)
{
    const cJSON *rec, *best = NULL;
    double best_created = 0;
    long long prompt = 0, completion = 0, cached = 0;

    call->found_records = call->foreign_records = 0;
    call->found_attempt = 0;
    cJSON_ArrayForEach(rec, data)
    {
        const char *run = meta_string(rec, RL_MODEL_META_RUN_ID);
        const char *att = meta_string(rec, RL_MODEL_META_ATTEMPT);
        /* The model asked for, as the record's metadata names it: an
         * endpoint may answer under another name (Azure answers a
         * deployment's request with the model behind it). A record
         * without that key: the model that answered. */
        const char *asked = meta_string(rec, RL_MODEL_META_MODEL);
        const cJSON *model = cJSON_GetObjectItemCaseSensitive(rec, "model");
        const cJSON *created = cJSON_GetObjectItemCaseSensitive(rec, "created");
        const cJSON *usage = cJSON_GetObjectItemCaseSensitive(rec, "usage");
        double when = cJSON_IsNumber(created) ? created->valuedouble : 0;
        char *end = NULL;
        long attempt;

        if (!cJSON_IsObject(rec) || !run || strcmp(run, call->run_id) != 0)
            continue;
        if (!same(call->lookup_installation,
                  meta_string(rec, RL_MODEL_META_INSTALLATION)) ||
            !same(call->lookup_fingerprint,
                  meta_string(rec, RL_MODEL_META_FINGERPRINT)) ||
            !(asked ? same(call->lookup_model, asked)
                    : same_model(call->lookup_model, cJSON_IsString(model)
                                                         ? model->valuestring
                                                         : NULL))) {
            call->foreign_records++;
            continue;
        }
        attempt = att ? strtol(att, &end, 10) : 0;
        if (!att || end == att || *end || attempt <= 0 || attempt > INT_MAX ||
            !looked_up(call, (int)attempt))
            continue;
        call->found_records++;
        if (cJSON_IsObject(usage)) {
            const cJSON *details = cJSON_GetObjectItemCaseSensitive(
                usage, "prompt_tokens_details");

            prompt += usage_number(usage, "prompt_tokens");
            completion += usage_number(usage, "completion_tokens");
            if (cJSON_IsObject(details))
                cached += usage_number(details, "cached_tokens");
        }
        if (!best || when < best_created) {
            best = rec;
            best_created = when;
            call->found_attempt = (int)attempt;
        }
    }
    if (best) {
        const cJSON *usage = cJSON_GetObjectItemCaseSensitive(best, "usage");
        const cJSON *details =
            cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens_details");

        if (cJSON_IsObject(usage)) {
            prompt -= usage_number(usage, "prompt_tokens");
            completion -= usage_number(usage, "completion_tokens");
            if (cJSON_IsObject(details))
                cached -= usage_number(details, "cached_tokens");
        }
        call->found_extra_prompt_tokens = prompt;
        call->found_extra_completion_tokens = completion;
        call->found_extra_cached_tokens = cached;
    }
    return best;
}

/* Reads a 2xx answer into call: a chat completion, a Responses API
 * object, or a lookup's record of one. Usage is kept even when the
 * content is unusable: those tokens were billed. */
void
model_parse_completion(const struct rl_model *m, const struct xfer *x,
                       struct rl_model_call *call)
{
    cJSON *root;
    const cJSON *answer;

    root = x->resp ? cJSON_ParseWithLength(x->resp, x->resp_len) : NULL;
    if (!cJSON_IsObject(root)) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        model_call_error(m, call,
                         "model response is not a json object (%zu bytes)",
                         x->resp_len);
        goto done;
    }
    answer = root;
    if (x->lookup && x->api == RL_MODEL_API_CHAT) {
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");

        if (!cJSON_IsArray(data)) {
            call->outcome = RL_MODEL_INVALID_OUTPUT;
            model_call_error(m, call,
                             "stored completions list has no data array");
            goto done;
        }
        answer = rl_model_pick_stored(data, call);
        if (!answer) {
            call->outcome = RL_MODEL_NOT_FOUND;
            model_call_error(m, call,
                             "no stored completion of this ledger for "
                             "attempt %d%s (%d of another installation, "
                             "request or model)",
                             call->attempt_no,
                             call->lookup_nattempts > 1 ? " or an earlier one"
                                                        : "",
                             call->foreign_records);
            goto done;
        }
    }
    if (x->api == RL_MODEL_API_RESPONSES)
        model_parse_response_object(m, answer, call);
    else
        parse_chat_object(m, answer, call);
done:
    cJSON_Delete(root);
}

/* Reads a chat completion object into call. */
static void
parse_chat_object(const struct rl_model *m, const cJSON *root,
                  struct rl_model_call *call)
{
    const cJSON *choices, *message, *content, *tool_calls, *model, *id, *usage;
    int has_text, has_calls;

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
        model_call_error(m, call,
                         "model response has no choices[0].message object");
        return;
    }
    /* A message that calls tools is an answer: its content is null (or
     * empty, or a preamble) and the caller acts on the calls. */
    has_text = cJSON_IsString(content) && content->valuestring &&
               content->valuestring[0] != '\0';
    has_calls = cJSON_IsArray(tool_calls) && cJSON_GetArraySize(tool_calls) > 0;
    if (!has_text && !has_calls) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        if (cJSON_IsString(content) && content->valuestring)
            model_call_error(m, call, "model response content is empty");
        else
            model_call_error(
                m, call,
                "model response has neither a "
                "choices[0].message.content string nor tool_calls");
        return;
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
        model_call_error(m, call, "out of memory copying model response");
        return;
    }
    call->outcome = RL_MODEL_OK;
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
        model_call_error(m, call, "model endpoint returned http %ld: %s",
                         call->http_status, msg);
    else
        model_call_error(m, call, "model endpoint returned http %ld",
                         call->http_status);
}

/* Translates how a finished transfer ended into an outcome. */
void
model_classify(const struct rl_model *m, struct xfer *x, CURLcode rc,
               struct rl_model_call *call)
{
    long status = call->http_status;
    int final_status = status >= 200;

    if (x->oversize) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        model_call_error(m, call, "model response is larger than %zu bytes",
                         m->max_response_bytes);
        return;
    }
    if (x->nomem) {
        call->outcome =
            call->request_sent ? RL_MODEL_AMBIGUOUS : RL_MODEL_NOT_SENT;
        model_call_error(m, call, "out of memory reading model response");
        return;
    }
    if (rc != CURLE_OK && !(final_status && (status < 200 || status > 299))) {
        /* No verdict from the endpoint. Whether it may have generated
         * depends only on whether any request byte left this process. */
        call->outcome =
            call->request_sent ? RL_MODEL_AMBIGUOUS : RL_MODEL_NOT_SENT;
        model_call_error(m, call, "model call failed: %s",
                         x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
        if (call->outcome == RL_MODEL_AMBIGUOUS && !x->lookup &&
            x->api == RL_MODEL_API_RESPONSES && status >= 200 && status <= 299)
            model_partial_response_id(x, call);
        return;
    }
    /* A non-2xx status is the endpoint's verdict even if its error body was
     * cut short. */
    if (status >= 200 && status <= 299) {
        model_parse_completion(m, x, call);
    } else if (x->lookup && status == 404) {
        /* No such record, or none kept: the caller waits and asks again
         * until its settle window ends. */
        call->outcome = RL_MODEL_NOT_FOUND;
        model_call_error(m, call, "the endpoint holds no record (http 404)");
    } else {
        classify_status(m, x, call);
    }
}
