#ifndef RL_LEDGER_INT_H
#define RL_LEDGER_INT_H

/* The ledger stage of `runledger consume`: everything that talks to
 * PostgreSQL for runs in flight. It claims runs (from Kafka intake or the
 * sweeper) in batches, stores the collected input write-once, records each
 * dispatch before the model call, renews every held lease in one statement,
 * and turns model results into exactly one durable state: completed (with
 * its outbox rows, one transaction), pending again with next_attempt_at,
 * failed, or unknown. Every write after the claim carries (worker,
 * lease_epoch); a refused write means the lease is gone and the run is
 * abandoned, never completed. @locality ledger thread
 *
 * Private to consumer/ledger/: the state of the ledger thread (struct
 * ledger) and the functions its files share, prefixed ledger_. */

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "deadletters.h"
#include "item.h"
#include "pipeline.h"
#include "positions.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/log.h"
#include "rl/outcome.h"
#include "rl/run_status.h"

/* Which step of a run to redo after the connection came back. */
enum { REDO_NONE, REDO_CLAIM, REDO_START, REDO_RESULT };

struct ledger {
    struct rl_pipeline *pl;
    const struct rl_config *cfg;
    struct rl_db *db;
    struct rl_item *live; /* runs this worker holds a lease on */
    size_t live_count;
    struct rl_item *retry; /* results whose ledger write must be redone */
    struct rl_item *reconcile_wait; /* live runs waiting for their next
                                       lookup (reconcile.c), via next */
    /* The renewer thread walks live and writes the renewal fields of its
     * items (renewed_at, renew_lost) under live_lock; the ledger thread
     * changes the list under it too, and reads the list without it. */
    pthread_mutex_t live_lock;
    pthread_cond_t renew_wake;
    pthread_t renewer;
    int renewer_started;
    int renew_stop;          /* @locks live_lock */
    atomic_long leases_gone; /* renew_lost set, not yet seen by ledger */
    int64_t next_sweep;
    int64_t next_connect;
    long connect_backoff;
    int abandoned;
    size_t in_model;   /* live runs whose call the model thread holds */
    size_t completing; /* live runs the completer holds */
    /* Until then the ledger has seen runs wait for a slot (registered
     * pending, or a sweep that filled its room): the slots are handed out
     * by the fair claim of the sweeper, the intake claims only those a
     * sweep cannot take (intake_room), and a slot that frees is refilled
     * at once (sweep_soon) rather than at the next sweep. */
    int64_t backlog_until;
    int sweep_soon;
    int64_t last_sweep;
    /* Runs the sweeper claimed ahead, leased and live, waiting for a model
     * slot, oldest first: a slot that frees while runs wait in the ledger
     * is refilled from here in the same turn of the loop, without waiting
     * for the next sweep and its statement. */
    struct rl_item *ready;
    struct rl_item **ready_tail;
    size_t ready_count;
    unsigned int seed;
    int64_t connected_at; /* monotonic ms of the connection's start */
    int failing; /* statements fail on every connection: /readyz says so */
    /* What the ledger handled of each partition read (positions.c), and
     * whether a new connection must compare it with the ledger's. */
    struct ledger_position *positions;
    size_t npositions, positions_cap;
    int recheck_positions;
    int64_t positions_checked_at; /* monotonic ms of the last comparison */
    int64_t positions_kept_since; /* ms since the epoch; 0: not read yet */
    /* The offsets one intake turn registered (ledger_claim_intake), for
     * the note of its refused events that follows them. */
    int32_t *round_parts;
    int64_t *round_firsts; /* src.covers_from */
    int64_t *round_offsets;
    size_t round_n, round_cap;
    int round_open;
    int round_gaps; /* an event of the turn covers offsets before it */
    struct rl_batcher *batch; /* batch mode (batch.c, consumer/batch/) */
    /* The ledger's installation id (schema/086_installation.sql), read at
     * the first connection: every stored call names it and a lookup adopts
     * only records that do (reconcile.c). "" until read. */
    char installation_id[128];
};

/* One partition as the ledger has handled it, in the newest epoch seen. */
struct ledger_position {
    int32_t partition;
    uint64_t epoch;
    int64_t handled_next; /* one past the last offset handled; -1: none */
    int checked;    /* compared with the ledger's position in this epoch */
    int registered; /* this process registered events of it, any epoch */
    uint64_t since_epoch; /* the epoch a seek by time was asked in */
};

/* How long a backlog seen keeps slots handed out by the sweeper, and the
 * shortest time between two sweeps it asks for. */
#define BACKLOG_MS 10000
#define SWEEP_SOON_MS 20

/* Runs one registration statement carries at most. */
#define REGISTER_MAX 512

/* Runs one sweep claims at most. */
#define SWEEP_MAX 256

/* live.c */
size_t ledger_count(const struct rl_item *list);
void ledger_log_ctx(const struct rl_item *item, struct rl_log_ctx *ctx);
int64_t ledger_now_ns(void);
void ledger_trace_claimed(struct rl_item *item, const char *stored);
void ledger_live_add(struct ledger *lg, struct rl_item *item);
void ledger_live_remove(struct ledger *lg, struct rl_item *item);
void ledger_trace_run_end(struct ledger *lg, struct rl_item *item,
                          const char *outcome);
void ledger_finish(struct ledger *lg, struct rl_item *item);
struct rl_lease ledger_lease_of(const struct ledger *lg,
                                const struct rl_item *item);

/* failures.c: writes that lost their connection, redone after it. */
void ledger_requeue(struct ledger *lg, struct rl_item *item, int redo);
void ledger_defer(struct ledger *lg, struct rl_item *item, int redo,
                  const char *what, const char *errstr);
void ledger_defer_batch(struct ledger *lg, struct rl_item **items, size_t n,
                        int redo, const char *what, const char *errstr);

/* retry.c: the retry policy (what each outcome does, backoff and
 * Retry-After, the ambiguity rule, attempts and deadline). */
/* Full-jitter exponential backoff before attempt, never shorter than
 * retry_after_ms (the provider's Retry-After; negative: none). */
long ledger_backoff_ms(struct ledger *lg, int attempt, long retry_after_ms);
/* How long a run whose dispatch the ledger refused (a budget or a rate
 * limit) waits before it is due again. */
long ledger_retry_refused_dispatch_ms(struct ledger *lg);
/* Before an attempt: 1 when item's deadline has not passed, 0 when it
 * was failed here. */
int ledger_retry_in_time(struct ledger *lg, struct rl_item *item);
/* Before an attempt, after any lookup of an earlier ambiguous dispatch:
 * 1 when item may be dispatched, 0 when it was handled here (parked by
 * the ambiguity rule, or no attempts left). */
int ledger_retry_may_attempt(struct ledger *lg, struct rl_item *item);
/* The dispatch statement found item's deadline spent: it fails. */
void ledger_retry_past_deadline(struct ledger *lg, struct rl_item *item);
/* A call cut off by shutdown after it was sent, whose endpoint keeps a
 * record: returns 1 when item was released with its attempt unsettled,
 * for the next claimer to look up; 0 when the policy applies. */
int ledger_retry_left_to_reconcile(struct ledger *lg, struct rl_item *item);
/* The outcome item's attempt records, from its call. */
enum rl_outcome ledger_retry_outcome(const struct rl_item *item);
/* What a call that brought no answer does to its run, its outcome
 * recorded: retried after a backoff, parked as unknown, or failed with a
 * dead letter. */
void ledger_retry_apply(struct ledger *lg, struct rl_item *item,
                        enum rl_outcome outcome, const struct rl_log_ctx *ctx);
/* The writes that carry the policy out: failed or unknown for good, with
 * a dead letter (give_up), or pending again after delay_ms
 * (retry_later). */
void ledger_give_up(struct ledger *lg, struct rl_item *item,
                    enum rl_run_status status, const char *error_class,
                    const char *detail);
void ledger_retry_later(struct ledger *lg, struct rl_item *item, long delay_ms,
                        const char *error_class, const char *detail);
/* ledger_retry_later for a wait the provider asked for (Retry-After): the
 * run's deadline moves by it. */
void ledger_retry_after_provider(struct ledger *lg, struct rl_item *item,
                                 long delay_ms, const char *error_class,
                                 const char *detail);

/* dispatch.c */
void ledger_start_attempts(struct ledger *lg, struct rl_item *list);

/* batch.c: batch mode (docs/batch.md). */
/* Starts the batcher thread (with a connection and an endpoint client of
 * its own); without it, batch-mode runs are sent live. */
void ledger_batch_start(struct ledger *lg);
/* Tells it to stop, as the process begins to: its call in progress ends
 * and it takes nothing more, so the join later waits for nothing. */
void ledger_batch_stopping(struct ledger *lg);
/* Stops and joins it. */
void ledger_batch_stop(struct ledger *lg);
/* Of n runs whose dispatch is recorded, hands those in batch mode to the
 * batcher (finishing them here) and moves the ones to call live to the
 * front of items; returns how many those are. */
size_t ledger_batch_take_over(struct ledger *lg, struct rl_item **items,
                              size_t n);

/* proposals.c */
void ledger_propose(struct ledger *lg, struct rl_item *item,
                    const struct rl_log_ctx *ctx);

/* throttle.c */
void ledger_throttle_model(struct ledger *lg, struct rl_item *item);

/* results.c */
void ledger_handle_results(struct ledger *lg, struct rl_item *list);
/* Records item's result (not an answer for the completer) and applies
 * the retry or ambiguity policy: the part of handling a result after any
 * lookup in the endpoint's record. */
void ledger_apply_result(struct ledger *lg, struct rl_item *item);
void ledger_land(struct ledger *lg, struct rl_item *list);

/* reconcile.c: ambiguous attempts looked up in the endpoint's record
 * (RUNLEDGER_MODEL_STORED_COMPLETIONS) before the ambiguity policy. */
/* item's call ended ambiguous: returns 1 when a lookup started (the item
 * is reconcile.c's until it comes back), 0 when the policy applies now. */
int ledger_reconcile_live(struct ledger *lg, struct rl_item *item);
/* item was claimed with an earlier dispatch that has no outcome: returns 1
 * when item was handled here (a lookup started, or the step deferred), 0
 * when the policy applies now. */
int ledger_reconcile_prior(struct ledger *lg, struct rl_item *item);
/* What became of a lookup that came back. */
enum ledger_lookup {
    LEDGER_LOOKUP_HANDLED, /* handled here: waiting for the next lookup,
                              released or finished */
    LEDGER_LOOKUP_FOUND,   /* the answer was adopted as the attempt's: the
                              caller hands it on like a live one */
    LEDGER_LOOKUP_MISSED   /* not found within the settle window: the
                              caller applies the ambiguity policy */
};
/* A lookup came back (item->in_lookup): found, the answer is adopted as
 * the attempt's; not found, asked again within the settle window, then
 * left to the policy. Calls neither results.c nor dispatch.c: the caller
 * (ledger_handle_results) goes on from what it returns. */
enum ledger_lookup ledger_reconcile_result(struct ledger *lg,
                                           struct rl_item *item);
/* Writes that item's attempt was answered from the record. Returns 1, or
 * 0 when item was handled here (deferred for the connection). */
int ledger_reconcile_mark(struct ledger *lg, struct rl_item *item);
/* Every loop turn: submits the lookups that are due; at shutdown, hands
 * back the runs waiting for one. */
void ledger_reconcile_tick(struct ledger *lg);

/* connection.c: the ledger thread's connection to PostgreSQL. */
void ledger_connection_init(struct ledger *lg);
/* Returns 1 with lg->db open, 0 while none can be had (a backoff after
 * a failed attempt). */
int ledger_connect(struct ledger *lg);
/* Closes a connection a statement failed on. The next one is opened
 * after a backoff when this one lived less than a few seconds, so a
 * statement that fails at once on every connection (a schema this build
 * does not know) does not turn into a loop of connections. */
void ledger_drop_db(struct ledger *lg);
/* A connection that has lived a while: its statements work again, and
 * /readyz stops saying they fail. */
void ledger_connection_settled(struct ledger *lg);

/* positions.c */
int ledger_positions_check(struct ledger *lg, const struct rl_item *batch);
void ledger_positions_handled(struct ledger *lg, const struct rl_item *it);
void ledger_positions_recheck(struct ledger *lg);
/* Whether the periodic comparison of every assigned partition is due. */
int ledger_positions_due(const struct ledger *lg);
struct rl_item *ledger_refuse_intake(struct ledger *lg, struct rl_item *batch,
                                     struct rl_item **refused);
void ledger_dead_letter_refused(struct ledger *lg, struct rl_item *refused);
void ledger_positions_free(struct ledger *lg);

/* intake.c */
void ledger_claim_intake(struct ledger *lg, struct rl_item *batch, long room);
size_t ledger_intake_take(const struct ledger *lg, long room);

/* slots.c */
long ledger_model_room(const struct ledger *lg);
long ledger_reserve_target(const struct ledger *lg);
void ledger_start_ready(struct ledger *lg);
/* Results that cannot be written before the process ends (no connection
 * and the grace period over): each call is over, and its run waits on the
 * retry list like a deferred write until the thread ends; its lease
 * expires and another worker's sweeper takes it. */
void ledger_park_results(struct ledger *lg, struct rl_item *list);
void ledger_release_ready(struct ledger *lg);
void ledger_drop_ready(struct ledger *lg);
void ledger_sweep(struct ledger *lg);

/* renewer.c */
void *ledger_renewer_main(void *arg);
void ledger_leases_gone(struct ledger *lg);

#endif /* RL_LEDGER_INT_H */
