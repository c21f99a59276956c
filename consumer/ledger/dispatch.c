/* Dispatch: the checks before an attempt, the collect step (raw input
 * stored write-once), the request's size bound, the dispatches of a batch
 * recorded in one statement (budgets and model rate limits taken there),
 * then the model calls sent. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_int.h"
#include "rl/approval.h"
#include "rl/db_dispatch.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/log.h"

/* Tokens a dispatch reserves against the run's budgets: the prompt
 * estimated at 4 bytes a token over the body that is sent (after
 * {{input}} substitution, measured by prepare_attempt), plus the completion's
 * cap (max_tokens or max_completion_tokens of the request, else
 * RUNLEDGER_BUDGET_DEFAULT_MAX_TOKENS). Only consulted when a budget
 * covers the run. */
static int64_t
budget_estimate(const struct ledger *lg, const struct rl_item *item)
{
    size_t bytes = item->request_bytes;
    int64_t completion = lg->cfg->budget_default_max_tokens;
    cJSON *root = cJSON_Parse(item->request_json ? item->request_json : "");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(req, "max_tokens");

    if (!cJSON_IsNumber(max))
        max = cJSON_GetObjectItemCaseSensitive(req, "max_completion_tokens");
    if (cJSON_IsNumber(max) && max->valuedouble >= 0 && max->valuedouble < 1e12)
        completion = (int64_t)max->valuedouble;
    cJSON_Delete(root);
    return (int64_t)((bytes + 3) / 4) + completion;
}

static int store_input(struct ledger *lg, struct rl_item *item);

static int within_request_limit(struct ledger *lg, struct rl_item *item);

/* The checks before a dispatch, and the collect step: returns 1 when item
 * is ready to be dispatched, 0 when it was handled here (finished, given
 * up, or waiting for a connection). */
static int
prepare_attempt(struct ledger *lg, struct rl_item *item)
{

    /* An earlier item of the same batch lost the connection: this one
     * waits for the next one instead of writing through none. */
    if (!lg->db) {
        ledger_requeue(lg, item, REDO_START);
        return 0;
    }
    if (!ledger_retry_in_time(lg, item))
        return 0;
    /* The last dispatch has no outcome: an earlier worker died after
     * sending. The endpoint's record may hold its answer. */
    if (item->ambiguous_prior && ledger_reconcile_prior(lg, item))
        return 0;
    /* The ambiguity rule and the attempts left. */
    if (!ledger_retry_may_attempt(lg, item))
        return 0;
    if (!item->raw_input && store_input(lg, item) != 0)
        return 0;
    return within_request_limit(lg, item);
}

/* The collect step: the input is stored write-once; returns 0, or -1 when
 * the item was handled here (deferred or lease lost). */
static int
store_input(struct ledger *lg, struct rl_item *item)
{
    const struct rl_lease lease = ledger_lease_of(lg, item);
    char errstr[512];
    char *stored = NULL;
    int err;

    err = rl_db_store_raw_input(lg->db, &lease,
                                item->ev ? item->ev->input_json : "null",
                                &stored, errstr, sizeof(errstr));
    if (err == RL_ERR_DB) {
        ledger_defer(lg, item, REDO_START, "store the collected input", errstr);
        return -1;
    }
    if (err) {
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
        ledger_finish(lg, item);
        return -1;
    }
    /* Use what the ledger holds, not the local copy: a concurrent worker
     * may have collected first. */
    item->raw_input = stored;
    rl_item_recount(item);
    return 0;
}

/* Measures the body the run would send, before any of it is built: a
 * prompt that repeats "{{input}}" thousands of times over a large input
 * would otherwise allocate gigabytes on this thread, and stall the lease
 * renewals of every other run while it copies them. Over
 * RUNLEDGER_MAX_REQUEST_BYTES the run fails at once (no dispatch is
 * recorded, nothing is sent) and is dead-lettered; under it, building the
 * body later costs at most that many bytes copied. Returns 1 when the run
 * may go on, 0 when it was failed here. */
static int
within_request_limit(struct ledger *lg, struct rl_item *item)
{
    char errstr[512], detail[256];
    size_t size = 0;

    if (rl_model_body_size(item->request_json, item->raw_input, &size, errstr,
                           sizeof(errstr)) != RL_OK) {
        /* send_call() fails it as invalid_request with the builder's
         * reason; the estimate meanwhile counts what the ledger holds. */
        item->request_bytes =
            strlen(item->request_json ? item->request_json : "") +
            strlen(item->raw_input ? item->raw_input : "");
        return 1;
    }
    item->request_bytes = size;
    /* The body is charged as measured now, and only one that is built. */
    item->body_reserve = size <= (size_t)lg->cfg->max_request_bytes ? size : 0;
    rl_item_recount(item);
    if (size <= (size_t)lg->cfg->max_request_bytes)
        return 1;
    if (size == SIZE_MAX)
        snprintf(detail, sizeof(detail),
                 "the model request after {{input}} substitution would be "
                 "larger than the address space; the limit is %d bytes",
                 lg->cfg->max_request_bytes);
    else
        snprintf(detail, sizeof(detail),
                 "the model request after {{input}} substitution would be "
                 "%zu bytes, over RUNLEDGER_MAX_REQUEST_BYTES (%d)",
                 size, lg->cfg->max_request_bytes);
    ledger_give_up(lg, item, RL_RUN_FAILED, "request_too_large", detail);
    return 0;
}

/* Sends the call of a run whose dispatch is recorded. */
static void
send_call(struct ledger *lg, struct rl_item *item)
{
    char errstr[512];
    struct rl_log_ctx ctx;

    ledger_log_ctx(item, &ctx);
    /* The gate fails closed: a run whose approval cannot be read is not
     * sent, or its answer could reach the relay without a human. */
    if (rl_approval_required(item->request_json) < 0) {
        char dberr[512];

        rl_db_record_outcome(lg->db, item->run_id,
                             &(struct rl_attempt_outcome){
                                 .outcome = RL_OUTCOME_PERMANENT,
                                 .call = {.attempt_no = item->attempt_no},
                                 .error = "approval gate unreadable"},
                             dberr, sizeof(dberr));
        ledger_give_up(
            lg, item, RL_RUN_FAILED, "invalid_approval",
            "the approval of the effective request cannot be read: not "
            "dispatched");
        return;
    }
    item->call.body = rl_model_build_body(item->request_json, item->raw_input,
                                          errstr, sizeof(errstr));
    item->call.api = RL_MODEL_API_CHAT;
    /* The chat body as built is what most deployments send: no second
     * parse of a large body for them. */
    if (item->call.body &&
        (lg->cfg->model_stored_completions ||
         lg->cfg->model_api != RL_MODEL_API_CHAT ||
         (lg->cfg->model_api_by_model && *lg->cfg->model_api_by_model))) {
        /* The API the model speaks, and the record the endpoint keeps of
         * this attempt (ledger/reconcile.c looks it up). */
        const struct rl_model_body_opts opts = {
            .api = (enum rl_model_api)lg->cfg->model_api,
            .api_by_model = lg->cfg->model_api_by_model,
            .store = lg->cfg->model_stored_completions,
            .run_id = item->run_id,
            .attempt_no = item->attempt_no,
            .installation_id = lg->installation_id,
            .fingerprint = item->fingerprint,
        };
        char *body = rl_model_body_prepare(
            item->call.body, &opts, &item->call.api, errstr, sizeof(errstr));

        free(item->call.body);
        item->call.body = body;
    }
    if (!item->call.body) {
        char why[512], dberr[512];

        /* The reason is both stored and reported: keep it apart from the
         * buffer the ledger call may overwrite. */
        snprintf(why, sizeof(why), "%s", errstr);
        rl_db_record_outcome(lg->db, item->run_id,
                             &(struct rl_attempt_outcome){
                                 .outcome = RL_OUTCOME_PERMANENT,
                                 .call = {.attempt_no = item->attempt_no},
                                 .error = why},
                             dberr, sizeof(dberr));
        ledger_give_up(lg, item, RL_RUN_FAILED, "invalid_request", why);
        return;
    }
    item->call.run_id = item->run_id;
    item->call.opaque = item;
    /* Each attempt is a span of its own, the run span's child; the model
     * call carries it as the parent of whatever the endpoint traces. */
    rl_trace_new_span_id(item->attempt_span_id);
    rl_trace_format(item->trace.trace_id, item->attempt_span_id,
                    item->trace.flags, item->attempt_traceparent);
    item->attempt_start_ns = ledger_now_ns();
    item->call.traceparent = item->attempt_traceparent;
    ledger_log_ctx(item, &ctx);
    if (rl_model_submit(lg->pl->model, &item->call) != 0) {
        free(item->call.body);
        item->call.body = NULL;
        /* The dispatch is recorded but nothing left: say so, or the next
         * claimer would count it as an ambiguous attempt. */
        rl_db_record_outcome(lg->db, item->run_id,
                             &(struct rl_attempt_outcome){
                                 .outcome = RL_OUTCOME_NOT_SENT,
                                 .call = {.attempt_no = item->attempt_no},
                                 .error = "model client stopping"},
                             errstr, sizeof(errstr));
        ledger_retry_later(lg, item, 0, "shutdown", "model client stopping");
        return;
    }
    item->in_model = 1;
    lg->in_model++;
    atomic_fetch_add(&lg->pl->counters.dispatches, 1);
    rl_log_debug(&ctx, "dispatched");
}

/* Records the dispatches of up to RL_PIPELINE_BATCH_MAX ready runs in one
 * statement, then sends their calls. */
static void
dispatch_batch(struct ledger *lg, struct rl_item **items, size_t n)
{
    struct rl_dispatch_req *reqs = calloc(n, sizeof(*reqs));
    struct rl_dispatch_res *res = calloc(n, sizeof(*res));
    char errstr[512];
    size_t live = 0;
    int err;

    if (!reqs || !res) {
        ledger_defer_batch(lg, items, n, REDO_START, "record the dispatch",
                           "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        reqs[i] = (struct rl_dispatch_req){
            .run_id = items[i]->run_id,
            .lease_epoch = items[i]->lease_epoch,
            .idempotency_key = items[i]->run_id,
            .estimate = budget_estimate(lg, items[i]),
        };
    }
    rl_failpoint("after_collect");
    err = rl_db_dispatch_runs(lg->db, reqs, n, lg->cfg->worker_id,
                              ledger_retry_refused_dispatch_ms(lg), res, errstr,
                              sizeof(errstr));
    if (err) {
        ledger_defer_batch(lg, items, n, REDO_START, "record the dispatch",
                           errstr);
        goto done;
    }
    rl_failpoint("after_dispatch_record");
    for (size_t i = 0; i < n; i++) {
        struct rl_item *item = items[i];
        struct rl_log_ctx ctx;

        if (res[i].err) {
            atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
            ledger_finish(lg, item);
            continue;
        }
        if (res[i].status == RL_DISPATCH_DEADLINE) {
            /* Claimed in time, but the deadline passed before this
             * statement: nothing was sent, nothing may be. */
            ledger_retry_past_deadline(lg, item);
            continue;
        }
        if (res[i].status == RL_DISPATCH_RATE_LIMITED) {
            /* Pending again until the model's bucket has room (or the
             * provider's pause ends), in the statement that refused it;
             * no attempt was spent. */
            atomic_fetch_add(&lg->pl->counters.rate_limit_waits, 1);
            ledger_log_ctx(item, &ctx);
            rl_log_debug(&ctx, "rate limit: %s", res[i].detail);
            ledger_finish(lg, item);
            continue;
        }
        if (res[i].status != RL_DISPATCH_RECORDED) {
            /* Already pending (until the next window, or until the calls
             * in flight settled), in the statement that refused the
             * reservation; no attempt was spent. */
            if (res[i].status == RL_DISPATCH_DEFERRED)
                atomic_fetch_add(&lg->pl->counters.budget_deferrals, 1);
            else
                atomic_fetch_add(&lg->pl->counters.budget_waits, 1);
            ledger_log_ctx(item, &ctx);
            rl_log_info(&ctx, "budget: %s", res[i].detail);
            ledger_finish(lg, item);
            continue;
        }
        item->attempt_no = res[i].attempt_no;
        items[live++] = item;
    }
    /* Batch-mode runs wait for a batch instead of a call. */
    live = ledger_batch_take_over(lg, items, live);
    for (size_t i = 0; i < live; i++)
        send_call(lg, items[i]);
done:
    free(reqs);
    free(res);
}

/* Walks a list of claimed runs: prepare_attempt() handles a run that
 * cannot be dispatched on its own and returns 0, or returns 1; the
 * dispatches of the rest are recorded RL_PIPELINE_BATCH_MAX runs to a statement
 * (or wait on the retry list when the connection went while they were being
 * gathered). */
static void
flush_dispatches(struct ledger *lg, struct rl_item **ready, size_t n)
{
    if (n > 0 && !lg->db) {
        for (size_t i = 0; i < n; i++)
            ledger_requeue(lg, ready[i], REDO_START);
    } else if (n > 0) {
        dispatch_batch(lg, ready, n);
    }
}

/* Collect, record the dispatch, call the model: for a list of claimed
 * runs. */
void
ledger_start_attempts(struct ledger *lg, struct rl_item *list)
{
    struct rl_item *ready[RL_PIPELINE_BATCH_MAX];
    size_t n = 0;

    while (list) {
        struct rl_item *item = list;

        list = item->next;
        item->next = NULL;
        /* After SIGTERM no call starts: the run goes back to pending,
         * due at once, for another worker's sweeper. */
        if (atomic_load(&lg->pl->stopping)) {
            if (!lg->db) {
                ledger_requeue(lg, item, REDO_START);
                continue;
            }
            ledger_retry_later(lg, item, 0, "shutdown",
                               "released at shutdown before its call");
            continue;
        }
        if (!prepare_attempt(lg, item))
            continue;
        ready[n++] = item;
        if (n == RL_PIPELINE_BATCH_MAX) {
            flush_dispatches(lg, ready, n);
            n = 0;
        }
    }
    flush_dispatches(lg, ready, n);
}
