/* purge.c: `runledger purge`, retention of finished runs. A run leaves the
 * ledger with every row that names it (attempts, operator decisions,
 * approval decision, delivered notifications, a leftover budget
 * reservation, its counted model calls), a bounded batch of runs per
 * transaction, so no lock is held longer than one batch and the tables
 * are never rewritten: the freed space is reused after autovacuum. In
 * the same statement it leaves a tombstone (run_tombstones), which
 * rl_claim_runs reads so the run's event, delivered again later, is
 * acknowledged and never run again; tombstones go in a purge of their own
 * (rl_db_purge_tombstones), after the topics' retention.
 *
 * A run qualifies when its status is one of the purgeable statuses the
 * caller names, its updated_at is before the cutoff, and no outbox row
 * (a notification not delivered yet) and no outbox_dead row (a
 * notification the relay gave up on, waiting for an operator) names it.
 * updated_at, not completed_at: failed runs have no completed_at, and
 * updated_at is the last time anything (the worker, an operator's decision)
 * changed the run, never earlier than completed_at, so a run an operator
 * touched recently is kept for the whole retention period after that touch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_purge.h"
#include "rl/err.h"

/* The statuses a run never leaves: a status added to the schema that is
 * final goes here (and into the documentation of `runledger purge`). */
static const enum rl_run_status purgeable_statuses[] = {
    RL_RUN_COMPLETED, RL_RUN_FAILED, RL_RUN_CANCELLED};

/* $1 statuses, $2 cutoff, $3 batch size. The run rows are locked FOR
 * UPDATE SKIP LOCKED: a run another session holds (an operator's
 * decision, a late completion) is left for the next batch or the next
 * purge, never waited for. A notification queued for a run between this
 * statement's snapshot and its lock makes the outbox foreign key refuse
 * the batch (nothing deleted) instead of losing the notification. The
 * children go first in the same statement: the foreign keys to runs are
 * checked at its end, the deferred one of budget_reservations at commit. */
#define PURGE_VICTIMS                                                          \
    "SELECT r.run_id FROM runs r"                                              \
    " WHERE r.status = ANY ($1::text[])"                                       \
    "   AND r.updated_at < $2::timestamptz"                                    \
    "   AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.run_id = r.run_id)"     \
    "   AND NOT EXISTS (SELECT 1 FROM outbox_dead o"                           \
    "                    WHERE o.run_id = r.run_id)"

static const char purge_batch[] =
    "WITH v AS (" PURGE_VICTIMS " LIMIT $3::int4 FOR UPDATE SKIP LOCKED),"
    " tmb AS (INSERT INTO run_tombstones (run_id, fingerprint, job, tenant,"
    "                                     scheduled_at, version,"
    "                                     final_status, finished_at)"
    "         SELECT r.run_id, r.fingerprint, r.job, r.tenant,"
    "                r.scheduled_at, r.version, r.status, r.updated_at"
    "           FROM runs r JOIN v USING (run_id)"
    "         ON CONFLICT (run_id) DO NOTHING RETURNING 1),"
    " res AS (DELETE FROM budget_reservations x USING v"
    "          WHERE x.run_id = v.run_id RETURNING 1),"
    " mc AS (DELETE FROM model_calls x USING v"
    "         WHERE x.run_id = v.run_id RETURNING 1),"
    " att AS (DELETE FROM attempts x USING v"
    "          WHERE x.run_id = v.run_id RETURNING 1),"
    " dec AS (DELETE FROM run_decisions x USING v"
    "          WHERE x.run_id = v.run_id RETURNING 1),"
    " apr AS (DELETE FROM approvals x USING v"
    "          WHERE x.run_id = v.run_id RETURNING 1),"
    " dlv AS (DELETE FROM outbox_delivered x USING v"
    "          WHERE x.run_id = v.run_id RETURNING 1),"
    " run AS (DELETE FROM runs x USING v"
    "          WHERE x.run_id = v.run_id RETURNING 1)"
    "SELECT (SELECT count(*) FROM run), (SELECT count(*) FROM att),"
    "       (SELECT count(*) FROM dec), (SELECT count(*) FROM apr),"
    "       (SELECT count(*) FROM dlv), (SELECT count(*) FROM res),"
    "       (SELECT count(*) FROM mc), (SELECT count(*) FROM tmb)";

static const char purge_count[] =
    "WITH v AS (" PURGE_VICTIMS ")"
    "SELECT (SELECT count(*) FROM v),"
    "       (SELECT count(*) FROM attempts x JOIN v USING (run_id)),"
    "       (SELECT count(*) FROM run_decisions x JOIN v USING (run_id)),"
    "       (SELECT count(*) FROM approvals x JOIN v USING (run_id)),"
    "       (SELECT count(*) FROM outbox_delivered x JOIN v USING (run_id)),"
    "       (SELECT count(*) FROM budget_reservations x JOIN v USING (run_id)),"
    "       (SELECT count(*) FROM model_calls x JOIN v USING (run_id)),"
    "       (SELECT count(*) FROM v)";

/* $1 cutoff, $2 batch size: tombstones of runs that finished before the
 * cutoff, oldest first, skipping any a concurrent purge holds. */
static const char purge_tombstones[] =
    "WITH v AS (SELECT t.run_id FROM run_tombstones t"
    "            WHERE t.finished_at < $1::timestamptz"
    "            ORDER BY t.finished_at LIMIT $2::int4"
    "            FOR UPDATE SKIP LOCKED)"
    "DELETE FROM run_tombstones t USING v WHERE t.run_id = v.run_id";

static const char count_tombstones[] =
    "SELECT count(*) FROM run_tombstones WHERE finished_at < $1::timestamptz";

/* A purged run's tombstone, for `runs show`. */
static const char tombstone_of[] =
    "SELECT run_id, fingerprint, job, tenant,"
    "       " DB_TS_S(
        "scheduled_at") ", version, final_status,"
                        "       " DB_TS_US("finished_at") ", " DB_TS_US(
                            "purged_at") "  FROM run_tombstones WHERE run_id = "
                                         "$1";

static const char purge_cutoff[] =
    "SELECT " DB_TS_US("(now() - make_interval(secs => $1::float8))");

int
rl_db_purge_status_known(enum rl_run_status status)
{
    for (size_t i = 0;
         i < sizeof(purgeable_statuses) / sizeof(purgeable_statuses[0]); i++) {
        if (status == purgeable_statuses[i])
            return 1;
    }
    return 0;
}

const enum rl_run_status *
rl_db_purge_statuses(size_t *n)
{
    *n = sizeof(purgeable_statuses) / sizeof(purgeable_statuses[0]);
    return purgeable_statuses;
}

int
rl_db_purge_cutoff(struct rl_db *db, int64_t older_than_seconds, char *cutoff,
                   size_t cutoff_size, char *errstr, size_t errstr_size)
{
    char secs[24];
    const char *params[1];
    PGresult *res;
    int err = RL_ERR_DB;

    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    snprintf(secs, sizeof(secs), "%lld", (long long)older_than_seconds);
    params[0] = secs;
    res = db_exec_simple(db, purge_cutoff, 1, params, &err, errstr, errstr_size,
                         "compute the purge cutoff");
    if (!res)
        return err;
    db_copy_value(res, 0, 0, cutoff, cutoff_size);
    PQclear(res);
    return 0;
}

/* Builds the text[] literal of statuses into b; 0 or RL_ERR_INVALID. */
static int
statuses_param(const enum rl_run_status *statuses, size_t n, struct rl_buf *b,
               char *errstr, size_t errstr_size)
{
    if (n == 0) {
        rl_set_err(errstr, errstr_size, "no status to purge");
        return RL_ERR_INVALID;
    }
    rl_buf_puts(b, "{");
    for (size_t i = 0; i < n; i++) {
        if (!rl_db_purge_status_known(statuses[i])) {
            rl_set_err(errstr, errstr_size,
                       "refused to purge status %s: runs in it may still "
                       "change",
                       rl_run_status_name(statuses[i]));
            return RL_ERR_INVALID;
        }
        db_array_add(b, rl_run_status_name(statuses[i]));
    }
    rl_buf_puts(b, "}");
    return b->failed ? RL_ERR_NOMEM : 0;
}

/* The counts of a purge statement's one row. */
static void
read_counts(const PGresult *res, struct rl_purge_counts *out)
{
    out->model_calls = db_int_value(res, 0, 6, 0);
    out->tombstones = db_int_value(res, 0, 7, 0);
    out->runs = db_int_value(res, 0, 0, 0);
    out->attempts = db_int_value(res, 0, 1, 0);
    out->decisions = db_int_value(res, 0, 2, 0);
    out->approvals = db_int_value(res, 0, 3, 0);
    out->delivered = db_int_value(res, 0, 4, 0);
    out->reservations = db_int_value(res, 0, 5, 0);
}

/* One purge statement: the count ($1, $2) or a batch ($1 to $3). */
static int
purge_exec(struct rl_db *db, const char *sql, int nparams,
           const enum rl_run_status *statuses, size_t nstatuses,
           const char *cutoff, int batch, struct rl_purge_counts *out,
           const char *what, char *errstr, size_t errstr_size)
{
    struct rl_buf arr = {0};
    char limit[16];
    const char *params[3];
    PGresult *res = NULL;
    int err;

    memset(out, 0, sizeof(*out));
    err = statuses_param(statuses, nstatuses, &arr, errstr, errstr_size);
    if (err)
        goto done;
    err = RL_ERR_DB;
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        goto done;
    snprintf(limit, sizeof(limit), "%d", batch > 0 ? batch : 1000);
    params[0] = arr.data;
    params[1] = cutoff;
    params[2] = limit;
    res = db_exec_simple(db, sql, nparams, params, &err, errstr, errstr_size,
                         what);
    if (!res)
        goto done;
    if (PQntuples(res) != 1) {
        rl_set_err(errstr, errstr_size, "could not %s: no counts returned",
                   what);
        err = RL_ERR_DB;
        goto done;
    }
    read_counts(res, out);
    err = 0;

done:
    PQclear(res);
    rl_buf_free(&arr);
    return err;
}

int
rl_db_purge_count(struct rl_db *db, const enum rl_run_status *statuses,
                  size_t nstatuses, const char *cutoff,
                  struct rl_purge_counts *out, char *errstr, size_t errstr_size)
{
    return purge_exec(db, purge_count, 2, statuses, nstatuses, cutoff, 0, out,
                      "count purgeable runs", errstr, errstr_size);
}

int
rl_db_purge_batch(struct rl_db *db, const enum rl_run_status *statuses,
                  size_t nstatuses, const char *cutoff, int batch,
                  struct rl_purge_counts *out, char *errstr, size_t errstr_size)
{
    int err = purge_exec(db, purge_batch, 3, statuses, nstatuses, cutoff, batch,
                         out, "purge a batch of runs", errstr, errstr_size);

    /* The purge's last batch: no run it removed was waiting for a model's
     * bucket, but a horizon still ahead of every waiting run is brought
     * back now rather than at the next cancel. */
    if (err == 0 && out->runs == 0)
        db_refresh_model_horizons(db);
    return err;
}

int
rl_db_purge_tombstones(struct rl_db *db, const char *cutoff, int batch,
                       int dry_run, int64_t *removed, char *errstr,
                       size_t errstr_size)
{
    char limit[16];
    const char *params[2] = {cutoff, limit};
    PGresult *res;
    int err = RL_ERR_DB;

    *removed = 0;
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    snprintf(limit, sizeof(limit), "%d", batch > 0 ? batch : 1000);
    res = db_exec_simple(db, dry_run ? count_tombstones : purge_tombstones,
                         dry_run ? 1 : 2, params, &err, errstr, errstr_size,
                         dry_run ? "count tombstones" : "purge tombstones");
    if (!res)
        return err;
    *removed = dry_run ? db_int_value(res, 0, 0, 0)
                       : strtoll(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return 0;
}

int
rl_db_tombstone_get(struct rl_db *db, const char *run_id,
                    struct rl_tombstone *out, char *errstr, size_t errstr_size)
{
    const char *params[1] = {run_id};
    PGresult *res;
    int err = RL_ERR_DB;

    memset(out, 0, sizeof(*out));
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, tombstone_of, 1, params, &err, errstr, errstr_size,
                         "read the tombstone");
    if (!res)
        return err;
    if (PQntuples(res) != 1) {
        PQclear(res);
        rl_set_err(errstr, errstr_size, "no tombstone of run %s", run_id);
        return RL_ERR_NOTFOUND;
    }
    db_copy_value(res, 0, 0, out->run_id, sizeof(out->run_id));
    db_copy_value(res, 0, 1, out->fingerprint, sizeof(out->fingerprint));
    db_copy_value(res, 0, 2, out->job, sizeof(out->job));
    db_copy_value(res, 0, 3, out->tenant, sizeof(out->tenant));
    db_copy_value(res, 0, 4, out->scheduled_at, sizeof(out->scheduled_at));
    db_copy_value(res, 0, 5, out->version, sizeof(out->version));
    db_copy_value(res, 0, 6, out->final_status, sizeof(out->final_status));
    db_copy_value(res, 0, 7, out->finished_at, sizeof(out->finished_at));
    db_copy_value(res, 0, 8, out->purged_at, sizeof(out->purged_at));
    PQclear(res);
    return 0;
}
