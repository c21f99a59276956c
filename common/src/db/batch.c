/* batch.c: batch mode as the operator sets, reads and removes it
 * (`runledger batch`), over schema/060_batch_mode.sql. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_batch.h"
#include "rl/err.h"

static const char batch_setting_set[] =
    "INSERT INTO batch_settings (job, tenant, window_ms, max_runs, max_bytes,"
    "                            completion_window, on_expiry, updated_by)"
    "VALUES ($1, coalesce($2, ''), $3::int4, $4::int4, $5::int8, $6, $7, $8)"
    "    ON CONFLICT (job, tenant) DO UPDATE"
    "   SET window_ms = EXCLUDED.window_ms, max_runs = EXCLUDED.max_runs,"
    "       max_bytes = EXCLUDED.max_bytes,"
    "       completion_window = EXCLUDED.completion_window,"
    "       on_expiry = EXCLUDED.on_expiry,"
    "       updated_by = EXCLUDED.updated_by, updated_at = now()";

static const char batch_setting_remove[] =
    "DELETE FROM batch_settings WHERE job = $1 AND tenant = coalesce($2, '')";

static const char batch_settings_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.job, x.tenant), '[]')::text"
    "  FROM (SELECT s.job, s.tenant, s.window_ms / 1000.0 AS window_seconds,"
    "               s.max_runs, s.max_bytes, s.completion_window,"
    "               s.on_expiry, s.updated_by, " DB_TS_S(
        "s.updated_at") "                   AS updated_at"
                        "          FROM batch_settings s"
                        "         WHERE $1::text IS NULL OR s.job = $1) x";

int
rl_db_batch_setting_set(struct rl_db *db, const struct rl_batch_setting *s,
                        const char *actor, char *errstr, size_t errstr_size)
{
    char window[32], runs[32], bytes[32];
    const char *params[8];

    if (!s->job || !*s->job || s->window_ms < 100 || s->max_runs < 1 ||
        s->max_runs > 50000 || s->max_bytes < 1024 ||
        s->max_bytes > 209715200 || !s->completion_window ||
        !*s->completion_window || !s->on_expiry ||
        (strcmp(s->on_expiry, "live") && strcmp(s->on_expiry, "rebatch") &&
         strcmp(s->on_expiry, "fail"))) {
        rl_set_err(errstr, errstr_size,
                   "could not set the batch mode: need a job, a window of "
                   "0.1 s or more, 1..50000 runs, 1 KiB..200 MiB and "
                   "on_expiry live, rebatch or fail");
        return RL_ERR_INVALID;
    }
    snprintf(window, sizeof(window), "%" PRId64, s->window_ms);
    snprintf(runs, sizeof(runs), "%" PRId64, s->max_runs);
    snprintf(bytes, sizeof(bytes), "%" PRId64, s->max_bytes);
    params[0] = s->job;
    params[1] = s->tenant && *s->tenant ? s->tenant : NULL;
    params[2] = window;
    params[3] = runs;
    params[4] = bytes;
    params[5] = s->completion_window;
    params[6] = s->on_expiry;
    params[7] = actor && *actor ? actor : "operator";
    return db_write(db, batch_setting_set, 8, params, "set the batch mode",
                    NULL, errstr, errstr_size);
}

int
rl_db_batch_setting_remove(struct rl_db *db, const char *job,
                           const char *tenant, char *errstr, size_t errstr_size)
{
    const char *params[2] = {job, tenant && *tenant ? tenant : NULL};
    int rows = 0;
    int err = db_write(db, batch_setting_remove, 2, params,
                       "remove the batch mode", &rows, errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove the batch mode of job %s%s%s: there is "
                   "none",
                   job, tenant && *tenant ? " tenant " : "",
                   tenant && *tenant ? tenant : "");
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_batch_settings_json(struct rl_db *db, const char *job, char **json,
                          char *errstr, size_t errstr_size)
{
    const char *params[1] = {job && *job ? job : NULL};

    return db_one_text(db, batch_settings_list, 1, params,
                       "list the batch modes", json, errstr, errstr_size);
}

/* ---- the batcher ------------------------------------------------------ */

static const char batch_park[] =
    "SELECT o_run_id, o_status FROM rl_batch_park($1, $2::text[],"
    " $3::int8[], $4::int4[], $5::text[], $6::text[], $7::text[])";

static const char batch_modes[] =
    "SELECT coalesce(string_agg(job || E'\\t' || tenant, E'\\n'), '')"
    "  FROM batch_settings";

static const char batch_form[] = "SELECT count(*) FROM rl_batch_form($1::int4)";

/* An intent whose lease is free or expired. Submitted batches are taken
 * with a poll slot (batch_take_poll). */
static const char batch_take[] =
    "UPDATE batches b"
    "   SET lock_owner = $1, lock_epoch = b.lock_epoch + 1,"
    "       lock_expires_at = now() + $2::int8 * interval '1 millisecond'"
    " WHERE b.batch_id IN ("
    "        SELECT d.batch_id FROM batches d"
    "         WHERE d.state = 'intent'"
    "           AND d.next_poll_at <= now()"
    "           AND (d.lock_expires_at IS NULL OR d.lock_expires_at < now())"
    "         ORDER BY d.next_poll_at"
    "         LIMIT $3::int4"
    "           FOR UPDATE SKIP LOCKED)"
    " RETURNING b.batch_id, b.lock_epoch, b.state, b.endpoint, b.model,"
    "           b.completion_window, coalesce(b.input_file_id, ''),"
    "           coalesce(b.provider_batch_id, ''), b.upload_tries,"
    "           b.create_tries,"
    "           CASE WHEN b.lookup_since IS NULL THEN -1"
    "                ELSE (extract(epoch FROM now() - b.lookup_since)"
    "                      * 1000)::int8 END,"
    "           b.polls, b.runs";

static const char batch_take_poll[] =
    "SELECT * FROM rl_batch_take_poll($1, $2::int8, $3, $4::int8)";

#define FENCE                                                                  \
    " WHERE batch_id = $1 AND lock_owner = $2 AND lock_epoch = $3::int8"
#define RELEASE                                                                \
    " lock_owner = NULL, lock_expires_at = NULL,"                              \
    " next_poll_at = now() + $5::int8 * interval '1 millisecond'"

static const char *const batch_steps[] = {
    [RL_BATCH_STEP_UPLOAD] =
        "UPDATE batches SET upload_tries = upload_tries + 1,"
        " lock_expires_at = now() + $5::int8 * interval '1 millisecond',"
        " detail = $4" FENCE,
    [RL_BATCH_STEP_UPLOADED] =
        "UPDATE batches SET input_file_id = $4,"
        " lock_expires_at = now() + $5::int8 * interval '1 millisecond'" FENCE,
    [RL_BATCH_STEP_CREATE] =
        "UPDATE batches SET create_tries = create_tries + 1,"
        " lookup_since = NULL, detail = $4,"
        " lock_expires_at = now() + $5::int8 * interval '1 millisecond'" FENCE,
    [RL_BATCH_STEP_SUBMITTED] =
        "UPDATE batches SET provider_batch_id = $4, state = 'submitted',"
        " submitted_at = now(), lookup_since = NULL, detail = NULL," RELEASE
            FENCE,
    [RL_BATCH_STEP_LOOKUP] =
        "UPDATE batches SET lookup_since = coalesce(lookup_since, now()),"
        " detail = $4," RELEASE FENCE,
    [RL_BATCH_STEP_POLL] = "UPDATE batches SET polls = polls + 1,"
                           " provider_status = $4," RELEASE FENCE,
    [RL_BATCH_STEP_RELEASE] = "UPDATE batches SET detail = $4," RELEASE FENCE,
};

static const char batch_requests_page[] =
    "SELECT run_id, attempt_no, body FROM batch_runs"
    " WHERE batch_id = $1 AND (run_id, attempt_no) > ($2, $3::int4)"
    " ORDER BY run_id, attempt_no LIMIT 256";

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
    " ORDER BY b.run_id LIMIT $2::int4";

static const char batch_run_state[] =
    "UPDATE batch_runs SET state = $4"
    " WHERE batch_id = $1 AND run_id = $2 AND attempt_no = $3::int4";

static const char batch_live_runs[] =
    "SELECT count(*) FROM batch_runs b JOIN runs r ON r.run_id = b.run_id"
    " WHERE b.batch_id = $1 AND b.state = 'in_batch'"
    "   AND r.status = 'running' AND r.lock_owner = '" RL_BATCH_OWNER "'"
    "   AND r.lease_epoch = b.lease_epoch";

static const char batch_finish[] =
    "UPDATE batches SET state = $4, provider_status = $5,"
    " output_file_id = nullif($6, ''), error_file_id = nullif($7, ''),"
    " lines_ok = $8::int4, lines_failed = $9::int4,"
    " lines_ignored = $10::int4, finished_at = now(),"
    " lock_owner = NULL, lock_expires_at = NULL" FENCE;

int
rl_db_batch_park(struct rl_db *db, const char *worker,
                 const struct rl_batch_park_req *reqs, size_t n,
                 enum rl_batch_park_status *status, char *errstr,
                 size_t errstr_size)
{
    enum { A_RUN, A_EPOCH, A_ATTEMPT, A_ENDPOINT, A_MODEL, A_BODY, A_COUNT };
    struct rl_buf arrays[A_COUNT];
    const char *params[1 + A_COUNT];
    PGresult *res;
    int err = 0;

    memset(arrays, 0, sizeof(arrays));
    db_arrays_open(arrays, A_COUNT);
    for (size_t i = 0; i < n; i++) {
        db_array_add(&arrays[A_RUN], reqs[i].run_id);
        db_array_add_int(&arrays[A_EPOCH], reqs[i].lease_epoch, 0);
        db_array_add_int(&arrays[A_ATTEMPT], reqs[i].attempt_no, 0);
        db_array_add(&arrays[A_ENDPOINT], reqs[i].endpoint);
        db_array_add(&arrays[A_MODEL], reqs[i].model);
        db_array_add(&arrays[A_BODY], reqs[i].body);
        status[i] = RL_BATCH_LOST;
    }
    params[0] = worker;
    if (db_arrays_close(arrays, A_COUNT, params + 1) != 0) {
        db_arrays_free(arrays, A_COUNT);
        rl_set_err(errstr, errstr_size, "could not park runs: out of memory");
        return RL_ERR_NOMEM;
    }
    res = db_exec_simple(db, batch_park, 1 + A_COUNT, params, &err, errstr,
                         errstr_size, "hand runs to the batcher");
    db_arrays_free(arrays, A_COUNT);
    if (!res)
        return err;
    for (int row = 0; row < PQntuples(res); row++) {
        const char *id = PQgetvalue(res, row, 0);
        const char *st = PQgetvalue(res, row, 1);

        for (size_t i = 0; i < n; i++) {
            if (strcmp(reqs[i].run_id, id) != 0)
                continue;
            status[i] = strcmp(st, "parked") == 0 ? RL_BATCH_PARKED
                        : strcmp(st, "live") == 0 ? RL_BATCH_LIVE
                                                  : RL_BATCH_LOST;
            break;
        }
    }
    PQclear(res);
    return 0;
}

int
rl_db_batch_modes(struct rl_db *db, char **text, char *errstr,
                  size_t errstr_size)
{
    return db_one_text(db, batch_modes, 0, NULL, "read the batch modes", text,
                       errstr, errstr_size);
}

int
rl_db_batch_form(struct rl_db *db, int max, int *formed, char *errstr,
                 size_t errstr_size)
{
    char n[16], *text = NULL;
    const char *params[1] = {n};
    int err;

    snprintf(n, sizeof(n), "%d", max);
    err = db_one_text(db, batch_form, 1, params, "form batches", &text, errstr,
                      errstr_size);
    *formed = text ? atoi(text) : 0;
    free(text);
    return err;
}

/* A row of batch_take or rl_batch_take_poll into *b. */
static void
copy_batch(const PGresult *res, int row, struct rl_batch *b)
{
    memset(b, 0, sizeof(*b));
    db_copy_value(res, row, 0, b->batch_id, sizeof(b->batch_id));
    b->epoch = db_int_value(res, row, 1, 0);
    db_copy_value(res, row, 2, b->state, sizeof(b->state));
    db_copy_value(res, row, 3, b->endpoint, sizeof(b->endpoint));
    db_copy_value(res, row, 4, b->model, sizeof(b->model));
    db_copy_value(res, row, 5, b->completion_window,
                  sizeof(b->completion_window));
    db_copy_value(res, row, 6, b->input_file_id, sizeof(b->input_file_id));
    db_copy_value(res, row, 7, b->provider_batch_id,
                  sizeof(b->provider_batch_id));
    b->upload_tries = (int)db_int_value(res, row, 8, 0);
    b->create_tries = (int)db_int_value(res, row, 9, 0);
    b->lookup_ms = db_int_value(res, row, 10, -1);
    b->polls = (int)db_int_value(res, row, 11, 0);
    b->runs = (int)db_int_value(res, row, 12, 0);
}

int
rl_db_batch_take(struct rl_db *db, const char *owner, int64_t lease_ms,
                 struct rl_batch *out, size_t max, size_t *n, char *errstr,
                 size_t errstr_size)
{
    char lease[32], limit[16];
    const char *params[3] = {owner, lease, limit};
    PGresult *res;
    int err = 0;

    *n = 0;
    snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
    snprintf(limit, sizeof(limit), "%zu", max);
    res = db_exec_simple(db, batch_take, 3, params, &err, errstr, errstr_size,
                         "lease batches");
    if (!res)
        return err;
    for (int row = 0; row < PQntuples(res) && *n < max; row++)
        copy_batch(res, row, &out[(*n)++]);
    PQclear(res);
    return 0;
}

int
rl_db_batch_take_poll(struct rl_db *db, const char *owner, int64_t lease_ms,
                      const char *provider, int64_t spacing_ms,
                      struct rl_batch *out, int *taken, char *errstr,
                      size_t errstr_size)
{
    char lease[32], spacing[32];
    const char *params[4] = {owner, lease, provider, spacing};
    PGresult *res;
    int err = 0;

    *taken = 0;
    snprintf(lease, sizeof(lease), "%" PRId64, lease_ms);
    snprintf(spacing, sizeof(spacing), "%" PRId64, spacing_ms);
    res = db_exec_simple(db, batch_take_poll, 4, params, &err, errstr,
                         errstr_size, "take a batch to poll");
    if (!res)
        return err;
    if (PQntuples(res) == 1) {
        copy_batch(res, 0, out);
        *taken = 1;
    }
    PQclear(res);
    return 0;
}

/* A fenced write of b: RL_ERR_STALE when no row matched. */
static int
fenced(struct rl_db *db, const char *sql, const struct rl_batch *b,
       const char *owner, int nextra, const char *const *extra,
       const char *what, char *errstr, size_t errstr_size)
{
    char epoch[32];
    const char *params[10] = {b->batch_id, owner, epoch};
    int rows = 0, err;

    snprintf(epoch, sizeof(epoch), "%" PRId64, b->epoch);
    for (int i = 0; i < nextra; i++)
        params[3 + i] = extra[i];
    err =
        db_write(db, sql, 3 + nextra, params, what, &rows, errstr, errstr_size);
    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not %s of batch %s: its lease (epoch %" PRId64
                   ") is gone",
                   what, b->batch_id, b->epoch);
        return RL_ERR_STALE;
    }
    return 0;
}

int
rl_db_batch_step(struct rl_db *db, const struct rl_batch *b, const char *owner,
                 enum rl_batch_step step, const char *arg, int64_t ms,
                 char *errstr, size_t errstr_size)
{
    char msbuf[32];
    const char *extra[2] = {arg, msbuf};

    if ((size_t)step >= sizeof(batch_steps) / sizeof(batch_steps[0])) {
        rl_set_err(errstr, errstr_size, "unknown batch step %d", (int)step);
        return RL_ERR_INVALID;
    }
    snprintf(msbuf, sizeof(msbuf), "%" PRId64, ms);
    return fenced(db, batch_steps[step], b, owner, 2, extra, "write the step",
                  errstr, errstr_size);
}

int
rl_db_batch_write_requests(struct rl_db *db, const struct rl_batch *b, FILE *f,
                           int64_t *bytes, char *errstr, size_t errstr_size)
{
    char after_run[96] = "", after_attempt[16] = "0";
    const char *params[3] = {b->batch_id, after_run, after_attempt};
    int64_t total = 0;

    for (;;) {
        int err = 0, rows;
        PGresult *res =
            db_exec_simple(db, batch_requests_page, 3, params, &err, errstr,
                           errstr_size, "read the batch's requests");

        if (!res)
            return err;
        rows = PQntuples(res);
        for (int row = 0; row < rows; row++) {
            int w = fprintf(f,
                            "{\"custom_id\":\"%s:%s\",\"method\":\"POST\","
                            "\"url\":\"%s\",\"body\":%s}\n",
                            PQgetvalue(res, row, 0), PQgetvalue(res, row, 1),
                            b->endpoint, PQgetvalue(res, row, 2));

            if (w < 0) {
                PQclear(res);
                rl_set_err(errstr, errstr_size,
                           "could not write the batch's request file");
                return RL_ERR_IO;
            }
            total += w;
        }
        if (rows > 0) {
            db_copy_value(res, rows - 1, 0, after_run, sizeof(after_run));
            db_copy_value(res, rows - 1, 1, after_attempt,
                          sizeof(after_attempt));
        }
        PQclear(res);
        if (rows < 256)
            break;
    }
    if (fflush(f) != 0) {
        rl_set_err(errstr, errstr_size,
                   "could not write the batch's request file");
        return RL_ERR_IO;
    }
    *bytes = total;
    return 0;
}

static int
copy_run(const PGresult *res, int row, struct rl_batch_run *r)
{
    int oom = 0;

    memset(r, 0, sizeof(*r));
    db_copy_value(res, row, 0, r->run_id, sizeof(r->run_id));
    r->attempt_no = (int)db_int_value(res, row, 1, 0);
    r->lease_epoch = db_int_value(res, row, 2, 0);
    db_copy_value(res, row, 3, r->state, sizeof(r->state));
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
rl_db_batch_unanswered(struct rl_db *db, const char *batch_id,
                       struct rl_batch_run *out, size_t max, size_t *n,
                       char *errstr, size_t errstr_size)
{
    char limit[16];
    const char *params[2] = {batch_id, limit};
    PGresult *res;
    int err = 0;

    *n = 0;
    snprintf(limit, sizeof(limit), "%zu", max);
    res = db_exec_simple(db, batch_unanswered, 2, params, &err, errstr,
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

static const char batch_store_answers[] =
    "SELECT ord, result FROM rl_batch_store_answers($1, $2::text[],"
    " $3::int4[], $4::jsonb[], $5::text[], $6::int8[], $7::int8[],"
    " $8::int8[])";

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
                      const char *run_id, int attempt_no, const char *state,
                      char *errstr, size_t errstr_size)
{
    char attempt[16];
    const char *params[4] = {batch_id, run_id, attempt, state};

    snprintf(attempt, sizeof(attempt), "%d", attempt_no);
    return db_write(db, batch_run_state, 4, params,
                    "set the state of a batch's run", NULL, errstr,
                    errstr_size);
}

int
rl_db_batch_live_runs(struct rl_db *db, const char *batch_id, int *live,
                      char *errstr, size_t errstr_size)
{
    const char *params[1] = {batch_id};
    char *text = NULL;
    int err = db_one_text(db, batch_live_runs, 1, params,
                          "count the batch's runs", &text, errstr, errstr_size);

    *live = text ? atoi(text) : 0;
    free(text);
    return err;
}

int
rl_db_batch_finish(struct rl_db *db, const struct rl_batch *b,
                   const char *owner, const char *state,
                   const char *provider_status, const char *output_file_id,
                   const char *error_file_id, int ok, int failed, int ignored,
                   char *errstr, size_t errstr_size)
{
    char okb[16], failedb[16], ignoredb[16];
    const char *extra[7] = {
        state, provider_status, output_file_id, error_file_id,
        okb,   failedb,         ignoredb};

    snprintf(okb, sizeof(okb), "%d", ok);
    snprintf(failedb, sizeof(failedb), "%d", failed);
    snprintf(ignoredb, sizeof(ignoredb), "%d", ignored);
    return fenced(db, batch_finish, b, owner, 7, extra, "finish", errstr,
                  errstr_size);
}

/* ---- what operators read -------------------------------------------- */

const char *const rl_db_batch_states[6] = {"intent", "submitted", "completed",
                                           "failed", "expired",   "cancelled"};

static const char batch_of_run[] =
    "SELECT coalesce((SELECT json_build_object("
    "    'batch_id', b.batch_id, 'provider_batch_id', b.provider_batch_id,"
    "    'batch_state', b.state, 'provider_status', b.provider_status,"
    "    'attempt_no', r.attempt_no, 'run_state', r.state,"
    "    'parked_at', " DB_TS_S(
        "r.parked_at") ","
                       "    'submitted_at', " DB_TS_S(
                           "b.submitted_at") ")"
                                             "  FROM batch_runs r LEFT JOIN "
                                             "batches b ON b.batch_id = "
                                             "r.batch_id"
                                             " WHERE r.run_id = $1 ORDER BY "
                                             "r.attempt_no DESC LIMIT 1), "
                                             "'null')::text";

/* Batches by state (a row per batch, far fewer than runs), and the open
 * ones' runs and age through the partial indexes. */
static const char batch_gauges[] =
    "SELECT count(*) FILTER (WHERE state = 'intent'),"
    "       count(*) FILTER (WHERE state = 'submitted'),"
    "       count(*) FILTER (WHERE state = 'completed'),"
    "       count(*) FILTER (WHERE state = 'failed'),"
    "       count(*) FILTER (WHERE state = 'expired'),"
    "       count(*) FILTER (WHERE state = 'cancelled'),"
    "       (SELECT count(*) FROM batch_runs"
    "         WHERE state IN ('waiting', 'in_batch')),"
    "       coalesce(extract(epoch FROM now() - min(created_at)"
    "                FILTER (WHERE state IN ('intent', 'submitted'))), 0)"
    "  FROM batches";

int
rl_db_batch_of_run(struct rl_db *db, const char *run_id, char **json,
                   char *errstr, size_t errstr_size)
{
    const char *params[1] = {run_id};

    return db_one_text(db, batch_of_run, 1, params, "read the run's batch",
                       json, errstr, errstr_size);
}

int
rl_db_batch_gauges(struct rl_db *db, struct rl_db_batch_gauges *g, char *errstr,
                   size_t errstr_size)
{
    PGresult *res;
    int err = 0;

    memset(g, 0, sizeof(*g));
    res = db_exec_simple(db, batch_gauges, 0, NULL, &err, errstr, errstr_size,
                         "read the batch gauges");
    if (!res)
        return err;
    if (PQntuples(res) == 1) {
        for (int i = 0; i < 6; i++)
            g->by_state[i] = db_int_value(res, 0, i, 0);
        g->runs_waiting = db_int_value(res, 0, 6, 0);
        g->oldest_open_seconds = strtod(PQgetvalue(res, 0, 7), NULL);
    }
    PQclear(res);
    return 0;
}

/* ---- prices --------------------------------------------------------- */

static const char price_set[] =
    "INSERT INTO model_prices (model, input_per_mtok, output_per_mtok,"
    "                          batch_discount, updated_by)"
    "VALUES ($1, $2::numeric, $3::numeric, coalesce($4::numeric, 0.5), $5)"
    "    ON CONFLICT (model) DO UPDATE"
    "   SET input_per_mtok = EXCLUDED.input_per_mtok,"
    "       output_per_mtok = EXCLUDED.output_per_mtok,"
    "       batch_discount = EXCLUDED.batch_discount,"
    "       updated_by = EXCLUDED.updated_by, updated_at = now()";

static const char price_remove[] = "DELETE FROM model_prices WHERE model = $1";

static const char prices_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.model), '[]')::text"
    "  FROM (SELECT p.model, p.input_per_mtok, p.output_per_mtok,"
    "               p.batch_discount, p.updated_by, " DB_TS_S(
        "p.updated_at") " AS updated_at"
                        "          FROM model_prices p) x";

/* Costs are decimal text (six places): the table prints numbers as whole
 * ones. An attempt is a batch's when its line came back in a batch (its
 * batch_runs row); every other attempt with usage was a live call. */
static const char cost_report[] =
    "WITH t AS ("
    "  SELECT r.request->'request'->>'model' AS model,"
    "         (b.run_id IS NOT NULL) AS batch,"
    "         coalesce(a.prompt_tokens, 0) AS pin,"
    "         coalesce(a.completion_tokens, 0) AS pout"
    "    FROM runs r JOIN attempts a ON a.run_id = r.run_id"
    "    LEFT JOIN batch_runs b ON b.run_id = a.run_id"
    "          AND b.attempt_no = a.attempt_no AND b.state = 'completed'"
    "   WHERE r.scheduled_at >= $1::timestamptz"
    "), g AS ("
    "  SELECT model,"
    "         sum(pin) FILTER (WHERE NOT batch) AS lin,"
    "         sum(pout) FILTER (WHERE NOT batch) AS lout,"
    "         sum(pin) FILTER (WHERE batch) AS bin,"
    "         sum(pout) FILTER (WHERE batch) AS bout"
    "    FROM t GROUP BY model"
    ")"
    "SELECT coalesce(json_agg(x ORDER BY x.model), '[]')::text FROM ("
    "  SELECT g.model,"
    "         coalesce(g.lin, 0) AS live_prompt_tokens,"
    "         coalesce(g.lout, 0) AS live_completion_tokens,"
    "         round((coalesce(g.lin, 0) * p.input_per_mtok"
    "                + coalesce(g.lout, 0) * p.output_per_mtok) / 1e6, 6)::text"
    "             AS live_cost,"
    "         coalesce(g.bin, 0) AS batch_prompt_tokens,"
    "         coalesce(g.bout, 0) AS batch_completion_tokens,"
    "         round((coalesce(g.bin, 0) * p.input_per_mtok"
    "                + coalesce(g.bout, 0) * p.output_per_mtok)"
    "               * (1 - p.batch_discount) / 1e6, 6)::text AS batch_cost,"
    "         round((coalesce(g.bin, 0) * p.input_per_mtok"
    "                + coalesce(g.bout, 0) * p.output_per_mtok) / 1e6, 6)::text"
    "             AS batch_at_live_price,"
    "         round((coalesce(g.bin, 0) * p.input_per_mtok"
    "                + coalesce(g.bout, 0) * p.output_per_mtok)"
    "               * p.batch_discount / 1e6, 6)::text AS saved"
    "    FROM g LEFT JOIN model_prices p ON p.model = g.model) x";

int
rl_db_price_set(struct rl_db *db, const char *model, const char *input,
                const char *output, const char *batch_discount,
                const char *actor, char *errstr, size_t errstr_size)
{
    const char *params[5] = {model, input, output, batch_discount,
                             actor && *actor ? actor : "operator"};

    if (!model || !*model || !input || !output) {
        rl_set_err(errstr, errstr_size,
                   "could not set the price: need a model, an input and an "
                   "output price");
        return RL_ERR_INVALID;
    }
    return db_write(db, price_set, 5, params, "set the price", NULL, errstr,
                    errstr_size);
}

int
rl_db_price_remove(struct rl_db *db, const char *model, char *errstr,
                   size_t errstr_size)
{
    const char *params[1] = {model};
    int rows = 0;
    int err = db_write(db, price_remove, 1, params, "remove the price", &rows,
                       errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove the price of model %s: there is none",
                   model);
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_prices_json(struct rl_db *db, char **json, char *errstr,
                  size_t errstr_size)
{
    return db_one_text(db, prices_list, 0, NULL, "list the prices", json,
                       errstr, errstr_size);
}

int
rl_db_cost_report_json(struct rl_db *db, const char *since, char **json,
                       char *errstr, size_t errstr_size)
{
    const char *params[1] = {since};

    return db_one_text(db, cost_report, 1, params, "report the cost", json,
                       errstr, errstr_size);
}
