/* The renewer: renews, in one statement, every held lease that is a third of
 * its term old, on a thread and a connection of its own (runledger-renew): a
 * ledger statement stalled on PostgreSQL (a failover without a reset, a row
 * lock held elsewhere, a backend stopped) must not let the leases of the runs
 * in flight run out. The renewer runs every sixth of the term (at least
 * every second), so a lease is renewed before half of it has passed; in
 * between it only checks, read-only, that the leases are still held, so
 * a run an operator cancelled (`runs cancel` fences its lease) has its
 * call cancelled within about a second. A run that finishes within
 * a third of the term is never renewed: a renewal rewrites the run's row
 * and every index entry of it (lock_expires_at is indexed). Its session's
 * statement and lock timeouts are at most a third and a sixth of the
 * lease, so one stuck renewal gives way to the next. A run whose lease is
 * gone is marked renew_lost; the ledger thread cancels its call and never
 * completes it. @locality renewer thread */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger_int.h"
#include "rl/clock.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rl/log.h"

struct renewal {
    char run_id[RL_HEX_SIZE];
    int64_t epoch;
    int renew; /* due: extended; else only checked */
};

static int
renewal_cmp(const void *a, const void *b)
{
    return strcmp(((const struct renewal *)a)->run_id,
                  ((const struct renewal *)b)->run_id);
}

/* One statement over the renewals of batch[0..n) whose renew flag is
 * renew: extends those leases (renew) or only reads whether they are
 * still held. held[k] is set for batch[k]. Returns the number held or a
 * negative error. */
static int
renew_some(struct ledger *lg, struct rl_db *db, const struct renewal *batch,
           size_t n, int renew, const char **ids, int64_t *epochs, int *held,
           size_t *idx, char *errstr, size_t errstr_size)
{
    struct rl_lease_set set = {lg->cfg->worker_id, ids, epochs, 0};
    size_t m = 0;
    int *got = held + n; /* scratch: the second half of held */
    int err;

    for (size_t i = 0; i < n; i++) {
        if (batch[i].renew != renew)
            continue;
        ids[m] = batch[i].run_id;
        epochs[m] = batch[i].epoch;
        idx[m++] = i;
    }
    if (m == 0)
        return 0;
    set.n = m;
    err = renew ? rl_db_renew_leases(db, &set, lg->cfg->lease_seconds, got,
                                     errstr, errstr_size)
                : rl_db_check_leases(db, &set, got, errstr, errstr_size);
    if (err < 0)
        return err;
    for (size_t k = 0; k < m; k++)
        held[idx[k]] = got[k];
    return err;
}

/* One round: what is held, copied under the lock; the statements without
 * it; the answers applied to the runs still live. Leases a third of their
 * term old are renewed; the others are only checked, read-only, so a
 * lease an operator's cancel fenced is seen within a round (a second),
 * not when its renewal falls due. Returns the connection to use next time
 * (NULL after an error). */
static struct rl_db *
renew_round(struct ledger *lg, struct rl_db *db)
{
    int64_t now = rl_clock_ms();
    int64_t due = now - lg->cfg->lease_seconds * 1000LL / 3;
    struct renewal *batch = NULL;
    const char **ids = NULL;
    int64_t *epochs = NULL;
    int *held = NULL;
    size_t *idx = NULL;
    size_t n = 0, cap = lg->live_count;
    char errstr[512];
    int err;

    if (cap == 0)
        return db;
    batch = calloc(cap, sizeof(*batch));
    ids = calloc(cap, sizeof(*ids));
    epochs = calloc(cap, sizeof(*epochs));
    held = calloc(2 * cap, sizeof(*held));
    idx = calloc(cap, sizeof(*idx));
    if (!batch || !ids || !epochs || !held || !idx) {
        rl_log_warn(NULL, "could not renew %zu leases: out of memory", cap);
        goto done;
    }
    for (struct rl_item *it = lg->live; it && n < cap; it = it->live_next) {
        if (it->renew_lost)
            continue;
        memcpy(batch[n].run_id, it->run_id, sizeof(batch[n].run_id));
        batch[n].renew = it->renewed_at <= due;
        batch[n++].epoch = it->lease_epoch;
    }
    if (n == 0)
        goto done;
    pthread_mutex_unlock(&lg->live_lock);

    qsort(batch, n, sizeof(*batch), renewal_cmp);
    if (!db) {
        db = rl_db_connect_role(lg->cfg, RL_DB_ROLE_RENEW, errstr,
                                sizeof(errstr));
        if (!db)
            rl_log_warn(NULL, "renewer: %s", errstr);
    }
    /* Renewals first: they are what keeps the leases. Each returns a
     * count of the leases still held, or a negative error. */
    err = db ? renew_some(lg, db, batch, n, 1, ids, epochs, held, idx, errstr,
                          sizeof(errstr))
             : RL_ERR_DB;
    if (err >= 0)
        err = renew_some(lg, db, batch, n, 0, ids, epochs, held, idx, errstr,
                         sizeof(errstr));
    if (err < 0 && db) {
        rl_log_warn(NULL, "could not renew %zu leases: %s", n, errstr);
        rl_db_destroy(db);
        db = NULL;
    }

    pthread_mutex_lock(&lg->live_lock);
    if (err < 0)
        goto done;
    for (struct rl_item *it = lg->live; it; it = it->live_next) {
        struct renewal key;
        struct renewal *hit;

        memcpy(key.run_id, it->run_id, sizeof(key.run_id));
        hit = bsearch(&key, batch, n, sizeof(*batch), renewal_cmp);
        if (!hit || hit->epoch != it->lease_epoch)
            continue;
        if (held[hit - batch]) {
            if (hit->renew)
                it->renewed_at = now;
        } else if (!it->renew_lost) {
            it->renew_lost = 1;
            atomic_fetch_add(&lg->leases_gone, 1);
        }
    }
done:
    free(batch);
    free(ids);
    free(epochs);
    free(held);
    free(idx);
    return db;
}

void *
ledger_renewer_main(void *arg)
{
    struct ledger *lg = arg;
    long period = lg->cfg->lease_seconds * 1000L / 6 < 1000
                      ? lg->cfg->lease_seconds * 1000L / 6
                      : 1000;
    struct rl_db *db = NULL;

    rl_thread_name("rl-renewer");
    pthread_mutex_lock(&lg->live_lock);
    while (!lg->renew_stop) {
        rl_cond_wait_ms(&lg->renew_wake, &lg->live_lock, period);
        if (lg->renew_stop)
            break;
        db = renew_round(lg, db);
    }
    pthread_mutex_unlock(&lg->live_lock);
    rl_db_destroy(db);
    return NULL;
}

/* The leases the renewer found gone: their calls are cancelled, and they
 * are never completed by this worker. A completing run is not held once
 * its completion committed; a lease really lost shows in the completion's
 * answer. @locality ledger thread */
void
ledger_leases_gone(struct ledger *lg)
{
    if (atomic_load(&lg->leases_gone) == 0)
        return;
    atomic_store(&lg->leases_gone, 0);
    pthread_mutex_lock(&lg->live_lock);
    for (struct rl_item *it = lg->live; it; it = it->live_next) {
        struct rl_log_ctx ctx;

        if (!it->renew_lost || it->lease_lost || it->completing)
            continue;
        it->lease_lost = 1;
        ledger_log_ctx(it, &ctx);
        rl_log_warn(&ctx, "lease lost: cancelling the model call");
        if (it->in_model)
            rl_model_cancel(lg->pl->model,
                            it->in_lookup ? &it->lookup : &it->call);
    }
    pthread_mutex_unlock(&lg->live_lock);
}
