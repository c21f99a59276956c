/* The lifecycle of one run in flight (struct rl_item): the bytes it is
 * charged for against RUNLEDGER_MAX_HELD_BYTES from intake on, kept up to
 * date as its copies come and go, and its end. */
#include <stdlib.h>
#include <string.h>

#include "item.h"
#include "rl/err.h"

static size_t
str_bytes(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

static size_t
event_bytes(const struct rl_event *ev)
{
    size_t n;

    if (!ev)
        return 0;
    n = sizeof(*ev) + str_bytes(ev->job) + str_bytes(ev->tenant) +
        str_bytes(ev->version) + str_bytes(ev->window) +
        str_bytes(ev->input_json) + str_bytes(ev->request_json);
    for (size_t i = 0; i < ev->notify_count; i++)
        n += sizeof(char *) + str_bytes(ev->notify[i]);
    return n;
}

/* The bytes item holds now, plus the copies its claim will make of its
 * event and the body it will send, until they exist. */
static size_t
footprint(const struct rl_item *item)
{
    const struct rl_event *ev = item->ev;
    size_t n = sizeof(*item);

    if (item->value)
        n += item->value_len + 1;
    n += event_bytes(ev);
    n += str_bytes(item->job) + str_bytes(item->tenant) +
         str_bytes(item->landed_error) + item->dead_letter_bytes;
    if (item->request_json)
        n += str_bytes(item->request_json);
    else if (ev)
        n += str_bytes(ev->request_json);
    if (item->raw_input)
        n += str_bytes(item->raw_input);
    else if (ev)
        n += str_bytes(ev->input_json);
    /* Until its answer is back the call is the model's (its body with
     * it): count the body as measured, never the call's fields. */
    if (item->in_model || !item->in_result)
        n += item->body_reserve;
    else
        n += str_bytes(item->call.body) + str_bytes(item->call.text) +
             str_bytes(item->call.tool_calls) +
             str_bytes(item->call.model_name);
    return n;
}

void
rl_item_recount(struct rl_item *item)
{
    size_t now;

    if (!item || !item->held_bytes)
        return;
    now = footprint(item);
    if (now > item->held)
        atomic_fetch_add(item->held_bytes, (long long)(now - item->held));
    else if (now < item->held)
        atomic_fetch_sub(item->held_bytes, (long long)(item->held - now));
    item->held = now;
}

void
rl_item_charge(struct rl_item *item, atomic_llong *held_bytes, size_t max_body)
{
    const char *request_json = item->request_json, *input = item->raw_input;
    char errstr[256];
    size_t size = 0;

    if (!request_json && item->ev)
        request_json = item->ev->request_json;
    if (!input)
        input = item->ev ? item->ev->input_json : "null";
    if (request_json &&
        rl_model_body_size(request_json, input, &size, errstr,
                           sizeof(errstr)) == RL_OK &&
        size <= max_body)
        item->body_reserve = size;
    item->held_bytes = held_bytes;
    rl_item_recount(item);
}

void
rl_item_destroy(struct rl_item *item)
{
    if (!item)
        return;
    if (item->held_bytes)
        atomic_fetch_sub(item->held_bytes, (long long)item->held);
    rl_event_destroy(item->ev);
    free(item->value);
    free(item->job);
    free(item->tenant);
    free(item->request_json);
    free(item->raw_input);
    free(item->version);
    free(item->origin_topic);
    free(item->landed_error);
    free(item->refusal_reason);
    free(item->refusal_detail);
    rl_model_call_clear(&item->call);
    rl_model_call_clear(&item->lookup);
    free(item->reconcile_attempts);
    free(item->reconcile_model);
    free(item);
}

struct rl_attempt_ok
rl_item_attempt_ok(const struct rl_item *item)
{
    const struct rl_model_call *call = &item->call;

    return (struct rl_attempt_ok){
        .attempt_no = item->attempt_no,
        .http_status = (int)call->http_status,
        .upstream_request_id = call->upstream_request_id,
        /* An answer read back from the endpoint's record is charged with
         * every generation found there for the run's ambiguous attempts,
         * the adopted one and any other: each was billed. */
        .prompt_tokens =
            call->prompt_tokens +
            (item->reconciled ? item->lookup.found_extra_prompt_tokens : 0),
        .completion_tokens =
            call->completion_tokens +
            (item->reconciled ? item->lookup.found_extra_completion_tokens : 0),
        .cached_tokens =
            call->cached_tokens +
            (item->reconciled ? item->lookup.found_extra_cached_tokens : 0),
        .latency_ms = call->latency_ms,
    };
}
