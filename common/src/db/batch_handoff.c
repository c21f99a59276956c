/* batch_handoff.c: the hand-off of batch-mode runs to the batcher: which
 * (job, tenant) pairs are in batch mode, and rl_batch_park, the one
 * statement that passes the runs' leases from the worker to the batch. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_batch_handoff.h"
#include "rl/err.h"

static const char batch_park[] =
    "SELECT o_run_id, o_status FROM rl_batch_park($1, $2::text[],"
    " $3::int8[], $4::int4[], $5::text[], $6::text[], $7::text[])";

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

static const char batch_modes[] =
    "SELECT coalesce(string_agg(job || E'\\t' || tenant, E'\\n'), '')"
    "  FROM batch_settings";

int
rl_db_batch_modes(struct rl_db *db, char **text, char *errstr,
                  size_t errstr_size)
{
    return db_one_text(db, batch_modes, 0, NULL, "read the batch modes", text,
                       errstr, errstr_size);
}
