/* positions.c: the partitions' consumed positions in the ledger, over
 * schema/033_consumed_positions.sql. rl_claim_runs writes them with the
 * registrations; these two statements are the rare rest: a note for
 * events handled without a registration, and the read a consumer makes
 * on assignment and after a reconnection. Both run unprepared. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "db_int.h"
#include "rl/buf.h"
#include "rl/db_positions.h"
#include "rl/err.h"

/* Over contiguous ranges only, as rl_claim_runs moves them
 * (rl_advance_positions). */
static const char note_positions[] =
    "SELECT rl_advance_positions("
    "  array_fill($1::text, ARRAY[cardinality($2::int4[])]), $2::int4[],"
    "  $3::int8[], $4::int8[])";

static const char read_positions[] =
    "SELECT partition, next_offset FROM consumed_positions"
    " WHERE topic = $1 AND partition = ANY ($2::int4[])";

int
rl_db_note_positions(struct rl_db *db, const char *topic,
                     const int32_t *partitions, const int64_t *firsts,
                     const int64_t *next_offsets, size_t n, char *errstr,
                     size_t errstr_size)
{
    struct rl_buf arrays[3] = {0};
    const char *params[4];
    PGresult *res;
    int err = 0;

    if (n == 0)
        return 0;
    db_arrays_open(arrays, 3);
    for (size_t i = 0; i < n; i++) {
        db_array_add_int(&arrays[0], partitions[i], 0);
        db_array_add_int(&arrays[1], firsts[i], 0);
        db_array_add_int(&arrays[2], next_offsets[i], 0);
    }
    params[0] = topic;
    if (db_arrays_close(arrays, 3, params + 1) != 0) {
        db_arrays_free(arrays, 3);
        rl_set_err(errstr, errstr_size,
                   "could not note the consumed positions: out of memory");
        return RL_ERR_NOMEM;
    }
    res = db_exec_simple(db, note_positions, 4, params, &err, errstr,
                         errstr_size, "note the consumed positions");
    PQclear(res);
    db_arrays_free(arrays, 3);
    return err;
}

int
rl_db_read_positions(struct rl_db *db, const char *topic,
                     const int32_t *partitions, size_t n, int64_t *next_offsets,
                     char *errstr, size_t errstr_size)
{
    struct rl_buf arrays[1] = {0};
    const char *params[2];
    PGresult *res;
    int err = 0;

    for (size_t i = 0; i < n; i++)
        next_offsets[i] = -1;
    if (n == 0)
        return 0;
    db_arrays_open(arrays, 1);
    for (size_t i = 0; i < n; i++)
        db_array_add_int(&arrays[0], partitions[i], 0);
    params[0] = topic;
    if (db_arrays_close(arrays, 1, params + 1) != 0) {
        db_arrays_free(arrays, 1);
        rl_set_err(errstr, errstr_size,
                   "could not read the consumed positions: out of memory");
        return RL_ERR_NOMEM;
    }
    res = db_exec_simple(db, read_positions, 2, params, &err, errstr,
                         errstr_size, "read the consumed positions");
    db_arrays_free(arrays, 1);
    if (!res)
        return err;
    for (int r = 0; r < PQntuples(res); r++) {
        int64_t part = db_int_value(res, r, 0, -1);

        for (size_t i = 0; i < n; i++) {
            if (partitions[i] == part)
                next_offsets[i] = db_int_value(res, r, 1, -1);
        }
    }
    PQclear(res);
    return 0;
}

int
rl_db_positions_kept_since(struct rl_db *db, int64_t *since_ms, char *errstr,
                           size_t errstr_size)
{
    PGresult *res;
    int err = 0;

    *since_ms = 0;
    res = db_exec_simple(db,
                         "SELECT (extract(epoch FROM since) * 1000)::int8"
                         " FROM positions_kept",
                         0, NULL, &err, errstr, errstr_size,
                         "read since when positions are kept");
    if (!res)
        return err;
    if (PQntuples(res) == 1)
        *since_ms = db_int_value(res, 0, 0, 0);
    PQclear(res);
    return 0;
}

int
rl_db_synchronous_standby_names(struct rl_db *db, char *out, size_t out_size,
                                char *errstr, size_t errstr_size)
{
    PGresult *res;
    int err = 0;

    out[0] = '\0';
    res = db_exec_simple(
        db, "SELECT current_setting('synchronous_standby_names')", 0, NULL,
        &err, errstr, errstr_size, "read synchronous_standby_names");
    if (!res)
        return err;
    if (PQntuples(res) == 1)
        db_copy_value(res, 0, 0, out, out_size);
    PQclear(res);
    return 0;
}
