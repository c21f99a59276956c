#ifndef RL_QUEUE_H
#define RL_QUEUE_H

/* The bounded hand-over between the pipeline's stages (queue.c): a FIFO
 * of items that one thread pushes and another takes. */

#include <pthread.h>
#include <stddef.h>

struct rl_item;

/* A mutex+condvar FIFO of items. Every member but the two primitives is
 * @locks lock: another thread pushes while this one reads, so a reader
 * that wants to know whether anything waits asks rl_queue_empty(). */
struct rl_queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct rl_item *head, *tail; /* @locks lock */
    size_t len;                  /* @locks lock */
};

void rl_queue_init(struct rl_queue *q);
void rl_queue_destroy(struct rl_queue *q);
void rl_queue_push(struct rl_queue *q, struct rl_item *item);
/* Takes up to max items (all when max is 0) as a list; NULL when empty. */
struct rl_item *rl_queue_take(struct rl_queue *q, size_t max);
/* 1 when q holds no item at this instant, else 0. Takes q->lock, so it
 * may be called with another mutex held (the ledger's wake_lock) as long
 * as nobody takes that mutex while holding q->lock. @locality any thread */
int rl_queue_empty(struct rl_queue *q);

#endif /* RL_QUEUE_H */
