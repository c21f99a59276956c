/* batch_submit.c: the submit stage's statements: intents formed from
 * the waiting runs (rl_batch_form) and committed before any upload,
 * intents leased, and the request file written from the ledger a page at
 * a time. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_batch_submit.h"
#include "rl/err.h"

static const char batch_form[] = "SELECT count(*) FROM rl_batch_form($1::int4)";

/* An intent whose lease is free or expired. Submitted batches are taken
 * with a poll slot (rl_db_batch_take_poll, batch_poll.c). */
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

static const char batch_requests_page[] =
    "SELECT run_id, attempt_no, body FROM batch_runs"
    " WHERE batch_id = $1 AND (run_id, attempt_no) > ($2, $3::int4)"
    " ORDER BY run_id, attempt_no LIMIT 256";

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
        db_batch_row(res, row, &out[(*n)++]);
    PQclear(res);
    return 0;
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
