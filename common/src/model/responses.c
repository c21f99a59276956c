/* The API a call speaks and what that changes: the chat body made into
 * the body one attempt sends (store and metadata for the endpoint's
 * record, the Responses API's shape for a model that speaks it), and a
 * Responses API answer read into a call. The chat answer is read in
 * response.c; transport.c sends what this builds. */
#include "model_int.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/buf.h"
#include "rl/err.h"
#include "rl/json.h"

int
rl_model_api_parse(const char *name, enum rl_model_api *api)
{
    if (name && strcmp(name, "chat") == 0) {
        *api = RL_MODEL_API_CHAT;
        return RL_OK;
    }
    if (name && strcmp(name, "responses") == 0) {
        *api = RL_MODEL_API_RESPONSES;
        return RL_OK;
    }
    return RL_ERR_INVALID;
}

/* Finds model in api_by_model: 1 and *api set when an entry names it, 0
 * when none does, -1 (errstr set) when an entry is malformed. */
static int
api_map_find(const char *map, const char *model, enum rl_model_api *api,
             char *errstr, size_t errstr_size)
{
    const char *p = map ? map : "";
    int found = 0;

    while (*p) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n);
        const char *name = p, *value;
        size_t name_len, value_len;
        char word[16];

        while (n > 0 && (*name == ' ' || *name == '\t')) {
            name++;
            n--;
        }
        if (n == 0) {
            p += strspn(p, ",");
            continue;
        }
        if (!eq || eq == name) {
            rl_set_err(errstr, errstr_size,
                       "RUNLEDGER_MODEL_API_BY_MODEL entries are "
                       "model=chat or model=responses, not \"%.*s\"",
                       (int)n, name);
            return -1;
        }
        name_len = (size_t)(eq - name);
        while (name_len > 0 &&
               (name[name_len - 1] == ' ' || name[name_len - 1] == '\t'))
            name_len--;
        value = eq + 1;
        value_len = n - (size_t)(value - name);
        while (value_len > 0 && (*value == ' ' || *value == '\t')) {
            value++;
            value_len--;
        }
        while (value_len > 0 &&
               (value[value_len - 1] == ' ' || value[value_len - 1] == '\t'))
            value_len--;
        snprintf(word, sizeof(word), "%.*s", (int)value_len, value);
        {
            enum rl_model_api a;

            if (value_len >= sizeof(word) ||
                rl_model_api_parse(word, &a) != RL_OK) {
                rl_set_err(errstr, errstr_size,
                           "RUNLEDGER_MODEL_API_BY_MODEL: the API of "
                           "\"%.*s\" must be chat or responses, not \"%.*s\"",
                           (int)name_len, name, (int)value_len, value);
                return -1;
            }
            if (!found && model && strlen(model) == name_len &&
                strncmp(model, name, name_len) == 0) {
                *api = a;
                found = 1;
            }
        }
        p = name + n;
        p += strspn(p, ",");
    }
    return found;
}

enum rl_model_api
rl_model_api_for(const char *api_by_model, enum rl_model_api def,
                 const char *model)
{
    enum rl_model_api api = def;

    if (!model || api_map_find(api_by_model, model, &api, NULL, 0) <= 0)
        return def;
    return api;
}

int
rl_model_api_map_check(const char *api_by_model, char *errstr,
                       size_t errstr_size)
{
    enum rl_model_api api;

    return api_map_find(api_by_model, NULL, &api, errstr, errstr_size) < 0
               ? RL_ERR_INVALID
               : RL_OK;
}

/* Moves obj's member from to the name to (replacing what to held). */
static int
rename_member(cJSON *obj, const char *from, const char *to)
{
    cJSON *item = cJSON_DetachItemFromObjectCaseSensitive(obj, from);

    if (!item)
        return 0;
    cJSON_DeleteItemFromObjectCaseSensitive(obj, to);
    if (!cJSON_AddItemToObject(obj, to, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

/* A chat message's content parts as the Responses API names them. */
static void
convert_parts(cJSON *content, int assistant)
{
    cJSON *part;

    cJSON_ArrayForEach(part, content)
    {
        cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");

        if (!cJSON_IsString(type) || !type->valuestring)
            continue;
        if (strcmp(type->valuestring, "text") == 0) {
            cJSON_SetValuestring(type,
                                 assistant ? "output_text" : "input_text");
        } else if (strcmp(type->valuestring, "image_url") == 0) {
            cJSON *img = cJSON_GetObjectItemCaseSensitive(part, "image_url");
            cJSON *url = cJSON_GetObjectItemCaseSensitive(img, "url");

            cJSON_SetValuestring(type, "input_image");
            if (cJSON_IsObject(img) && cJSON_IsString(url)) {
                cJSON *u = cJSON_DetachItemViaPointer(img, url);

                if (!cJSON_ReplaceItemInObjectCaseSensitive(part, "image_url",
                                                            u))
                    cJSON_Delete(u);
            }
        }
    }
}

/* Rewrites a chat request (req, a cJSON object) in place for POST
 * /responses. Returns 0, or -1 when out of memory. */
static int
to_responses(cJSON *req)
{
    cJSON *input, *msg, *fmt, *tools, *tool, *choice;

    if (rename_member(req, "messages", "input") != 0)
        return -1;
    input = cJSON_GetObjectItemCaseSensitive(req, "input");
    cJSON_ArrayForEach(msg, input)
    {
        cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
        int assistant = cJSON_IsString(role) && role->valuestring &&
                        strcmp(role->valuestring, "assistant") == 0;

        if (cJSON_IsArray(content))
            convert_parts(content, assistant);
    }
    if (cJSON_HasObjectItem(req, "max_completion_tokens")) {
        cJSON_DeleteItemFromObjectCaseSensitive(req, "max_tokens");
        if (rename_member(req, "max_completion_tokens", "max_output_tokens"))
            return -1;
    } else if (rename_member(req, "max_tokens", "max_output_tokens") != 0) {
        return -1;
    }
    fmt = cJSON_DetachItemFromObjectCaseSensitive(req, "response_format");
    if (fmt) {
        /* json_schema's object is flattened into format itself. */
        cJSON *schema =
            cJSON_DetachItemFromObjectCaseSensitive(fmt, "json_schema");
        cJSON *text, *member;

        if (cJSON_IsObject(schema)) {
            while ((member = schema->child)) {
                cJSON_DetachItemViaPointer(schema, member);
                cJSON_DeleteItemFromObjectCaseSensitive(fmt, member->string);
                if (!cJSON_AddItemToObject(fmt, member->string, member))
                    cJSON_Delete(member);
            }
        }
        cJSON_Delete(schema);
        text = cJSON_GetObjectItemCaseSensitive(req, "text");
        if (!cJSON_IsObject(text)) {
            cJSON_DeleteItemFromObjectCaseSensitive(req, "text");
            text = cJSON_AddObjectToObject(req, "text");
        }
        if (!text || !cJSON_AddItemToObject(text, "format", fmt)) {
            cJSON_Delete(fmt);
            return -1;
        }
    }
    tools = cJSON_GetObjectItemCaseSensitive(req, "tools");
    cJSON_ArrayForEach(tool, tools)
    {
        cJSON *fn = cJSON_DetachItemFromObjectCaseSensitive(tool, "function");
        cJSON *member;

        if (!cJSON_IsObject(fn)) {
            cJSON_Delete(fn);
            continue;
        }
        while ((member = fn->child)) {
            cJSON_DetachItemViaPointer(fn, member);
            cJSON_DeleteItemFromObjectCaseSensitive(tool, member->string);
            if (!cJSON_AddItemToObject(tool, member->string, member))
                cJSON_Delete(member);
        }
        cJSON_Delete(fn);
    }
    choice = cJSON_GetObjectItemCaseSensitive(req, "tool_choice");
    if (cJSON_IsObject(choice)) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(choice, "function");
        cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");

        if (cJSON_IsString(name)) {
            cJSON *n = cJSON_DetachItemViaPointer(fn, name);

            cJSON_DeleteItemFromObjectCaseSensitive(choice, "function");
            if (!cJSON_AddItemToObject(choice, "name", n)) {
                cJSON_Delete(n);
                return -1;
            }
        }
    }
    return 0;
}

/* Replaces meta's key with value (NULL/"": removed). Returns 0 or -1. */
static int
set_meta(cJSON *meta, const char *key, const char *value)
{
    cJSON_DeleteItemFromObjectCaseSensitive(meta, key);
    if (!value || !*value)
        return 0;
    return cJSON_AddStringToObject(meta, key, value) ? 0 : -1;
}

/* Adds "store": true and the run's metadata to req. Returns 0 or -1. */
static int
add_store(cJSON *req, const char *model, const struct rl_model_body_opts *opts)
{
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(req, "metadata");
    char attempt[16];

    cJSON_DeleteItemFromObjectCaseSensitive(req, "store");
    if (!cJSON_AddTrueToObject(req, "store"))
        return -1;
    if (!cJSON_IsObject(meta)) {
        cJSON_DeleteItemFromObjectCaseSensitive(req, "metadata");
        meta = cJSON_AddObjectToObject(req, "metadata");
        if (!meta)
            return -1;
    }
    snprintf(attempt, sizeof(attempt), "%d", opts->attempt_no);
    /* The run ID alone is no proof a record is this ledger's: run IDs are
     * deterministic, so another installation stores the same one. */
    cJSON_DeleteItemFromObjectCaseSensitive(meta, RL_MODEL_META_RUN_ID);
    if (!cJSON_AddStringToObject(meta, RL_MODEL_META_RUN_ID,
                                 opts->run_id ? opts->run_id : "") ||
        set_meta(meta, RL_MODEL_META_ATTEMPT, attempt) != 0 ||
        set_meta(meta, RL_MODEL_META_INSTALLATION, opts->installation_id) !=
            0 ||
        set_meta(meta, RL_MODEL_META_FINGERPRINT, opts->fingerprint) != 0 ||
        set_meta(meta, RL_MODEL_META_MODEL, model) != 0)
        return -1;
    return 0;
}

char *
rl_model_body_prepare(const char *chat_body,
                      const struct rl_model_body_opts *opts,
                      enum rl_model_api *api, char *errstr, size_t errstr_size)
{
    cJSON *req = chat_body ? cJSON_Parse(chat_body) : NULL;
    cJSON *model = cJSON_GetObjectItemCaseSensitive(req, "model");
    char *body = NULL;
    int found;

    *api = opts->api;
    if (!cJSON_IsObject(req) || !cJSON_IsString(model) || !model->valuestring) {
        rl_set_err(errstr, errstr_size,
                   "model request body is not an object with a model");
        goto done;
    }
    found = api_map_find(opts->api_by_model, model->valuestring, api, errstr,
                         errstr_size);
    if (found < 0)
        goto done;
    if (*api == RL_MODEL_API_RESPONSES && to_responses(req) != 0)
        goto nomem;
    if (opts->store && add_store(req, model->valuestring, opts) != 0)
        goto nomem;
    body = rl_json_print(req);
    if (!body)
        goto nomem;
    goto done;

nomem:
    rl_set_err(errstr, errstr_size, "out of memory building model request");
done:
    cJSON_Delete(req);
    return body;
}

static long long
count_of(const cJSON *obj, const char *name)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);

    if (!cJSON_IsNumber(item) || item->valuedouble < 0)
        return 0;
    if (item->valuedouble > (double)LLONG_MAX / 2)
        return LLONG_MAX / 2;
    return (long long)item->valuedouble;
}

/* A function_call output item as a chat tool call, added to calls. */
static int
add_tool_call(cJSON *calls, const cJSON *item)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(item, "call_id");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(item, "arguments");
    cJSON *call = cJSON_CreateObject(), *fn;
    int bad = !call;

    if (!cJSON_IsString(id))
        id = cJSON_GetObjectItemCaseSensitive(item, "id");
    if (!call)
        return -1;
    bad |= !cJSON_AddStringToObject(
        call, "id",
        cJSON_IsString(id) && id->valuestring ? id->valuestring : "");
    bad |= !cJSON_AddStringToObject(call, "type", "function");
    fn = cJSON_AddObjectToObject(call, "function");
    bad |= !fn;
    if (fn) {
        bad |= !cJSON_AddStringToObject(
            fn, "name",
            cJSON_IsString(name) && name->valuestring ? name->valuestring : "");
        bad |= !cJSON_AddStringToObject(
            fn, "arguments",
            cJSON_IsString(args) && args->valuestring ? args->valuestring
                                                      : "{}");
    }
    if (bad || !cJSON_AddItemToArray(calls, call)) {
        cJSON_Delete(call);
        return -1;
    }
    return 0;
}

void
model_parse_response_object(const struct rl_model *m, const cJSON *root,
                            struct rl_model_call *call)
{
    const cJSON *output, *item, *usage, *status, *model, *id;
    struct rl_buf text = {0};
    cJSON *calls = cJSON_CreateArray();
    int has_text = 0, nomem = !calls;

    id = cJSON_GetObjectItemCaseSensitive(root, "id");
    if (cJSON_IsString(id) && id->valuestring && id->valuestring[0])
        snprintf(call->upstream_request_id, sizeof(call->upstream_request_id),
                 "%s", id->valuestring);
    model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (cJSON_IsString(model) && model->valuestring && !call->model_name)
        call->model_name = strdup(model->valuestring);
    usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
    if (cJSON_IsObject(usage)) {
        call->prompt_tokens = count_of(usage, "input_tokens");
        call->completion_tokens = count_of(usage, "output_tokens");
        call->cached_tokens = count_of(
            cJSON_GetObjectItemCaseSensitive(usage, "input_tokens_details"),
            "cached_tokens");
    }
    status = cJSON_GetObjectItemCaseSensitive(root, "status");
    if (cJSON_IsString(status) && status->valuestring &&
        (strcmp(status->valuestring, "failed") == 0 ||
         strcmp(status->valuestring, "cancelled") == 0)) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        model_call_error(m, call, "model response status is %s",
                         status->valuestring);
        goto done;
    }
    output = cJSON_GetObjectItemCaseSensitive(root, "output");
    if (!cJSON_IsArray(output)) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        model_call_error(m, call, "model response has no output array");
        goto done;
    }
    cJSON_ArrayForEach(item, output)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(item, "type");
        const cJSON *part;

        if (!cJSON_IsString(type) || !type->valuestring)
            continue;
        if (strcmp(type->valuestring, "function_call") == 0) {
            nomem |= calls && add_tool_call(calls, item) != 0;
            continue;
        }
        if (strcmp(type->valuestring, "message") != 0)
            continue;
        cJSON_ArrayForEach(part,
                           cJSON_GetObjectItemCaseSensitive(item, "content"))
        {
            const cJSON *ptype = cJSON_GetObjectItemCaseSensitive(part, "type");
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");

            if (cJSON_IsString(ptype) && ptype->valuestring &&
                strcmp(ptype->valuestring, "output_text") == 0 &&
                cJSON_IsString(t) && t->valuestring && t->valuestring[0]) {
                rl_buf_put(&text, t->valuestring, strlen(t->valuestring));
                has_text = 1;
            }
        }
    }
    if (nomem) {
        call->outcome = RL_MODEL_AMBIGUOUS;
        model_call_error(m, call, "out of memory copying model response");
        goto done;
    }
    if (!has_text && cJSON_GetArraySize(calls) == 0) {
        call->outcome = RL_MODEL_INVALID_OUTPUT;
        model_call_error(m, call,
                         "model response has neither output_text nor a "
                         "function_call");
        goto done;
    }
    if (has_text) {
        call->text = rl_buf_take(&text);
        if (!call->text) {
            call->outcome = RL_MODEL_AMBIGUOUS;
            model_call_error(m, call, "out of memory copying model response");
            goto done;
        }
    }
    if (cJSON_GetArraySize(calls) > 0) {
        call->tool_calls = rl_json_print(calls);
        if (!call->tool_calls) {
            free(call->text);
            call->text = NULL;
            call->outcome = RL_MODEL_AMBIGUOUS;
            model_call_error(m, call, "out of memory copying model response");
            goto done;
        }
    }
    call->outcome = RL_MODEL_OK;
done:
    rl_buf_free(&text);
    cJSON_Delete(calls);
}

void
model_partial_response_id(const struct xfer *x, struct rl_model_call *call)
{
    const char *p, *end;
    size_t n = 0;
    char id[sizeof(call->upstream_request_id)];

    if (!x->resp || x->resp_len == 0)
        return;
    end = x->resp + x->resp_len;
    /* The object's first member: {"id": "resp_..." as OpenAI and the
     * stub both print it; anything else and no id is taken. */
    p = x->resp;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    if (end - p < 6 || memcmp(p, "{\"id\"", 5) != 0)
        return;
    p += 5;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || *p++ != ':')
        return;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end || *p++ != '"')
        return;
    while (p < end && *p != '"' && n + 1 < sizeof(id)) {
        /* An id is visible ASCII without escapes. */
        if (*p <= 0x20 || *p >= 0x7f || *p == '\\')
            return;
        id[n++] = *p++;
    }
    if (p >= end || *p != '"' || n == 0)
        return;
    id[n] = '\0';
    memcpy(call->upstream_request_id, id, n + 1);
}
