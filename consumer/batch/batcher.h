#ifndef RL_BATCHER_H
#define RL_BATCHER_H

/* Batch mode (docs/batch.md) as the ledger calls it: the batcher, a
 * thread with a connection and an endpoint client of its own, started
 * and stopped with the ledger thread (thread.c), and the hand-off of the
 * runs whose dispatch the ledger recorded (handoff.c). Nothing in
 * consumer/batch/ calls the ledger: what the ledger does with a run it
 * handed off, it does in the hand-off's callback. The stages behind these
 * are declared in batch_int.h. */

#include <stddef.h>

#include "pipeline.h"

struct rl_batcher;
struct rl_db;

/* Starts the batcher for cfg's worker. pl (borrowed for the batcher's
 * life) counts the runs it fails and dead-letters them; its http, when
 * set, counts their answers' tokens. Returns the batcher, or NULL (out of
 * memory, or no endpoint client: logged): batch-mode runs are then sent
 * live. A thread that could not start is logged, and the runs still go
 * to batches, for the batchers of other workers. @locality ledger
 * thread */
struct rl_batcher *rl_batcher_start(const struct rl_config *cfg,
                                    struct rl_pipeline *pl);

/* Tells the thread to stop (NULL accepted): its call in progress ends
 * within about a second, whatever its timeout, its batch released for
 * another worker, and it takes nothing more. Called as the process
 * begins to stop, so the join of rl_batcher_stop waits for nothing.
 * @locality ledger thread */
void rl_batcher_stopping(struct rl_batcher *bt);

/* Stops and joins the thread and frees bt (NULL accepted). @locality
 * ledger thread */
void rl_batcher_stop(struct rl_batcher *bt);

/* What became of a run that is no longer the caller's to call live. */
enum rl_batch_handoff {
    RL_BATCH_HANDOFF_PARKED, /* the batcher holds its lease now: done for
                                this worker and for Kafka */
    RL_BATCH_HANDOFF_LOST,   /* the worker's lease is gone: send nothing */
    RL_BATCH_HANDOFF_FAILED  /* the hand-off failed (errstr says why): its
                                attempt is recorded as never sent */
};

/* Of n runs whose dispatch is recorded, hands those in batch mode to the
 * batcher in one statement on db (the caller's connection), except those
 * whose answer becomes a proposal for approval: they stay live. For each
 * run handed or failed to hand, in items' order, calls handed(arg, item,
 * what, errstr) before it returns (errstr NULL unless FAILED): the item
 * is the caller's to finish or retry there. Moves the runs to call live
 * to the front of items and returns how many those are: all n when bt is
 * NULL. @locality ledger thread */
size_t rl_batcher_hand_off(struct rl_batcher *bt, struct rl_db *db,
                           struct rl_item **items, size_t n,
                           void (*handed)(void *arg, struct rl_item *item,
                                          enum rl_batch_handoff what,
                                          const char *errstr),
                           void *arg);

#endif /* RL_BATCHER_H */
