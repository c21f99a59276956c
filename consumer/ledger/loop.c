/* The ledger thread's loop: (re)connecting, redoing deferred writes,
 * waiting for work, and the turn that claims, sweeps, dispatches and
 * handles results until the pipeline stops. @locality ledger thread */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "ledger.h"
#include "ledger_int.h"
#include "rl/clock.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/db_positions.h"
#include "rl/log.h"

static void
redo_deferred(struct ledger *lg)
{
    struct rl_item *list = lg->retry;
    struct rl_item *claim_again = NULL, *start_again = NULL,
                   *results_again = NULL;

    lg->retry = NULL;
    while (list) {
        struct rl_item *it = list;
        struct rl_item **to = it->redo == REDO_CLAIM   ? &claim_again
                              : it->redo == REDO_START ? &start_again
                                                       : &results_again;

        list = it->next;
        it->next = *to;
        *to = it;
    }
    /* Each step requeues what it cannot write when the connection goes
     * again, so nothing is lost between them. */
    ledger_handle_results(lg, results_again);
    ledger_start_attempts(lg, start_again);
    if (claim_again)
        ledger_claim_intake(lg, claim_again, ledger_model_room(lg));
}

/* Sleeps up to ms unless there is work: results, runs back from the
 * completer, or (when claiming) intake. */
static void
wait_for_work(struct ledger *lg, long ms, int claiming)
{
    struct rl_pipeline *pl = lg->pl;

    /* The queues are read under their own locks, inside wake_lock: a push
     * after these reads is followed by rl_pipeline_wake(), which waits for
     * wake_lock and so cannot signal before the wait below begins. */
    pthread_mutex_lock(&pl->wake_lock);
    if ((!claiming || rl_queue_empty(&pl->intake)) &&
        rl_queue_empty(&pl->results) && rl_queue_empty(&pl->landed)) {
        rl_cond_wait_ms(&pl->wake, &pl->wake_lock, ms);
    }
    pthread_mutex_unlock(&pl->wake_lock);
}

/* Without a connection nothing can be written: sleeps until the next
 * connection attempt (backed off up to 5 s) rather than turning on
 * results it cannot write; a wake (a stop, a new result) ends it early. */
static void
wait_for_db(struct ledger *lg)
{
    struct rl_pipeline *pl = lg->pl;
    int64_t ms = lg->next_connect - rl_clock_ms();

    if (ms < 10)
        ms = 10;
    if (ms > 1000)
        ms = 1000;
    pthread_mutex_lock(&pl->wake_lock);
    rl_cond_wait_ms(&pl->wake, &pl->wake_lock, ms);
    pthread_mutex_unlock(&pl->wake_lock);
}

/* At the end of the thread: every run still leased to this worker (its
 * writes never found a connection, or it was claimed as the process
 * stopped) goes back to pending at once instead of when its lease
 * expires. */
static void
release_leftovers(struct ledger *lg)
{
    char errstr[512];
    int n;

    if (!lg->db)
        return;
    n = rl_db_release_leases_of_owner(lg->db, lg->cfg->worker_id, "shutdown",
                                      "released at shutdown", errstr,
                                      sizeof(errstr));
    if (n < 0)
        rl_log_warn(NULL,
                    "ledger: %s; the leases expire and another worker's "
                    "sweeper takes the runs over",
                    errstr);
    else if (n > 0)
        rl_log_info(NULL, "ledger: released %d leases at shutdown", n);
}

void *
rl_ledger_main(void *arg)
{
    struct rl_pipeline *pl = arg;
    struct ledger lg;

    rl_thread_name("rl-ledger");
    memset(&lg, 0, sizeof(lg));
    lg.pl = pl;
    lg.cfg = pl->cfg;
    ledger_connection_init(&lg);
    lg.seed = (unsigned int)rl_clock_ms();
    lg.ready_tail = &lg.ready;
    pthread_mutex_init(&lg.live_lock, NULL);
    pthread_cond_init(&lg.renew_wake, NULL);
    atomic_init(&lg.leases_gone, 0);
    if (pthread_create(&lg.renewer, NULL, ledger_renewer_main, &lg) == 0)
        lg.renewer_started = 1;
    else
        rl_log_error(NULL, "ledger: could not start the lease renewer thread; "
                           "leases will expire under runs in flight");
    ledger_batch_start(&lg);

    for (;;) {
        int64_t now;
        struct rl_item *batch;
        int stopping = atomic_load(&pl->stopping);
        int claimed = 0;
        long room;

        /* Once the grace period is over nothing is redone: the leases of
         * what waits expire, and another worker's sweeper takes over. */
        rl_http_ledger_turned(pl->http);
        ledger_connection_settled(&lg);
        ledger_leases_gone(&lg);
        if (ledger_connect(&lg) && !stopping && ledger_positions_due(&lg))
            ledger_positions_recheck(&lg);
        if (lg.db && lg.retry && !atomic_load(&pl->abandon))
            redo_deferred(&lg);

        /* Results first: they free capacity and finish runs. */
        while ((batch = rl_queue_take(&pl->landed, 0)))
            ledger_land(&lg, batch);
        while (lg.db && (batch = rl_queue_take(&pl->results, 0))) {
            ledger_handle_results(&lg, batch);
        }
        while (!lg.db && atomic_load(&pl->abandon) &&
               (batch = rl_queue_take(&pl->results, 0)))
            ledger_park_results(&lg, batch);
        /* Lookups due in the endpoint's record; at shutdown the runs
         * waiting for one go back, their attempt still without outcome. */
        ledger_reconcile_tick(&lg);
        /* Claims go on while answers wait for their completion: a run
         * the intake does not claim is registered pending and claimed
         * later by a ledger_sweep, a second write of its row, where one claimed
         * at registration is written once (a burst of fast answers in
         * `make bench` zero: WAL 8.0 -> 7.4 kB a run, and a run's median
         * overhead 2 s -> 50 ms, as runs no longer wait pending behind
         * the burst). What the process holds stays bounded by the Kafka
         * thread's pause (RL_PIPELINE_HOLD_MAX). */
        /* The batcher's call in progress ends now, not at the join: an
         * upload or a poll may take longer than the grace. */
        if (stopping)
            ledger_batch_stopping(&lg);
        if (lg.db && stopping)
            ledger_release_ready(&lg);
        else if (lg.db)
            ledger_start_ready(&lg);
        room = ledger_model_room(&lg);
        if (stopping) {
            /* Not claimed yet: not ours to start. Their offsets stay
             * uncommitted and the events are consumed again. */
            while ((batch = rl_queue_take(&pl->intake, 0))) {
                while (batch) {
                    struct rl_item *next = batch->next;

                    atomic_fetch_sub(&pl->in_flight, 1);
                    rl_item_destroy(batch);
                    batch = next;
                }
            }
        } else if (lg.db && (batch = rl_queue_take(
                                 &pl->intake, ledger_intake_take(&lg, room)))) {
            /* Registered whether or not a slot is free: admission never
             * waits for the model, and the offsets move on. */
            ledger_claim_intake(&lg, batch, room);
            claimed = 1;
        }

        /* The sweeper runs on time even while a backlog keeps the intake
         * busy (leases are renewed by the renewer thread), and at once
         * when a slot frees while runs wait for one. */
        now = rl_clock_ms();
        if (lg.db && !stopping &&
            (now >= lg.next_sweep ||
             (lg.sweep_soon &&
              (room > 0 || (long)lg.ready_count < ledger_reserve_target(&lg)) &&
              now >= lg.last_sweep + SWEEP_SOON_MS))) {
            ledger_sweep(&lg);
            lg.next_sweep = now + lg.cfg->sweep_interval_ms;
        }
        if (atomic_load(&pl->abandon) && !lg.abandoned) {
            lg.abandoned = 1;
            ledger_drop_ready(&lg);
            for (struct rl_item *it = lg.live; it; it = it->live_next) {
                if (it->in_model)
                    rl_model_cancel(pl->model,
                                    it->in_lookup ? &it->lookup : &it->call);
            }
        }
        /* Done when nothing is left, or, once the grace period is over,
         * when no model call is outstanding: runs whose writes still wait
         * for PostgreSQL keep their lease until it expires, and then the
         * sweeper of another worker takes them over. */
        if (stopping && rl_queue_empty(&pl->results) &&
            rl_queue_empty(&pl->intake) && lg.in_model == 0 &&
            (lg.live_count == 0 || (atomic_load(&pl->abandon) &&
                                    lg.live_count == ledger_count(lg.retry))))
            break;
        if (!lg.db)
            wait_for_db(&lg);
        else if (!claimed)
            wait_for_work(&lg, lg.sweep_soon && room > 0 ? SWEEP_SOON_MS : 50,
                          lg.db != NULL);
    }
    /* Deferred writes that never found a connection: their leases expire
     * and the sweeper of another worker takes the runs over. */
    while (lg.retry) {
        struct rl_item *it = lg.retry;

        lg.retry = it->next;
        ledger_live_remove(&lg, it);
        atomic_fetch_sub(&pl->in_flight, 1);
        rl_item_destroy(it);
    }
    if (lg.renewer_started) {
        pthread_mutex_lock(&lg.live_lock);
        lg.renew_stop = 1;
        pthread_cond_signal(&lg.renew_wake);
        pthread_mutex_unlock(&lg.live_lock);
        pthread_join(lg.renewer, NULL);
    }
    /* After the renewer: it would count the released leases as lost. */
    release_leftovers(&lg);
    /* After the runs' leases are released: a batcher slow to stop never
     * keeps them. */
    ledger_batch_stop(&lg);
    pthread_cond_destroy(&lg.renew_wake);
    pthread_mutex_destroy(&lg.live_lock);
    rl_db_destroy(lg.db);
    ledger_positions_free(&lg);
    return NULL;
}
