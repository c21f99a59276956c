/* batch_poll.c: the poll stage's statements: a submitted batch leased
 * only together with a slot of its provider's poll bound
 * (rl_batch_take_poll), and the count of its runs anyone still waits
 * for, which decides whether it is cancelled at the provider; and the
 * orphan sweep's: whether the ledger reads a batch the provider lists. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_batch_lease.h"
#include "rl/db_batch_poll.h"

static const char batch_take_poll[] =
    "SELECT * FROM rl_batch_take_poll($1, $2::int8, $3, $4::int8)";

static const char batch_live_runs[] =
    "SELECT count(*) FROM batch_runs b JOIN runs r ON r.run_id = b.run_id"
    " WHERE b.batch_id = $1 AND b.state = 'in_batch'"
    "   AND r.status = 'running' AND r.lock_owner = '" RL_BATCH_OWNER "'"
    "   AND r.lease_epoch = b.lease_epoch";

static const char batch_in_use[] =
    "SELECT (EXISTS (SELECT 1 FROM batch_settings)"
    "     OR EXISTS (SELECT 1 FROM batches))::int";

/* An intent still open reads its adopted batch and cancels its strays
 * itself; one ended reads nothing more, but the batch it ended with may
 * have ended at the provider since it was listed. */
static const char batch_unread[] =
    "SELECT count(*) FROM batches WHERE batch_id = $1"
    "   AND (state IN ('intent', 'submitted') OR provider_batch_id = $2)";

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
        db_batch_row(res, 0, out);
        *taken = 1;
    }
    PQclear(res);
    return 0;
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
rl_db_batch_in_use(struct rl_db *db, int *in_use, char *errstr,
                   size_t errstr_size)
{
    char *text = NULL;
    int err = db_one_text(db, batch_in_use, 0, NULL,
                          "tell whether batch mode is used", &text, errstr,
                          errstr_size);

    *in_use = text ? atoi(text) : 0;
    free(text);
    return err;
}

int
rl_db_batch_unread(struct rl_db *db, const char *local_id,
                   const char *provider_batch_id, int *unread, char *errstr,
                   size_t errstr_size)
{
    const char *params[2] = {local_id, provider_batch_id};
    char *text = NULL;
    int err = db_one_text(db, batch_unread, 2, params,
                          "look up a provider batch's intent", &text, errstr,
                          errstr_size);

    *unread = !err && text && atoi(text) == 0;
    free(text);
    return err;
}
