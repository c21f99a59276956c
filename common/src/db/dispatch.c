/* dispatch.c: the dispatches of a batch recorded under each run's lease
 * before any request is sent (budgets and model rate limits taken in the
 * same statement), and the outcome of an attempt, once. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_dispatch.h"
#include "rl/err.h"

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

static const struct db_stmt record_outcome_once = {
    DB_STMT_RECORD_OUTCOME_ONCE, "record_outcome_once",
    "UPDATE attempts"
    "   SET outcome = $3, http_status = $4::int4,"
    "       upstream_request_id = $5, prompt_tokens = $6::int8,"
    "       completion_tokens = $7::int8, cached_tokens = $8::int8,"
    "       latency_ms = $9::int8, error = $10, finished_at = now()"
    " WHERE run_id = $1 AND attempt_no = $2::int4 AND outcome IS NULL",
    10};

static const struct db_stmt latest_attempt_without_outcome = {
    DB_STMT_LATEST_ATTEMPT_WITHOUT_OUTCOME, "latest_attempt_without_outcome",
    "SELECT a.attempt_no FROM attempts a"
    " WHERE a.run_id = $1 AND a.outcome IS NULL"
    "   AND a.attempt_no = (SELECT max(b.attempt_no) FROM attempts b"
    "                        WHERE b.run_id = $1)",
    1};

static const struct db_stmt mark_attempt_reconciled = {
    DB_STMT_MARK_ATTEMPT_RECONCILED, "mark_attempt_reconciled",
    "UPDATE attempts SET reconciled_at = now(), reconciled_from = $3,"
    "       reconciled_attempt = $4::int4, reconciled_generations = $5::int4"
    " WHERE run_id = $1 AND attempt_no = $2::int4 AND outcome IS NULL",
    5};

/* The attempts that may have generated unseen, as rl_ambiguous_attempts
 * counts them. */
static const struct db_stmt ambiguous_attempt_nos = {
    DB_STMT_AMBIGUOUS_ATTEMPT_NOS, "ambiguous_attempt_nos",
    "SELECT a.attempt_no FROM attempts a"
    " WHERE a.run_id = $1 AND (a.outcome IS NULL OR a.outcome = 'ambiguous')"
    " ORDER BY a.attempt_no",
    1};

static const struct db_stmt installation_id = {
    DB_STMT_INSTALLATION_ID, "installation_id",
    "SELECT installation_id FROM installation", 0};

/* The database cluster's identifier: kept by a physical standby and by
 * a copy of the cluster's files, new in any cluster a pg_dump is
 * restored into. */
static const struct db_stmt cluster_id = {
    DB_STMT_CLUSTER_ID, "cluster_id",
    "SELECT system_identifier::text FROM pg_control_system()", 0};

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

int
rl_db_record_outcome(struct rl_db *db, const char *run_id,
                     const struct rl_attempt_outcome *oc, char *errstr,
                     size_t errstr_size)
{
    char attempt[16], http[16], prompt[32], completion[32], cached[32],
        latency[32];
    const char *params[10];
    PGresult *res;
    int err = RL_ERR_DB;
    const char *outcome = rl_outcome_name(oc->outcome);
    int rows;

    if (!outcome) {
        rl_set_err(errstr, errstr_size,
                   "could not record outcome of run %s: no outcome", run_id);
        return RL_ERR_INVALID;
    }
    snprintf(attempt, sizeof(attempt), "%d", oc->call.attempt_no);
    params[0] = run_id;
    params[1] = attempt;
    params[2] = outcome;
    params[3] = db_int_or_null(oc->call.http_status, http, sizeof(http));
    params[4] = oc->call.upstream_request_id;
    params[5] = db_int_or_null(oc->call.prompt_tokens, prompt, sizeof(prompt));
    params[6] = db_int_or_null(oc->call.completion_tokens, completion,
                               sizeof(completion));
    params[7] = db_int_or_null(oc->call.cached_tokens, cached, sizeof(cached));
    params[8] = db_int_or_null(oc->call.latency_ms, latency, sizeof(latency));
    params[9] = oc->error;
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
                   run_id, oc->call.attempt_no);
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_unsettled_attempt(struct rl_db *db, const char *run_id, int *attempt_no,
                        char *errstr, size_t errstr_size)
{
    const char *params[1] = {run_id};
    PGresult *res;
    int err = RL_ERR_DB;

    *attempt_no = 0;
    res = db_exec_stmt(db, &latest_attempt_without_outcome, params,
                       "read the latest attempt of run", run_id, &err, errstr,
                       errstr_size);
    if (!res)
        return err;
    if (PQntuples(res) == 1)
        *attempt_no = (int)db_int_value(res, 0, 0, 0);
    PQclear(res);
    return 0;
}

int
rl_db_mark_reconciled(struct rl_db *db, const char *run_id, int attempt_no,
                      const char *record_id, int record_attempt,
                      int generations, char *errstr, size_t errstr_size)
{
    char attempt[16], from[16], gens[16];
    const char *params[5];
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    snprintf(attempt, sizeof(attempt), "%d", attempt_no);
    snprintf(from, sizeof(from), "%d",
             record_attempt > 0 ? record_attempt : attempt_no);
    snprintf(gens, sizeof(gens), "%d", generations > 0 ? generations : 1);
    params[0] = run_id;
    params[1] = attempt;
    params[2] = record_id && *record_id ? record_id : NULL;
    params[3] = from;
    params[4] = gens;
    res = db_exec_stmt(db, &mark_attempt_reconciled, params,
                       "mark the reconciled attempt of run", run_id, &err,
                       errstr, errstr_size);
    if (!res)
        return err;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    if (rows != 1) {
        rl_set_err(errstr, errstr_size,
                   "could not mark attempt %d of run %s reconciled: it does "
                   "not exist or already has an outcome",
                   attempt_no, run_id);
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_ambiguous_attempt_nos(struct rl_db *db, const char *run_id,
                            int **attempt_nos, int *n, char *errstr,
                            size_t errstr_size)
{
    const char *params[1] = {run_id};
    PGresult *res;
    int err = RL_ERR_DB;
    int rows;

    *attempt_nos = NULL;
    *n = 0;
    res = db_exec_stmt(db, &ambiguous_attempt_nos, params,
                       "read the ambiguous attempts of run", run_id, &err,
                       errstr, errstr_size);
    if (!res)
        return err;
    rows = PQntuples(res);
    if (rows > 0) {
        *attempt_nos = malloc((size_t)rows * sizeof(**attempt_nos));
        if (!*attempt_nos) {
            PQclear(res);
            rl_set_err(errstr, errstr_size,
                       "could not read the ambiguous attempts of run %s: out "
                       "of memory",
                       run_id);
            return RL_ERR_NOMEM;
        }
        for (int i = 0; i < rows; i++)
            (*attempt_nos)[i] = (int)db_int_value(res, i, 0, 0);
    }
    *n = rows;
    PQclear(res);
    return 0;
}

int
rl_db_installation_id(struct rl_db *db, char *out, size_t size, char *errstr,
                      size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    out[0] = '\0';
    res = db_exec_stmt(db, &installation_id, NULL, "read the installation id",
                       NULL, &err, errstr, errstr_size);
    if (!res)
        return err;
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0) ||
        !*PQgetvalue(res, 0, 0)) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "the ledger has no installation id (is it migrated?)");
        return RL_ERR_NOTFOUND;
    }
    db_copy_value(res, 0, 0, out, size);
    PQclear(res);
    return 0;
}

int
rl_db_cluster_id(struct rl_db *db, char *out, size_t size, char *errstr,
                 size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    out[0] = '\0';
    res = db_exec_stmt(db, &cluster_id, NULL,
                       "read the cluster's system identifier "
                       "(pg_control_system())",
                       NULL, &err, errstr, errstr_size);
    /* A server that answers with an error refuses the function (a
     * managed service may revoke it); one that does not answer is gone. */
    if (!res)
        return PQstatus(db->conn) == CONNECTION_OK ? RL_ERR_NOTFOUND
                                                   : RL_ERR_DB;
    if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0) ||
        !*PQgetvalue(res, 0, 0)) {
        PQclear(res);
        rl_set_err(errstr, errstr_size,
                   "could not read the cluster's system identifier: "
                   "pg_control_system() returned none");
        return RL_ERR_NOTFOUND;
    }
    db_copy_value(res, 0, 0, out, size);
    PQclear(res);
    return 0;
}
