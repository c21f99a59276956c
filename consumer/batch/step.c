/* The batcher's step writer, shared by its stages (submit.c, poll.c,
 * output.c): the log line of a batch (its local and provider ids), the
 * lease a step asks for, and a failed step handed back for a later try.
 * A file of its own so that the stages share it without calling each
 * other or the thread that calls them. @locality batcher thread */
#include "batch_int.h"
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
    char errstr[512];

    if (err == RL_ERR_STALE)
        return;
    batch_log(b, RL_LOG_WARN, "", why);
    rl_db_batch_step(bt->db, b, bt->cfg->worker_id, RL_BATCH_STEP_RELEASE, why,
                     RETRY_STEP_MS, errstr, sizeof(errstr));
}
