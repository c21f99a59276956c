/* Writes that lost their connection: the run waits on the retry list
 * (requeue) and its step is redone once a connection is back; a failed
 * statement (defer) also drops the connection (connection.c). */
#include "ledger_int.h"
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
