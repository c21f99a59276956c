/* batch_lease.c: a batch's lease, which every stage writes under: the
 * row of a leased batch read one way (db_batch_row, for the takes of
 * batch_submit.c and batch_poll.c), each step fenced by (owner, epoch),
 * and the batch's end. A file of its own so that no stage calls another
 * for them. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_batch_lease.h"
#include "rl/err.h"

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
                           " provider_status = $4, failures = 0," RELEASE FENCE,
    [RL_BATCH_STEP_RELEASE] = "UPDATE batches SET detail = $4," RELEASE FENCE,
    /* lookup_since kept: the batch a create that got no answer made, so
     * its polls and its end look for strays of a create the ledger may
     * not count (create_tries, lost by a failover). */
    [RL_BATCH_STEP_ADOPTED] =
        "UPDATE batches SET provider_batch_id = $4, state = 'submitted',"
        " submitted_at = now(), lookup_since = coalesce(lookup_since, now()),"
        " detail = NULL," RELEASE FENCE,
};

static const char batch_finish[] =
    "UPDATE batches SET state = $4, provider_status = $5,"
    " output_file_id = nullif($6, ''), error_file_id = nullif($7, ''),"
    " lines_ok = (SELECT count(*) FROM batch_runs r"
    "  WHERE r.batch_id = $1 AND r.state = 'completed'),"
    " lines_failed = (SELECT count(*) FROM batch_runs r"
    "  WHERE r.batch_id = $1 AND r.state IN ('failed', 'retried',"
    "  'go_live')),"
    " lines_ignored = $8::int4 + (SELECT count(*) FROM batch_runs r"
    "  WHERE r.batch_id = $1 AND r.state = 'ignored'),"
    " finished_at = now(), detail = coalesce(nullif($9, ''), detail),"
    " lock_owner = NULL, lock_expires_at = NULL" FENCE;

static const char batch_renew[] =
    "UPDATE batches SET"
    " lock_expires_at = now() + $4::int8 * interval '1 millisecond'" FENCE;

static const char batch_failure[] =
    "UPDATE batches SET failures = failures + 1, polls = polls + 1,"
    " detail = $4,"
    " lock_expires_at = now() + $5::int8 * interval '1 millisecond'" FENCE
    " RETURNING failures";

/* The batches row locked under the lease: a worker whose lease another
 * took waits here for the taker's commit and then finds no row. */
static const char batch_fence[] = "SELECT 1 FROM batches" FENCE " FOR UPDATE";

void
db_batch_row(const PGresult *res, int row, struct rl_batch *b)
{
    memset(b, 0, sizeof(*b));
    db_copy_value(res, row, 0, b->batch_id, sizeof(b->batch_id));
    b->epoch = db_int_value(res, row, 1, 0);
    /* Column 2, the state, is the one the take chose the batch by. */
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
rl_db_batch_finish(struct rl_db *db, const struct rl_batch *b,
                   const char *owner, enum rl_batch_state state,
                   const char *provider_status, const char *output_file_id,
                   const char *error_file_id, int unmatched, const char *detail,
                   char *errstr, size_t errstr_size)
{
    char unmatchedb[16];
    const char *name = rl_batch_state_name(state);
    const char *extra[6] = {name,           provider_status,
                            output_file_id, error_file_id,
                            unmatchedb,     detail ? detail : ""};

    snprintf(unmatchedb, sizeof(unmatchedb), "%d", unmatched);
    return fenced(db, batch_finish, b, owner, 6, extra, "finish", errstr,
                  errstr_size);
}

int
rl_db_batch_renew(struct rl_db *db, const struct rl_batch *b, const char *owner,
                  int64_t ms, char *errstr, size_t errstr_size)
{
    char msbuf[32];
    const char *extra[1] = {msbuf};

    snprintf(msbuf, sizeof(msbuf), "%" PRId64, ms);
    return fenced(db, batch_renew, b, owner, 1, extra, "renew the lease",
                  errstr, errstr_size);
}

int
rl_db_batch_failure(struct rl_db *db, const struct rl_batch *b,
                    const char *owner, const char *why, int64_t lease_ms,
                    int *failures, char *errstr, size_t errstr_size)
{
    char epoch[32], msbuf[32];
    const char *params[5] = {b->batch_id, owner, epoch, why, msbuf};
    char *text = NULL;
    int err;

    snprintf(epoch, sizeof(epoch), "%" PRId64, b->epoch);
    snprintf(msbuf, sizeof(msbuf), "%" PRId64, lease_ms);
    err = db_one_text(db, batch_failure, 5, params, "count a failure", &text,
                      errstr, errstr_size);
    if (err == RL_ERR_NOTFOUND) {
        rl_set_err(errstr, errstr_size,
                   "could not count a failure of batch %s: its lease (epoch "
                   "%" PRId64 ") is gone",
                   b->batch_id, b->epoch);
        return RL_ERR_STALE;
    }
    *failures = text ? atoi(text) : 0;
    free(text);
    return err;
}

int
rl_db_batch_fence(struct rl_db *db, const struct rl_batch *b, const char *owner,
                  char *errstr, size_t errstr_size)
{
    char epoch[32];
    const char *params[3] = {b->batch_id, owner, epoch};
    char *text = NULL;
    int err;

    snprintf(epoch, sizeof(epoch), "%" PRId64, b->epoch);
    err = db_write(db, "BEGIN", 0, NULL, "begin", NULL, errstr, errstr_size);
    if (err)
        return err;
    err = db_one_text(db, batch_fence, 3, params, "lock the batch", &text,
                      errstr, errstr_size);
    free(text);
    if (err == RL_ERR_NOTFOUND) {
        rl_set_err(errstr, errstr_size,
                   "could not act on a line of batch %s: its lease (epoch "
                   "%" PRId64 ") is gone",
                   b->batch_id, b->epoch);
        err = RL_ERR_STALE;
    }
    if (err) {
        char ignored[256];

        db_write(db, "ROLLBACK", 0, NULL, "roll back", NULL, ignored,
                 sizeof(ignored));
    }
    return err;
}

int
rl_db_batch_fence_end(struct rl_db *db, int commit, char *errstr,
                      size_t errstr_size)
{
    PGresult *res;
    int err = RL_ERR_DB;

    if (!commit)
        return db_write(db, "ROLLBACK", 0, NULL, "roll back", NULL, errstr,
                        errstr_size);
    res = db_exec_simple(db, "COMMIT", 0, NULL, &err, errstr, errstr_size,
                         "commit");
    /* No answer to the COMMIT: the server may have committed it. */
    if (!res)
        return PQstatus(db->conn) == CONNECTION_OK ? err : RL_ERR_IO;
    /* A transaction an error aborted answers COMMIT with ROLLBACK. */
    err = strcmp(PQcmdStatus(res), "COMMIT") == 0 ? 0 : RL_ERR_DB;
    if (err)
        rl_set_err(errstr, errstr_size,
                   "could not commit: the transaction was rolled back");
    PQclear(res);
    return err;
}
