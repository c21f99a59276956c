/* The retry policy, in one place: what becomes of a run whose attempt did
 * not answer (retried after a backoff, parked as unknown, or failed and
 * dead-lettered), how long it waits (full-jitter backoff, never shorter
 * than the provider's Retry-After), the ambiguity rule (an attempt that
 * may have generated is not repeated blindly), the attempts a run has and
 * its deadline. Each outcome is recorded first (rl/outcome.h); the writes
 * that end an attempt are failures.c's. @locality ledger thread */
#include <stdlib.h>

#include "ledger_int.h"
#include "rl/log.h"

long
ledger_backoff_ms(struct ledger *lg, int attempt, long retry_after_ms)
{
    long cap = lg->cfg->backoff_base_ms;
    long delay;

    for (int i = 1; i < attempt && cap < lg->cfg->backoff_max_ms; i++)
        cap *= 2;
    if (cap > lg->cfg->backoff_max_ms)
        cap = lg->cfg->backoff_max_ms;
    delay = (long)((double)rand_r(&lg->seed) / RAND_MAX * (double)cap);
    if (retry_after_ms > delay)
        delay = retry_after_ms;
    return delay;
}

long
ledger_retry_refused_dispatch_ms(struct ledger *lg)
{
    return lg->cfg->backoff_base_ms / 2 + ledger_backoff_ms(lg, 1, -1) / 2;
}

/* The ambiguity rule: with ambiguous_attempts of the run's attempts
 * ambiguous (the one at hand included), another attempt could generate
 * twice. RUNLEDGER_AMBIGUOUS_POLICY park stops at the first, retry_once
 * at the second; retry goes on while attempts are left. */
static int
ambiguity_parks(const struct ledger *lg, int ambiguous_attempts)
{
    enum rl_ambiguous_policy policy = lg->cfg->ambiguous_policy;

    return policy == RL_AMBIGUOUS_PARK ||
           (policy == RL_AMBIGUOUS_RETRY_ONCE && ambiguous_attempts >= 2);
}

int
ledger_retry_may_attempt(struct ledger *lg, struct rl_item *item)
{
    if (item->deadline_passed) {
        /* Checked before the ambiguity rule: past its deadline a run is
         * failed whatever an earlier dispatch did. */
        ledger_give_up(lg, item, RL_RUN_FAILED, "deadline",
                       "the run's deadline passed before it completed");
        return 0;
    }
    /* The last dispatch has no outcome: an earlier worker died after
     * sending. The endpoint's record may hold its answer. */
    if (item->ambiguous_prior && ledger_reconcile_prior(lg, item))
        return 0;
    /* Not found there (or no record is kept): never re-dispatch blindly.
     * ambiguous_count counts the prior attempt already. */
    if (item->ambiguous_prior && ambiguity_parks(lg, item->ambiguous_count)) {
        ledger_give_up(lg, item, RL_RUN_UNKNOWN, "ambiguous",
                       "an earlier dispatch has no recorded outcome");
        return 0;
    }
    if (item->attempts_before >= lg->cfg->max_attempts) {
        ledger_give_up(lg, item, RL_RUN_FAILED, "attempts_exhausted",
                       "no attempts left");
        return 0;
    }
    return 1;
}

void
ledger_retry_past_deadline(struct ledger *lg, struct rl_item *item)
{
    ledger_give_up(lg, item, RL_RUN_FAILED, "deadline",
                   "the run's deadline passed before it was dispatched");
}

int
ledger_retry_left_to_reconcile(struct ledger *lg, struct rl_item *item)
{
    const struct rl_model_call *call = &item->call;

    if (call->outcome != RL_MODEL_CANCELLED || !call->request_sent ||
        item->lease_lost || !lg->cfg->model_stored_completions ||
        call->api != RL_MODEL_API_CHAT)
        return 0;
    /* Cut off by shutdown after it was sent, with the endpoint keeping a
     * record: the attempt keeps no outcome, so whoever claims the run next
     * looks its answer up there (ambiguous_prior) instead of applying the
     * policy blind. */
    ledger_retry_later(lg, item, 0, "shutdown",
                       "abandoned at shutdown; left to reconcile");
    return 1;
}

enum rl_outcome
ledger_retry_outcome(const struct rl_item *item)
{
    const struct rl_model_call *call = &item->call;

    switch (call->outcome) {
    case RL_MODEL_OK:
        return RL_OUTCOME_OK;
    case RL_MODEL_TRANSIENT:
        return RL_OUTCOME_TRANSIENT;
    case RL_MODEL_PERMANENT:
        return RL_OUTCOME_PERMANENT;
    case RL_MODEL_NOT_SENT:
        return RL_OUTCOME_NOT_SENT;
    case RL_MODEL_AMBIGUOUS:
        return RL_OUTCOME_AMBIGUOUS;
    case RL_MODEL_INVALID_OUTPUT:
    case RL_MODEL_NOT_FOUND: /* only lookups end so; never a live call */
        return RL_OUTCOME_INVALID_OUTPUT;
    case RL_MODEL_CANCELLED:
        break;
    }
    /* Cancelled: sent, the endpoint may have generated. */
    return item->lease_lost     ? RL_OUTCOME_LEASE_LOST
           : call->request_sent ? RL_OUTCOME_AMBIGUOUS
                                : RL_OUTCOME_NOT_SENT;
}

void
ledger_retry_apply(struct ledger *lg, struct rl_item *item,
                   enum rl_outcome outcome, const struct rl_log_ctx *ctx)
{
    const struct rl_model_call *call = &item->call;
    /* The attempts that count against the limit: this one and those
     * before it, less any an operator forgave (`runs retry --attempts`);
     * attempt_no stays the dispatch's own number. */
    int counted = item->attempts_before + 1;

    switch (call->outcome) {
    case RL_MODEL_OK: /* an answer is the completer's or the proposal's */
        return;
    case RL_MODEL_TRANSIENT:
    case RL_MODEL_NOT_SENT:
        if (counted >= lg->cfg->max_attempts) {
            ledger_give_up(lg, item, RL_RUN_FAILED, "attempts_exhausted",
                           call->error);
            return;
        }
        if (call->retry_after_ms >= 0)
            ledger_retry_after_provider(
                lg, item, ledger_backoff_ms(lg, counted, call->retry_after_ms),
                rl_outcome_name(outcome), call->error);
        else
            ledger_retry_later(lg, item, ledger_backoff_ms(lg, counted, -1),
                               rl_outcome_name(outcome), call->error);
        return;
    case RL_MODEL_AMBIGUOUS:
        /* ambiguous_count counts the earlier attempts, this one not. */
        if (ambiguity_parks(lg, item->ambiguous_count + 1) ||
            counted >= lg->cfg->max_attempts) {
            ledger_give_up(lg, item, RL_RUN_UNKNOWN, "ambiguous", call->error);
            return;
        }
        ledger_retry_later(lg, item, ledger_backoff_ms(lg, counted, -1),
                           "ambiguous", call->error);
        return;
    case RL_MODEL_PERMANENT:
        ledger_give_up(lg, item, RL_RUN_FAILED, "model_rejected", call->error);
        return;
    case RL_MODEL_INVALID_OUTPUT:
    case RL_MODEL_NOT_FOUND: /* only lookups end so; never a live call */
        ledger_give_up(lg, item, RL_RUN_FAILED, "invalid_output", call->error);
        return;
    case RL_MODEL_CANCELLED:
        if (item->lease_lost) {
            atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
            rl_log_warn(ctx, "lease lost during the call: abandoned");
            ledger_finish(lg, item);
            return;
        }
        /* Shutdown: hand the run back at once; the next claimer sees the
         * outcome recorded and follows the ambiguity rule. */
        ledger_retry_later(lg, item, 0, "shutdown", "abandoned at shutdown");
        return;
    }
}
