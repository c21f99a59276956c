/* batch_output.c: the output stage's statements: the runs of a finished
 * batch read (one named by a line, or those no line named), answered
 * lines stored many to a statement (rl_batch_store_answers), a run failed
 * for good under the batch's lease with what its dead letter needs, and
 * each run's state in the batch. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_batch_lease.h"
#include "rl/db_batch_output.h"
#include "rl/err.h"

static const char batch_run_of[] =
    "SELECT b.run_id, b.attempt_no, b.lease_epoch, b.state, b.on_expiry,"
    "       r.request::text"
    "  FROM batch_runs b JOIN runs r ON r.run_id = b.run_id"
    " WHERE b.batch_id = $1 AND b.run_id = $2 AND b.attempt_no = $3::int4";

static const char batch_unanswered[] =
    "SELECT b.run_id, b.attempt_no, b.lease_epoch, b.state, b.on_expiry,"
    "       r.request::text"
    "  FROM batch_runs b JOIN runs r ON r.run_id = b.run_id"
    " WHERE b.batch_id = $1 AND b.state = 'in_batch'"
    " ORDER BY b.run_id LIMIT $2::int4 OFFSET $3::int4";

static const char batch_run_state[] =
    "UPDATE batch_runs SET state = $4"
    " WHERE batch_id = $1 AND run_id = $2 AND attempt_no = $3::int4";

static const char batch_store_answers[] =
    "SELECT ord, result FROM rl_batch_store_answers($1, $2::text[],"
    " $3::int4[], $4::jsonb[], $5::text[], $6::int8[], $7::int8[],"
    " $8::int8[])";

/* What the dead letter needs, as the sweeper's claim returns it. */
#define FAILED_COLUMNS                                                         \
    "job, tenant, " DB_TS_S("scheduled_at") ", version, request::text, "       \
                                            "raw_input::text, source_topic, "  \
                                            "source_partition, source_offset"

/* The same update as park_run_under_lease (lease.c), fenced by the
 * batch's owner and the run's epoch. When the run is already failed at
 * that epoch with that class (a read of the files again after a crash
 * between this statement and the line's state), its fields come back
 * too: its dead letter is produced again, at least once as every dead
 * letter is. The outer read sees the row as it was before the update, so
 * a run failed now is returned once. */
static const char batch_fail_run[] =
    "WITH f AS ("
    "  UPDATE runs"
    "     SET status = 'failed', lock_owner = NULL, lock_expires_at = NULL,"
    "         next_attempt_at = NULL, error_class = $4, last_error = $5,"
    "         updated_at = now()"
    "   WHERE run_id = $1 AND lock_owner = $2 AND lease_epoch = $3::int8"
    "     AND status = 'running'"
    "  RETURNING *"
    ")"
    "SELECT " FAILED_COLUMNS " FROM f "
    "UNION ALL "
    "SELECT " FAILED_COLUMNS " FROM runs"
    " WHERE run_id = $1 AND lease_epoch = $3::int8 AND status = 'failed'"
    "   AND lock_owner IS NULL AND error_class = $4"
    "   AND NOT EXISTS (SELECT 1 FROM f)";

/* A row of batch_run_of or batch_unanswered into *r. */
static int
copy_run(const PGresult *res, int row, struct rl_batch_run *r)
{
    int oom = 0;

    memset(r, 0, sizeof(*r));
    db_copy_value(res, row, 0, r->run_id, sizeof(r->run_id));
    r->attempt_no = (int)db_int_value(res, row, 1, 0);
    r->lease_epoch = db_int_value(res, row, 2, 0);
    /* The schema allows no other text; were there one, the run would not
     * count as in the batch, as waiting does not. */
    rl_batch_run_state_parse(PQgetvalue(res, row, 3), &r->state);
    db_copy_value(res, row, 4, r->on_expiry, sizeof(r->on_expiry));
    r->request_json = db_dup_value(res, row, 5, &oom);
    return oom ? RL_ERR_NOMEM : 0;
}

int
rl_db_batch_run(struct rl_db *db, const char *batch_id, const char *run_id,
                int attempt_no, struct rl_batch_run *r, char *errstr,
                size_t errstr_size)
{
    char attempt[16];
    const char *params[3] = {batch_id, run_id, attempt};
    PGresult *res;
    int err = 0;

    snprintf(attempt, sizeof(attempt), "%d", attempt_no);
    res = db_exec_simple(db, batch_run_of, 3, params, &err, errstr, errstr_size,
                         "read a run of the batch");
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "no run %s attempt %d in batch %s",
                   run_id, attempt_no, batch_id);
        return RL_ERR_NOTFOUND;
    }
    err = copy_run(res, 0, r);
    PQclear(res);
    return err;
}

int
rl_db_batch_unanswered(struct rl_db *db, const char *batch_id, size_t skip,
                       struct rl_batch_run *out, size_t max, size_t *n,
                       char *errstr, size_t errstr_size)
{
    char limit[16], offset[16];
    const char *params[3] = {batch_id, limit, offset};
    PGresult *res;
    int err = 0;

    *n = 0;
    snprintf(limit, sizeof(limit), "%zu", max);
    snprintf(offset, sizeof(offset), "%zu", skip);
    res = db_exec_simple(db, batch_unanswered, 3, params, &err, errstr,
                         errstr_size, "read the batch's unanswered runs");
    if (!res)
        return err;
    for (int row = 0; row < PQntuples(res) && *n < max; row++) {
        if (copy_run(res, row, &out[*n]) != 0) {
            free(out[*n].request_json);
            err = RL_ERR_NOMEM;
            break;
        }
        (*n)++;
    }
    PQclear(res);
    return err;
}

int
rl_db_batch_store_answers(struct rl_db *db, const char *batch_id,
                          const struct rl_batch_answer *answers, size_t n,
                          enum rl_batch_answer_result *out, char *errstr,
                          size_t errstr_size)
{
    enum {
        A_RUN,
        A_ATTEMPT,
        A_OUTPUT,
        A_UPSTREAM,
        A_PROMPT,
        A_COMPLETION,
        A_CACHED,
        A_COUNT
    };
    struct rl_buf arrays[A_COUNT];
    const char *params[1 + A_COUNT];
    PGresult *res;
    int err = 0;

    memset(arrays, 0, sizeof(arrays));
    db_arrays_open(arrays, A_COUNT);
    for (size_t i = 0; i < n; i++) {
        const struct rl_batch_answer *a = &answers[i];

        db_array_add(&arrays[A_RUN], a->run_id);
        db_array_add_int(&arrays[A_ATTEMPT], a->attempt_no, 0);
        db_array_add(&arrays[A_OUTPUT], a->output_json);
        db_array_add(&arrays[A_UPSTREAM],
                     a->upstream_request_id && *a->upstream_request_id
                         ? a->upstream_request_id
                         : NULL);
        db_array_add_int(&arrays[A_PROMPT], a->prompt_tokens, 1);
        db_array_add_int(&arrays[A_COMPLETION], a->completion_tokens, 1);
        db_array_add_int(&arrays[A_CACHED], a->cached_tokens, 1);
        out[i] = RL_BATCH_ANSWER_NOT_FOUND;
    }
    params[0] = batch_id;
    if (db_arrays_close(arrays, A_COUNT, params + 1) != 0) {
        db_arrays_free(arrays, A_COUNT);
        rl_set_err(errstr, errstr_size,
                   "could not store the batch's answers: out of memory");
        return RL_ERR_NOMEM;
    }
    res = db_exec_simple(db, batch_store_answers, 1 + A_COUNT, params, &err,
                         errstr, errstr_size, "store the batch's answers");
    db_arrays_free(arrays, A_COUNT);
    if (!res)
        return err;
    for (int row = 0; row < PQntuples(res); row++) {
        int64_t ord = db_int_value(res, row, 0, 0);
        const char *r = PQgetvalue(res, row, 1);

        if (ord < 1 || (size_t)ord > n)
            continue;
        out[ord - 1] = strcmp(r, "completed") == 0 ? RL_BATCH_ANSWER_COMPLETED
                       : strcmp(r, "ignored") == 0 ? RL_BATCH_ANSWER_IGNORED
                       : strcmp(r, "handled") == 0 ? RL_BATCH_ANSWER_HANDLED
                                                   : RL_BATCH_ANSWER_NOT_FOUND;
    }
    PQclear(res);
    return 0;
}

int
rl_db_batch_run_state(struct rl_db *db, const char *batch_id,
                      const char *run_id, int attempt_no,
                      enum rl_batch_run_state state, char *errstr,
                      size_t errstr_size)
{
    char attempt[16];
    const char *params[4] = {batch_id, run_id, attempt,
                             rl_batch_run_state_name(state)};

    snprintf(attempt, sizeof(attempt), "%d", attempt_no);
    return db_write(db, batch_run_state, 4, params,
                    "set the state of a batch's run", NULL, errstr,
                    errstr_size);
}

void
rl_batch_failed_run_clear(struct rl_batch_failed_run *f)
{
    if (!f)
        return;
    free(f->job);
    free(f->tenant);
    free(f->version);
    free(f->request_json);
    free(f->raw_input);
    free(f->source_topic);
    memset(f, 0, sizeof(*f));
}

int
rl_db_batch_fail_run(struct rl_db *db, const char *run_id, int64_t lease_epoch,
                     const char *error_class, const char *error,
                     struct rl_batch_failed_run *f, char *errstr,
                     size_t errstr_size)
{
    char epoch[32];
    const char *params[5] = {run_id, RL_BATCH_OWNER, epoch, error_class, error};
    PGresult *res;
    int err = 0, oom = 0;

    memset(f, 0, sizeof(*f));
    snprintf(epoch, sizeof(epoch), "%" PRId64, lease_epoch);
    res = db_exec_simple(db, batch_fail_run, 5, params, &err, errstr,
                         errstr_size, "fail a run of a batch");
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        db_stale_msg(errstr, errstr_size, "fail a run of a batch", run_id,
                     lease_epoch);
        return RL_ERR_STALE;
    }
    f->job = db_dup_value(res, 0, 0, &oom);
    f->tenant = db_dup_value(res, 0, 1, &oom);
    db_copy_value(res, 0, 2, f->scheduled_at, sizeof(f->scheduled_at));
    f->version = db_dup_value(res, 0, 3, &oom);
    f->request_json = db_dup_value(res, 0, 4, &oom);
    f->raw_input = db_dup_value(res, 0, 5, &oom);
    f->source_topic = db_dup_value(res, 0, 6, &oom);
    f->source_partition = (int32_t)db_int_value(res, 0, 7, -1);
    f->source_offset = db_int_value(res, 0, 8, -1);
    PQclear(res);
    if (oom) {
        rl_batch_failed_run_clear(f);
        rl_set_err(errstr, errstr_size,
                   "could not fail run %s of a batch: out of memory", run_id);
        return RL_ERR_NOMEM;
    }
    return 0;
}
