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
#include "rl/db_complete.h"
#include "rl/deadletter.h"
#include "rl/event.h"
#include "rl/model.h"
#include "rl/trace.h"

/* The most runs one process holds leased, for an in-flight cap
 * (RUNLEDGER_MAX_IN_FLIGHT) of cap model calls: up to cap calls in flight,
 * the rest answered and waiting for their completion. The sweeper claims
 * no more than that. */
#define RL_PIPELINE_LIVE_MAX(cap) (2L * (long)(cap))

/* Runs parsed and waiting in the intake to be registered, beyond the
 * leased ones. The ledger registers the intake whether or not a model slot
 * is free (what has no slot stays pending in the ledger), so the intake
 * drains at the speed of PostgreSQL, not of the model. */
#define RL_PIPELINE_INTAKE_MAX 1024L

/* The most runs one process holds between intake and a durable state. The
 * Kafka thread pauses its partitions there: a memory guard, reached when
 * PostgreSQL cannot keep up with the intake, never because model slots are
 * busy. */
#define RL_PIPELINE_HOLD_MAX(cap)                                              \
    (RL_PIPELINE_LIVE_MAX(cap) + RL_PIPELINE_INTAKE_MAX)

/* The held runs are also bounded by the bytes they keep
 * (RUNLEDGER_MAX_HELD_BYTES, counted in rl_counters.held_bytes): a few
 * hundred events of a megabyte each, four copies apiece, would otherwise
 * outgrow the pod well below the count. The Kafka thread pauses at
 * max_held_bytes and resumes at three quarters of it; it pauses only
 * while something is held, so one run larger than the whole limit still
 * runs, alone. Between two polls it takes one message, so the held bytes
 * stay below max_held_bytes plus the charge of one run. */
#define RL_PIPELINE_HELD_BYTES_RESUME(max) ((long long)(max) / 4 * 3)

/* Where a run came from: a Kafka message (its offset becomes done when the
 * run is durable) or the sweeper (no offset). */
struct rl_source {
    int from_kafka;
    int32_t partition;
    int64_t offset;
    /* The partition's epoch when the offset was read (positions.c): an
     * assignment, a revocation or a seek back starts a new one, and the
     * offsets of an older epoch are no longer this process's to commit. */
    uint64_t epoch;
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
    /* Sweeper-driven runs: the rest of the stored identity and where the
     * event was read (origin_topic NULL: unknown), for a dead letter. */
    char scheduled_at[RL_TIME_UTC_SIZE];
    char *version, *origin_topic;
    int32_t origin_partition;
    int64_t origin_offset;
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
    /* An event the intake refused (ev NULL): why, for its dead letter,
     * which the ledger produces once it has noted the event's position. */
    char *refusal_reason, *refusal_detail;
    struct rl_model_call call;
    /* Reconciliation of an ambiguous attempt from the endpoint's record
     * (ledger/reconcile.c): the lookup call, apart from call, which keeps
     * the ambiguous result the policy needs when nothing is found. */
    struct rl_model_call lookup;
    int in_lookup;           /* the model thread holds lookup (in_model
                                set too) */
    int reconcile;           /* RL_RECONCILE_*: what is looked up */
    int reconcile_attempt;   /* the attempt looked up */
    int reconcile_done;      /* looked up and not found: the policy
                                applies */
    int reconciled;          /* call holds the answer found there */
    int reconcile_marked;    /* the attempt says so in the ledger */
    int reconcile_lookups;   /* lookups made */
    int64_t reconcile_until; /* monotonic ms: the settle window's end */
    int64_t reconcile_due;   /* monotonic ms: the next lookup */
    /* What the item is charged for in the process's held bytes (@locality
     * the thread that owns the item; the counter is atomic). */
    atomic_llong *held_bytes; /* the counter, NULL: not counted */
    size_t held;              /* charged now (rl_item_recount) */
    size_t body_reserve;      /* the body it will build (measured at
                                 charge, again before it is built) */
    size_t dead_letter_bytes; /* the dead letter's copy of its value */
    /* Trace context (docs/operations.md#tracing). traceparent: the
     * event's valid header at intake, then what the claim returned ("":
     * none). The rest is set at each claim won: the run span (its id from
     * the epoch) and the attempt span of the call in flight. */
    char traceparent[RL_TRACEPARENT_SIZE];
    struct rl_trace_ctx trace;
    char run_span_id[RL_TRACE_SPAN_ID_SIZE];
    char attempt_span_id[RL_TRACE_SPAN_ID_SIZE];   /* "" between attempts */
    char attempt_traceparent[RL_TRACEPARENT_SIZE]; /* sent to the model */
    int64_t run_start_ns;                          /* wall clock, the claim */
    int64_t attempt_start_ns;  /* wall clock, the dispatch; 0: exported */
    const char *trace_outcome; /* how the run span ended (static) */
};

/* What an item's lookup is for (rl_item.reconcile). */
enum {
    RL_RECONCILE_NONE,
    RL_RECONCILE_LIVE, /* this worker's call ended ambiguous */
    RL_RECONCILE_PRIOR /* an earlier owner's dispatch has no outcome */
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

/* Frees item and what it owns, and takes its charge off the held bytes;
 * NULL is accepted. */
void rl_item_destroy(struct rl_item *item);

/* Starts counting item in *held_bytes: the bytes it holds now, plus
 * those its run will hold later and can be measured now (the request and
 * input copies the claim makes from its event, the model body), so a run
 * is charged at intake for most of what it grows to and the Kafka
 * thread's pause bounds the bytes runs reach after it, not only those
 * they start with. A body over max_body (RUNLEDGER_MAX_REQUEST_BYTES) is
 * never built and not reserved. Call once, when the item has its event
 * or, for the sweeper's, its request and input. @locality the owner of
 * item */
void rl_item_charge(struct rl_item *item, atomic_llong *held_bytes,
                    size_t max_body);

/* Brings item's charge up to date with what it holds now: call after
 * setting or freeing any of its copies. Reads the call's results only
 * once they are the item's again (in_result set, in_model not).
 * @locality the owner of item */
void rl_item_recount(struct rl_item *item);

/* What the attempt that answered returned, as the ledger records it (its
 * strings borrowed from item). @locality the owner of item */
struct rl_attempt_ok rl_item_attempt_ok(const struct rl_item *item);

/* The most runs one dispatch or completion statement carries: a
 * completion of 256 runs queues 512 notifications at once, what the relay
 * (1000 rows a batch) takes in one go. */
#define RL_PIPELINE_BATCH_MAX 256

/* Process-wide counters, read by /metrics and the shutdown summary. */
struct rl_counters {
    atomic_llong events;
    atomic_llong invalid;
    atomic_llong claims_won;
    atomic_llong claims_lost;
    atomic_llong duplicates;
    atomic_llong conflicts;
    atomic_llong purged_redelivered; /* events of purged runs, acknowledged */
    atomic_llong seeks_back; /* partitions read again: the ledger was behind */
    atomic_llong dispatches;
    atomic_llong completed;
    atomic_llong retried;
    atomic_llong failed;
    atomic_llong unknown;
    atomic_llong lease_lost;
    atomic_llong dead_letters;
    atomic_llong swept;
    atomic_llong queued; /* registered pending: no slot, or over a limit */
    atomic_llong relayed;
    atomic_llong budget_deferrals;  /* dispatches refused by a spent budget */
    atomic_llong budget_waits;      /* ... by reservations of calls in flight */
    atomic_llong held_bytes;        /* a gauge: bytes charged to the runs held
                                       (rl_item_charge), against
                                       RUNLEDGER_MAX_HELD_BYTES */
    atomic_llong rate_limit_waits;  /* ... by a model's rate limit or pause */
    atomic_llong model_throttles;   /* 429s that paused their model */
    atomic_llong reconciled;        /* ambiguous attempts whose answer was
                                       found in the endpoint's record and
                                       adopted (no new generation) */
    atomic_llong reconcile_missed;  /* ... not found there within the settle
                                       window: the ambiguity policy applied */
    atomic_llong reconcile_lookups; /* lookups made in the endpoint's
                                       record */
};

struct rl_http; /* health and metrics endpoint (http.h) */
struct rl_otlp; /* span exporter (rl/otlp.h) */

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
    pthread_rwlock_t dlq_swap; /* producing holds it read, a swap write */
    /* Dead letters the broker did not acknowledge, waiting for their next
     * try (consume.c); dlq_undelivered counts them and those re-sent and
     * not yet reported. */
    pthread_mutex_t dlq_lock;
    struct rl_dead_letter *dlq_retry; /* @locks dlq_lock */
    long dlq_undelivered;             /* @locks dlq_lock */
    struct rl_model *model;
    struct rl_otlp *otlp;      /* NULL: spans are not exported */
    pthread_mutex_t wake_lock; /* ledger thread sleeps here */
    pthread_cond_t wake;
    struct rl_http *http; /* NULL when RUNLEDGER_HTTP_PORT is 0 */
    /* Seeks back the ledger asks of the Kafka thread (positions.c). */
    pthread_mutex_t seek_lock;
    struct rl_seek *seeks; /* @locks seek_lock */
    size_t seek_count;     /* @locks seek_lock */
    size_t seek_cap;       /* @locks seek_lock */
};

/* A partition the ledger is behind on: its consumed position (offset) is
 * before offsets the Kafka thread read in epoch, so registrations were
 * lost (a failover to a standby that had not received them) and the
 * events from offset on must be read again. */
struct rl_seek {
    int32_t partition;
    uint64_t epoch;
    int64_t offset;
};

/* Asks the Kafka thread to read partition again from offset, unless its
 * epoch has moved on since. A second request for a partition replaces
 * the first. @locality any thread */
void rl_pipeline_seek_back(struct rl_pipeline *pl, int32_t partition,
                           uint64_t epoch, int64_t offset);

/* Takes the pending seek requests: a malloc'd array (free it) and its
 * length in *n, or NULL with *n 0. @locality kafka thread */
struct rl_seek *rl_pipeline_take_seeks(struct rl_pipeline *pl, size_t *n);

/* Each partition's epoch, on the Kafka thread (positions.c). Epochs come
 * from one counter, so no two partitions or assignments share one. */
struct rl_epochs {
    uint64_t *by_partition; /* 0: never assigned */
    size_t count;
    uint64_t last;
};

uint64_t rl_epochs_get(const struct rl_epochs *e, int32_t partition);
/* Starts a new epoch for partition. Returns it, or 0 when out of memory
 * (the partition then keeps epoch 0, which no offset read carries). */
uint64_t rl_epochs_bump(struct rl_epochs *e, int32_t partition);
void rl_epochs_free(struct rl_epochs *e);

/* Wakes the ledger thread. @locality any thread */
void rl_pipeline_wake(struct rl_pipeline *pl);

/* Hands a finished item to the Kafka thread (offset done) or frees it.
 * @locality any thread */
void rl_pipeline_finish(struct rl_pipeline *pl, struct rl_item *item);

/* Produces item's dead letter with the headers of rl/deadletter.h; its
 * value is the original event (item->value), or for a swept run the event
 * rebuilt from the ledger row (job, tenant, scheduled_at, version,
 * request_json, raw_input). The item (if any) is finished once the broker
 * acknowledged the record: its offset must not be committed before the
 * dead letter is durable. Ownership of item passes to the producer.
 * @locality any thread */
void rl_pipeline_dead_letter(struct rl_pipeline *pl, struct rl_item *item,
                             enum rl_deadletter_source source,
                             const char *reason, const char *detail);

/* The dead-letter producer's delivery report (deadletters.c): set on
 * pl->dlq's configuration, served by rd_kafka_poll on it. */
void rl_pipeline_dlq_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm,
                           void *opaque);

/* A new dead-letter producer configured for pl (its reports to
 * rl_pipeline_dlq_dr_cb), or NULL with errstr. */
rd_kafka_t *rl_pipeline_dlq_new(struct rl_pipeline *pl, char *errstr,
                                size_t errstr_size);

/* Replaces pl->dlq when it failed for good (deadletters.c). @locality
 * kafka thread */
void rl_pipeline_dlq_renew_if_fatal(struct rl_pipeline *pl);

/* Produces again the dead letters the broker did not take whose backoff
 * is over (abandon: every one, once, as the process stops). @locality
 * kafka thread */
void rl_pipeline_retry_dead_letters(struct rl_pipeline *pl, int abandon);

/* The ledger thread body (ledger/loop.c). */
void *rl_ledger_main(void *arg);

/* The completer thread body (completer.c): completes the answers the ledger
 * hands it, in batches, on its own connection, and hands each run back on
 * pl->landed. Ends once completer_stop is set and nothing is left. */
void *rl_completer_main(void *arg);

/* The relay: runs until *stop is set (relay.c). http (may be NULL)
 * receives delivery latency and, in `runledger relay`, liveness.
 * Returns 0, or non-zero after a fatal error. */
int rl_relay_run(const struct rl_config *cfg, atomic_int *stop,
                 struct rl_counters *counters, struct rl_http *http);

#endif /* RL_PIPELINE_H */
