/* Results: a model call's result becomes one durable state (answers go to
 * the completer; the rest are released, failed, proposed or left
 * ambiguous), and runs the completer hands back land here. */
#include <stdio.h>

#include "ledger_int.h"
#include "rl/approval.h"
#include "rl/clock.h"
#include "rl/db_dispatch.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/otlp.h"

/* The model thread gave the call back: the attempt span ends. */
static void
result_arrived(struct ledger *lg, struct rl_item *item)
{
    if (item->in_model) {
        item->in_model = 0;
        lg->in_model--;
        /* Its slot is free now, while the answer waits for its
         * completion: with runs waiting in the ledger the slot is handed
         * out at once, not after the completion. */
        if (lg->backlog_until > rl_clock_ms())
            lg->sweep_soon = 1;
    }
    item->in_result = 1;
    rl_item_recount(item); /* the body went, the answer came */
    if (item->attempt_start_ns && lg->pl->otlp &&
        (item->trace.flags & RL_TRACE_FLAG_SAMPLED)) {
        const struct rl_model_call *call = &item->call;
        struct rl_otlp_span span = {
            .name = "runledger.attempt",
            .trace_id = item->trace.trace_id,
            .span_id = item->attempt_span_id,
            .parent_span_id = item->run_span_id,
            .kind = 3, /* CLIENT: the model call */
            .start_ns = item->attempt_start_ns,
            .end_ns = ledger_now_ns(),
            .error = call->outcome != RL_MODEL_OK,
            .run_id = item->run_id,
            .tenant = item->tenant,
            .job = item->job,
            .outcome = rl_model_outcome_name(call->outcome),
            .attempt = item->attempt_no,
            .lease_epoch = item->lease_epoch,
            .http_status = call->http_status,
        };

        rl_otlp_export(lg->pl->otlp, &span);
    }
    item->attempt_start_ns = 0;
}

/* Hands an answer to the completer thread; it comes back on pl->landed
 * (ledger_land()). The run stays live: its lease is renewed meanwhile. */
static void
to_completer(struct ledger *lg, struct rl_item *item)
{
    item->completing = 1;
    lg->completing++;
    rl_queue_push(&lg->pl->answers, item);
}

/* Turns a model result into one durable state: every result but the
 * answer of a run without an approval gate (ledger_handle_results). */
static void
handle_result(struct ledger *lg, struct rl_item *item)
{
    result_arrived(lg, item);
    if (!lg->db) {
        ledger_requeue(lg, item, REDO_RESULT);
        return;
    }
    ledger_throttle_model(lg, item);
    /* Before the outcome is recorded: the attempt stays without one
     * while the endpoint's record is asked, so a crash meanwhile leaves
     * it ambiguous for the next claimer to look up again. */
    if (item->call.outcome == RL_MODEL_AMBIGUOUS &&
        ledger_reconcile_live(lg, item))
        return;
    ledger_apply_result(lg, item);
}

void
ledger_apply_result(struct ledger *lg, struct rl_item *item)
{
    struct rl_model_call *call = &item->call;
    enum rl_outcome outcome;
    char errstr[512];
    struct rl_log_ctx ctx;
    int err;

    ledger_log_ctx(item, &ctx);
    if (ledger_retry_left_to_reconcile(lg, item))
        return;
    outcome = ledger_retry_outcome(item);
    /* An answer's outcome is recorded by the statement that stores it
     * (rl_db_complete_runs): dying in between must leave the attempt
     * without an outcome, which the next claimer treats as ambiguous. */
    if (call->outcome != RL_MODEL_OK) {
        err = rl_db_record_outcome(
            lg->db, item->run_id,
            &(struct rl_attempt_outcome){.outcome = outcome,
                                         .call = rl_item_attempt_ok(item),
                                         .error = call->error},
            errstr, sizeof(errstr));
        if (err == RL_ERR_DB) {
            ledger_defer(lg, item, REDO_RESULT, "record the attempt outcome",
                         errstr);
            return;
        }
    }
    /* Only the answers of runs that need an approval come here; the
     * others went to the completer (ledger_handle_results). */
    if (call->outcome == RL_MODEL_OK) {
        ledger_propose(lg, item, &ctx);
        return;
    }
    ledger_retry_apply(lg, item, outcome, &ctx);
}

/* Results of a list of calls: answers of runs without an approval gate
 * go to the completer, which needs no connection of the ledger's; every
 * other result is handled here. */
void
ledger_handle_results(struct ledger *lg, struct rl_item *list)
{
    while (list) {
        struct rl_item *item = list;

        list = item->next;
        item->next = NULL;
        if (item->in_lookup) {
            int kind = item->reconcile;

            switch (ledger_reconcile_result(lg, item)) {
            case LEDGER_LOOKUP_HANDLED:
                continue;
            case LEDGER_LOOKUP_MISSED:
                /* The ambiguity policy applies as if no lookup had been
                 * made: to the live call's result, or before the next
                 * attempt of a run an earlier owner left unsettled. */
                if (kind == RL_RECONCILE_LIVE)
                    ledger_apply_result(lg, item);
                else
                    ledger_start_attempts(lg, item);
                continue;
            case LEDGER_LOOKUP_FOUND:
                break; /* adopted: handled below like a live answer */
            }
        }
        /* An answer found in the endpoint's record: its attempt says so
         * before it is stored like any other answer. */
        if (item->call.outcome == RL_MODEL_OK && item->reconciled &&
            !item->reconcile_marked && !ledger_reconcile_mark(lg, item))
            continue;
        /* Only a request that says "no gate" skips the proposal; an
         * unreadable one is failed by ledger_propose (fail closed). */
        if (item->call.outcome == RL_MODEL_OK &&
            rl_approval_required(item->request_json) == 0) {
            result_arrived(lg, item);
            if (lg->db)
                ledger_throttle_model(lg, item);
            to_completer(lg, item);
        } else {
            handle_result(lg, item);
        }
    }
}

void
ledger_park_results(struct ledger *lg, struct rl_item *list)
{
    while (list) {
        struct rl_item *item = list;

        list = item->next;
        item->next = NULL;
        /* A lookup's run waits like any result; its attempt keeps no
         * outcome, so the next claimer looks it up again. One looking up
         * an earlier owner's attempt has no call of its own to redo: it
         * starts over. */
        item->in_lookup = 0;
        result_arrived(lg, item);
        if (item->reconcile == RL_RECONCILE_PRIOR) {
            item->reconcile = RL_RECONCILE_NONE;
            item->reconcile_done = 0;
            ledger_requeue(lg, item, REDO_START);
            continue;
        }
        ledger_requeue(lg, item, REDO_RESULT);
    }
}

/* Runs the completer handed back: finished once their completion
 * committed, failed when the database refused the output, redone when the
 * completer could not reach the database before the grace period ended. */
void
ledger_land(struct ledger *lg, struct rl_item *list)
{
    while (list) {
        struct rl_item *item = list;
        struct rl_log_ctx ctx;

        list = item->next;
        item->next = NULL;
        item->completing = 0;
        lg->completing--;
        ledger_log_ctx(item, &ctx);
        if (item->landed == RL_LANDED_DEFERRED ||
            (item->landed == RL_LANDED_INVALID && !lg->db)) {
            ledger_requeue(lg, item, REDO_RESULT);
        } else if (item->landed == RL_LANDED_INVALID) {
            char why[512], dberr[512];

            /* The answer is not what PostgreSQL stores (jsonb refused
             * it): the attempt's outcome says so and the run fails. */
            snprintf(why, sizeof(why), "%s",
                     item->landed_error ? item->landed_error : "refused");
            rl_db_record_outcome(
                lg->db, item->run_id,
                &(struct rl_attempt_outcome){
                    .outcome = RL_OUTCOME_INVALID_OUTPUT,
                    .call = {.attempt_no = item->attempt_no,
                             .http_status = (int)item->call.http_status,
                             .upstream_request_id =
                                 item->call.upstream_request_id,
                             .prompt_tokens = -1,
                             .completion_tokens = -1,
                             .cached_tokens = -1,
                             .latency_ms = item->call.latency_ms},
                    .error = why},
                dberr, sizeof(dberr));
            ledger_give_up(lg, item, RL_RUN_FAILED, "invalid_output", why);
        } else {
            if (item->landed_err) {
                atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
                rl_log_warn(&ctx, "lease lost: result discarded");
                item->trace_outcome = "lease_lost";
            } else if (item->landed_completed) {
                atomic_fetch_add(&lg->pl->counters.completed, 1);
                rl_log_debug(&ctx, "completed");
                item->trace_outcome = "completed";
            } else {
                item->trace_outcome = "completed_elsewhere";
            }
            ledger_finish(lg, item);
        }
    }
}
