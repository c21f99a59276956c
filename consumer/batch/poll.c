/* The poll stage: a submitted batch polled at the provider, with a
 * backoff, and each poll only with a slot of the group's bound
 * (RUNLEDGER_BATCH_MAX_POLLS_PER_MINUTE). A batch the provider ended goes
 * to output.c; one whose every run was cancelled is cancelled at the
 * provider. A poll that fails at the provider BATCH_FAILURES_MAX times in
 * a row gives the batch up (output.c). An intent created more than once
 * is still looked for strays a while after its end (batch_watch_due).
 * @locality batcher thread */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "batch_int.h"
#include "rl/db_batch_lease.h"
#include "rl/db_batch_poll.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/model_batch.h"

/* The longest wait between two polls of a batch. */
#define POLL_MAX_MS 600000

/* A submitted batch whose poll is due. */
static void
poll_batch(struct rl_batcher *bt, struct rl_batch *b)
{
    struct rl_model_batch_state st;
    char errstr[512];
    int64_t wait = bt->cfg->batch_poll_ms;
    int live = 1, err;

    for (int i = 0; i < b->polls && i < 12 && wait < POLL_MAX_MS; i++)
        wait *= 2;
    if (wait > POLL_MAX_MS)
        wait = POLL_MAX_MS;
    err = rl_model_batches_get(bt->mb, b->provider_batch_id, &st, errstr,
                               sizeof(errstr));
    if (err) {
        char why[600];
        int failures = 0;

        snprintf(why, sizeof(why), "poll: %s", errstr);
        batch_log(b, RL_LOG_WARN, "", why);
        /* Given up by the tick: no failure of the provider's. */
        if (bt->lease_lost || batch_stopping(bt)) {
            batch_step_failed(bt, b, RL_ERR_IO, why);
            return;
        }
        if (rl_db_batch_failure(bt->db, b, bt->cfg->worker_id, why,
                                batch_lease_ms(bt), &failures, errstr,
                                sizeof(errstr)) != 0)
            return;
        if (failures >= BATCH_FAILURES_MAX) {
            snprintf(why + strlen(why), sizeof(why) - strlen(why),
                     " (%d polls failed in a row)", failures);
            batch_give_up(bt, b, why);
            return;
        }
        rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_RELEASE,
                         why, wait, errstr, sizeof(errstr));
        return;
    }
    if (strcmp(st.status, "completed") == 0 ||
        strcmp(st.status, "failed") == 0 || strcmp(st.status, "expired") == 0 ||
        strcmp(st.status, "cancelled") == 0) {
        batch_finish(bt, b, &st);
        return;
    }
    /* A create that reached the provider late has made its batch by
     * now, most likely: cancelled before it costs. A batch created more
     * than once is looked at every poll: the provider may list the other
     * create's batch only later (its list lags, or that create arrives
     * late), and it is to be cancelled before it runs, not when this one
     * ends. So is one adopted by its metadata (lookup_ms set): a
     * failover to an asynchronous standby may have lost the ledger's
     * record of its other create, create_tries included. */
    if (b->polls == 0 || b->create_tries > 1 || b->lookup_ms >= 0)
        batch_cancel_strays(bt, b);
    /* Every run of it cancelled: nobody wants its answers. */
    if (strcmp(st.status, "cancelling") != 0 &&
        rl_db_batch_live_runs(bt->db, b->batch_id, &live, errstr,
                              sizeof(errstr)) == 0 &&
        live == 0) {
        if (rl_model_batches_cancel(bt->mb, b->provider_batch_id, errstr,
                                    sizeof(errstr)) == RL_OK)
            batch_log(b, RL_LOG_INFO, "",
                      "every run cancelled: cancelled at the provider");
        else
            batch_log(b, RL_LOG_WARN, "cancel: ", errstr);
        wait = bt->cfg->batch_poll_ms;
    }
    rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_POLL,
                     st.status, wait, errstr, sizeof(errstr));
}

int
batch_poll_due(struct rl_batcher *bt)
{
    /* The intents this worker ended after more than one create, looked
     * for strays a while longer (output.c): leased by nobody, each look
     * only lists and cancels. */
    batch_watch_due(bt);
    for (int i = 0; i < BATCH_TAKE_MAX; i++) {
        struct rl_batch b;
        char errstr[512];
        int taken = 0;

        if (rl_db_batch_take_poll(
                bt->db, bt->cfg->worker_id, batch_lease_ms(bt), bt->provider,
                bt->poll_spacing_ms, &b, &taken, errstr, sizeof(errstr)) != 0) {
            rl_log_warn(NULL, "batcher: %s", errstr);
            return -1;
        }
        if (!taken)
            break;
        if (batch_guard(bt, &b) == 0)
            poll_batch(bt, &b);
        batch_guard(bt, NULL);
        if (batch_stopping(bt))
            break;
    }
    return 0;
}
