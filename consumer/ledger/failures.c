/* The writes that end an attempt without an answer, as the retry policy
 * (retry.c) decides them: a write that lost its connection waits on the
 * retry list (defer), a run is pending again after a delay (retry_later),
 * or failed or unknown for good with a dead letter (give_up). */
#include <stdlib.h>
#include <string.h>

#include "ledger_int.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rl/log.h"

/* Puts item on the retry list: its step is redone once a connection is
 * back. */
void
ledger_requeue(struct ledger *lg, struct rl_item *item, int redo)
{
    item->redo = redo;
    item->next = lg->retry;
    lg->retry = item;
}

/* A DB error that is not a refusal: the connection is suspect. The item
 * waits on the retry list and its step is redone after reconnecting; every
 * step is safe to redo (guarded by owner and epoch, write-once columns). */
void
ledger_defer(struct ledger *lg, struct rl_item *item, int redo,
             const char *what, const char *errstr)
{
    struct rl_log_ctx ctx;

    ledger_log_ctx(item, &ctx);
    rl_log_warn(&ctx, "could not %s: %s; will retry", what, errstr);
    ledger_drop_db(lg);
    ledger_requeue(lg, item, redo);
}

/* Puts the n items of a batch whose statement failed (not a refusal) on
 * the retry list, as ledger_defer() does for one. */
void
ledger_defer_batch(struct ledger *lg, struct rl_item **items, size_t n,
                   int redo, const char *what, const char *errstr)
{
    if (n == 1) {
        ledger_defer(lg, items[0], redo, what, errstr);
        return;
    }
    rl_log_warn(NULL, "could not %s of %zu runs: %s; will retry", what, n,
                errstr);
    ledger_drop_db(lg);
    for (size_t i = n; i-- > 0;)
        ledger_requeue(lg, items[i], redo);
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
