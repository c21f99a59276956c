/* Reconciliation: an ambiguous attempt (sent, then a timeout, a reset or a
 * cut body; or dispatched by an owner that died before recording what came
 * back) is looked up in the endpoint's own record of the calls it answered
 * (RUNLEDGER_MODEL_STORED_COMPLETIONS: every call is stored with metadata
 * naming its run and attempt) before the ambiguity policy applies. The
 * record is eventually consistent, so a lookup that finds nothing is
 * repeated with backoff until RUNLEDGER_RECONCILE_SETTLE_MS has passed;
 * only then does "not found" count. Found, the stored answer becomes that
 * attempt's result and goes through the same guarded completion as a live
 * answer: no new generation.
 *
 * Lookups are model calls (GETs on the model thread, each bounded by
 * RUNLEDGER_RECONCILE_LOOKUP_TIMEOUT_MS), so waiting for the record never
 * holds up other runs; between two lookups a run waits on the ledger's
 * reconcile_wait list, leased and renewed like any live run.
 * @locality ledger thread */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "ledger_int.h"
#include "rl/clock.h"
#include "rl/db_dispatch.h"
#include "rl/err.h"
#include "rl/log.h"

/* The first wait between two lookups, and the longest. */
#define LOOKUP_BACKOFF_MIN_MS 250L
#define LOOKUP_BACKOFF_MAX_MS 5000L

/* The API the run's model speaks, from its stored request. */
static enum rl_model_api
api_of_run(const struct ledger *lg, const struct rl_item *item)
{
    cJSON *root = cJSON_Parse(item->request_json ? item->request_json : "");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "request"), "model");
    enum rl_model_api api = rl_model_api_for(
        lg->cfg->model_api_by_model, (enum rl_model_api)lg->cfg->model_api,
        cJSON_IsString(model) ? model->valuestring : NULL);

    cJSON_Delete(root);
    return api;
}

/* Hands item's lookup to the model thread; at shutdown (the model takes
 * no more calls) the run goes back with its attempt still unsettled. */
static void
submit_lookup(struct ledger *lg, struct rl_item *item)
{
    struct rl_model_call *lk = &item->lookup;
    enum rl_model_api api = lk->api;

    rl_model_call_clear(lk);
    lk->run_id = item->run_id;
    lk->opaque = item;
    lk->lookup = 1;
    lk->api = api;
    lk->attempt_no = item->reconcile_attempt;
    /* A response is looked up by its id, which the ambiguous call's reply
     * named before it was cut. */
    lk->lookup_id =
        api == RL_MODEL_API_RESPONSES ? item->call.upstream_request_id : NULL;
    lk->timeout_ms = lg->cfg->reconcile_lookup_timeout_ms;
    if (rl_model_submit(lg->pl->model, lk) != 0) {
        ledger_retry_later(lg, item, 0, "shutdown",
                           "released at shutdown while reconciling");
        return;
    }
    item->reconcile_lookups++;
    atomic_fetch_add(&lg->pl->counters.reconcile_lookups, 1);
    item->in_lookup = 1;
    item->in_model = 1;
    lg->in_model++;
}

/* Starts looking up attempt_no of item with api. */
static void
start(struct ledger *lg, struct rl_item *item, int kind, int attempt_no,
      enum rl_model_api api)
{
    struct rl_log_ctx ctx;

    item->reconcile = kind;
    item->reconcile_attempt = attempt_no;
    item->reconcile_lookups = 0;
    item->reconcile_until = rl_clock_ms() + lg->cfg->reconcile_settle_ms;
    item->lookup.api = api;
    ledger_log_ctx(item, &ctx);
    rl_log_info(&ctx,
                "attempt %d is ambiguous: looking it up in the endpoint's "
                "record for up to %d ms",
                attempt_no, lg->cfg->reconcile_settle_ms);
    submit_lookup(lg, item);
}

int
ledger_reconcile_live(struct ledger *lg, struct rl_item *item)
{
    if (!lg->cfg->model_stored_completions || item->reconcile_done ||
        item->lease_lost)
        return 0;
    /* Without an id nothing names a response in the record. */
    if (item->call.api == RL_MODEL_API_RESPONSES &&
        strncmp(item->call.upstream_request_id, "resp_", 5) != 0)
        return 0;
    start(lg, item, RL_RECONCILE_LIVE, item->attempt_no, item->call.api);
    return 1;
}

int
ledger_reconcile_prior(struct ledger *lg, struct rl_item *item)
{
    char errstr[512];
    int attempt_no = 0, err;

    if (!lg->cfg->model_stored_completions || item->reconcile_done ||
        !item->ambiguous_prior)
        return 0;
    item->reconcile_done = 1; /* once per claim, found or not */
    if (api_of_run(lg, item) != RL_MODEL_API_CHAT)
        return 0;
    err = rl_db_unsettled_attempt(lg->db, item->run_id, &attempt_no, errstr,
                                  sizeof(errstr));
    if (err) {
        item->reconcile_done = 0;
        ledger_defer(lg, item, REDO_START, "read the attempt to reconcile",
                     errstr);
        return 1;
    }
    if (attempt_no <= 0)
        return 0;
    start(lg, item, RL_RECONCILE_PRIOR, attempt_no, RL_MODEL_API_CHAT);
    return 1;
}

/* The lookup found the attempt's answer: it becomes the call's result. */
static void
adopt(struct ledger *lg, struct rl_item *item)
{
    struct rl_model_call *call = &item->call, *lk = &item->lookup;
    struct rl_log_ctx ctx;

    rl_model_call_clear(call);
    call->outcome = RL_MODEL_OK;
    call->http_status = lk->http_status;
    snprintf(call->upstream_request_id, sizeof(call->upstream_request_id), "%s",
             lk->upstream_request_id);
    call->text = lk->text;
    call->tool_calls = lk->tool_calls;
    call->model_name = lk->model_name;
    lk->text = lk->tool_calls = lk->model_name = NULL;
    call->prompt_tokens = lk->prompt_tokens;
    call->completion_tokens = lk->completion_tokens;
    call->cached_tokens = lk->cached_tokens;
    call->latency_ms = lk->latency_ms;
    call->request_sent = 1;
    item->attempt_no = item->reconcile_attempt;
    item->reconciled = 1;
    item->reconcile_marked = 0;
    item->reconcile = RL_RECONCILE_NONE;
    rl_item_recount(item);
    atomic_fetch_add(&lg->pl->counters.reconciled, 1);
    rl_http_reconciled(lg->pl->http, call);
    ledger_log_ctx(item, &ctx);
    rl_log_info(&ctx,
                "attempt %d answered in the endpoint's record (%s) after %d "
                "lookups: adopted, no new generation",
                item->attempt_no, call->upstream_request_id,
                item->reconcile_lookups);
}

/* Nothing found within the settle window: the ambiguity policy applies
 * as if no lookup had been made (the caller applies it). */
static void
not_found(struct ledger *lg, struct rl_item *item)
{
    struct rl_log_ctx ctx;

    item->reconcile = RL_RECONCILE_NONE;
    item->reconcile_done = 1;
    atomic_fetch_add(&lg->pl->counters.reconcile_missed, 1);
    ledger_log_ctx(item, &ctx);
    rl_log_info(&ctx,
                "attempt %d not in the endpoint's record after %d lookups "
                "(%s): the ambiguity policy applies",
                item->reconcile_attempt, item->reconcile_lookups,
                item->lookup.error[0] ? item->lookup.error : "not found");
}

enum ledger_lookup
ledger_reconcile_result(struct ledger *lg, struct rl_item *item)
{
    struct rl_model_call *lk = &item->lookup;
    int64_t now = rl_clock_ms();
    long delay;

    item->in_lookup = 0;
    if (item->in_model) {
        item->in_model = 0;
        lg->in_model--;
    }
    if (item->lease_lost) {
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
        item->trace_outcome = "lease_lost";
        ledger_finish(lg, item);
        return LEDGER_LOOKUP_HANDLED;
    }
    if (lk->outcome == RL_MODEL_OK) {
        adopt(lg, item);
        return LEDGER_LOOKUP_FOUND;
    }
    if (lk->outcome == RL_MODEL_CANCELLED) {
        /* Shutdown: the attempt keeps no outcome, so the next claimer
         * looks it up again. */
        ledger_retry_later(lg, item, 0, "shutdown",
                           "released at shutdown while reconciling");
        return LEDGER_LOOKUP_HANDLED;
    }
    /* Not found, or the lookup failed (the endpoint busy, the record not
     * reachable): asked again while the settle window lasts. */
    if (now >= item->reconcile_until) {
        not_found(lg, item);
        return LEDGER_LOOKUP_MISSED;
    }
    delay = LOOKUP_BACKOFF_MIN_MS;
    for (int i = 1;
         i < item->reconcile_lookups && delay < LOOKUP_BACKOFF_MAX_MS; i++)
        delay *= 2;
    if (delay > LOOKUP_BACKOFF_MAX_MS)
        delay = LOOKUP_BACKOFF_MAX_MS;
    /* A last lookup at the window's end, not after it. */
    item->reconcile_due = now + delay < item->reconcile_until
                              ? now + delay
                              : item->reconcile_until;
    item->next = lg->reconcile_wait;
    lg->reconcile_wait = item;
    return LEDGER_LOOKUP_HANDLED;
}

int
ledger_reconcile_mark(struct ledger *lg, struct rl_item *item)
{
    char errstr[512];
    struct rl_log_ctx ctx;
    int err;

    if (!lg->db) {
        ledger_requeue(lg, item, REDO_RESULT);
        return 0;
    }
    err = rl_db_mark_reconciled(lg->db, item->run_id, item->attempt_no,
                                item->call.upstream_request_id, errstr,
                                sizeof(errstr));
    if (err == RL_ERR_DB) {
        ledger_defer(lg, item, REDO_RESULT, "mark the reconciled attempt",
                     errstr);
        return 0;
    }
    if (err) {
        /* The attempt has an outcome already (a completion that committed
         * before a lost reply): the completion below says what holds. */
        ledger_log_ctx(item, &ctx);
        rl_log_warn(&ctx, "%s", errstr);
    }
    item->reconcile_marked = 1;
    return 1;
}

void
ledger_reconcile_tick(struct ledger *lg)
{
    struct rl_item *list = lg->reconcile_wait, *keep = NULL;
    int64_t now = rl_clock_ms();
    int stopping = atomic_load(&lg->pl->stopping);

    lg->reconcile_wait = NULL;
    while (list) {
        struct rl_item *item = list;

        list = item->next;
        item->next = NULL;
        if (item->lease_lost) {
            atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
            item->trace_outcome = "lease_lost";
            ledger_finish(lg, item);
        } else if (stopping && !lg->db) {
            ledger_requeue(lg, item, REDO_START);
        } else if (stopping) {
            /* The attempt keeps no outcome: whoever claims the run next
             * looks it up again. */
            ledger_retry_later(lg, item, 0, "shutdown",
                               "released at shutdown while reconciling");
        } else if (now >= item->reconcile_due) {
            submit_lookup(lg, item);
        } else {
            item->next = keep;
            keep = item;
        }
    }
    /* Whatever was handled above may have added to the list again. */
    while (keep) {
        struct rl_item *item = keep;

        keep = item->next;
        item->next = lg->reconcile_wait;
        lg->reconcile_wait = item;
    }
}
