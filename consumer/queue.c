/* Hand-over between the pipeline's stages: a mutex+condvar FIFO of
 * items. What bounds them is the process-wide in-flight cap and held
 * bytes the Kafka thread enforces by pausing (consume.c), and the bytes
 * each item is charged for (item.c). */
#include <stddef.h>

#include "item.h"
#include "queue.h"

void
rl_queue_init(struct rl_queue *q)
{
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    q->head = q->tail = NULL;
    q->len = 0;
}

void
rl_queue_destroy(struct rl_queue *q)
{
    struct rl_item *item = q->head;

    while (item) {
        struct rl_item *next = item->next;
        rl_item_destroy(item);
        item = next;
    }
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->lock);
}

void
rl_queue_push(struct rl_queue *q, struct rl_item *item)
{
    item->next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail)
        q->tail->next = item;
    else
        q->head = item;
    q->tail = item;
    q->len++;
    pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

struct rl_item *
rl_queue_take(struct rl_queue *q, size_t max)
{
    struct rl_item *head, *last;
    size_t n = 1;

    pthread_mutex_lock(&q->lock);
    head = q->head;
    if (!head) {
        pthread_mutex_unlock(&q->lock);
        return NULL;
    }
    last = head;
    while (last->next && (max == 0 || n < max)) {
        last = last->next;
        n++;
    }
    q->head = last->next;
    if (!q->head)
        q->tail = NULL;
    q->len -= n;
    last->next = NULL;
    pthread_mutex_unlock(&q->lock);
    return head;
}

int
rl_queue_empty(struct rl_queue *q)
{
    int empty;

    pthread_mutex_lock(&q->lock);
    empty = q->head == NULL;
    pthread_mutex_unlock(&q->lock);
    return empty;
}
