/* The ledger's side of batch mode (docs/batch.md): the batcher
 * (consumer/batch/) started and stopped with the ledger thread, and what
 * the ledger does with a run it handed off: finished here once the
 * batcher holds it (or its lease is gone), pending again when the
 * hand-off failed. Finishing and retrying a run are the ledger's, so they
 * stay here, and the batcher reaches them only through the hand-off's
 * callback. @locality ledger thread */
#include <stdatomic.h>
#include <stddef.h>

#include "batch/batcher.h"
#include "ledger_int.h"
#include "rl/log.h"

/* rl_batcher_hand_off's callback: item is no longer the ledger's to call
 * live. */
static void
handed(void *arg, struct rl_item *item, enum rl_batch_handoff what,
       const char *errstr)
{
    struct ledger *lg = arg;
    struct rl_log_ctx ctx;

    switch (what) {
    case RL_BATCH_HANDOFF_PARKED:
        /* The batcher holds its lease now: done for this worker and for
         * Kafka (the ledger has it). */
        ledger_log_ctx(item, &ctx);
        rl_log_debug(&ctx, "waiting for a batch");
        item->trace_outcome = "batched";
        ledger_finish(lg, item);
        break;
    case RL_BATCH_HANDOFF_LOST:
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
        ledger_finish(lg, item);
        break;
    case RL_BATCH_HANDOFF_FAILED:
        ledger_retry_later(lg, item, 0, "batch", errstr);
        break;
    }
}

void
ledger_batch_start(struct ledger *lg)
{
    lg->batch = rl_batcher_start(lg->cfg, lg->pl);
}

void
ledger_batch_stopping(struct ledger *lg)
{
    rl_batcher_stopping(lg->batch);
}

void
ledger_batch_stop(struct ledger *lg)
{
    rl_batcher_stop(lg->batch);
    lg->batch = NULL;
}

size_t
ledger_batch_take_over(struct ledger *lg, struct rl_item **items, size_t n)
{
    return rl_batcher_hand_off(lg->batch, lg->db, items, n, handed, lg);
}
