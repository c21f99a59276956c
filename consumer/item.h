#ifndef RL_ITEM_H
#define RL_ITEM_H

/* One run in flight through the consumer process (item.c): where it came
 * from, what it holds at each stage, and the bytes it is charged for
 * against RUNLEDGER_MAX_HELD_BYTES. An item has one owner at a time, the
 * stage that holds it; stages hand it over through queues (queue.h). */

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rl/db_complete.h"
#include "rl/event.h"
#include "rl/model.h"
#include "rl/runid.h"
#include "rl/timefmt.h"
#include "rl/trace.h"

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
    /* The first offset this event covers: with the offsets before it that
     * Kafka never delivers (transaction markers, compacted records), as
     * the Kafka thread read them in this epoch (rl_epochs_covers_from). */
    int64_t covers_from;
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
    char fingerprint[RL_HEX_SIZE]; /* the stored request's, at the claim */
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
    int reconcile_attempt;   /* the attempt looked up (its outcome is
                                recorded: this one's or, adopted, ok) */
    int *reconcile_attempts; /* every ambiguous attempt of the run whose
                                records are looked up (malloc'd; NULL:
                                reconcile_attempt alone) */
    int reconcile_nattempts;
    char *reconcile_model;   /* the run's model, which a record adopted
                                answered (malloc'd; NULL: any) */
    int reconcile_foreign;   /* records of another installation, request
                                or model, at the last lookup */
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

#endif /* RL_ITEM_H */
