#ifndef RL_DB_DISPATCH_H
#define RL_DB_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "rl/db_complete.h"
#include "rl/outcome.h"
#include "rl/timefmt.h"

/* Dispatches recorded before any request is sent, within budgets and
 * model rate limits, and the outcome of each attempt
 * (common/src/db/dispatch.c). Writes under a lease follow rl/db_lease.h's
 * rules; conventions: rl/db_conn.h. */

struct rl_db;

/* What a dispatch under a budget did. */
enum rl_dispatch_status {
    RL_DISPATCH_RECORDED,    /* the attempt is recorded: send the request */
    RL_DISPATCH_DEFERRED,    /* a budget is spent for today: no attempt was
                                recorded and the run is already pending until
                                the next UTC day (error_class "budget") */
    RL_DISPATCH_WAIT,        /* only reservations of calls in flight stand in
                                the way: as DEFERRED, due again after wait_ms */
    RL_DISPATCH_DEADLINE,    /* the run's deadline has passed: nothing was
                                recorded; fail the run (error_class deadline) */
    RL_DISPATCH_RATE_LIMITED /* the model's rate limit (or the provider's
                                pause) has no room: as WAIT, due again at
                                next_window (error_class rate_limit,
                                schema/019_model_rate_limits.sql) */
};

/* One run of a dispatch batch. */
struct rl_dispatch_req {
    const char *run_id;
    int64_t lease_epoch;
    const char *idempotency_key;
    int64_t estimate;
};

/* What a dispatch batch did for one run. */
struct rl_dispatch_res {
    int err; /* 0 or RL_ERR_STALE (nothing written for this run) */
    enum rl_dispatch_status status;
    int attempt_no;                     /* RECORDED */
    char next_window[RL_TIME_UTC_SIZE]; /* DEFERRED, WAIT, RATE_LIMITED:
                                           when due again */
    char detail[320];                   /* DEFERRED, WAIT, RATE_LIMITED:
                                           why */
};

/* Records the model dispatches of n runs BEFORE their requests are sent
 * (plpgsql rl_dispatch_runs in schema/007_batches.sql and 010), in one
 * statement and one transaction, each run under its own lease; out[k]
 * tells what happened to reqs[k]. For each run, estimate tokens are first
 * reserved against every budget of its tenant (and job) for today's UTC
 * date (rl_dispatch_within_budget of schema/004_budgets.sql); the attempt's
 * outcome settles the reservation. A recorded dispatch increments
 * runs.attempts and inserts attempts(run_id, attempt_no, lease_epoch,
 * worker, idempotency_key, dispatched_at = now()). Idempotent per lease:
 * when this worker already recorded a dispatch under lease_epoch that has
 * no outcome yet (the first call's COMMIT went through but its answer was
 * lost), that attempt is returned and nothing is added. No two reqs may
 * name the same run. Returns 0, RL_ERR_INVALID, RL_ERR_NOMEM or RL_ERR_DB
 * (nothing known; safe to redo: a lease dispatches at most once). */
int rl_db_dispatch_runs(struct rl_db *db, const struct rl_dispatch_req *reqs,
                        size_t n, const char *worker, int64_t wait_ms,
                        struct rl_dispatch_res *out, char *errstr,
                        size_t errstr_size);

/* What one attempt's call came to: its outcome, the numbers of the call
 * (call.attempt_no names the attempt; the fields an answer's completion
 * records too, except that an "" upstream_request_id is stored as "")
 * and the error. Negative numbers and NULL strings are stored as NULL;
 * zero is stored as zero. */
struct rl_attempt_outcome {
    enum rl_outcome outcome;
    struct rl_attempt_ok call;
    const char *error;
};

/* Sets the outcome of attempt oc->call.attempt_no of run_id to oc, once. Not
 * lease-guarded: an attempt's outcome is a fact about what was sent, and a
 * worker that lost its lease still tells the truth about its call.
 * Returns 0, RL_ERR_NOTFOUND (no such attempt, or it has an outcome),
 * RL_ERR_INVALID (no or unknown outcome) or RL_ERR_DB. */
int rl_db_record_outcome(struct rl_db *db, const char *run_id,
                         const struct rl_attempt_outcome *oc, char *errstr,
                         size_t errstr_size);

/* The latest attempt of run_id when it has no outcome (an earlier owner
 * sent it and died before recording what came back), into *attempt_no;
 * 0 when there is none. Returns 0 or RL_ERR_DB. */
int rl_db_unsettled_attempt(struct rl_db *db, const char *run_id,
                            int *attempt_no, char *errstr, size_t errstr_size);

/* Records that the answer of attempt attempt_no of run_id was read back
 * from the endpoint's record (record_id: the stored answer's id, NULL or
 * "": none) instead of arriving as the call's reply: attempts.reconciled_at
 * and reconciled_from (schema/050_reconciled_attempts.sql), and
 * reconciled_attempt (the attempt the stored answer names: attempt_no or
 * an earlier ambiguous one) and reconciled_generations (the records found
 * for the run's ambiguous attempts, each a generation; at least 1)
 * (schema/086_installation.sql), while the attempt has no outcome yet;
 * the completion that stores the answer sets its outcome. Not
 * lease-guarded, as an outcome is not. Returns 0, RL_ERR_NOTFOUND (no
 * such attempt, or it has an outcome) or RL_ERR_DB. */
int rl_db_mark_reconciled(struct rl_db *db, const char *run_id, int attempt_no,
                          const char *record_id, int record_attempt,
                          int generations, char *errstr, size_t errstr_size);

/* The attempts of run_id that may have generated without a result known
 * (no outcome, or ended ambiguous), ascending, into *attempt_nos
 * (malloc'd, NULL when *n is 0). Returns 0, RL_ERR_NOMEM or RL_ERR_DB. */
int rl_db_ambiguous_attempt_nos(struct rl_db *db, const char *run_id,
                                int **attempt_nos, int *n, char *errstr,
                                size_t errstr_size);

/* The ledger's installation id (schema/086_installation.sql: generated
 * once by the migration), into out. Returns 0, RL_ERR_NOTFOUND (no row)
 * or RL_ERR_DB. */
int rl_db_installation_id(struct rl_db *db, char *out, size_t size,
                          char *errstr, size_t errstr_size);

/* The database cluster's system identifier (pg_control_system()), as
 * decimal text, into out: a physical standby promoted after a failover
 * has its primary's, a cluster a pg_dump is restored into has another.
 * Returns 0, RL_ERR_NOTFOUND when the server refuses it (a managed
 * service that revokes the function: the connection stays usable,
 * errstr says why) or RL_ERR_DB when the connection is lost. */
int rl_db_cluster_id(struct rl_db *db, char *out, size_t size, char *errstr,
                     size_t errstr_size);

#endif /* RL_DB_DISPATCH_H */
