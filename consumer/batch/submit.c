/* The submit stage: an intent, formed in the ledger before any upload,
 * moved on to the provider. Its request file is written from the ledger
 * to a temporary file and uploaded (after an upload that got no answer,
 * the file the provider holds is adopted), and the batch created with its
 * local id in metadata. A create that got no answer is looked up at the
 * provider for the settle period before another. Every call runs under
 * the batch's lease, renewed while it runs (batch_tick), and ends when
 * the lease is gone: no create outlives the lease it was begun under, so
 * no other worker creates the batch meanwhile. A stage of its own
 * because it alone makes batches at the provider: that each is made once
 * is decided here. @locality batcher thread */
#include <stdint.h>
#include <stdio.h>

#include "batch_int.h"
#include "rl/db_batch_lease.h"
#include "rl/db_batch_submit.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/log.h"
#include "rl/model_batch.h"

/* Uploads or creates the provider refused (4xx) before the batch's runs
 * are given back to their policy. */
#define REFUSALS_MAX 3

/* The request file uploaded (or, after an upload that got no answer,
 * the one the provider holds adopted). Returns 0 when b has its file. */
static int
upload(struct rl_batcher *bt, struct rl_batch *b)
{
    char errstr[512], filename[96], why[600];
    int64_t bytes = 0;
    FILE *f;
    int err;

    snprintf(filename, sizeof(filename), "%s.jsonl", b->batch_id);
    if (b->upload_tries > 0 &&
        rl_model_batches_find_file(bt->mb, filename, b->input_file_id,
                                   sizeof(b->input_file_id), errstr,
                                   sizeof(errstr)) == RL_OK) {
        err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                               RL_BATCH_STEP_UPLOADED, b->input_file_id,
                               batch_lease_ms(bt), errstr, sizeof(errstr));
        if (err)
            batch_step_failed(bt, b, err, errstr);
        return err;
    }
    err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_UPLOAD,
                           "uploading", batch_lease_ms(bt), errstr,
                           sizeof(errstr));
    if (err) {
        batch_step_failed(bt, b, err, errstr);
        return err;
    }
    /* On disk, not in memory: a file may be 200 MB. */
    f = tmpfile();
    if (!f) {
        batch_step_failed(bt, b, RL_ERR_IO,
                          "could not create a temporary file");
        return RL_ERR_IO;
    }
    err = rl_db_batch_write_requests(bt->db, b, f, &bytes, errstr,
                                     sizeof(errstr));
    if (!err) {
        rewind(f);
        err = rl_model_batches_upload(bt->mb, f, filename, b->input_file_id,
                                      sizeof(b->input_file_id), errstr,
                                      sizeof(errstr));
    }
    fclose(f);
    if (!err) {
        rl_failpoint("batch_after_upload");
        err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                               RL_BATCH_STEP_UPLOADED, b->input_file_id,
                               batch_lease_ms(bt), errstr, sizeof(errstr));
    }
    if (err) {
        snprintf(why, sizeof(why), "upload: %s", errstr);
        if (err == RL_ERR_INVALID && b->upload_tries + 1 >= REFUSALS_MAX)
            batch_refused(bt, b, why);
        else
            batch_step_failed(bt, b, err, why);
        return err;
    }
    snprintf(why, sizeof(why), "uploaded %d runs, %lld bytes, file %s", b->runs,
             (long long)bytes, b->input_file_id);
    batch_log(b, RL_LOG_INFO, "", why);
    return 0;
}

/* An intent: uploaded, then created once. A create that may have been
 * made is looked up by its local id first, for the settle period. */
static void
submit(struct rl_batcher *bt, struct rl_batch *b)
{
    char errstr[512], why[600];
    int err;

    if (!*b->input_file_id && upload(bt, b) != 0)
        return;
    if (b->create_tries > 0) {
        err = rl_model_batches_find(bt->mb, b->batch_id, b->provider_batch_id,
                                    sizeof(b->provider_batch_id), errstr,
                                    sizeof(errstr));
        if (err == RL_OK) {
            batch_log(b, RL_LOG_INFO, "", "adopted: the provider holds it");
            err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                                   RL_BATCH_STEP_ADOPTED, b->provider_batch_id,
                                   bt->cfg->batch_poll_ms, errstr,
                                   sizeof(errstr));
            if (err)
                batch_step_failed(bt, b, err, errstr);
            return;
        }
        if (err != RL_ERR_NOTFOUND) {
            snprintf(why, sizeof(why), "lookup: %s", errstr);
            batch_step_failed(bt, b, err, why);
            return;
        }
        if (b->lookup_ms < 0 || b->lookup_ms < bt->cfg->batch_settle_ms) {
            /* The provider's list is eventually consistent: not found yet
             * is not "not made". */
            int64_t next = bt->cfg->batch_settle_ms / 5;

            rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                             RL_BATCH_STEP_LOOKUP, "not found yet",
                             next < 100 ? 100 : next, errstr, sizeof(errstr));
            return;
        }
        batch_log(b, RL_LOG_WARN, "",
                  "not found at the provider after the settle period: created "
                  "again");
    }
    err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_CREATE,
                           "creating", batch_lease_ms(bt), errstr,
                           sizeof(errstr));
    if (err) {
        batch_step_failed(bt, b, err, errstr);
        return;
    }
    err = rl_model_batches_create(
        bt->mb, b->input_file_id, b->endpoint, b->completion_window,
        b->batch_id, bt->installation_id, bt->cluster_id,
        rl_failpoint("batch_create_drop_reply") ? "drop_reply" : NULL,
        b->provider_batch_id, sizeof(b->provider_batch_id), errstr,
        sizeof(errstr));
    if (err == RL_OK) {
        rl_failpoint("batch_after_create");
        /* Fenced: made after this worker's lease was gone, the batch is
         * the next owner's to adopt by its metadata, or to cancel as a
         * stray (poll.c). */
        err = rl_db_batch_step(bt->db, b, bt->cfg->worker_id,
                               RL_BATCH_STEP_SUBMITTED, b->provider_batch_id,
                               bt->cfg->batch_poll_ms, errstr, sizeof(errstr));
        if (err == RL_ERR_STALE)
            batch_log(b, RL_LOG_WARN,
                      "created after its lease was lost; left to the next "
                      "owner: ",
                      errstr);
        else if (err)
            batch_step_failed(bt, b, err, errstr);
        else
            batch_log(b, RL_LOG_INFO, "", "created");
        return;
    }
    /* No answer, or refused: the next turn looks it up before any other
     * create. */
    snprintf(why, sizeof(why), "create: %s", errstr);
    if (err == RL_ERR_INVALID && b->create_tries + 1 >= REFUSALS_MAX) {
        batch_refused(bt, b, why);
        return;
    }
    batch_log(b, RL_LOG_WARN, "", why);
    rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_LOOKUP, why,
                     200, errstr, sizeof(errstr));
}

int
batch_submit_due(struct rl_batcher *bt)
{
    struct rl_batch bs[BATCH_TAKE_MAX];
    char errstr[512];
    size_t n = 0;
    int formed = 0;

    if (rl_db_batch_form(bt->db, BATCH_TAKE_MAX, &formed, errstr,
                         sizeof(errstr)) ||
        rl_db_batch_take(bt->db, bt->cfg->worker_id, batch_lease_ms(bt), bs,
                         BATCH_TAKE_MAX, &n, errstr, sizeof(errstr))) {
        rl_log_warn(NULL, "batcher: %s", errstr);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int err;

        /* Stopping: the batches not begun go back at once. */
        if (batch_stopping(bt)) {
            batch_step_failed(bt, &bs[i], RL_ERR_IO, "the worker stops");
            continue;
        }
        err = batch_guard(bt, &bs[i]);
        if (err == RL_ERR_DB)
            return -1;
        if (err == 0)
            submit(bt, &bs[i]);
        batch_guard(bt, NULL);
    }
    return 0;
}
