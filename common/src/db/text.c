/* text.c: the text form of parameters and results: PostgreSQL array
 * literals for the batch statements, values copied out of a result, and
 * the errstr of a write refused for a lost lease. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/err.h"

/* Appends one element to a PostgreSQL array literal being built in b
 * ("{" first, "}" after the last): quoted, with '"' and '\' escaped, or
 * NULL. */
void
db_array_add(struct rl_buf *b, const char *elem)
{
    const char *p;
    const char *run;

    rl_buf_put(b, b->len > 1 ? "," : "", b->len > 1 ? 1 : 0);
    if (!elem) {
        rl_buf_put(b, "NULL", 4);
        return;
    }
    rl_buf_put(b, "\"", 1);
    for (p = run = elem; *p; p++) {
        if (*p == '"' || *p == '\\') {
            rl_buf_put(b, run, (size_t)(p - run));
            rl_buf_put(b, "\\", 1);
            run = p;
        }
    }
    rl_buf_put(b, run, (size_t)(p - run));
    rl_buf_put(b, "\"", 1);
}

void
db_array_add_int(struct rl_buf *b, int64_t value, int null_if_negative)
{
    char num[32];

    if (null_if_negative && value < 0) {
        db_array_add(b, NULL);
        return;
    }
    snprintf(num, sizeof(num), "%" PRId64, value);
    db_array_add(b, num);
}

/* Copies column col of row into a new string; NULL for SQL NULL. Sets
 * *oom when the copy fails. */
char *
db_dup_value(const PGresult *res, int row, int col, int *oom)
{
    char *copy;

    if (PQgetisnull(res, row, col))
        return NULL;
    copy = strdup(PQgetvalue(res, row, col));
    if (!copy)
        *oom = 1;
    return copy;
}

void
db_copy_value(const PGresult *res, int row, int col, char *out, size_t size)
{
    snprintf(out, size, "%s",
             PQgetisnull(res, row, col) ? "" : PQgetvalue(res, row, col));
}

int64_t
db_int_value(const PGresult *res, int row, int col, int64_t if_null)
{
    if (PQgetisnull(res, row, col))
        return if_null;
    return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

int
db_bool_value(const PGresult *res, int row, int col)
{
    return !PQgetisnull(res, row, col) && PQgetvalue(res, row, col)[0] == 't';
}

int
db_is_json_null(const char *json)
{
    return !json || strcmp(json, "null") == 0;
}

void
db_stale_msg(char *errstr, size_t errstr_size, const char *what,
             const char *run_id, int64_t epoch)
{
    rl_set_err(errstr, errstr_size,
               "could not %s %s: lease lost (another worker owns the run, or "
               "lease epoch %" PRId64 " is no longer current)",
               what, run_id, epoch);
}

/* Formats value into buf, or returns NULL (SQL NULL) when negative. */
const char *
db_int_or_null(int64_t value, char *buf, size_t size)
{
    if (value < 0)
        return NULL;
    snprintf(buf, size, "%" PRId64, value);
    return buf;
}

/* The text arrays of a batch statement, built in step: one buffer per
 * parameter, each an array literal. */
void
db_arrays_open(struct rl_buf *arrays, size_t n)
{
    for (size_t a = 0; a < n; a++)
        rl_buf_put(&arrays[a], "{", 1);
}

/* Closes every array and points params[a] at it; 0, or RL_ERR_NOMEM. */
int
db_arrays_close(struct rl_buf *arrays, size_t n, const char **params)
{
    int err = 0;

    for (size_t a = 0; a < n; a++) {
        rl_buf_put(&arrays[a], "}", 1);
        if (arrays[a].failed)
            err = RL_ERR_NOMEM;
        params[a] = arrays[a].data;
    }
    return err;
}

void
db_arrays_free(struct rl_buf *arrays, size_t n)
{
    for (size_t a = 0; a < n; a++)
        rl_buf_free(&arrays[a]);
}

/* Checks that res has one row of ncols columns per input element, the
 * first column naming a distinct element by its 1-based ord, and sets
 * index[row] to that element's 0-based index. Returns 0, RL_ERR_NOMEM or
 * RL_ERR_DB (errstr: "could not <what>: ..."). */
int
db_batch_rows(const PGresult *res, size_t n, int ncols, long *index,
              const char *what, char *errstr, size_t errstr_size)
{
    unsigned char *seen;

    if ((size_t)PQntuples(res) != n || PQnfields(res) != ncols) {
        rl_set_err(
            errstr, errstr_size,
            "could not %s: expected %zu rows of %d columns, got %d of %d "
            "(is the schema migrated?)",
            what, n, ncols, PQntuples(res), PQnfields(res));
        return RL_ERR_DB;
    }
    seen = calloc(n, 1);
    if (!seen) {
        rl_set_err(errstr, errstr_size, "could not %s: out of memory", what);
        return RL_ERR_NOMEM;
    }
    for (int row = 0; row < PQntuples(res); row++) {
        int64_t ord = db_int_value(res, row, 0, 0);

        if (ord < 1 || (size_t)ord > n || seen[ord - 1]) {
            rl_set_err(errstr, errstr_size,
                       "could not %s: bad row order in the result", what);
            free(seen);
            return RL_ERR_DB;
        }
        seen[ord - 1] = 1;
        index[row] = (long)(ord - 1);
    }
    free(seen);
    return 0;
}
