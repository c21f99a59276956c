/* The outbox relay: a thread inside `runledger consume` and the
 * `runledger relay` process. It takes undelivered outbox rows in SKIP
 * LOCKED batches, produces them with the idempotent producer and records
 * them delivered only after every delivery report of the batch came back.
 * A crash between produce and record re-sends the batch: delivery is at
 * least once and every duplicate carries the same idempotency-key header
 * (<run_id>:<channel>), which is the receiver's deduplication key. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "http.h"
#include "pipeline.h"
#include "rl/clock.h"
#include "rl/db.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/kafka.h"
#include "rl/log.h"

struct batch_state {
    size_t acked;
    size_t failed;
    rd_kafka_resp_err_t last_err;
};

/* @locality relay thread (served by rd_kafka_flush) */
static void
relay_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    struct batch_state *bs = rkm->_private;

    (void)rk;
    (void)opaque;
    if (rkm->err) {
        bs->failed++;
        bs->last_err = rkm->err;
    } else {
        bs->acked++;
    }
}

static void
nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Produces one batch; returns the rows delivered or a negative rl_err. */
static int
relay_batch(rd_kafka_t *rk, struct rl_db *db, const struct rl_config *cfg,
            char *errstr, size_t errstr_size)
{
    struct rl_outbox_row *rows = NULL;
    size_t n = 0;
    struct batch_state bs = {0, 0, RD_KAFKA_RESP_ERR_NO_ERROR};
    double t0 = rl_clock_seconds(), t_locked, t_acked, t_done;
    int err;

    err = rl_db_outbox_lock_batch(db, cfg->relay_batch, &rows, &n, errstr,
                                  errstr_size);
    if (err)
        return err;
    if (n == 0) {
        rl_db_outbox_finish_batch(db, NULL, 0, 0, errstr, errstr_size);
        return 0;
    }
    t_locked = rl_clock_seconds();
    for (size_t i = 0; i < n; i++) {
        struct rl_outbox_row *row = &rows[i];
        rd_kafka_headers_t *hdrs = rd_kafka_headers_new(4);
        char key[RL_HEX_SIZE + 80];
        rd_kafka_resp_err_t kerr;

        snprintf(key, sizeof(key), "%s:%s", row->run_id, row->channel);
        rd_kafka_header_add(hdrs, "idempotency-key", -1, key, -1);
        rd_kafka_header_add(hdrs, "run_id", -1, row->run_id, -1);
        rd_kafka_header_add(hdrs, "channel", -1, row->channel, -1);
        rd_kafka_header_add(hdrs, "job", -1, row->job, -1);
        rd_kafka_header_add(hdrs, "tenant", -1, row->tenant, -1);
        do {
            kerr = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(cfg->notify_topic),
                RD_KAFKA_V_KEY(row->run_id, strlen(row->run_id)),
                RD_KAFKA_V_VALUE(row->payload, strlen(row->payload)),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(&bs),
                RD_KAFKA_V_END);
            if (kerr == RD_KAFKA_RESP_ERR__QUEUE_FULL)
                rd_kafka_poll(rk, 100);
        } while (kerr == RD_KAFKA_RESP_ERR__QUEUE_FULL);
        if (kerr) {
            rd_kafka_headers_destroy(hdrs);
            bs.failed++;
            bs.last_err = kerr;
        }
    }
    /* Every report must be in before a row may be marked delivered. */
    while (bs.acked + bs.failed < n)
        rd_kafka_poll(rk, 100);
    t_acked = rl_clock_seconds();
    if (rl_failpoint("relay_after_produce")) {
        bs.failed = n;
        bs.last_err = RD_KAFKA_RESP_ERR__FAIL;
    }
    if (bs.failed) {
        snprintf(errstr, errstr_size, "could not deliver %zu of %zu: %s",
                 bs.failed, n, rd_kafka_err2str(bs.last_err));
        rl_db_outbox_finish_batch(db, rows, n, 0, errstr, errstr_size);
        rl_db_outbox_rows_free(rows, n);
        return RL_ERR_KAFKA;
    }
    err = rl_db_outbox_finish_batch(db, rows, n, 1, errstr, errstr_size);
    rl_db_outbox_rows_free(rows, n);
    t_done = rl_clock_seconds();
    /* Rows queue behind a slow batch; say which step was slow. */
    if (t_done - t0 >= 1.0)
        rl_log_warn(NULL,
                    "relay: a batch of %zu rows took %.1f s (lock %.2f s, "
                    "broker acks %.2f s, record %.2f s)",
                    n, t_done - t0, t_locked - t0, t_acked - t_locked,
                    t_done - t_acked);
    return err ? err : (int)n;
}

/* The relay's vacuums of the outbox (see rl_db_outbox_vacuum_start): one
 * at a time, on a connection of their own, started every
 * cfg->relay_vacuum_rows delivered rows and watched at every turn of the
 * relay loop. A failed one only costs a warning: delivery goes on. */
struct vacuum_state {
    struct rl_db *db;
    size_t since;   /* rows delivered since the last one started */
    int running;    /* one was sent and has not finished */
    int denied;     /* this role may not vacuum the outbox */
    double started; /* rl_clock_seconds() when it was sent */
};

/* A vacuum that failed: say why and drop its connection (a new one is
 * made for the next). */
static void
vacuum_failed(struct vacuum_state *vs, const char *errstr)
{
    rl_log_warn(NULL, "relay: %s", errstr);
    rl_db_destroy(vs->db);
    vs->db = NULL;
}

static void
relay_vacuum(struct vacuum_state *vs, const struct rl_config *cfg,
             struct rl_http *http)
{
    char errstr[512];
    int rc;

    if (vs->running) {
        rc = rl_db_outbox_vacuum_poll(vs->db, errstr, sizeof(errstr));
        if (rc == 1)
            return;
        vs->running = 0;
        if (rc == 0) {
            double took = rl_clock_seconds() - vs->started;

            rl_http_outbox_vacuumed(http, took);
            if (took >= 1.0)
                rl_log_warn(NULL, "relay: vacuuming the outbox took %.1f s",
                            took);
        } else {
            vacuum_failed(vs, errstr);
        }
    }
    if (cfg->relay_vacuum_rows <= 0 || vs->denied ||
        vs->since < (size_t)cfg->relay_vacuum_rows)
        return;
    vs->since = 0;
    if (!vs->db) {
        vs->db =
            rl_db_connect_role(cfg, RL_DB_ROLE_VACUUM, errstr, sizeof(errstr));
        if (!vs->db) {
            rl_log_warn(NULL, "relay: vacuum connection: %s", errstr);
            return;
        }
    }
    rc = rl_db_outbox_vacuum_start(vs->db, errstr, sizeof(errstr));
    if (rc == 1) {
        vs->running = 1;
        vs->started = rl_clock_seconds();
    } else if (rc == 0) {
        vs->denied = 1;
        rl_log_info(NULL, "relay: this role owns neither the outbox nor the "
                          "database, so it cannot vacuum the outbox; "
                          "autovacuum alone keeps it (set "
                          "RUNLEDGER_RELAY_VACUUM_ROWS=0 to say so)");
    } else {
        vacuum_failed(vs, errstr);
    }
}

int
rl_relay_run(const struct rl_config *cfg, atomic_int *stop,
             struct rl_counters *counters, struct rl_http *http)
{
    char errstr[512];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    struct rl_db *db = NULL;
    long backoff = 100;
    struct vacuum_state vacuum = {NULL, 0, 0, 0, 0.0};

    conf = rl_kafka_conf_new(cfg, errstr, sizeof(errstr));
    if (!conf) {
        rl_log_error(NULL, "relay: %s", errstr);
        return 1;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, relay_dr_cb);
    rl_kafka_conf_set(conf, "linger.ms", "5", errstr, sizeof(errstr));
    rk = rl_kafka_producer_new(conf, 1, errstr, sizeof(errstr));
    if (!rk) {
        rl_log_error(NULL, "relay: could not create producer: %s", errstr);
        return 1;
    }
    rl_log_info(NULL, "relay producing outbox rows to %s", cfg->notify_topic);
    while (!atomic_load(stop)) {
        int n;
        double started;

        rl_http_relay_turned(http);
        if (!db) {
            db = rl_db_connect_role(cfg, RL_DB_ROLE_RELAY, errstr,
                                    sizeof(errstr));
            if (db && rl_db_outbox_listen(db, errstr, sizeof(errstr)) != 0) {
                rl_db_destroy(db);
                db = NULL;
            }
            if (!db) {
                rl_log_warn(NULL, "relay: %s", errstr);
                nap_ms(backoff);
                backoff = backoff < 5000 ? backoff * 2 : 5000;
                continue;
            }
            backoff = 100;
        }
        started = rl_clock_seconds();
        n = relay_batch(rk, db, cfg, errstr, sizeof(errstr));
        if (n < 0) {
            rl_log_warn(NULL, "relay: %s", errstr);
            if (n == RL_ERR_DB) {
                rl_db_destroy(db);
                db = NULL;
            }
            nap_ms(backoff);
            backoff = backoff < 5000 ? backoff * 2 : 5000;
            continue;
        }
        backoff = 100;
        if (counters)
            atomic_fetch_add(&counters->relayed, n);
        rl_http_relay_batch(http, (size_t)n, rl_clock_seconds() - started);
        vacuum.since += (size_t)n;
        relay_vacuum(&vacuum, cfg, http);
        /* Nothing pending: sleep until a statement queues rows (the
         * outbox's wake-up) or the interval passes, whichever is first. */
        if (n == 0 && rl_db_outbox_wait(db, cfg->relay_interval_ms, errstr,
                                        sizeof(errstr)) < 0) {
            rl_log_warn(NULL, "relay: %s", errstr);
            rl_db_destroy(db);
            db = NULL;
        }
    }
    rd_kafka_flush(rk, 5000);
    rd_kafka_destroy(rk);
    rl_db_destroy(db);
    rl_db_destroy(vacuum.db);
    return 0;
}

static volatile sig_atomic_t relay_signal;

static void
on_relay_signal(int sig)
{
    relay_signal = sig;
}

static atomic_int relay_stop;

static void *
watch_signal(void *arg)
{
    (void)arg;
    while (!relay_signal && !atomic_load(&relay_stop))
        nap_ms(50);
    atomic_store(&relay_stop, 1);
    return NULL;
}

int
rl_cmd_relay(int argc, char **argv)
{
    char errstr[512];
    struct rl_config *cfg;
    struct rl_counters counters;
    struct rl_http *http = NULL;
    struct sigaction sa;
    pthread_t tid;
    int rc;

    if (argc > 1) {
        FILE *out = strcmp(argv[1], "--help") == 0 ? stdout : stderr;

        fprintf(out, "usage: runledger relay [--help]\n\n"
                     "Delivers outbox rows to the notification topic; "
                     "configured by the environment\n(see `runledger "
                     "config`). Several relays may run at once.\n");
        return out == stdout ? RL_EXIT_OK : RL_EXIT_USAGE;
    }
    cfg = rl_config_load(errstr, sizeof(errstr));
    if (!cfg) {
        fprintf(stderr, "runledger relay: %s\n", errstr);
        return RL_EXIT_USAGE;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_relay_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    memset(&counters, 0, sizeof(counters));
    if (rl_http_start(cfg, "relay", &counters, NULL, &http, errstr,
                      sizeof(errstr)) != 0) {
        rl_log_error(NULL, "%s", errstr);
        rl_config_destroy(cfg);
        return RL_EXIT_FAILURE;
    }
    pthread_create(&tid, NULL, watch_signal, NULL);
    rc = rl_relay_run(cfg, &relay_stop, &counters, http);
    atomic_store(&relay_stop, 1);
    rl_http_stopping(http);
    pthread_join(tid, NULL);
    rl_http_stop(http);
    rl_config_destroy(cfg);
    return rc == 0 ? RL_EXIT_OK : RL_EXIT_FAILURE;
}
