/* Throttling: a provider's 429 or exhausted rate-limit headers pause the
 * model for every worker of the group through the ledger's model rate
 * limits (rl_db_model_throttled), with an adaptive cap when the provider
 * publishes no headers. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "ledger_int.h"
#include "rl/db_model_limits.h"
#include "rl/log.h"

/* The pause of a model answered 429 without Retry-After nor reset
 * headers. */
#define RL_THROTTLE_DEFAULT_MS 1000

/* The "model" of the run's request into buf ("" when it has none). */
static void
model_of(const struct rl_item *item, char *buf, size_t size)
{
    cJSON *root = cJSON_Parse(item->request_json ? item->request_json : "");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(req, "model");

    snprintf(buf, size, "%s", cJSON_IsString(model) ? model->valuestring : "");
    cJSON_Delete(root);
}

/* How long the provider asked the whole model to wait, from a response
 * that was a 429 or said nothing is left: Retry-After, else the reset of
 * what ran out (of both when neither did), else -1 (nothing to pause for:
 * a response with room left). */
static long
provider_pause_ms(const struct rl_model_call *call)
{
    const struct rl_ratelimit_headers *rl = &call->ratelimit;
    int out_r = rl->remaining_requests == 0;
    int out_t = rl->remaining_tokens == 0;
    long pause = -1;

    if (call->http_status != 429 && !out_r && !out_t)
        return -1;
    if (call->retry_after_ms >= 0)
        return call->retry_after_ms;
    if ((out_r || !out_t) && rl->reset_requests_ms > pause)
        pause = rl->reset_requests_ms;
    if ((out_t || !out_r) && rl->reset_tokens_ms > pause)
        pause = rl->reset_tokens_ms;
    if (pause < 0 && call->http_status == 429)
        pause = RL_THROTTLE_DEFAULT_MS;
    return pause;
}

/* The calls of model this worker has in flight: the live runs whose call
 * the model thread holds, plus item, whose refused call was one of them
 * until its result arrived. The ledger thread owns the live list. */
static int
model_calls_in_flight(const struct ledger *lg, const struct rl_item *item,
                      const char *model)
{
    char other[256];
    int n = 1;

    for (const struct rl_item *it = lg->live; it; it = it->live_next) {
        if (it == item || !it->in_model)
            continue;
        model_of(it, other, sizeof(other));
        if (strcmp(other, model) == 0)
            n++;
    }
    return n;
}

/* The provider throttled this run's model (429, or no requests or tokens
 * left): pause the model for every worker of the group in the ledger
 * (rl_model_throttled), not only this run. A failure is logged and
 * otherwise ignored: the run's own retry still honours Retry-After. */
void
ledger_throttle_model(struct ledger *lg, struct rl_item *item)
{
    const struct rl_model_call *call = &item->call;
    long pause = provider_pause_ms(call);
    char model[256], reason[160], until[40], errstr[512];
    struct rl_log_ctx ctx;
    struct rl_model_throttle t;
    int cap = 0, adaptive, in_flight = 0;

    if (pause < 0 || !lg->db)
        return;
    model_of(item, model, sizeof(model));
    if (!*model)
        return;
    ledger_log_ctx(item, &ctx);
    if (call->http_status == 429)
        snprintf(reason, sizeof(reason), "429 from the provider (%s)",
                 call->upstream_request_id[0] ? call->upstream_request_id
                                              : "no request id");
    else
        snprintf(reason, sizeof(reason),
                 "the provider has no %s left in this window",
                 call->ratelimit.remaining_requests == 0 ? "requests"
                                                         : "tokens");
    if (call->http_status == 429)
        atomic_fetch_add(&lg->pl->counters.model_throttles, 1);
    /* The first cap halves the calls in flight. The ledger counts the
     * group's only once a cap exists, so this worker's own count is what
     * keeps it from starting at one call for the whole group. */
    adaptive = lg->cfg->model_adaptive_cap &&
               !rl_ratelimit_headers_published(&call->ratelimit);
    if (adaptive)
        in_flight = model_calls_in_flight(lg, item, model);
    t.model = model;
    t.pause_ms = pause;
    t.adaptive = adaptive;
    t.in_flight = in_flight;
    t.reason = reason;
    t.run_id = item->run_id;
    t.attempt_no = item->attempt_no;
    if (rl_db_model_throttled(lg->db, &t, until, sizeof(until), &cap, errstr,
                              sizeof(errstr)) != 0) {
        rl_log_warn(&ctx, "could not pause model %s: %s", model, errstr);
        return;
    }
    rl_log_info(&ctx, "model %s paused for every worker until %s: %s%s", model,
                until, reason,
                cap > 0 ? " (adaptive concurrency cap lowered)" : "");
}
