/* Bounded hand-over between the pipeline's stages; the bounds are the
 * process-wide in-flight cap and held bytes that the Kafka thread enforces
 * by pausing, and the bytes each item is charged for them. */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "rl/err.h"

void
rl_queue_init(struct rl_queue *q)
{
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    q->head = q->tail = NULL;
    q->len = 0;
}

void
rl_queue_destroy(struct rl_queue *q)
{
    struct rl_item *item = q->head;

    while (item) {
        struct rl_item *next = item->next;
        rl_item_destroy(item);
        item = next;
    }
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
}

void
rl_queue_push(struct rl_queue *q, struct rl_item *item)
{
    item->next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail)
        q->tail->next = item;
    else
        q->head = item;
    q->tail = item;
    q->len++;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

struct rl_item *
rl_queue_take(struct rl_queue *q, size_t max)
{
    struct rl_item *head, *last;
    size_t n = 1;

    pthread_mutex_lock(&q->lock);
    head = q->head;
    if (!head) {
        pthread_mutex_unlock(&q->lock);
        return NULL;
    }
    last = head;
    while (last->next && (max == 0 || n < max)) {
        last = last->next;
        n++;
    }
    q->head = last->next;
    if (!q->head)
        q->tail = NULL;
    q->len -= n;
    last->next = NULL;
    pthread_mutex_unlock(&q->lock);
    return head;
}

int
rl_queue_empty(struct rl_queue *q)
{
    int empty;

    pthread_mutex_lock(&q->lock);
    empty = q->head == NULL;
    pthread_mutex_unlock(&q->lock);
    return empty;
}

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
        .prompt_tokens = call->prompt_tokens,
        .completion_tokens = call->completion_tokens,
        .cached_tokens = call->cached_tokens,
        .latency_ms = call->latency_ms,
    };
}
