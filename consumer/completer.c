/* The completer of `runledger consume`: a thread and a connection of its
 * own that turn the answers the ledger hands over into completed runs
 * with their outbox rows, many runs in one statement and transaction.
 * @locality completer thread */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "completer.h"
#include "item.h"
#include "pipeline.h"
#include "rl/clock.h"
#include "rl/db_complete.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/log.h"

/* Notification channels of the effective request {"notify": [...]}. */
static size_t
channels_of(const char *request_json, char ***out)
{
    cJSON *root = cJSON_Parse(request_json);
    const cJSON *notify = cJSON_GetObjectItemCaseSensitive(root, "notify");
    const cJSON *ch;
    size_t n = 0;

    *out = NULL;
    if (!cJSON_IsArray(notify)) {
        cJSON_Delete(root);
        return 0;
    }
    *out = calloc((size_t)cJSON_GetArraySize(notify) + 1, sizeof(char *));
    cJSON_ArrayForEach(ch, notify)
    {
        if (*out && cJSON_IsString(ch))
            (*out)[n++] = strdup(ch->valuestring);
    }
    cJSON_Delete(root);
    return n;
}

static void
channels_free(char **channels, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(channels[i]);
    free(channels);
}

/* * Completions run on a thread and a connection of their own: the ledger's
 * connection is busy with claims and dispatches, and PostgreSQL runs the
 * two statements on two backends at once. The completer reads only what
 * does not change while a run is completing (its id, lease, request and
 * the call's answer); the ledger keeps the run on its live list and renews
 * its lease, and does all the bookkeeping once the run is back (land()). */

struct completer {
    struct rl_pipeline *pl;
    const struct rl_config *cfg;
    struct rl_db *db;
    long connect_backoff;
    long retry_backoff; /* ms before redoing a failed statement */
    unsigned int seed;
};

/* complete_statement(): the statement's answers exceed
 * RUNLEDGER_COMPLETE_MAX_BYTES, or the server refused it for its size;
 * nothing was written. Positive, apart from every rl_err. */
#define COMPLETE_TOO_LARGE 1

/* The first and the longest wait before a failed completion statement is
 * redone. */
#define COMPLETE_BACKOFF_MIN_MS 100L
#define COMPLETE_BACKOFF_MAX_MS 5000L

/* Hands a run back to the ledger with what was done to it. */
static void
hand_back(struct completer *cp, struct rl_item *item, int landed,
          const struct rl_complete_res *res, const char *why)
{
    item->landed = landed;
    item->landed_err = res ? res->err : 0;
    item->landed_completed = res ? res->completed : 0;
    free(item->landed_error);
    item->landed_error = why ? strdup(why) : NULL;
    rl_item_recount(item);
    rl_queue_push(&cp->pl->landed, item);
}

/* Sleeps ms, in steps, unless the grace period ends meanwhile. */
static void
completer_pause(struct completer *cp, long ms)
{
    for (long slept = 0; slept < ms && !atomic_load(&cp->pl->abandon);
         slept += 50) {
        struct timespec ts = {0, 50 * 1000000L};

        nanosleep(&ts, NULL);
    }
}

/* A connection, reconnecting with backoff until there is one. Returns 0
 * only once the grace period is over and a last try failed: the runs are
 * then handed back. */
static int
completer_db(struct completer *cp)
{
    char errstr[512];

    while (!cp->db) {
        cp->db = rl_db_connect_role(cp->cfg, RL_DB_ROLE_COMPLETER, errstr,
                                    sizeof(errstr));
        if (cp->db) {
            cp->connect_backoff = 100;
            break;
        }
        rl_log_warn(NULL, "completer: %s", errstr);
        if (atomic_load(&cp->pl->abandon))
            return 0;
        completer_pause(cp, cp->connect_backoff);
        cp->connect_backoff =
            cp->connect_backoff < 5000 ? cp->connect_backoff * 2 : 5000;
    }
    return 1;
}

/* Hands n answers back undone: the ledger redoes them, or, once the grace
 * period is over, leaves their runs leased. */
static void
defer_answers(struct completer *cp, struct rl_item **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hand_back(cp, items[i], RL_LANDED_DEFERRED, NULL, NULL);
}

/* 1 when errstr reads as the server or libpq refusing a statement for its
 * size (a message over 1 GB, an allocation beyond 1 GB, a value too long):
 * the same statement would fail again, and half of it may not. */
static int
refused_for_size(const char *errstr)
{
    static const char *const signs[] = {
        "out of memory",
        "invalid memory alloc request size",
        "invalid message length",
        "message too large",
        "too long",
        "exceeds the maximum",
        "program limit exceeded",
    };

    for (size_t i = 0; i < sizeof(signs) / sizeof(signs[0]); i++) {
        if (strstr(errstr, signs[i]))
            return 1;
    }
    return 0;
}

/* One completion statement for n answers: each run's attempt outcome, its
 * write-once output and its outbox rows, under its own lease. Returns
 * rl_db_complete_runs' answer; on RL_OK every run has been handed back. */
static int
complete_statement(struct completer *cp, struct rl_item **items, size_t n,
                   char *errstr, size_t errstr_size)
{
    struct rl_complete_req *reqs = calloc(n, sizeof(*reqs));
    struct rl_complete_res *res = calloc(n, sizeof(*res));
    char ***channels = calloc(n, sizeof(*channels));
    size_t bytes = 0;
    int err = RL_ERR_NOMEM;

    snprintf(errstr, errstr_size, "out of memory");
    if (!reqs || !res || !channels)
        goto done;
    for (size_t i = 0; i < n; i++) {
        reqs[i] = (struct rl_complete_req){
            .run_id = items[i]->run_id,
            .lease_epoch = items[i]->lease_epoch,
            .output_json = rl_model_output_json(&items[i]->call),
            .oc = rl_item_attempt_ok(items[i]),
        };
        reqs[i].n_channels = channels_of(items[i]->request_json, &channels[i]);
        reqs[i].channels = (const char *const *)channels[i];
        if (!reqs[i].output_json)
            goto done;
        bytes += strlen(reqs[i].output_json);
    }
    /* Bounded before sending: PostgreSQL refuses a message over 1 GB, and
     * the client holds every parameter of it at once. */
    if (bytes > (size_t)cp->cfg->complete_max_bytes) {
        snprintf(errstr, errstr_size,
                 "%zu answers of %zu bytes exceed "
                 "RUNLEDGER_COMPLETE_MAX_BYTES (%d)",
                 n, bytes, cp->cfg->complete_max_bytes);
        err = COMPLETE_TOO_LARGE;
        goto done;
    }
    if (rl_failpoint("before_complete_statement")) {
        snprintf(errstr, errstr_size, "failpoint before_complete_statement");
        err = RL_ERR_DB;
        goto done;
    }
    rl_failpoint("after_model_response");
    err = rl_db_complete_runs(cp->db, reqs, n, cp->cfg->worker_id, res, errstr,
                              errstr_size);
    if (err == RL_ERR_DB && refused_for_size(errstr))
        err = COMPLETE_TOO_LARGE;
    if (err == RL_OK) {
        rl_failpoint("after_complete_commit");
        for (size_t i = 0; i < n; i++)
            hand_back(cp, items[i], RL_LANDED_DONE, &res[i], NULL);
    }
done:
    for (size_t i = 0; reqs && i < n; i++) {
        free((char *)reqs[i].output_json);
        if (channels)
            channels_free(channels[i], reqs[i].n_channels);
    }
    free(reqs);
    free(res);
    free(channels);
    return err;
}

/* Completes n answers and hands every one of them back: a failed
 * statement is redone (every step is guarded and write-once) on a new
 * connection, after a backoff that doubles up to COMPLETE_BACKOFF_MAX_MS
 * with jitter, until it commits or the grace period ends; a statement too
 * large is split in halves. */
static void
complete_answers(struct completer *cp, struct rl_item **items, size_t n)
{
    char errstr[512];

    for (;;) {
        int err;

        if (!completer_db(cp)) {
            defer_answers(cp, items, n);
            break;
        }
        err = complete_statement(cp, items, n, errstr, sizeof(errstr));
        if (err == RL_OK) {
            cp->retry_backoff = 0;
            break;
        }
        if (err == COMPLETE_TOO_LARGE && n > 1) {
            rl_log_warn(NULL, "could not complete %zu runs: %s; splitting", n,
                        errstr);
            complete_answers(cp, items, n / 2);
            complete_answers(cp, items + n / 2, n - n / 2);
            break;
        }
        if (err == COMPLETE_TOO_LARGE) {
            /* One answer the database cannot take in one statement:
             * retrying cannot help, the run fails with the reason. */
            hand_back(cp, items[0], RL_LANDED_INVALID, NULL, errstr);
            break;
        }
        if (err == RL_ERR_INVALID && n > 1) {
            /* The database refused a value of one run (an output jsonb
             * rejects): it must not hold up the others, so they complete
             * one at a time and only it fails. */
            rl_log_warn(NULL,
                        "could not complete %zu runs: %s; completing them "
                        "one by one",
                        n, errstr);
            for (size_t i = 0; i < n; i++)
                complete_answers(cp, &items[i], 1);
            break;
        }
        if (err == RL_ERR_INVALID) {
            hand_back(cp, items[0], RL_LANDED_INVALID, NULL, errstr);
            break;
        }
        rl_db_destroy(cp->db);
        cp->db = NULL;
        if (atomic_load(&cp->pl->abandon)) {
            /* The grace period is over: the runs keep their leases until
             * those expire and the sweeper of a worker takes them over. */
            rl_log_warn(NULL, "could not complete %zu runs: %s; leaving them",
                        n, errstr);
            defer_answers(cp, items, n);
            break;
        }
        cp->retry_backoff = cp->retry_backoff == 0 ? COMPLETE_BACKOFF_MIN_MS
                            : cp->retry_backoff < COMPLETE_BACKOFF_MAX_MS / 2
                                ? cp->retry_backoff * 2
                                : COMPLETE_BACKOFF_MAX_MS;
        rl_log_warn(NULL, "could not complete %zu runs: %s; will retry", n,
                    errstr);
        /* Half the delay fixed, half drawn: completers of several workers
         * failing together do not come back in step. */
        completer_pause(cp, cp->retry_backoff / 2 +
                                (long)((double)rand_r(&cp->seed) / RAND_MAX *
                                       (double)(cp->retry_backoff / 2)));
    }
    rl_pipeline_wake(cp->pl);
}

void *
rl_completer_main(void *arg)
{
    struct completer cp = {.pl = arg, .connect_backoff = 100};
    struct rl_queue *q = &cp.pl->answers;

    rl_thread_name("rl-completer");
    cp.cfg = cp.pl->cfg;
    cp.seed = (unsigned int)rl_clock_ms() ^ 0x5bd1e995u;
    for (;;) {
        struct rl_item *items[RL_PIPELINE_BATCH_MAX];
        struct rl_item *list;
        size_t n = 0;

        pthread_mutex_lock(&q->lock);
        if (!q->head && !atomic_load(&cp.pl->completer_stop)) {
            /* Bounded: a wake-up lost to a bug costs a second, not the
             * process. */
            rl_cond_wait_ms(&q->cond, &q->lock, 1000);
        }
        pthread_mutex_unlock(&q->lock);
        list = rl_queue_take(q, RL_PIPELINE_BATCH_MAX);
        if (!list && atomic_load(&cp.pl->completer_stop))
            break; /* stopping, and nothing left */
        if (!list)
            continue;
        for (; list; list = list->next)
            items[n++] = list;
        complete_answers(&cp, items, n);
    }
    rl_db_destroy(cp.db);
    return NULL;
}
