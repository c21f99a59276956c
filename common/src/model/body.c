/* The model request's body and the stored output: the event's request
 * with {{input}} substituted, its size measured before it is built, and
 * the answer as the ledger stores it. No transport here: transport.c sends
 * what this builds. */
#include "rl/model.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/err.h"
#include "rl/json.h"

#define INPUT_PLACEHOLDER "{{input}}"

/* text with every INPUT_PLACEHOLDER replaced by input, or NULL (no
 * placeholder in text, *found untouched; or out of memory, *nomem set). */
static char *
substitute(const char *text, const char *input, int *found, int *nomem)
{
    const size_t ph_len = sizeof(INPUT_PLACEHOLDER) - 1;
    size_t in_len = strlen(input), count = 0, out_len;
    const char *p;
    char *out, *o;

    for (p = strstr(text, INPUT_PLACEHOLDER); p;
         p = strstr(p + ph_len, INPUT_PLACEHOLDER))
        count++;
    if (count == 0)
        return NULL;
    *found = 1;
    out_len = strlen(text) - count * ph_len + count * in_len;
    out = malloc(out_len + 1);
    if (!out) {
        *nomem = 1;
        return NULL;
    }
    o = out;
    for (p = text;;) {
        const char *hit = strstr(p, INPUT_PLACEHOLDER);

        if (!hit) {
            strcpy(o, p);
            break;
        }
        memcpy(o, p, (size_t)(hit - p));
        o += hit - p;
        memcpy(o, input, in_len);
        o += in_len;
        p = hit + ph_len;
    }
    return out;
}

/* Replaces the string member name of obj when it holds the placeholder.
 * Returns 0, or -1 when out of memory. */
static int
substitute_member(cJSON *obj, const char *name, const char *input, int *found)
{
    cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
    cJSON *repl;
    char *text;
    int nomem = 0;

    if (!cJSON_IsString(item) || !item->valuestring)
        return 0;
    text = substitute(item->valuestring, input, found, &nomem);
    if (!text)
        return nomem ? -1 : 0;
    repl = cJSON_CreateString(text);
    free(text);
    if (!repl)
        return -1;
    /* ...InObject, not ...ViaPointer: the replacement needs the key */
    if (!cJSON_ReplaceItemInObjectCaseSensitive(obj, name, repl)) {
        cJSON_Delete(repl);
        return -1;
    }
    return 0;
}

static int
is_null_input(const char *raw)
{
    const char *end;

    if (!raw)
        return 1;
    while (*raw == ' ' || *raw == '\t' || *raw == '\r' || *raw == '\n')
        raw++;
    if (strncmp(raw, "null", 4) != 0)
        return 0;
    for (end = raw + 4; *end; end++) {
        if (*end != ' ' && *end != '\t' && *end != '\r' && *end != '\n')
            return 0;
    }
    return 1;
}

static int
append_input_message(cJSON *messages, const char *raw)
{
    static const char prefix[] = "Input:\n";
    size_t len = sizeof(prefix) + strlen(raw);
    cJSON *msg;
    char *content = malloc(len);

    if (!content)
        return -1;
    snprintf(content, len, "%s%s", prefix, raw);
    msg = cJSON_CreateObject();
    if (!msg || !cJSON_AddStringToObject(msg, "role", "user") ||
        !cJSON_AddStringToObject(msg, "content", content)) {
        cJSON_Delete(msg);
        free(content);
        return -1;
    }
    free(content);
    if (!cJSON_AddItemToArray(messages, msg)) {
        cJSON_Delete(msg);
        return -1;
    }
    return 0;
}

/* Bytes cJSON prints for the characters of s inside a JSON string: the
 * quote, the backslash and the five short escapes take two, any other
 * control character six (\u00XX), every other byte one. */
static size_t
escaped_len(const char *s)
{
    size_t n = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == '\b' || *p == '\f' || *p == '\n' ||
            *p == '\r' || *p == '\t')
            n += 2;
        else if (*p < 32)
            n += 6;
        else
            n++;
    }
    return n;
}

static size_t
count_placeholders(const cJSON *item)
{
    const size_t ph_len = sizeof(INPUT_PLACEHOLDER) - 1;
    size_t n = 0;

    if (!cJSON_IsString(item) || !item->valuestring)
        return 0;
    for (const char *p = strstr(item->valuestring, INPUT_PLACEHOLDER); p;
         p = strstr(p + ph_len, INPUT_PLACEHOLDER))
        n++;
    return n;
}

int
rl_model_body_size(const char *request_json, const char *raw_input_json,
                   size_t *size, char *errstr, size_t errstr_size)
{
    const char *input = raw_input_json ? raw_input_json : "null";
    const size_t ph_len = sizeof(INPUT_PLACEHOLDER) - 1;
    cJSON *root = NULL, *req, *model, *messages, *msg, *stream;
    char *printed = NULL;
    size_t found = 0, in_len;
    int err = RL_ERR_INVALID;

    *size = 0;
    if (!request_json) {
        rl_set_err(errstr, errstr_size, "effective request is missing");
        goto done;
    }
    root = cJSON_Parse(request_json);
    req = cJSON_GetObjectItemCaseSensitive(root, "request");
    model = cJSON_GetObjectItemCaseSensitive(req, "model");
    messages = cJSON_GetObjectItemCaseSensitive(req, "messages");
    if (!cJSON_IsObject(req) || !cJSON_IsString(model) ||
        !cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0) {
        rl_set_err(errstr, errstr_size,
                   "effective request is not a request rl_model_build_body "
                   "accepts");
        goto done;
    }
    /* The members rl_model_build_body() substitutes, counted where they
     * stand: the placeholders stay in the tree, printed as themselves. */
    cJSON_ArrayForEach(msg, messages)
    {
        cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
        cJSON *part;

        if (cJSON_IsString(content)) {
            found += count_placeholders(content);
            continue;
        }
        if (!cJSON_IsArray(content))
            continue;
        cJSON_ArrayForEach(part, content)
        {
            cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");

            if (cJSON_IsString(type) && type->valuestring &&
                strcmp(type->valuestring, "text") == 0)
                found += count_placeholders(
                    cJSON_GetObjectItemCaseSensitive(part, "text"));
        }
    }
    err = RL_ERR_NOMEM;
    /* Appended once, so its cost is one copy of an input the event
     * already bounds. */
    if (!found && !is_null_input(raw_input_json) &&
        append_input_message(messages, raw_input_json) != 0)
        goto nomem;
    cJSON_DeleteItemFromObjectCaseSensitive(req, "stream_options");
    stream = cJSON_GetObjectItemCaseSensitive(req, "stream");
    if (stream) {
        cJSON *no = cJSON_CreateFalse();

        if (!no || !cJSON_ReplaceItemInObjectCaseSensitive(req, "stream", no)) {
            cJSON_Delete(no);
            goto nomem;
        }
    } else if (!cJSON_AddFalseToObject(req, "stream")) {
        goto nomem;
    }
    printed = cJSON_PrintUnformatted(req);
    if (!printed)
        goto nomem;
    in_len = found ? escaped_len(input) : 0;
    /* Saturates instead of wrapping: any such size is over every limit. */
    if (found && in_len > ph_len &&
        found > (SIZE_MAX - strlen(printed)) / (in_len - ph_len))
        *size = SIZE_MAX;
    else
        *size = strlen(printed) - found * ph_len + found * in_len;
    err = RL_OK;
    goto done;

nomem:
    rl_set_err(errstr, errstr_size, "out of memory measuring model request");
done:
    if (printed)
        cJSON_free(printed);
    cJSON_Delete(root);
    return err;
}

char *
rl_model_build_body(const char *request_json, const char *raw_input_json,
                    char *errstr, size_t errstr_size)
{
    const char *input = raw_input_json ? raw_input_json : "null";
    cJSON *root = NULL, *req, *model, *messages, *msg, *stream;
    char *body = NULL;
    int found = 0;

    if (!request_json) {
        rl_set_err(errstr, errstr_size, "effective request is missing");
        goto done;
    }
    root = cJSON_Parse(request_json);
    if (!root) {
        rl_set_err(errstr, errstr_size, "effective request is not valid json");
        goto done;
    }
    req = cJSON_GetObjectItemCaseSensitive(root, "request");
    if (!cJSON_IsObject(req)) {
        rl_set_err(errstr, errstr_size,
                   "effective request has no \"request\" object");
        goto done;
    }
    model = cJSON_GetObjectItemCaseSensitive(req, "model");
    if (!cJSON_IsString(model) || !model->valuestring || !*model->valuestring) {
        rl_set_err(errstr, errstr_size,
                   "effective request has no \"model\" string");
        goto done;
    }
    messages = cJSON_GetObjectItemCaseSensitive(req, "messages");
    if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0) {
        rl_set_err(errstr, errstr_size,
                   "effective request has no non-empty \"messages\" array");
        goto done;
    }

    cJSON_ArrayForEach(msg, messages)
    {
        cJSON *content, *part;

        if (!cJSON_IsObject(msg)) {
            rl_set_err(errstr, errstr_size,
                       "effective request has a message that is not an object");
            goto done;
        }
        content = cJSON_GetObjectItemCaseSensitive(msg, "content");
        if (cJSON_IsString(content)) {
            /* replaces (frees) content: do not touch it afterwards */
            if (substitute_member(msg, "content", input, &found) != 0)
                goto nomem;
            continue;
        }
        if (!cJSON_IsArray(content))
            continue;
        cJSON_ArrayForEach(part, content)
        {
            cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");

            if (!cJSON_IsString(type) || !type->valuestring ||
                strcmp(type->valuestring, "text") != 0)
                continue;
            if (substitute_member(part, "text", input, &found) != 0)
                goto nomem;
        }
    }
    if (!found && !is_null_input(raw_input_json) &&
        append_input_message(messages, raw_input_json) != 0)
        goto nomem;

    /* One JSON response is what this client reads; stream_options is
     * rejected by endpoints unless stream is true. */
    cJSON_DeleteItemFromObjectCaseSensitive(req, "stream_options");
    stream = cJSON_GetObjectItemCaseSensitive(req, "stream");
    if (stream) {
        cJSON *no = cJSON_CreateFalse();

        if (!no || !cJSON_ReplaceItemInObjectCaseSensitive(req, "stream", no)) {
            cJSON_Delete(no);
            goto nomem;
        }
    } else if (!cJSON_AddFalseToObject(req, "stream")) {
        goto nomem;
    }

    body = rl_json_print(req);
    if (!body)
        goto nomem;
    goto done;

nomem:
    rl_set_err(errstr, errstr_size, "out of memory building model request");
done:
    cJSON_Delete(root);
    return body;
}

char *
rl_model_output_json(const struct rl_model_call *call)
{
    cJSON *out, *usage;
    char *json = NULL;
    int bad = 0;

    if (!call || call->outcome != RL_MODEL_OK ||
        (!call->text && !call->tool_calls))
        return NULL;
    out = cJSON_CreateObject();
    if (!out)
        return NULL;
    if (call->text)
        bad |= !cJSON_AddStringToObject(out, "text", call->text);
    else
        bad |= !cJSON_AddNullToObject(out, "text");
    if (call->tool_calls) {
        cJSON *calls = cJSON_Parse(call->tool_calls);

        if (!calls || !cJSON_AddItemToObject(out, "tool_calls", calls)) {
            cJSON_Delete(calls);
            bad = 1;
        }
    }
    if (call->model_name)
        bad |= !cJSON_AddStringToObject(out, "model", call->model_name);
    else
        bad |= !cJSON_AddNullToObject(out, "model");
    if (call->upstream_request_id[0])
        bad |= !cJSON_AddStringToObject(out, "upstream_request_id",
                                        call->upstream_request_id);
    else
        bad |= !cJSON_AddNullToObject(out, "upstream_request_id");
    usage = cJSON_AddObjectToObject(out, "usage");
    bad |= !usage;
    if (usage) {
        bad |= !cJSON_AddNumberToObject(usage, "prompt_tokens",
                                        (double)call->prompt_tokens);
        bad |= !cJSON_AddNumberToObject(usage, "completion_tokens",
                                        (double)call->completion_tokens);
        bad |= !cJSON_AddNumberToObject(usage, "cached_tokens",
                                        (double)call->cached_tokens);
    }
    if (!bad)
        json = rl_json_print(out);
    cJSON_Delete(out);
    return json;
}
