#ifndef RL_DB_BATCH_LEASE_H
#define RL_DB_BATCH_LEASE_H

/* A batch moved on by one worker at a time (common/src/db/batch_lease.c,
 * schema/061_batches.sql): the batches row leased with its epoch bumped,
 * every step of it written under (owner, epoch), and its end. A worker
 * whose lease is gone is refused (RL_ERR_STALE) at its next write. The
 * batcher's stages take batches through db_batch_submit.h (intents) and
 * db_batch_poll.h (due polls). Conventions: rl/db_conn.h. */

#include <stddef.h>
#include <stdint.h>

#include "rl/batch_state.h"

struct rl_db;

/* The lease owner of every run waiting in or for a batch. */
#define RL_BATCH_OWNER "runledger-batch"

/* One batch as the batcher leases it. */
struct rl_batch {
    char batch_id[64];
    int64_t epoch; /* lock_epoch of this lease */
    char endpoint[64];
    char model[256];
    char completion_window[16];
    char input_file_id[128];
    char provider_batch_id[128];
    int upload_tries;
    int create_tries;
    /* An intent: since the first lookup found nothing; a submitted
     * batch: since it was looked up, when it was adopted by its metadata
     * (ADOPTED); -1: none. */
    int64_t lookup_ms;
    int polls;
    int runs;
};

/* The steps of a leased batch, each written under (owner, b->epoch). */
enum rl_batch_step {
    RL_BATCH_STEP_UPLOAD,    /* an upload begins: upload_tries + 1, the
                                lease extended by ms */
    RL_BATCH_STEP_UPLOADED,  /* arg: the provider's file id */
    RL_BATCH_STEP_CREATE,    /* a create begins: create_tries + 1 */
    RL_BATCH_STEP_SUBMITTED, /* arg: the provider's batch id; the first
                                poll in ms; the lease released */
    RL_BATCH_STEP_LOOKUP,    /* not found at the provider (yet): looked
                                up again in ms; the lease released */
    RL_BATCH_STEP_POLL,      /* arg: the provider's status; polled again
                                in ms; failures reset; the lease
                                released */
    RL_BATCH_STEP_RELEASE,   /* arg: why; the step redone in ms; the
                                lease released */
    RL_BATCH_STEP_ADOPTED    /* as SUBMITTED, for a batch found at the
                                provider by its metadata: lookup_since
                                kept (set if none), so its lookup_ms
                                says a create of it got no answer */
};

/* Writes step of b under its lease. Returns 0, RL_ERR_STALE (another
 * worker leases it now: stop) or RL_ERR_DB. */
int rl_db_batch_step(struct rl_db *db, const struct rl_batch *b,
                     const char *owner, enum rl_batch_step step,
                     const char *arg, int64_t ms, char *errstr,
                     size_t errstr_size);

/* Ends b under its lease: state (completed, failed, expired or
 * cancelled), the provider's status and files, and detail (NULL or "":
 * the last step's kept). Its lines are counted from its runs' states in
 * the ledger, whoever read them (lines_ok completed, lines_failed failed
 * or retried, lines_ignored ignored plus unmatched: the lines that named
 * no run of b). Returns 0, RL_ERR_STALE or RL_ERR_DB. */
int rl_db_batch_finish(struct rl_db *db, const struct rl_batch *b,
                       const char *owner, enum rl_batch_state state,
                       const char *provider_status, const char *output_file_id,
                       const char *error_file_id, int unmatched,
                       const char *detail, char *errstr, size_t errstr_size);

/* Extends b's lease to ms from now. Returns 0, RL_ERR_STALE or RL_ERR_DB. */
int rl_db_batch_renew(struct rl_db *db, const struct rl_batch *b,
                      const char *owner, int64_t ms, char *errstr,
                      size_t errstr_size);

/* A poll or read of b that failed at the provider: counted (failures + 1,
 * the poll backoff grown), why kept as its detail, the lease extended by
 * lease_ms and kept. The count since the last good poll into *failures.
 * Returns 0, RL_ERR_STALE or RL_ERR_DB. */
int rl_db_batch_failure(struct rl_db *db, const struct rl_batch *b,
                        const char *owner, const char *why, int64_t lease_ms,
                        int *failures, char *errstr, size_t errstr_size);

/* Begins a transaction on db holding b's row locked under its lease, for
 * what a line of b's files does to its run: a worker whose lease is gone
 * acts on nothing (RL_ERR_STALE, the transaction rolled back). End it
 * with rl_db_batch_fence_end. */
int rl_db_batch_fence(struct rl_db *db, const struct rl_batch *b,
                      const char *owner, char *errstr, size_t errstr_size);

/* Commits (commit nonzero) or rolls back the transaction of
 * rl_db_batch_fence. Returns 0; RL_ERR_DB when it was rolled back (or
 * the rollback failed); RL_ERR_IO when the connection went before the
 * COMMIT was answered, so it may have committed. */
int rl_db_batch_fence_end(struct rl_db *db, int commit, char *errstr,
                          size_t errstr_size);

#endif /* RL_DB_BATCH_LEASE_H */
