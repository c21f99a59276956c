#ifndef RL_BATCH_INT_H
#define RL_BATCH_INT_H

/* The batcher's stages (docs/batch.md), private to consumer/batch/: the
 * state they share (struct rl_batcher) and the functions of each file,
 * prefixed batch_. The thread (thread.c) runs a turn: sweep.c cancels
 * the provider batches no intent of the ledger reads (when due),
 * submit.c moves intents on to the provider, poll.c polls the batches
 * that are due, and both end a batch through output.c, which turns its lines
 * into each run's one durable state. Every stage writes its steps through
 * step.c. Calls go one way, down that list: no stage calls back into the one
 * that called it. handoff.c runs on the ledger thread and shares only the
 * configuration and the modes it reads.
 *
 * Every batch step is written under the batch's lease (owner, epoch);
 * every run write under the run's (RL_BATCH_OWNER, its epoch). */

#include <pthread.h>
#include <stdint.h>

#include "batcher.h"
#include "deadletters.h"
#include "item.h"
#include "pipeline.h"
#include "rl/db_batch_lease.h"
#include "rl/log.h"
#include "rl/model_batch.h"

/* Batches taken per turn: intents (submit.c), and due polls (poll.c). */
#define BATCH_TAKE_MAX 4
/* Polls or reads of a batch that failed at the provider, since its last
 * good poll, before it is given up (output.c, batch_give_up). */
#define BATCH_FAILURES_MAX 5
/* Ended intents watched for strays at once (output.c, batch_watch_due). */
#define BATCH_WATCHED_MAX 8

struct rl_batcher {
    const struct rl_config *cfg;
    struct rl_http *http;   /* /metrics (may be NULL) */
    struct rl_pipeline *pl; /* dead letters of the runs it fails */
    char *modes;            /* "job\ttenant" lines; ledger thread */
    int64_t modes_due;      /* next reread (monotonic ms); ledger thread */
    pthread_t thread;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;         /* @locks lock */
    struct rl_db *db; /* batcher thread */
    /* The ledger's installation id and its database cluster's system
     * identifier ("" when the server refuses it: no orphan sweep), read
     * at each connection (a failover may bring another ledger), named in
     * each batch's metadata; and when the next orphan sweep is due
     * (monotonic ms, 0: at once). Batcher thread. */
    char installation_id[128];
    char cluster_id[32];
    int64_t sweep_due;
    struct rl_model_batches *mb;
    char provider[512]; /* the poll slots' key: the base URL, bare */
    int64_t poll_spacing_ms;
    /* The batch whose lease batch_tick renews while a call runs
     * (batch_guard), when it is to be renewed, and until when it is
     * surely held; lease_lost once a renewal was refused or came too
     * late. Batcher thread. */
    const struct rl_batch *guarded;
    int64_t renew_at;
    int64_t lease_until;
    int lease_lost;
    /* The batch whose runs no line named could not be settled, as last
     * logged: a pass tried again is logged once, not at every try.
     * Batcher thread. */
    char unsettled[64];
    /* The intents this worker ended that were created more than once,
     * each looked for at the provider every poll period until a batch
     * lease after its end (until_ms 0: a free slot): a create of theirs
     * that got no answer may reach the provider only after the adopted
     * batch ended, when no poll of the intent is left to find it.
     * Batcher thread. */
    struct batch_watched {
        struct rl_batch b;
        int64_t next_ms, until_ms;
    } watched[BATCH_WATCHED_MAX];
};

/* step.c: what every stage writes of a batch. */
/* Logs msg about b (its local and provider ids), after prefix. */
void batch_log(const struct rl_batch *b, enum rl_log_level level,
               const char *prefix, const char *msg);
/* The lease a step of a batch asks for (RUNLEDGER_BATCH_LEASE_SECONDS). */
int64_t batch_lease_ms(const struct rl_batcher *bt);
/* A step's failure: b is released for a later try, unless its lease is
 * gone already (err RL_ERR_STALE). */
void batch_step_failed(struct rl_batcher *bt, const struct rl_batch *b, int err,
                       const char *why);
/* As batch_step_failed for a step whose failure is logged already. */
void batch_step_again(struct rl_batcher *bt, const struct rl_batch *b,
                      const char *why);

/* Whether the batcher is to stop (rl_batcher_stop, or the ledger's
 * stopping): a stage takes nothing more. */
int batch_stopping(struct rl_batcher *bt);
/* Makes b the batch whose lease batch_tick renews, renewing it now: 0, or
 * RL_ERR_STALE when it is gone already (nothing is to be done with b),
 * or RL_ERR_DB. NULL: none. */
int batch_guard(struct rl_batcher *bt, const struct rl_batch *b);
/* The endpoint client's tick (rl_model_batches_set_tick): renews the
 * guarded batch's lease every third of it, and ends the call (nonzero)
 * when the batcher stops or the lease is gone or about to be, so no call
 * outlives the lease it was made under. */
int batch_tick(void *arg);

/* sweep.c: the provider's batches naming this installation and this
 * cluster whose intent the ledger lacks or ended with another batch,
 * cancelled at the provider and never read; nothing when the cluster's
 * identifier is unknown. A listing or cancel that fails is logged and
 * left to the next sweep. Returns 0, or -1 when the connection is to be
 * dropped. */
int batch_sweep_orphans(struct rl_batcher *bt);

/* submit.c: intents formed, taken, uploaded and created. Returns 0, or
 * -1 when the connection is to be dropped. */
int batch_submit_due(struct rl_batcher *bt);

/* poll.c: the due polls of this turn. Returns 0, or -1 when the
 * connection is to be dropped. */
int batch_poll_due(struct rl_batcher *bt);

/* output.c: the end of a batch. */
/* A finished batch (st: the provider's status and files): every line
 * read, the runs no line named retried per their policy, the batch
 * closed. */
void batch_finish(struct rl_batcher *bt, struct rl_batch *b,
                  const struct rl_model_batch_state *st);
/* The provider refused b's upload or create too often: its runs go back
 * to their policy and b ends failed, never to be created. */
void batch_refused(struct rl_batcher *bt, struct rl_batch *b, const char *why);
/* The batches the provider holds under b's local id besides the one the
 * ledger adopted (made by a create whose worker lost the lease) cancelled
 * at the provider; their lines are never read. At b's first poll and
 * before its files are read. */
void batch_cancel_strays(struct rl_batcher *bt, const struct rl_batch *b);
/* The strays of the watched intents (struct rl_batcher's watched) whose
 * look is due, cancelled as batch_cancel_strays does; each intent's
 * watch dropped once its time is up. */
void batch_watch_due(struct rl_batcher *bt);
/* b cannot be polled or its files read (why): cancelled at the provider
 * if it can be, its runs not answered yet follow their --on-expiry
 * policy (error class batch_unreadable), and b ends failed with why as
 * its detail. */
void batch_give_up(struct rl_batcher *bt, struct rl_batch *b, const char *why);

#endif /* RL_BATCH_INT_H */
