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
 * waits for PostgreSQL or HTTP, it pauses its partitions at the cap.
 *
 * This header holds the state the stages share and the hand-offs between
 * them (pipeline.c); each stage declares its own functions in a header of
 * its own (item.h, queue.h, positions.h, deadletters.h, completer.h,
 * relay.h, ledger/ledger.h). */

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "counters.h"
#include "queue.h"
#include "rl/config.h"
#include "rl/model.h"

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

/* The most runs one dispatch or completion statement carries: a
 * completion of 256 runs queues 512 notifications at once, what the relay
 * (1000 rows a batch) takes in one go. */
#define RL_PIPELINE_BATCH_MAX 256

struct rl_dead_letter; /* a dead letter not yet acknowledged (deadletters.c) */
struct rl_http;        /* health and metrics endpoint (http.h) */
struct rl_seek;        /* a seek back the ledger asks for (positions.h) */
struct rl_otlp;        /* span exporter (rl/otlp.h) */

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
     * try (deadletters.c); dlq_undelivered counts them and those re-sent and
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
    /* What the Kafka thread knows the ledger held of each assigned
     * partition (positions.c), for the ledger's comparison. */
    struct rl_read_floor *floors; /* @locks seek_lock */
    size_t floor_count;           /* @locks seek_lock */
    size_t floor_cap;             /* @locks seek_lock */
};

/* Wakes the ledger thread. @locality any thread */
void rl_pipeline_wake(struct rl_pipeline *pl);

/* Hands a finished item to the Kafka thread (offset done) or frees it.
 * @locality any thread */
void rl_pipeline_finish(struct rl_pipeline *pl, struct rl_item *item);

/* The model client's callback (rl_model_new's done): a call or a lookup
 * came back on the model thread; its item goes to the ledger on
 * pl->results and the ledger wakes. opaque is pl. @locality model thread */
void rl_pipeline_model_done(struct rl_model_call *call, void *opaque);

#endif /* RL_PIPELINE_H */
