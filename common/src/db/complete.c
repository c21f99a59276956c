/* complete.c: the completions of a batch under each run's lease, with
 * their outbox rows and the attempt's outcome, in one statement. */
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_complete.h"
#include "rl/err.h"

static const struct db_stmt complete_runs = {
    DB_STMT_COMPLETE_RUNS, "complete_runs",
    "SELECT ord, result, outbox_rows, outcome_recorded"
    "  FROM rl_complete_runs($1::text[], $2::int8[], $3, $4::jsonb[],"
    "                        $5::text[], $6::text[], $7::int4[], $8::int4[],"
    "                        $9::text[], $10::int8[], $11::int8[],"
    "                        $12::int8[], $13::int8[])",
    13};

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
