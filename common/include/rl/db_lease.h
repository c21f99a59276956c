#ifndef RL_DB_LEASE_H
#define RL_DB_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "rl/run_status.h"

/* The writes that keep or end a lease: raw input stored once, renewals
 * and checks, release and park (common/src/db/lease.c). Conventions:
 * rl/db_conn.h.
 *
 * Rules every write under a lease follows:
 * - the database clock decides lease expiry: callers pass durations;
 * - every write after a claim names the lease (worker, lease_epoch) and is
 *   refused with RL_ERR_STALE once another worker has claimed the run, so a
 *   worker that lost its lease can never commit;
 * - output and raw_input are write-once (guarded statements, and a trigger
 *   underneath); a completed run stays completed. */

struct rl_db;

/* A lease a worker holds: the fencing token of every write under it. */
struct rl_lease {
    const char *run_id;
    const char *worker;
    int64_t epoch; /* the lease_epoch the claim returned */
};

/* The leases of n runs one worker holds, for one statement:
 * run_ids[k] under epochs[k]. */
struct rl_lease_set {
    const char *worker;
    const char *const *run_ids;
    const int64_t *epochs;
    size_t n;
};

/* Stores raw input once: the first value written stays. *stored receives
 * the stored value (malloc'd, free with free(); NULL if none), which the
 * caller must use instead of its own. input_json NULL or "null" stores
 * nothing. Returns 0, RL_ERR_STALE (lease lost), RL_ERR_INVALID (not
 * JSON) or RL_ERR_DB. */
int rl_db_store_raw_input(struct rl_db *db, const struct rl_lease *lease,
                          const char *input_json, char **stored, char *errstr,
                          size_t errstr_size);

/* Extends the leases of set (n runs held by one worker) to now() +
 * lease_seconds in one statement. held[k] (set->n entries,
 * caller-allocated) is set to 1 when run_ids[k] with epochs[k] is still
 * this worker's, else 0 (the run moved on: abandon it). Returns the
 * number still held (>= 0) or RL_ERR_INVALID / RL_ERR_DB. */
int rl_db_renew_leases(struct rl_db *db, const struct rl_lease_set *set,
                       int lease_seconds, int *held, char *errstr,
                       size_t errstr_size);

/* As rl_db_renew_leases without extending anything: held[k] says whether
 * run_ids[k] with epochs[k] is still worker's lease (an operator's cancel
 * clears it at once). Read-only. Returns the number still held (>= 0) or
 * RL_ERR_INVALID / RL_ERR_DB. */
int rl_db_check_leases(struct rl_db *db, const struct rl_lease_set *set,
                       int *held, char *errstr, size_t errstr_size);

/* Gives a run back for a later attempt: status pending, lease cleared,
 * next_attempt_at = now() + delay_ms (database clock), error_class and
 * error recorded. Returns 0, RL_ERR_STALE or RL_ERR_DB. */
int rl_db_release(struct rl_db *db, const struct rl_lease *lease,
                  int64_t delay_ms, const char *error_class, const char *error,
                  char *errstr, size_t errstr_size);

/* Gives back every run worker still leases (status running), due at
 * once, error_class and error recorded: what a stopping process has not
 * finished. Returns the number of runs released (>= 0) or RL_ERR_DB. */
int rl_db_release_leases_of_owner(struct rl_db *db, const char *worker,
                                  const char *error_class, const char *error,
                                  char *errstr, size_t errstr_size);

/* rl_db_release of a run whose batch (under the batch's lease) brought
 * no answer, due again at once: the run's deadline moves by the time it
 * spent handed to the batch, a wait the provider's completion window
 * imposed. Returns as rl_db_release. */
int rl_db_release_after_batch(struct rl_db *db, const struct rl_lease *lease,
                              const char *error_class, const char *error,
                              char *errstr, size_t errstr_size);

/* rl_db_release for a wait the provider imposed (Retry-After): the run's
 * deadline moves by delay_ms as well. */
int rl_db_release_for_provider_wait(struct rl_db *db,
                                    const struct rl_lease *lease,
                                    int64_t delay_ms, const char *error_class,
                                    const char *error, char *errstr,
                                    size_t errstr_size);

/* Parks a run for good: status RL_RUN_FAILED or RL_RUN_UNKNOWN (the outcome of
 * a dispatched call is unknowable), lease cleared, error recorded. Returns 0,
 * RL_ERR_STALE, RL_ERR_INVALID (other status) or RL_ERR_DB. */
int rl_db_fail(struct rl_db *db, const struct rl_lease *lease,
               enum rl_run_status status, const char *error_class,
               const char *error, char *errstr, size_t errstr_size);

#endif /* RL_DB_LEASE_H */
