/* lease.c: every write a worker makes under a lease (worker, lease_epoch):
 * raw input, the dispatches of a batch within budgets, attempt outcomes,
 * renewals, release, park, and the completions of a batch with their
 * outbox rows. Each statement names the lease and touches nothing once
 * another worker has claimed the run. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/err.h"

static const struct db_stmt store_raw_input_once = {
    DB_STMT_STORE_RAW_INPUT_ONCE, "store_raw_input_once",
    "UPDATE runs"
    "   SET raw_input = coalesce(raw_input, nullif($4::jsonb, 'null')),"
    "       updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running'"
    " RETURNING raw_input",
    4};

static const struct db_stmt record_outcome_once = {
    DB_STMT_RECORD_OUTCOME_ONCE, "record_outcome_once",
    "UPDATE attempts"
    "   SET outcome = $3, http_status = $4::int4,"
    "       upstream_request_id = $5, prompt_tokens = $6::int8,"
    "       completion_tokens = $7::int8, cached_tokens = $8::int8,"
    "       latency_ms = $9::int8, error = $10, finished_at = now()"
    " WHERE run_id = $1 AND attempt_no = $2::int4 AND outcome IS NULL",
    10};

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

static const struct db_stmt park_run_under_lease = {
    DB_STMT_PARK_RUN_UNDER_LEASE, "park_run_under_lease",
    "UPDATE runs"
    "   SET status = $4, lock_owner = NULL, lock_expires_at = NULL,"
    "       next_attempt_at = NULL, error_class = $5, last_error = $6,"
    "       updated_at = now()"
    " WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "   AND status = 'running' AND $4 IN ('failed', 'unknown')",
    6};

/* Batches of the per-run writes (schema/007_batches.sql): the dispatches
 * of many runs, each under its own lease and within its budgets, and
 * their completions, each with the outcome of the attempt that produced
 * the output in the same transaction (a worker that dies before this
 * statement leaves the attempt without an outcome, the evidence the
 * ambiguity policy needs, never an "ok" attempt whose answer was lost). */
static const struct db_stmt dispatch_runs = {
    DB_STMT_DISPATCH_RUNS, "dispatch_runs",
    "SELECT ord, result, attempt_no, next_window, detail"
    "  FROM rl_dispatch_runs($1::text[], $2::int8[], $3::text[], $4::int8[],"
    "                        $5, $6::int8)",
    6};

static const struct db_stmt complete_runs = {
    DB_STMT_COMPLETE_RUNS, "complete_runs",
    "SELECT ord, result, outbox_rows, outcome_recorded"
    "  FROM rl_complete_runs($1::text[], $2::int8[], $3, $4::jsonb[],"
    "                        $5::text[], $6::text[], $7::int4[], $8::int4[],"
    "                        $9::text[], $10::int8[], $11::int8[],"
    "                        $12::int8[], $13::int8[])",
    13};

int
rl_db_store_raw_input(struct rl_db *db, const char *run_id, const char *worker,
                      int64_t lease_epoch, const char *input_json,
                      char **stored, char *errstr, size_t errstr_size)
{
    char epoch[32];
    const char *params[4] = {run_id, worker, epoch,
                             db_is_json_null(input_json) ? NULL : input_json};
    PGresult *res;
    int err = RL_ERR_DB;
    int oom = 0;

    *stored = NULL;
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    res = db_exec_stmt(db, &store_raw_input_once, params,
                       "store raw input of run", run_id, &err, errstr,
                       errstr_size);
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        db_stale_msg(errstr, errstr_size, "store raw input of run", run_id,
                     lease_epoch);
        return RL_ERR_STALE;
    }
    *stored = db_dup_value(res, 0, 0, &oom);
    PQclear(res);
    if (oom) {
        rl_set_err(errstr, errstr_size,
                   "could not store raw input of run %s: out of memory",
                   run_id);
        return RL_ERR_NOMEM;
    }
    return 0;
}

int
rl_db_record_outcome(struct rl_db *db, const char *run_id, int attempt_no,
                     const char *outcome, int http_status,
                     const char *upstream_request_id, int64_t prompt_tokens,
                     int64_t completion_tokens, int64_t cached_tokens,
                     int64_t latency_ms, const char *error, char *errstr,
                     size_t errstr_size)
{
    char attempt[16], http[16], prompt[32], completion[32], cached[32],
        latency[32];
    const char *params[10];
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    if (!outcome || !*outcome) {
        rl_set_err(errstr, errstr_size,
                   "could not record outcome of run %s: no outcome", run_id);
        return RL_ERR_INVALID;
    }
    snprintf(attempt, sizeof(attempt), "%d", attempt_no);
    params[0] = run_id;
    params[1] = attempt;
    params[2] = outcome;
    params[3] = db_int_or_null(http_status, http, sizeof(http));
    params[4] = upstream_request_id;
    params[5] = db_int_or_null(prompt_tokens, prompt, sizeof(prompt));
    params[6] =
        db_int_or_null(completion_tokens, completion, sizeof(completion));
    params[7] = db_int_or_null(cached_tokens, cached, sizeof(cached));
    params[8] = db_int_or_null(latency_ms, latency, sizeof(latency));
    params[9] = error;
    res =
        db_exec_stmt(db, &record_outcome_once, params, "record outcome of run",
                     run_id, &err, errstr, errstr_size);
    if (!res)
        return err;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    if (rows != 1) {
        rl_set_err(errstr, errstr_size,
                   "could not record outcome of run %s: attempt %d does not "
                   "exist or already has an outcome",
                   run_id, attempt_no);
        return RL_ERR_NOTFOUND;
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
rl_db_renew_leases(struct rl_db *db, const char *worker, int lease_seconds,
                   const char *const *run_ids, const int64_t *epochs, size_t n,
                   int *held, char *errstr, size_t errstr_size)
{
    if (lease_seconds <= 0) {
        rl_set_err(
            errstr, errstr_size,
            "could not renew leases: need a worker and a positive lease");
        return RL_ERR_INVALID;
    }
    return leases_of_owner(db, worker, lease_seconds, run_ids, epochs, n, held,
                           errstr, errstr_size);
}

int
rl_db_check_leases(struct rl_db *db, const char *worker,
                   const char *const *run_ids, const int64_t *epochs, size_t n,
                   int *held, char *errstr, size_t errstr_size)
{
    return leases_of_owner(db, worker, 0, run_ids, epochs, n, held, errstr,
                           errstr_size);
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

int
rl_db_release(struct rl_db *db, const char *run_id, const char *worker,
              int64_t lease_epoch, int64_t delay_ms, const char *error_class,
              const char *error, char *errstr, size_t errstr_size)
{
    char epoch[32], delay[32];
    const char *params[6] = {run_id, worker, epoch, delay, error_class, error};

    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    snprintf(delay, sizeof(delay), "%" PRId64, delay_ms > 0 ? delay_ms : 0);
    return update_under_lease(db, &release_run_under_lease, params,
                              "release run", run_id, lease_epoch, errstr,
                              errstr_size);
}

int
rl_db_fail(struct rl_db *db, const char *run_id, const char *worker,
           int64_t lease_epoch, const char *status, const char *error_class,
           const char *error, char *errstr, size_t errstr_size)
{
    char epoch[32];
    const char *params[6] = {run_id, worker, epoch, status, error_class, error};

    if (!status ||
        (strcmp(status, "failed") != 0 && strcmp(status, "unknown") != 0)) {
        rl_set_err(errstr, errstr_size,
                   "could not park run %s: status must be failed or unknown",
                   run_id);
        return RL_ERR_INVALID;
    }
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    return update_under_lease(db, &park_run_under_lease, params, "park run",
                              run_id, lease_epoch, errstr, errstr_size);
}

int
rl_db_complete_runs(struct rl_db *db, const struct rl_complete_req *reqs,
                    size_t n, const char *worker, struct rl_complete_res *out,
                    char *errstr, size_t errstr_size)
{
    enum {
        A_RUN_ID,
        A_EPOCH,
        A_WORKER, /* not an array: the slot keeps params in order */
        A_OUTPUT,
        A_CH_RUN,
        A_CH_NAME,
        A_ATTEMPT,
        A_HTTP,
        A_UPSTREAM,
        A_PROMPT,
        A_COMPLETION,
        A_CACHED,
        A_LATENCY,
        A_COUNT
    };
    struct rl_buf arrays[A_COUNT];
    const char *params[A_COUNT];
    long *index = NULL;
    const char *subject;
    PGresult *res = NULL;
    int err = RL_ERR_DB;

    memset(arrays, 0, sizeof(arrays));
    if (n == 0 || !reqs || !out || !worker || !*worker) {
        rl_set_err(errstr, errstr_size,
                   "could not complete runs: need at least one run and a "
                   "worker");
        return RL_ERR_INVALID;
    }
    memset(out, 0, n * sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        if (!reqs[i].run_id || db_is_json_null(reqs[i].output_json)) {
            rl_set_err(errstr, errstr_size,
                       "could not complete run %s: no output",
                       reqs[i].run_id ? reqs[i].run_id : "(null)");
            return RL_ERR_INVALID;
        }
    }
    subject = n == 1 ? reqs[0].run_id : NULL;
    db_arrays_open(arrays, A_COUNT);
    for (size_t i = 0; i < n; i++) {
        const struct rl_complete_req *r = &reqs[i];
        const struct rl_attempt_ok *oc = &r->oc;

        db_array_add(&arrays[A_RUN_ID], r->run_id);
        db_array_add_int(&arrays[A_EPOCH], r->lease_epoch, 0);
        db_array_add(&arrays[A_OUTPUT], r->output_json);
        for (size_t c = 0; c < r->n_channels; c++) {
            if (!r->channels[c])
                continue;
            db_array_add(&arrays[A_CH_RUN], r->run_id);
            db_array_add(&arrays[A_CH_NAME], r->channels[c]);
        }
        db_array_add_int(&arrays[A_ATTEMPT], oc->attempt_no, 0);
        db_array_add_int(&arrays[A_HTTP], oc->http_status, 1);
        db_array_add(&arrays[A_UPSTREAM],
                     oc->upstream_request_id && *oc->upstream_request_id
                         ? oc->upstream_request_id
                         : NULL);
        db_array_add_int(&arrays[A_PROMPT], oc->prompt_tokens, 1);
        db_array_add_int(&arrays[A_COMPLETION], oc->completion_tokens, 1);
        db_array_add_int(&arrays[A_CACHED], oc->cached_tokens, 1);
        db_array_add_int(&arrays[A_LATENCY], oc->latency_ms, 1);
    }
    index = calloc(n, sizeof(*index));
    if (db_arrays_close(arrays, A_COUNT, params) != 0 || !index) {
        rl_set_err(errstr, errstr_size,
                   "could not complete runs: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    params[A_WORKER] = worker;
    res = db_exec_stmt(db, &complete_runs, params,
                       n == 1 ? "complete run" : "complete runs", subject, &err,
                       errstr, errstr_size);
    if (!res)
        goto done;
    err = db_batch_rows(res, n, 4, index, "complete runs", errstr, errstr_size);
    if (err)
        goto done;
    for (int row = 0; row < PQntuples(res); row++) {
        long k = index[row];
        const char *result = PQgetvalue(res, row, 1);

        out[k].completed = strcmp(result, "completed") == 0;
        out[k].err = strcmp(result, "stale") == 0       ? RL_ERR_STALE
                     : strcmp(result, "not_found") == 0 ? RL_ERR_NOTFOUND
                                                        : 0;
        out[k].outbox_rows = (int)db_int_value(res, row, 2, 0);
        out[k].outcome_set = db_bool_value(res, row, 3);
    }
    err = 0;

done:
    PQclear(res);
    free(index);
    db_arrays_free(arrays, A_COUNT);
    return err;
}

int
rl_db_dispatch_runs(struct rl_db *db, const struct rl_dispatch_req *reqs,
                    size_t n, const char *worker, int64_t wait_ms,
                    struct rl_dispatch_res *out, char *errstr,
                    size_t errstr_size)
{
    enum { A_RUN_ID, A_EPOCH, A_KEY, A_ESTIMATE, A_COUNT };
    struct rl_buf arrays[A_COUNT];
    const char *params[A_COUNT + 2];
    char wait[32];
    long *index = NULL;
    const char *subject;
    PGresult *res = NULL;
    int err = RL_ERR_DB;

    memset(arrays, 0, sizeof(arrays));
    if (n == 0 || !reqs || !out || !worker || !*worker) {
        rl_set_err(errstr, errstr_size,
                   "could not record dispatches: need at least one run and a "
                   "worker");
        return RL_ERR_INVALID;
    }
    memset(out, 0, n * sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        if (!reqs[i].run_id || !reqs[i].idempotency_key) {
            rl_set_err(
                errstr, errstr_size,
                "could not record dispatch of run %s: no idempotency key",
                reqs[i].run_id ? reqs[i].run_id : "(null)");
            return RL_ERR_INVALID;
        }
    }
    subject = n == 1 ? reqs[0].run_id : NULL;
    db_arrays_open(arrays, A_COUNT);
    for (size_t i = 0; i < n; i++) {
        db_array_add(&arrays[A_RUN_ID], reqs[i].run_id);
        db_array_add_int(&arrays[A_EPOCH], reqs[i].lease_epoch, 0);
        db_array_add(&arrays[A_KEY], reqs[i].idempotency_key);
        db_array_add_int(&arrays[A_ESTIMATE],
                         reqs[i].estimate > 0 ? reqs[i].estimate : 0, 0);
    }
    index = calloc(n, sizeof(*index));
    if (db_arrays_close(arrays, A_COUNT, params) != 0 || !index) {
        rl_set_err(errstr, errstr_size,
                   "could not record dispatches: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    snprintf(wait, sizeof(wait), "%" PRId64, wait_ms > 0 ? wait_ms : 1);
    params[A_COUNT] = worker;
    params[A_COUNT + 1] = wait;
    res = db_exec_stmt(db, &dispatch_runs, params,
                       n == 1 ? "record dispatch of run" : "record dispatches",
                       subject, &err, errstr, errstr_size);
    if (!res)
        goto done;
    err = db_batch_rows(res, n, 5, index, "record dispatches", errstr,
                        errstr_size);
    if (err)
        goto done;
    for (int row = 0; row < PQntuples(res); row++) {
        long k = index[row];
        const char *result = PQgetvalue(res, row, 1);

        if (strcmp(result, "dispatched") == 0) {
            out[k].status = RL_DISPATCH_RECORDED;
            out[k].attempt_no = (int)db_int_value(res, row, 2, 0);
        } else if (strcmp(result, "deadline") == 0) {
            out[k].status = RL_DISPATCH_DEADLINE;
        } else if (strcmp(result, "deferred") == 0 ||
                   strcmp(result, "wait") == 0 ||
                   strcmp(result, "rate_limited") == 0) {
            out[k].status = result[0] == 'd'   ? RL_DISPATCH_DEFERRED
                            : result[0] == 'w' ? RL_DISPATCH_WAIT
                                               : RL_DISPATCH_RATE_LIMITED;
            db_copy_value(res, row, 3, out[k].next_window,
                          sizeof(out[k].next_window));
            db_copy_value(res, row, 4, out[k].detail, sizeof(out[k].detail));
        } else {
            out[k].err = RL_ERR_STALE;
        }
    }
    err = 0;

done:
    PQclear(res);
    free(index);
    db_arrays_free(arrays, A_COUNT);
    return err;
}
