/* batch_fail.c: a run the batcher fails for good, with what its dead
 * letter needs: the run failed under the batch's lease as a live failure
 * is (rl_db_fail's update), returning the stored identity the event is
 * rebuilt from and where it was read. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_batch.h"
#include "rl/err.h"

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
