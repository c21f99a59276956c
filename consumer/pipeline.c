/* The hand-offs every stage of the consume process shares: waking the
 * ledger thread, finishing a run (its offset to the Kafka thread, or its
 * end), and the model client's callback that hands a call back to the
 * ledger. Each is called by the stages (consume.c, ledger/,
 * deadletters.c, completer.c) and calls none of them back. */
#include "pipeline.h"
#include "http.h"
#include "item.h"

void
rl_pipeline_wake(struct rl_pipeline *pl)
{
    pthread_mutex_lock(&pl->wake_lock);
    pthread_cond_signal(&pl->wake);
    pthread_mutex_unlock(&pl->wake_lock);
}

void
rl_pipeline_finish(struct rl_pipeline *pl, struct rl_item *item)
{
    if (item->src.from_kafka) {
        rl_queue_push(&pl->done, item);
        return;
    }
    atomic_fetch_sub(&pl->in_flight, 1);
    rl_item_destroy(item);
}

void
rl_pipeline_model_done(struct rl_model_call *call, void *opaque)
{
    struct rl_pipeline *pl = opaque;
    struct rl_item *item = call->opaque;

    /* A lookup in the endpoint's record is no attempt and no generation:
     * the ledger counts it (reconcile.c). */
    if (!call->lookup)
        rl_http_model_call(pl->http, call);
    rl_queue_push(&pl->results, item);
    rl_pipeline_wake(pl);
}
