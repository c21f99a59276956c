#ifndef RL_COUNTERS_H
#define RL_COUNTERS_H

/* What one consume or relay process has done, counted for /metrics
 * (http.c) and the shutdown summary. Every stage adds to them; none
 * waits for another to read them. @locality any thread */

#include <stdatomic.h>

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
    atomic_llong reconciled_generations; /* records found there and adopted
                                            or counted with the adopted one:
                                            each a generation */
    atomic_llong reconcile_foreign;      /* records naming a run looked up
                                            but another installation,
                                            request or model: not adopted */
    /* Provider batches of this installation and cluster whose intent the
     * ledger lacks, cancelled unread (batch/sweep.c). */
    atomic_llong batch_orphans_cancelled;
};

#endif /* RL_COUNTERS_H */
