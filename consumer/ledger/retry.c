/* The retry policy, in one place: what becomes of a run whose attempt did
 * not answer (retried after a backoff, parked as unknown, or failed and
 * dead-lettered), how long it waits (full-jitter backoff, never shorter
 * than the provider's Retry-After), the ambiguity rule (an attempt that
 * may have generated is not repeated blindly), the attempts a run has and
 * its deadline, and the writes that carry it out (release, fail). Each
 * outcome is recorded first (rl/outcome.h). @locality ledger thread */
#include <stdlib.h>

#include "ledger_int.h"
#include "rl/db_lease.h"
#include "rl/err.h"
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
ledger_retry_in_time(struct ledger *lg, struct rl_item *item)
{
    if (!item->deadline_passed)
        return 1;
    /* Checked before the ambiguity rule: past its deadline a run is
     * failed whatever an earlier dispatch did. */
    ledger_give_up(lg, item, RL_RUN_FAILED, "deadline",
                   "the run's deadline passed before it completed");
    return 0;
}

int
ledger_retry_may_attempt(struct ledger *lg, struct rl_item *item)
{
    /* An earlier dispatch without an outcome, not found in the endpoint's
     * record (or no record is kept): never re-dispatch blindly.
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

/* Terminal failure: the run is failed (or unknown), which is durable, and
 * a dead letter tells whoever watches the topic. */
void
ledger_give_up(struct ledger *lg, struct rl_item *item,
               enum rl_run_status status, const char *error_class,
               const char *detail)
{
    const struct rl_lease lease = ledger_lease_of(lg, item);
    char errstr[512];
    struct rl_log_ctx ctx;
    int err;

    err = rl_db_fail(lg->db, &lease, status, error_class, detail, errstr,
                     sizeof(errstr));
    if (err == RL_ERR_DB) {
        ledger_defer(lg, item, item->in_result ? REDO_RESULT : REDO_START,
                     "record the failure", errstr);
        return;
    }
    ledger_log_ctx(item, &ctx);
    if (err == RL_ERR_STALE) {
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
        rl_log_warn(&ctx, "lease lost before recording %s",
                    rl_run_status_name(status));
        item->trace_outcome = "lease_lost";
        ledger_finish(lg, item);
        return;
    }
    if (status == RL_RUN_UNKNOWN) {
        item->trace_outcome = "unknown";
        atomic_fetch_add(&lg->pl->counters.unknown, 1);
        rl_log_warn(&ctx, "run is unknown (%s): waiting for an operator",
                    detail);
        ledger_finish(lg, item);
        return;
    }
    atomic_fetch_add(&lg->pl->counters.failed, 1);
    rl_log_warn(&ctx, "run failed: %s: %s", error_class, detail);
    ledger_trace_run_end(lg, item, "failed");
    ledger_live_remove(lg, item);
    rl_pipeline_dead_letter(lg->pl, item, RL_DEADLETTER_RUN, error_class,
                            detail);
}

/* Pending again, due after delay_ms; the sweeper of any worker takes it.
 * provider_wait: the provider asked for the wait (Retry-After), so the
 * run's deadline moves by it. */
static void
retry_later(struct ledger *lg, struct rl_item *item, long delay_ms,
            int provider_wait, const char *error_class, const char *detail)
{
    const struct rl_lease lease = ledger_lease_of(lg, item);
    char errstr[512];
    int err;

    if (provider_wait)
        err = rl_db_release_for_provider_wait(lg->db, &lease, delay_ms,
                                              error_class, detail, errstr,
                                              sizeof(errstr));
    else
        err = rl_db_release(lg->db, &lease, delay_ms, error_class, detail,
                            errstr, sizeof(errstr));
    if (err == RL_ERR_DB) {
        ledger_defer(lg, item, item->in_result ? REDO_RESULT : REDO_START,
                     "release the lease", errstr);
        return;
    }
    if (err == RL_ERR_STALE)
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
    else
        atomic_fetch_add(&lg->pl->counters.retried, 1);
    item->trace_outcome = err == RL_ERR_STALE ? "lease_lost" : "retry";
    ledger_finish(lg, item);
}

void
ledger_retry_later(struct ledger *lg, struct rl_item *item, long delay_ms,
                   const char *error_class, const char *detail)
{
    retry_later(lg, item, delay_ms, 0, error_class, detail);
}

void
ledger_retry_after_provider(struct ledger *lg, struct rl_item *item,
                            long delay_ms, const char *error_class,
                            const char *detail)
{
    retry_later(lg, item, delay_ms, 1, error_class, detail);
}
