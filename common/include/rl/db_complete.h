#ifndef RL_DB_COMPLETE_H
#define RL_DB_COMPLETE_H

#include <stddef.h>
#include <stdint.h>

#include "rl/db_lease.h"

/* An answer becomes one durable state: a completed run with its outbox
 * rows (common/src/db/complete.c), or for an approval-required run its
 * proposal (rl_db_propose_attempt, rl/db_approval.h). Writes under a lease
 * follow rl/db_lease.h's rules; conventions: rl/db_conn.h. */

struct rl_db;

/* What an attempt that produced the output returned (outcome "ok").
 * Negative numbers and NULL or "" strings are stored as NULL. */
struct rl_attempt_ok {
    int attempt_no;
    int http_status;
    const char *upstream_request_id;
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;
    int64_t latency_ms;
};

/* One run of a completion batch. Under the lease (worker, lease_epoch):
 * status completed, output (write-once), completed_at, the lease cleared,
 * and one outbox row per distinct channel with the envelope {"run_id",
 * "job", "tenant", "scheduled_at", "version", "channel", "output"} (ON
 * CONFLICT DO NOTHING). Outbox rows are only written by the call that
 * completes the run, so a run never has two rows for one channel. In the
 * same transaction, outcome "ok" for attempt oc.attempt_no, once (an
 * attempt that already has an outcome keeps it), even when the lease is
 * stale: it is the call's truth. A run the worker released (pending, no
 * owner) with lease_epoch unchanged completes as if still leased: nobody
 * can have dispatched it since, and refusing the answer would leave an
 * "ok" attempt whose answer nobody stored. A worker that dies before this
 * commits leaves the attempt without an outcome, which the next claimer treats
 * as ambiguous; it never leaves an "ok" attempt whose answer nobody stored. */
struct rl_complete_req {
    const char *run_id;
    int64_t lease_epoch;
    const char *output_json; /* JSON, not null */
    const char *const *channels;
    size_t n_channels;
    struct rl_attempt_ok oc;
};

/* What a completion batch did to one run. */
struct rl_complete_res {
    int err;         /* 0, RL_ERR_STALE (nothing of the run written but the
                        outcome) or RL_ERR_NOTFOUND */
    int completed;   /* 1: this call completed the run; 0: done before (a
                        caller holding a stale lease also gets 0 and err 0
                        once the run is completed) */
    int outbox_rows; /* outbox rows this call queued */
    int outcome_set; /* 1: this call recorded the attempt's outcome */
};

/* Completes n runs (plpgsql rl_complete_runs in schema/007_batches.sql and
 * 010) in one statement and one transaction, each run under its own lease;
 * out[k] tells what happened to reqs[k]. No two reqs may name the same
 * run. Returns 0 (every run has its result, a stale one never holds up the
 * others), RL_ERR_INVALID (no output, or the database refused a value of
 * some run, e.g. an output jsonb rejects: nothing was written; complete
 * the runs one by one to find it), RL_ERR_NOMEM or RL_ERR_DB (nothing
 * known; every step is safe to redo). */
int rl_db_complete_runs(struct rl_db *db, const struct rl_complete_req *reqs,
                        size_t n, const char *worker,
                        struct rl_complete_res *out, char *errstr,
                        size_t errstr_size);

#endif /* RL_DB_COMPLETE_H */
