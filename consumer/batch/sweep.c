/* The orphan sweep: the provider batches this installation made in
 * this database cluster whose intent the ledger does not hold, cancelled
 * unread. An intent is committed before its batch is created, so a batch
 * of this installation's always has its row, unless a failover to an
 * asynchronous standby lost that row: nobody polls such a batch, and it
 * would run to its end and be billed while its runs are batched again.
 * A batch whose intent ended with another batch (a stray the intent's
 * own polls no longer look for) is cancelled the same way. The cluster's
 * identifier tells this ledger from a copy of it restored from a pg_dump
 * into another environment: the copy keeps the installation id and
 * knows this ledger's intents only up to the dump, so its sweep would
 * take every batch this ledger made since for an orphan; a standby
 * promoted after a failover keeps the identifier, and sweeps. The
 * provider is listed first and the ledger read after, so no intent
 * committed between the two is taken for lost. A stage of its own
 * because it acts on batches no intent leases. @locality batcher thread
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "batch_int.h"
#include "rl/db_batch_poll.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/model_batch.h"

/* How far back the provider's list is read: a batch ends within its
 * completion window (24 h at OpenAI and Azure OpenAI, the only one they
 * take), so one created a week ago has ended, and the pages past it are
 * of no use to a sweep that runs every few minutes. */
#define HORIZON_S (7LL * 24 * 3600)

int
batch_sweep_orphans(struct rl_batcher *bt)
{
    struct rl_model_batch_ref *refs = NULL;
    char errstr[512];
    size_t n = 0;
    int in_use = 0, err, rc = 0;

    /* The server refused its identifier (warned at the connection): this
     * ledger's batches cannot be told from a copy's. */
    if (!bt->cluster_id[0])
        return 0;
    /* A ledger that never batched made no batch: no listing (which a
     * gateway without the batch API would refuse at every sweep). */
    if (rl_db_batch_in_use(bt->db, &in_use, errstr, sizeof(errstr)) != 0) {
        rl_log_warn(NULL, "batcher: orphan sweep: %s", errstr);
        return -1;
    }
    if (!in_use)
        return 0;
    err = rl_model_batches_list_live(
        bt->mb, bt->installation_id, bt->cluster_id,
        (long long)time(NULL) - HORIZON_S, &refs, &n, errstr, sizeof(errstr));
    if (err) {
        /* Tried again at the next sweep; the batches' own steps go on. */
        rl_log_warn(NULL,
                    "batcher: orphan sweep: could not list the provider's "
                    "batches: %s",
                    errstr);
        return 0;
    }
    for (size_t i = 0; i < n && !batch_stopping(bt); i++) {
        int unread = 0;

        if (rl_db_batch_unread(bt->db, refs[i].local_id, refs[i].id, &unread,
                               errstr, sizeof(errstr)) != 0) {
            rl_log_warn(NULL, "batcher: orphan sweep: %s", errstr);
            rc = -1;
            break;
        }
        if (!unread)
            continue;
        err =
            rl_model_batches_cancel(bt->mb, refs[i].id, errstr, sizeof(errstr));
        if (err) {
            rl_log_warn(NULL,
                        "batcher: orphan provider batch %s (batch %s): "
                        "could not cancel it: %s",
                        refs[i].id, refs[i].local_id, errstr);
            continue;
        }
        atomic_fetch_add(&bt->pl->counters.batch_orphans_cancelled, 1);
        rl_log_warn(NULL,
                    "batcher: orphan provider batch %s (batch %s) cancelled "
                    "unread: the ledger holds no intent that reads it (lost "
                    "by a failover, or ended with another batch)",
                    refs[i].id, refs[i].local_id);
    }
    free(refs);
    return rc;
}
