/* The batcher thread (rl-batcher): its turn every TICK_MS, which sweeps
 * the provider's list for orphan batches when due (sweep.c), moves
 * intents on (submit.c) and polls the batches that are due (poll.c) on a
 * connection of its own, dropped and opened again when a statement
 * fails; and its start and stop with the ledger thread. Apart from the
 * stages so that the loop and its lifetime read in one place. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch_int.h"
#include "rl/clock.h"
#include "rl/db_conn.h"
#include "rl/db_dispatch.h"
#include "rl/err.h"
#include "rl/log.h"
#include "rl/model.h"
#include "rl/model_batch.h"

/* The batcher's turn: forming intents and taking due batches. */
#define TICK_MS 250
/* Between two orphan sweeps besides the one at each new connection (a
 * failover reconnects): a listing of the provider's batches, every page,
 * costs what a few polls do; an orphan found later than this may have
 * run to its end. */
#define SWEEP_MS 300000

/* One turn: intents formed and moved on, due batches polled. Returns 0,
 * or -1 when the connection is to be dropped. */
static int
turn(struct rl_batcher *bt)
{
    if (batch_stopping(bt))
        return 0;
    if (rl_clock_ms() >= bt->sweep_due) {
        bt->sweep_due = rl_clock_ms() + SWEEP_MS;
        if (batch_sweep_orphans(bt) != 0)
            return -1;
        if (batch_stopping(bt))
            return 0;
    }
    if (batch_submit_due(bt) != 0)
        return -1;
    return batch_stopping(bt) ? 0 : batch_poll_due(bt);
}

/* The key of the provider's poll slots: its base URL without what may
 * hold a secret or varies between workers of one provider (user
 * information, query, fragment), so the ledger never stores a key. */
static void
provider_key(const char *base_url, char *out, size_t size)
{
    const char *scheme = strstr(base_url, "://");
    const char *host = scheme ? scheme + 3 : base_url;
    const char *at = strchr(host, '@');
    const char *slash = strchr(host, '/');
    size_t len;

    if (at && (!slash || at < slash))
        host = at + 1;
    len = strcspn(host, "?#");
    while (len > 0 && host[len - 1] == '/')
        len--;
    snprintf(out, size, "%.*s%.*s", scheme ? (int)(scheme + 3 - base_url) : 0,
             base_url, (int)len, host);
}

/* Whether this process has said why its orphan sweep is off: once is
 * enough, the cause (a revoked function) does not change between
 * connections. */
static atomic_flag cluster_warned = ATOMIC_FLAG_INIT;

/* A new connection and the ledger it reaches: its installation id and
 * its cluster's identifier, read again at each connection (a failover
 * may bring another ledger). bt->db stays NULL when it fails. */
static void
connect_ledger(struct rl_batcher *bt)
{
    char errstr[512];
    int err;

    bt->db =
        rl_db_connect_role(bt->cfg, RL_DB_ROLE_BATCHER, errstr, sizeof(errstr));
    if (!bt->db)
        return;
    err = rl_db_installation_id(bt->db, bt->installation_id,
                                sizeof(bt->installation_id), errstr,
                                sizeof(errstr));
    if (!err) {
        err = rl_db_cluster_id(bt->db, bt->cluster_id, sizeof(bt->cluster_id),
                               errstr, sizeof(errstr));
        /* Without it the sweep cannot tell this ledger's batches from
         * those of a copy of it, so it does not run; the batches are
         * created all the same, naming no cluster. */
        if (err == RL_ERR_NOTFOUND) {
            if (!atomic_flag_test_and_set(&cluster_warned))
                rl_log_warn(NULL,
                            "batcher: the orphan sweep is off: %s; batches "
                            "are created without the cluster key and never "
                            "swept",
                            errstr);
            err = 0;
        }
    }
    if (err) {
        rl_log_warn(NULL, "batcher: %s", errstr);
        rl_db_destroy(bt->db);
        bt->db = NULL;
    }
    /* A new connection may reach a promoted standby that lost intents:
     * their batches are looked for at once. */
    bt->sweep_due = 0;
}

static void *
batcher_main(void *arg)
{
    struct rl_batcher *bt = arg;

    rl_thread_name("rl-batcher");
    for (;;) {
        int stop;

        if (!bt->db)
            connect_ledger(bt);
        if (bt->db && turn(bt) != 0) {
            rl_db_destroy(bt->db);
            bt->db = NULL;
        }
        pthread_mutex_lock(&bt->lock);
        if (!bt->stop)
            rl_cond_wait_ms(&bt->wake, &bt->lock, TICK_MS);
        stop = bt->stop;
        pthread_mutex_unlock(&bt->lock);
        if (stop)
            break;
    }
    rl_db_destroy(bt->db);
    bt->db = NULL;
    return NULL;
}

struct rl_batcher *
rl_batcher_start(const struct rl_config *cfg, struct rl_pipeline *pl)
{
    struct rl_batcher *bt = calloc(1, sizeof(*bt));
    struct rl_model_config mcfg;
    char errstr[512];

    if (!bt) {
        rl_log_error(NULL, "batcher: out of memory; batch mode is off");
        return NULL;
    }
    bt->cfg = cfg;
    bt->http = pl->http;
    bt->pl = pl;
    provider_key(cfg->model_base_url ? cfg->model_base_url : "", bt->provider,
                 sizeof(bt->provider));
    /* Rounded up: never more than the bound in a minute. */
    bt->poll_spacing_ms = cfg->batch_max_polls_per_minute > 0
                              ? (60000 + cfg->batch_max_polls_per_minute - 1) /
                                    cfg->batch_max_polls_per_minute
                              : 1000;
    memset(&mcfg, 0, sizeof(mcfg));
    mcfg.base_url = cfg->model_base_url;
    mcfg.api_key = cfg->model_api_key;
    mcfg.connect_timeout_ms = cfg->model_connect_timeout_ms;
    mcfg.timeout_ms = cfg->model_timeout_ms;
    mcfg.max_response_bytes = (size_t)cfg->max_response_bytes;
    mcfg.auth_header = cfg->model_auth_header;
    mcfg.query = cfg->model_query;
    mcfg.headers = cfg->model_headers;
    bt->mb = rl_model_batches_new(&mcfg, errstr, sizeof(errstr));
    if (!bt->mb) {
        rl_log_error(NULL, "batcher: %s; batch mode is off", errstr);
        free(bt);
        return NULL;
    }
    pthread_mutex_init(&bt->lock, NULL);
    pthread_cond_init(&bt->wake, NULL);
    rl_model_batches_set_tick(bt->mb, batch_tick, bt);
    if (pthread_create(&bt->thread, NULL, batcher_main, bt) == 0)
        bt->started = 1;
    else
        rl_log_error(NULL, "batcher: could not start its thread; batches "
                           "wait for another worker");
    return bt;
}

void
rl_batcher_stopping(struct rl_batcher *bt)
{
    if (!bt || !bt->started)
        return;
    pthread_mutex_lock(&bt->lock);
    bt->stop = 1;
    pthread_cond_signal(&bt->wake);
    pthread_mutex_unlock(&bt->lock);
}

void
rl_batcher_stop(struct rl_batcher *bt)
{
    if (!bt)
        return;
    if (bt->started) {
        rl_batcher_stopping(bt);
        pthread_join(bt->thread, NULL);
    }
    pthread_cond_destroy(&bt->wake);
    pthread_mutex_destroy(&bt->lock);
    rl_model_batches_destroy(bt->mb);
    free(bt->modes);
    free(bt);
}
