/* lease.c: the writes that keep or end a worker's lease (worker,
 * lease_epoch): raw input stored once, renewals and checks of every held
 * lease in one statement, release for a later attempt, and park. Each
 * statement names the lease and touches nothing once another worker has
 * claimed the run. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rl/run_status.h"

static const struct db_stmt store_raw_input_once = {
    DB_STMT_STORE_RAW_INPUT_ONCE, "store_raw_input_once",
    "UPDATE runs"
    "   SET raw_input = coalesce(raw_input, nullif($4::jsonb, 'null')),"
    "       updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running'"
    " RETURNING raw_input",
    4};

/* Rows are locked in run_id order, as rl_claim_runs locks them, so a
 * renewal and a claim batch sharing runs cannot deadlock. The lease is
 * owner and epoch: no status condition, which would let the planner read
 * every leased run through the partial index on running runs instead of
 * looking these up by run_id (a lock owner implies status running, see
 * schema/010_leases_by_run_id.sql). */
static const struct db_stmt renew_leases_of_owner = {
    DB_STMT_RENEW_LEASES_OF_OWNER, "renew_leases_of_owner",
    "UPDATE runs r"
    "   SET lock_expires_at = now() + make_interval(secs => $2::float8),"
    "       updated_at = now()"
    "  FROM (SELECT l.run_id, u.ord"
    "          FROM runs l"
    "          JOIN unnest($3::text[], $4::int8[]) WITH ORDINALITY"
    "               AS u(run_id, epoch, ord)"
    "            ON l.run_id = u.run_id AND l.lease_epoch = u.epoch"
    "         WHERE l.lock_owner = $1"
    "         ORDER BY l.run_id"
    "           FOR NO KEY UPDATE OF l) held"
    " WHERE r.run_id = held.run_id AND r.lock_owner = $1"
    " RETURNING held.ord",
    4};

/* The renewer's look at the leases it does not renew this round: which
 * are still held, without writing (an operator's cancel, or a claim after
 * expiry, took the others). Read-only, so it may run every second. */
static const struct db_stmt check_leases_of_owner = {
    DB_STMT_CHECK_LEASES_OF_OWNER, "check_leases_of_owner",
    "SELECT u.ord"
    "  FROM unnest($2::text[], $3::int8[]) WITH ORDINALITY"
    "       AS u(run_id, epoch, ord)"
    "  JOIN runs r ON r.run_id = u.run_id AND r.lease_epoch = u.epoch"
    " WHERE r.lock_owner = $1",
    3};

static const struct db_stmt release_run_under_lease = {
    DB_STMT_RELEASE_RUN_UNDER_LEASE, "release_run_under_lease",
    "UPDATE runs"
    "   SET status = 'pending', lock_owner = NULL, lock_expires_at = NULL,"
    "       next_attempt_at = now() + $4::int8 * interval '1 millisecond',"
    "       error_class = $5, last_error = $6, updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running'",
    6};

/* As release_run_under_lease, for a wait the provider imposed (its
 * Retry-After): the run's deadline moves by the same delay, since it
 * measures the run's waiting, not a queue it was told to join. */
static const struct db_stmt release_run_for_provider_wait = {
    DB_STMT_RELEASE_RUN_FOR_PROVIDER_WAIT, "release_run_for_provider_wait",
    "UPDATE runs"
    "   SET status = 'pending', lock_owner = NULL, lock_expires_at = NULL,"
    "       next_attempt_at = now() + $4::int8 * interval '1 millisecond',"
    "       deadline_at = deadline_at + $4::int8 * interval '1 millisecond',"
    "       error_class = $5, last_error = $6, updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running'",
    6};

/* As release_run_under_lease, for a run whose batch brought no answer
 * (expired, failed, refused): the deadline moves by the time the run spent
 * handed to the batch (batch_runs.parked_at of the attempt under this
 * lease), since a completion window of hours at the provider is a wait
 * the provider imposed, and a run sent on live or to the next batch with
 * its deadline already past would fail "deadline" at its next claim. */
static const struct db_stmt release_run_after_batch = {
    DB_STMT_RELEASE_RUN_AFTER_BATCH, "release_run_after_batch",
    "UPDATE runs"
    "   SET status = 'pending', lock_owner = NULL, lock_expires_at = NULL,"
    "       next_attempt_at = now() + $4::int8 * interval '1 millisecond',"
    "       deadline_at = deadline_at + coalesce("
    "           (SELECT greatest(now() - b.parked_at, interval '0')"
    "              FROM batch_runs b"
    "             WHERE b.run_id = $1 AND b.lease_epoch = $3::int8"
    "             ORDER BY b.attempt_no DESC LIMIT 1), interval '0'),"
    "       error_class = $5, last_error = $6, updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running'",
    6};

/* Every run owner still leases, given back at once: a process that stops
 * without finishing them lets another worker's sweeper take them now
 * rather than when the leases expire. */
static const struct db_stmt release_leases_of_owner = {
    DB_STMT_RELEASE_LEASES_OF_OWNER, "release_leases_of_owner",
    "UPDATE runs"
    "   SET status = 'pending', lock_owner = NULL, lock_expires_at = NULL,"
    "       next_attempt_at = now(), error_class = $2, last_error = $3,"
    "       updated_at = now()"
    " WHERE lock_owner = $1 AND status = 'running'",
    3};

static const struct db_stmt park_run_under_lease = {
    DB_STMT_PARK_RUN_UNDER_LEASE, "park_run_under_lease",
    "UPDATE runs"
    "   SET status = $4, lock_owner = NULL, lock_expires_at = NULL,"
    "       next_attempt_at = NULL, error_class = $5, last_error = $6,"
    "       updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running' AND $4 IN ('failed', 'unknown')",
    6};

int
rl_db_store_raw_input(struct rl_db *db, const struct rl_lease *lease,
                      const char *input_json, char **stored, char *errstr,
                      size_t errstr_size)
{
    char epoch[32];
    const char *params[4] = {lease->run_id, lease->worker, epoch,
                             db_is_json_null(input_json) ? NULL : input_json};
    PGresult *res;
    int err = RL_ERR_DB;
    int oom = 0;

    *stored = NULL;
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease->epoch);
    res = db_exec_stmt(db, &store_raw_input_once, params,
                       "store raw input of run", lease->run_id, &err, errstr,
                       errstr_size);
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        db_stale_msg(errstr, errstr_size, "store raw input of run",
                     lease->run_id, lease->epoch);
        return RL_ERR_STALE;
    }
    *stored = db_dup_value(res, 0, 0, &oom);
    PQclear(res);
    if (oom) {
        rl_set_err(errstr, errstr_size,
                   "could not store raw input of run %s: out of memory",
                   lease->run_id);
        return RL_ERR_NOMEM;
    }
    return 0;
}

/* Renews (lease_seconds > 0) or checks (0) the leases of n runs. */
static int
leases_of_owner(struct rl_db *db, const char *worker, int lease_seconds,
                const char *const *run_ids, const int64_t *epochs, size_t n,
                int *held, char *errstr, size_t errstr_size)
{
    struct rl_buf ids = {0}, eps = {0};
    char lease[32];
    const char *params[4];
    PGresult *res = NULL;
    int err = RL_ERR_DB;
    int count = 0;

    if (n == 0)
        return 0;
    memset(held, 0, n * sizeof(*held));
    if (!worker || !*worker || lease_seconds < 0) {
        rl_set_err(
            errstr, errstr_size,
            "could not renew leases: need a worker and a positive lease");
        return RL_ERR_INVALID;
    }
    rl_buf_put(&ids, "{", 1);
    rl_buf_put(&eps, "{", 1);
    for (size_t i = 0; i < n; i++) {
        db_array_add(&ids, run_ids[i]);
        db_array_add_int(&eps, epochs[i], 0);
    }
    rl_buf_put(&ids, "}", 1);
    rl_buf_put(&eps, "}", 1);
    if (ids.failed || eps.failed) {
        rl_set_err(errstr, errstr_size,
                   "could not renew leases: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    snprintf(lease, sizeof(lease), "%d", lease_seconds);
    params[0] = worker;
    params[1] = lease;
    params[2] = ids.data;
    params[3] = eps.data;
    if (lease_seconds == 0) {
        params[1] = ids.data;
        params[2] = eps.data;
        res =
            db_exec_stmt(db, &check_leases_of_owner, params,
                         n == 1 ? "check lease of run" : "check leases",
                         n == 1 ? run_ids[0] : NULL, &err, errstr, errstr_size);
    } else {
        res =
            db_exec_stmt(db, &renew_leases_of_owner, params,
                         n == 1 ? "renew lease of run" : "renew leases",
                         n == 1 ? run_ids[0] : NULL, &err, errstr, errstr_size);
    }
    if (!res)
        goto done;
    for (int row = 0; row < PQntuples(res); row++) {
        int64_t ord = db_int_value(res, row, 0, 0);

        if (ord >= 1 && (size_t)ord <= n && !held[ord - 1]) {
            held[ord - 1] = 1;
            count++;
        }
    }
    err = count;

done:
    PQclear(res);
    rl_buf_free(&ids);
    rl_buf_free(&eps);
    return err;
}

int
rl_db_renew_leases(struct rl_db *db, const struct rl_lease_set *set,
                   int lease_seconds, int *held, char *errstr,
                   size_t errstr_size)
{
    if (lease_seconds <= 0) {
        rl_set_err(
            errstr, errstr_size,
            "could not renew leases: need a worker and a positive lease");
        return RL_ERR_INVALID;
    }
    return leases_of_owner(db, set->worker, lease_seconds, set->run_ids,
                           set->epochs, set->n, held, errstr, errstr_size);
}

int
rl_db_check_leases(struct rl_db *db, const struct rl_lease_set *set, int *held,
                   char *errstr, size_t errstr_size)
{
    return leases_of_owner(db, set->worker, 0, set->run_ids, set->epochs,
                           set->n, held, errstr, errstr_size);
}

/* Runs a lease-guarded UPDATE; no row means the lease is gone. */
static int
update_under_lease(struct rl_db *db, const struct db_stmt *st,
                   const char *const *params, const char *what,
                   const char *run_id, int64_t epoch, char *errstr,
                   size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    res = db_exec_stmt(db, st, params, what, run_id, &err, errstr, errstr_size);
    if (!res)
        return err;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    if (rows != 1) {
        db_stale_msg(errstr, errstr_size, what, run_id, epoch);
        return RL_ERR_STALE;
    }
    return 0;
}

/* A release through st (with or without the deadline moved). */
static int
release(struct rl_db *db, const struct db_stmt *st,
        const struct rl_lease *lease, int64_t delay_ms, const char *error_class,
        const char *error, char *errstr, size_t errstr_size)
{
    char epoch[32], delay[32];
    const char *params[6] = {lease->run_id, lease->worker, epoch,
                             delay,         error_class,   error};

    snprintf(epoch, sizeof(epoch), "%" PRId64, lease->epoch);
    snprintf(delay, sizeof(delay), "%" PRId64, delay_ms > 0 ? delay_ms : 0);
    return update_under_lease(db, st, params, "release run", lease->run_id,
                              lease->epoch, errstr, errstr_size);
}

int
rl_db_release(struct rl_db *db, const struct rl_lease *lease, int64_t delay_ms,
              const char *error_class, const char *error, char *errstr,
              size_t errstr_size)
{
    return release(db, &release_run_under_lease, lease, delay_ms, error_class,
                   error, errstr, errstr_size);
}

int
rl_db_release_leases_of_owner(struct rl_db *db, const char *worker,
                              const char *error_class, const char *error,
                              char *errstr, size_t errstr_size)
{
    const char *params[3] = {worker, error_class, error};
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    res = db_exec_stmt(db, &release_leases_of_owner, params, "release leases",
                       worker, &err, errstr, errstr_size);
    if (!res)
        return err;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    return rows;
}

int
rl_db_release_for_provider_wait(struct rl_db *db, const struct rl_lease *lease,
                                int64_t delay_ms, const char *error_class,
                                const char *error, char *errstr,
                                size_t errstr_size)
{
    return release(db, &release_run_for_provider_wait, lease, delay_ms,
                   error_class, error, errstr, errstr_size);
}

int
rl_db_release_after_batch(struct rl_db *db, const struct rl_lease *lease,
                          const char *error_class, const char *error,
                          char *errstr, size_t errstr_size)
{
    return release(db, &release_run_after_batch, lease, 0, error_class, error,
                   errstr, errstr_size);
}

int
rl_db_fail(struct rl_db *db, const struct rl_lease *lease,
           enum rl_run_status status, const char *error_class,
           const char *error, char *errstr, size_t errstr_size)
{
    char epoch[32];
    const char *params[6] = {lease->run_id, lease->worker,
                             epoch,         rl_run_status_name(status),
                             error_class,   error};

    if (status != RL_RUN_FAILED && status != RL_RUN_UNKNOWN) {
        rl_set_err(errstr, errstr_size,
                   "could not park run %s: status must be failed or unknown",
                   lease->run_id);
        return RL_ERR_INVALID;
    }
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease->epoch);
    return update_under_lease(db, &park_run_under_lease, params, "park run",
                              lease->run_id, lease->epoch, errstr, errstr_size);
}
