#ifndef RL_PIPELINE_H
#define RL_PIPELINE_H

/* The staged pipeline of one consumer process (docs/design.md, "Flow through
 * one consumer process"):
 *
 *   kafka thread   poll -> parse/validate -> intake queue
 *                  done queue -> contiguous offset prefix -> offsets_store
 *   ledger thread  intake -> register+claim (batched) -> collect ->
 *                  record dispatch -> model; model results: answers ->
 *                  completer, the rest -> release | fail | propose; what
 *                  the completer wrote -> done queue; lease heartbeats for
 *                  every claimed run in one statement; the sweeper
 *   completer      answers -> complete + outbox (batched) on a connection
 *   thread         of its own, so completions overlap claims and dispatches
 *   model thread   one libcurl multi handle for every call (rl/model.h)
 *   relay thread   outbox -> notification topic (relay.c)
 *
 * Stages hand runs over through bounded queues; the Kafka thread never
 * waits for PostgreSQL or HTTP, it pauses its partitions at the cap. */

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rl/config.h"
#include "rl/event.h"
#include "rl/model.h"

/* The most runs one process holds between intake and a durable state, for
 * an in-flight cap (RUNLEDGER_MAX_IN_FLIGHT) of cap model calls: up to cap
 * calls in flight, the rest parsed and waiting to be claimed, or answered
 * and waiting for their completion. The Kafka thread pauses its partitions
 * there, so memory stays bounded whatever the model's latency. */
#define RL_PIPELINE_HOLD_MAX(cap) (2L * (long)(cap))

/* Where a run came from: a Kafka message (its offset becomes done when the
 * run is durable) or the sweeper (no offset). */
struct rl_source {
    int from_kafka;
    int32_t partition;
    int64_t offset;
    uint64_t generation; /* assignment generation the offset belongs to */
};

/* One run in flight through the process. Owned by whichever stage holds it;
 * queues link through next. */
struct rl_item {
    struct rl_item *next;
    struct rl_item *live_prev, *live_next; /* claimed-runs list (ledger) */
    struct rl_source src;
    struct rl_event *ev; /* NULL for sweeper-driven runs */
    char *value;         /* the raw Kafka value, for the dead-letter topic */
    size_t value_len;
    char run_id[RL_HEX_SIZE];
    char *job, *tenant, *request_json, *raw_input; /* owned copies */
    int64_t lease_epoch;
    int64_t leased_at;    /* monotonic ms: the statement that set the lease */
    size_t request_bytes; /* the model body, measured before it is built */
    int attempt_no;
    int attempts_before; /* dispatches before this claim */
    int ambiguous_prior;
    int ambiguous_count;
    int deadline_passed; /* the claim found the run's deadline spent */
    int lease_lost;
    int64_t renewed_at; /* monotonic ms of the last renewal: @locks the
                           ledger's live_lock, shared with its renewer */
    int renew_lost;     /* the renewer found the lease gone: @locks the
                           same */
    int in_model;       /* the model thread holds call */
    int in_result;      /* the call came back; its result is being recorded */
    int redo;           /* ledger step to redo after a lost connection */
    int completing; /* the completer holds it (set and read by the ledger) */
    int landed;     /* what the completer did with it: RL_LANDED_* */
    int landed_err; /* RL_LANDED_DONE: 0, RL_ERR_STALE or RL_ERR_NOTFOUND */
    int landed_completed; /* RL_LANDED_DONE: this statement completed it */
    char *landed_error;   /* RL_LANDED_INVALID: the database's reason */
    struct rl_model_call call;
};

/* What the completer thread did with an answer it was handed. */
enum {
    RL_LANDED_DONE,     /* the statement committed: see landed_err */
    RL_LANDED_INVALID,  /* the database refused this run's output */
    RL_LANDED_DEFERRED, /* no connection and the grace period is over */
};

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

/* Frees item and what it owns; NULL is accepted. */
void rl_item_destroy(struct rl_item *item);

/* Process-wide counters, read by /metrics and the shutdown summary. */
struct rl_counters {
    atomic_llong events;
    atomic_llong invalid;
    atomic_llong claims_won;
    atomic_llong claims_lost;
    atomic_llong duplicates;
    atomic_llong conflicts;
    atomic_llong dispatches;
    atomic_llong completed;
    atomic_llong retried;
    atomic_llong failed;
    atomic_llong unknown;
    atomic_llong lease_lost;
    atomic_llong dead_letters;
    atomic_llong swept;
    atomic_llong relayed;
    atomic_llong budget_deferrals; /* dispatches refused by a spent budget */
    atomic_llong budget_waits;     /* ... by reservations of calls in flight */
    atomic_llong rate_limit_waits; /* ... by a model's rate limit or pause */
    atomic_llong model_throttles;  /* 429s that paused their model */
};

struct rl_http; /* health and metrics endpoint (http.h) */

/* Shared state of one consume process. */
struct rl_pipeline {
    struct rl_config *cfg;
    struct rl_counters counters;
    atomic_int stopping;     /* SIGTERM/SIGINT seen: stop claiming new work */
    atomic_int abandon;      /* grace elapsed: cancel what is still in flight */
    atomic_long in_flight;   /* runs between intake and done (held runs) */
    struct rl_queue intake;  /* kafka -> ledger */
    struct rl_queue results; /* model -> ledger */
    struct rl_queue answers; /* ledger -> completer */
    struct rl_queue landed;  /* completer -> ledger */
    atomic_int completer_stop; /* set once the ledger thread has ended */
    struct rl_queue done;      /* ledger -> kafka (items with an offset) */
    rd_kafka_t *dlq;           /* producer for the dead-letter topic */
    /* Dead letters the broker did not acknowledge, waiting for their next
     * try (consume.c); dlq_undelivered counts them and those re-sent and
     * not yet reported. */
    pthread_mutex_t dlq_lock;
    struct rl_dead_letter *dlq_retry; /* @locks dlq_lock */
    long dlq_undelivered;             /* @locks dlq_lock */
    struct rl_model *model;
    pthread_mutex_t wake_lock; /* ledger thread sleeps here */
    pthread_cond_t wake;
    struct rl_http *http; /* NULL when RUNLEDGER_HTTP_PORT is 0 */
};

/* Wakes the ledger thread. @locality any thread */
void rl_pipeline_wake(struct rl_pipeline *pl);

/* Hands a finished item to the Kafka thread (offset done) or frees it.
 * @locality any thread */
void rl_pipeline_finish(struct rl_pipeline *pl, struct rl_item *item);

/* Produces value to the dead-letter topic with headers reason, run_id and
 * the source topic/partition/offset. The item (if any) is finished once the
 * broker acknowledged the record: its offset must not be committed before
 * the dead letter is durable. Ownership of item passes to the producer.
 * @locality any thread */
void rl_pipeline_dead_letter(struct rl_pipeline *pl, struct rl_item *item,
                             const char *value, size_t len, const char *reason,
                             const char *detail);

/* The ledger thread body (ledger.c). */
void *rl_ledger_main(void *arg);

/* The completer thread body (ledger.c): completes the answers the ledger
 * hands it, in batches, on its own connection, and hands each run back on
 * pl->landed. Ends once completer_stop is set and nothing is left. */
void *rl_completer_main(void *arg);

/* The relay: runs until *stop is set (relay.c). http (may be NULL)
 * receives delivery latency and, in `runledger relay`, liveness.
 * Returns 0, or non-zero after a fatal error. */
int rl_relay_run(const struct rl_config *cfg, atomic_int *stop,
                 struct rl_counters *counters, struct rl_http *http);

#endif /* RL_PIPELINE_H */
