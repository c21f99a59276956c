/* The batcher's step writer, shared by its stages (submit.c, poll.c,
 * output.c): the log line of a batch (its local and provider ids), the
 * lease a step asks for, and a failed step handed back for a later try.
 * A file of its own so that the stages share it without calling each
 * other or the thread that calls them. @locality batcher thread */
#include <pthread.h>

#include "batch_int.h"
#include "rl/clock.h"
#include "rl/db_batch_lease.h"
#include "rl/err.h"
#include "rl/log.h"

/* A failed step is tried again after this long. */
#define RETRY_STEP_MS 2000

void
batch_log(const struct rl_batch *b, enum rl_log_level level, const char *prefix,
          const char *msg)
{
    if (level == RL_LOG_WARN)
        rl_log_warn(NULL, "batch %s (provider %s): %s%s", b->batch_id,
                    *b->provider_batch_id ? b->provider_batch_id : "-", prefix,
                    msg);
    else
        rl_log_info(NULL, "batch %s (provider %s): %s%s", b->batch_id,
                    *b->provider_batch_id ? b->provider_batch_id : "-", prefix,
                    msg);
}

int64_t
batch_lease_ms(const struct rl_batcher *bt)
{
    return (int64_t)bt->cfg->batch_lease_seconds * 1000;
}

void
batch_step_failed(struct rl_batcher *bt, const struct rl_batch *b, int err,
                  const char *why)
{
    if (err == RL_ERR_STALE)
        return;
    batch_log(b, RL_LOG_WARN, "", why);
    batch_step_again(bt, b, why);
}

void
batch_step_again(struct rl_batcher *bt, const struct rl_batch *b,
                 const char *why)
{
    char errstr[512];

    rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_RELEASE, why,
                     RETRY_STEP_MS, errstr, sizeof(errstr));
}

int
batch_stopping(struct rl_batcher *bt)
{
    int stop;

    pthread_mutex_lock(&bt->lock);
    stop = bt->stop;
    pthread_mutex_unlock(&bt->lock);
    return stop;
}

int
batch_guard(struct rl_batcher *bt, const struct rl_batch *b)
{
    char errstr[512];
    int64_t now = rl_clock_ms();
    int err;

    bt->guarded = b;
    bt->lease_lost = 0;
    if (!b)
        return 0;
    /* A batch taken with others waited for their calls: its lease may be
     * gone already. */
    err = rl_db_batch_renew(bt->db, b, bt->cfg->worker_id, batch_lease_ms(bt),
                            errstr, sizeof(errstr));
    if (err) {
        bt->guarded = NULL;
        if (err == RL_ERR_STALE)
            batch_log(b, RL_LOG_INFO, "", errstr);
        return err;
    }
    bt->lease_until = now + batch_lease_ms(bt);
    bt->renew_at = now + batch_lease_ms(bt) / 3;
    return 0;
}

int
batch_tick(void *arg)
{
    struct rl_batcher *bt = arg;
    char errstr[512];
    int64_t now = rl_clock_ms();

    if (batch_stopping(bt))
        return 1;
    if (!bt->guarded)
        return 0;
    if (bt->lease_lost)
        return 1;
    if (now >= bt->renew_at) {
        int err = rl_db_batch_renew(bt->db, bt->guarded, bt->cfg->worker_id,
                                    batch_lease_ms(bt), errstr, sizeof(errstr));

        if (err == 0) {
            bt->lease_until = now + batch_lease_ms(bt);
            bt->renew_at = now + batch_lease_ms(bt) / 3;
        } else if (err == RL_ERR_STALE) {
            batch_log(bt->guarded, RL_LOG_WARN, "call given up: ", errstr);
            bt->lease_lost = 1;
            return 1;
        } else {
            bt->renew_at = now + 500;
        }
    }
    /* Not renewed (the database is away): the call ends a fifth of the
     * lease before it could pass to another worker, whose lookup then
     * finds what this call made. */
    if (now >= bt->lease_until - batch_lease_ms(bt) / 5) {
        batch_log(bt->guarded, RL_LOG_WARN, "",
                  "call given up: its lease could not be renewed");
        bt->lease_lost = 1;
        return 1;
    }
    return 0;
}
