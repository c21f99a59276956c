/* The outbox relay: a thread inside `runledger consume` and the
 * `runledger relay` process. It takes due outbox rows in SKIP LOCKED
 * batches (at most RUNLEDGER_RELAY_BATCH rows and about
 * RUNLEDGER_RELAY_BATCH_BYTES of notifications), produces them with the
 * idempotent producer and, once every delivery report of the batch came
 * back, records an outcome per row:
 *
 *   acknowledged  moved to outbox_delivered, never sent again, whatever
 *                 became of the other rows of its batch;
 *   refused for good (see refused_for_good)
 *                 dead-lettered to RUNLEDGER_DLQ_TOPIC (the headers of
 *                 rl/deadletter.h and the payload size, never the
 *                 payload) and moved to outbox_dead with the reason;
 *   anything else stays pending, due again after a backoff that doubles
 *                 with each failed delivery (RELAY_RETRY_BASE_MS up to
 *                 RELAY_RETRY_MAX_MS), so the rows behind it go first.
 *
 * A crash between produce and record re-sends the batch: delivery is at
 * least once and every duplicate carries the same idempotency-key header
 * (<run_id>:<channel>), which is the receiver's deduplication key. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "counters.h"
#include "http.h"
#include "relay.h"
#include "rl/clock.h"
#include "rl/db_conn.h"
#include "rl/db_outbox.h"
#include "rl/deadletter.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/kafka.h"
#include "rl/log.h"
#include "rl/trace.h"

/* A row that failed transiently is due again after 1 s, 2 s, 4 s ... and
 * at most 5 minutes. */
#define RELAY_RETRY_BASE_MS 1000L
#define RELAY_RETRY_MAX_MS 300000L

/* One message in flight: its delivery report lands here. */
struct row_report {
    size_t *pending; /* the batch's count of reports still to come */
    int done;
    rd_kafka_resp_err_t err;
};

/* @locality relay thread (served by rd_kafka_poll) */
static void
relay_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    struct row_report *rr = rkm->_private;

    (void)rk;
    (void)opaque;
    if (!rr)
        return;
    rr->err = rkm->err;
    rr->done = 1;
    (*rr->pending)--;
}

/* Errors that say this message can never be written, whatever is retried
 * or waited for, as opposed to the state of the broker, the topic, the
 * network or the producer (timeouts, leaders moving, missing topics,
 * authorisation, a full queue: an operator or time fixes those, and the
 * row is retried):
 *   MSG_SIZE_TOO_LARGE     the message exceeds the producer's
 *                          message.max.bytes (returned by producev) or the
 *                          topic's max.message.bytes (the broker's report)
 *   INVALID_MSG_SIZE       the broker found the message size invalid
 *   RECORD_LIST_TOO_LARGE  its record batch exceeds the segment size
 *   INVALID_MSG            the broker found the message corrupt (CRC)
 *   INVALID_RECORD         the broker refused the record itself (e.g. no
 *                          key on a compacted topic)
 * A broker's refusal covers a whole record batch, so rows batched with
 * the culprit share it: each row refused by the broker is sent once more
 * on its own (confirm_refusals) before it is set aside. */
static int
refused_for_good(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
        return 1;
    default:
        return 0;
    }
}

static void
nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Produces value to topic with hdrs (ownership passes to librdkafka on
 * success, else destroyed here), waiting while the queue is full. The
 * report goes to rr; a message producev refuses is reported at once. */
static void
produce_row(rd_kafka_t *rk, const char *topic, const char *key,
            const char *value, rd_kafka_headers_t *hdrs, struct row_report *rr)
{
    rd_kafka_resp_err_t kerr;

    rr->done = 0;
    rr->err = RD_KAFKA_RESP_ERR_NO_ERROR;
    (*rr->pending)++;
    do {
        kerr = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
            RD_KAFKA_V_VALUE((void *)value, value ? strlen(value) : 0),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs),
            RD_KAFKA_V_OPAQUE(rr), RD_KAFKA_V_END);
        if (kerr == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 100);
    } while (kerr == RD_KAFKA_RESP_ERR__QUEUE_FULL);
    if (kerr) {
        rd_kafka_headers_destroy(hdrs);
        rr->err = kerr;
        rr->done = 1;
        (*rr->pending)--;
    }
}

static rd_kafka_headers_t *
row_headers(const struct rl_outbox_row *row)
{
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(8);
    char key[RL_HEX_SIZE + 80];

    snprintf(key, sizeof(key), "%s:%s", row->run_id, row->channel);
    rd_kafka_header_add(hdrs, "idempotency-key", -1, key, -1);
    rd_kafka_header_add(hdrs, "run_id", -1, row->run_id, -1);
    rd_kafka_header_add(hdrs, "channel", -1, row->channel, -1);
    rd_kafka_header_add(hdrs, "job", -1, row->job, -1);
    rd_kafka_header_add(hdrs, "tenant", -1, row->tenant, -1);
    /* A child of the run span that completed the run: its trace is the
     * event's (or the one derived from run_id), its parent id the span id
     * the epoch names (rl_trace_run_span_id), the same in every relay. */
    {
        struct rl_trace_ctx tc;
        char span[RL_TRACE_SPAN_ID_SIZE], tp[RL_TRACEPARENT_SIZE];

        rl_trace_for_run(row->run_id, row->traceparent, &tc);
        rl_trace_run_span_id(row->run_id, row->lease_epoch, span);
        rl_trace_format(tc.trace_id, span, tc.flags, tp);
        rd_kafka_header_add(hdrs, "traceparent", -1, tp, -1);
    }
    return hdrs;
}

/* How long a stopping relay still waits for the broker's reports before
 * it purges what is unacknowledged (reported failed at once: the rows stay
 * pending, and what the broker did take is delivered again with the same
 * idempotency keys). */
#define RELAY_STOP_WAIT_MS 2000

/* Waits for every report of the batch: the producer gives each message
 * up after its message timeout, and a stop purges them sooner. */
static void
wait_reports(rd_kafka_t *rk, const size_t *pending, atomic_int *stop)
{
    int64_t purge_at = -1;

    while (*pending > 0) {
        rd_kafka_poll(rk, 100);
        if (!stop || !atomic_load(stop) || purge_at == INT64_MAX)
            continue;
        if (purge_at < 0) {
            purge_at = rl_clock_ms() + RELAY_STOP_WAIT_MS;
        } else if (rl_clock_ms() >= purge_at) {
            rl_log_warn(NULL,
                        "relay: stopping with %zu notifications not "
                        "acknowledged; their rows stay pending",
                        *pending);
            rd_kafka_purge(rk,
                           RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
            purge_at = INT64_MAX;
        }
    }
}

/* Sends each row the broker refused for good once more, alone, and waits
 * for its report: the refusal of a record batch names every row in it,
 * and only the culprit is refused again. */
static void
confirm_refusals(rd_kafka_t *rk, const struct rl_config *cfg,
                 const struct rl_outbox_row *rows, size_t n,
                 struct row_report *rr, const int *local, size_t *pending,
                 atomic_int *stop)
{
    for (size_t i = 0; i < n; i++) {
        if (local[i] || !refused_for_good(rr[i].err))
            continue;
        produce_row(rk, cfg->notify_topic, rows[i].run_id, rows[i].payload,
                    row_headers(&rows[i]), &rr[i]);
        wait_reports(rk, pending, stop);
    }
}

/* The dead letter of a refused row: the header set of rl/deadletter.h
 * with the row's identity and the reason, its payload's size in
 * payload_bytes, no value (the payload is what was refused; it stays in
 * outbox_dead). */
static void
produce_dead_letter(rd_kafka_t *rk, const struct rl_config *cfg,
                    const struct rl_outbox_row *row, const char *reason,
                    struct row_report *rr)
{
    struct rl_deadletter fields = {
        .reason = reason,
        .source = RL_DEADLETTER_OUTBOX,
        .value_kind = RL_DEADLETTER_VALUE_NONE,
        .source_partition = -1,
        .source_offset = -1,
        .run_id = row->run_id,
        .job = row->job,
        .tenant = row->tenant,
        .channel = row->channel,
    };
    rd_kafka_headers_t *hdrs = rl_deadletter_headers_new(&fields);
    char size[32];

    snprintf(size, sizeof(size), "%zu", strlen(row->payload));
    rd_kafka_header_add(hdrs, "payload_bytes", -1, size, -1);
    produce_row(rk, cfg->dlq_topic, row->run_id, NULL, hdrs, rr);
}

/* How long the rows of a batch are leased: RUNLEDGER_RELAY_LEASE_SECONDS,
 * with the producer giving up on a message after two thirds of it, so
 * every report
 * is in while the lease holds; an operator's own message timeout
 * (RUNLEDGER_KAFKA_message.timeout.ms) lengthens the lease instead. A
 * lease that ran out under a batch still waiting only means another
 * relay sends its rows too, with the same idempotency keys. */
static long
relay_lease_ms(const struct rl_config *cfg, rd_kafka_conf_t *conf)
{
    long lease = (long)cfg->relay_lease_seconds * 1000L;
    char value[32], errstr[256];
    size_t size = sizeof(value);
    int own = 0;

    for (size_t i = 0; i + 1 < cfg->kafka_props_count; i += 2) {
        if (strcmp(cfg->kafka_props[i], "message.timeout.ms") == 0 ||
            strcmp(cfg->kafka_props[i], "delivery.timeout.ms") == 0)
            own = 1;
    }
    if (own && rd_kafka_conf_get(conf, "message.timeout.ms", value, &size) ==
                   RD_KAFKA_CONF_OK) {
        long timeout = strtol(value, NULL, 10);

        if (timeout / 2 * 3 > lease)
            lease = timeout / 2 * 3;
        return lease;
    }
    snprintf(value, sizeof(value), "%ld", lease / 3 * 2);
    if (rl_kafka_conf_set(conf, "message.timeout.ms", value, errstr,
                          sizeof(errstr)) != 0)
        rl_log_warn(NULL, "relay: %s", errstr);
    return lease;
}

struct batch_result {
    size_t rows;      /* locked */
    int full;         /* the batch reached its rows or bytes bound */
    size_t delivered; /* acknowledged */
    size_t dead;      /* refused for good and dead-lettered */
    size_t retried;   /* left pending with a backoff */
};

/* Produces one batch and records an outcome per row. Returns 0 (counts
 * in *br) or a negative rl_err. */
static int
relay_batch(rd_kafka_t *rk, struct rl_db *db, const struct rl_config *cfg,
            long lease_ms, atomic_int *stop, struct rl_http *http,
            struct batch_result *br, char *errstr, size_t errstr_size)
{
    struct rl_outbox_row *rows = NULL;
    struct row_report *rr = NULL, *dl = NULL;
    struct rl_outbox_outcome *oc = NULL;
    int *local = NULL;
    size_t n = 0, pending = 0;
    rd_kafka_resp_err_t last_err = RD_KAFKA_RESP_ERR_NO_ERROR;
    double t0 = rl_clock_seconds(), t_locked, t_acked, t_done;
    int err;

    memset(br, 0, sizeof(*br));
    err = rl_db_outbox_lock_batch_bytes(db, cfg->relay_batch,
                                        cfg->relay_batch_bytes, lease_ms, &rows,
                                        &n, &br->full, errstr, errstr_size);
    if (err)
        return err;
    if (n == 0)
        return 0;
    rr = calloc(n, sizeof(*rr));
    dl = calloc(n, sizeof(*dl));
    oc = calloc(n, sizeof(*oc));
    local = calloc(n, sizeof(*local));
    if (!rr || !dl || !oc || !local) {
        /* The rows are due again when their lease ends. */
        rl_set_err(errstr, errstr_size,
                   "could not relay outbox rows: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    t_locked = rl_clock_seconds();
    for (size_t i = 0; i < n; i++) {
        rr[i].pending = &pending;
        dl[i].pending = &pending;
        produce_row(rk, cfg->notify_topic, rows[i].run_id, rows[i].payload,
                    row_headers(&rows[i]), &rr[i]);
        local[i] = rr[i].done; /* refused by producev itself */
    }
    /* Every report must be in before any row's outcome is recorded. */
    wait_reports(rk, &pending, stop);
    confirm_refusals(rk, cfg, rows, n, rr, local, &pending, stop);
    t_acked = rl_clock_seconds();
    if (rl_failpoint("relay_after_produce")) {
        for (size_t i = 0; i < n; i++)
            rr[i].err = RD_KAFKA_RESP_ERR__FAIL;
    }
    for (size_t i = 0; i < n; i++) {
        if (refused_for_good(rr[i].err)) {
            snprintf(oc[i].reason, sizeof(oc[i].reason), "%s: %s%s",
                     rd_kafka_err2name(rr[i].err), rd_kafka_err2str(rr[i].err),
                     local[i] ? " (refused by the producer)" : "");
            produce_dead_letter(rk, cfg, &rows[i], oc[i].reason, &dl[i]);
        }
    }
    wait_reports(rk, &pending, stop);
    for (size_t i = 0; i < n; i++) {
        struct rl_log_ctx ctx = RL_LOG_CTX_INIT;

        ctx.run_id = rows[i].run_id;
        ctx.tenant = rows[i].tenant;
        ctx.job = rows[i].job;
        ctx.topic = cfg->notify_topic;
        if (rr[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            oc[i].fate = RL_OUTBOX_DELIVERED;
            br->delivered++;
        } else if (refused_for_good(rr[i].err) &&
                   dl[i].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            oc[i].fate = RL_OUTBOX_DEAD;
            br->dead++;
            rl_log_warn(&ctx,
                        "relay: notification on channel %s (%zu bytes) "
                        "refused for good, dead-lettered to %s: %s",
                        rows[i].channel, strlen(rows[i].payload),
                        cfg->dlq_topic, oc[i].reason);
        } else {
            oc[i].fate = RL_OUTBOX_RETRY;
            br->retried++;
            if (refused_for_good(rr[i].err)) {
                last_err = dl[i].err;
                snprintf(oc[i].reason, sizeof(oc[i].reason),
                         "dead letter to %s: %s: %s", cfg->dlq_topic,
                         rd_kafka_err2name(dl[i].err),
                         rd_kafka_err2str(dl[i].err));
            } else {
                last_err = rr[i].err;
                snprintf(oc[i].reason, sizeof(oc[i].reason), "%s: %s",
                         rd_kafka_err2name(rr[i].err),
                         rd_kafka_err2str(rr[i].err));
            }
        }
    }
    err = rl_db_outbox_finish_rows(db, rows, n, oc, RELAY_RETRY_BASE_MS,
                                   RELAY_RETRY_MAX_MS, errstr, errstr_size);
    if (err)
        goto done;
    br->rows = n;
    for (size_t i = 0; i < n; i++) {
        if (oc[i].fate == RL_OUTBOX_DEAD)
            rl_http_outbox_dead_lettered(http, rd_kafka_err2name(rr[i].err));
    }
    if (br->retried > 0)
        rl_log_warn(NULL,
                    "relay: could not deliver %zu of %zu rows, each due "
                    "again after a backoff: %s",
                    br->retried, n, rd_kafka_err2str(last_err));
    t_done = rl_clock_seconds();
    /* Rows queue behind a slow batch; say which step was slow. */
    if (t_done - t0 >= 1.0)
        rl_log_warn(NULL,
                    "relay: a batch of %zu rows took %.1f s (lock %.2f s, "
                    "broker acks %.2f s, record %.2f s)",
                    n, t_done - t0, t_locked - t0, t_acked - t_locked,
                    t_done - t_acked);

done:
    rl_db_outbox_rows_free(rows, n);
    free(rr);
    free(dl);
    free(oc);
    free(local);
    return err;
}

/* The relay's vacuums of the outbox (see rl_db_outbox_vacuum_start): one
 * at a time, on a connection of their own, started every
 * cfg->relay_vacuum_rows delivered rows, and at least every
 * RELAY_VACUUM_EVERY_S while rows are delivered, and watched at every
 * turn of the relay loop. A failed one only costs a warning: delivery goes
 * on.
 *
 * The time bound is for light load. A delivered row leaves its entry at
 * the head of outbox_due_idx, before every pending row, and each read of
 * a batch steps over all of them until a vacuum removes them: at 50 runs
 * a second, 20,000 rows took 200 s to gather and each read cost 0.83 ms
 * of PostgreSQL's time (28 % of it), against 0.04 ms with a vacuum every
 * 200 rows. A vacuum of an outbox that small costs about a millisecond. */
#define RELAY_VACUUM_EVERY_S 1.0

struct vacuum_state {
    struct rl_db *db;
    size_t since;   /* rows delivered since the last one started */
    int running;    /* one was sent and has not finished */
    int denied;     /* this role may not vacuum the outbox */
    double started; /* rl_clock_seconds() when the last one was sent */
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
    if (cfg->relay_vacuum_rows <= 0 || vs->denied || vs->since == 0 ||
        (vs->since < (size_t)cfg->relay_vacuum_rows &&
         rl_clock_seconds() - vs->started < RELAY_VACUUM_EVERY_S))
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
                          "database (nor holds MAINTAIN on the outbox), so "
                          "it cannot vacuum the outbox; autovacuum alone "
                          "keeps it (set RUNLEDGER_RELAY_VACUUM_ROWS=0 to "
                          "say so)");
    } else {
        vacuum_failed(vs, errstr);
    }
}

/* The relay's idempotent producer, and in *lease_ms how long a batch's
 * rows are leased for its message timeout; NULL (and errstr) on
 * failure. */
static rd_kafka_t *
relay_producer_new(const struct rl_config *cfg, long *lease_ms, char *errstr,
                   size_t errstr_size)
{
    rd_kafka_conf_t *conf = rl_kafka_conf_new(cfg, errstr, errstr_size);
    rd_kafka_t *rk;

    if (!conf)
        return NULL;
    rd_kafka_conf_set_dr_msg_cb(conf, relay_dr_cb);
    rl_kafka_conf_set(conf, "linger.ms", "5", errstr, errstr_size);
    *lease_ms = relay_lease_ms(cfg, conf);
    rk = rl_kafka_producer_new(conf, 1, errstr, errstr_size);
    if (!rk) {
        char reason[384];

        snprintf(reason, sizeof(reason), "%s", errstr);
        rl_set_err(errstr, errstr_size, "could not create producer: %s",
                   reason);
    }
    return rk;
}

/* An idempotent producer can fail for good: librdkafka before 2.3.0 turns
 * a NOT_LEADER_FOR_PARTITION after a partition leader change into a fatal
 * OUT_OF_ORDER_SEQUENCE_NUMBER, seen with a broker of a three-node cluster
 * killed. Such a producer refuses every further message, and the relay
 * would leave every notification pending until the process restarts. Its
 * rows are due again after their backoff; a new producer (a new producer
 * id) sends them, at least once like any redelivery. Every report of the
 * last batch is in, so nothing waits on the old one. Returns the producer
 * to go on with: rk, a new one, or NULL when none could be made. */
static rd_kafka_t *
renew_if_fatal(rd_kafka_t *rk, const struct rl_config *cfg)
{
    char reason[512], errstr[512];
    rd_kafka_resp_err_t err = rd_kafka_fatal_error(rk, reason, sizeof(reason));
    rd_kafka_t *fresh;
    long lease_ms;

    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        return rk;
    rl_log_error(NULL,
                 "relay: the producer failed for good (%s: %s), starting a "
                 "new producer",
                 rd_kafka_err2name(err), reason);
    rd_kafka_destroy(rk);
    fresh = relay_producer_new(cfg, &lease_ms, errstr, sizeof(errstr));
    if (!fresh)
        rl_log_error(NULL, "relay: %s", errstr);
    return fresh;
}

int
rl_relay_run(const struct rl_config *cfg, atomic_int *stop,
             struct rl_counters *counters, struct rl_http *http)
{
    char errstr[512];
    rd_kafka_t *rk;
    struct rl_db *db = NULL;
    long backoff = 100;
    long lease_ms;
    struct vacuum_state vacuum = {NULL, 0, 0, 0, rl_clock_seconds()};

    rk = relay_producer_new(cfg, &lease_ms, errstr, sizeof(errstr));
    if (!rk) {
        rl_log_error(NULL, "relay: %s", errstr);
        return 1;
    }
    rl_log_info(NULL, "relay producing outbox rows to %s", cfg->notify_topic);
    while (!atomic_load(stop)) {
        struct batch_result br;
        double started;
        int err;

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
        /* The state librdkafka before 2.3.0 can reach after a partition
         * leader change, for fault tests. */
        if (rl_failpoint("relay_producer_fatal"))
            rd_kafka_test_fatal_error(
                rk, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                "failpoint relay_producer_fatal");
        started = rl_clock_seconds();
        err = relay_batch(rk, db, cfg, lease_ms, stop, http, &br, errstr,
                          sizeof(errstr));
        rk = renew_if_fatal(rk, cfg);
        if (!rk)
            break;
        if (err < 0) {
            rl_log_warn(NULL, "relay: %s", errstr);
            if (err == RL_ERR_DB) {
                rl_db_destroy(db);
                db = NULL;
            }
            nap_ms(backoff);
            backoff = backoff < 5000 ? backoff * 2 : 5000;
            continue;
        }
        backoff = 100;
        if (counters)
            atomic_fetch_add(&counters->relayed, (long long)br.delivered);
        rl_http_relay_batch(http, br.delivered, rl_clock_seconds() - started);
        vacuum.since += br.rows;
        relay_vacuum(&vacuum, cfg, http);
        /* A batch short of both its bounds (rows and bytes) took every
         * due row no other relay holds: sleep until a statement queues
         * rows (the outbox's wake-up) or the interval passes, whichever
         * is first. Rows committed during the batch have their wake-up
         * waiting already, so the wait returns at once; reading again to
         * find nothing would cost a statement and a commit a batch at
         * light load. */
        if (!br.full && rl_db_outbox_wait(db, cfg->relay_interval_ms, errstr,
                                          sizeof(errstr)) < 0) {
            rl_log_warn(NULL, "relay: %s", errstr);
            rl_db_destroy(db);
            db = NULL;
        }
    }
    if (!rk) {
        rl_db_destroy(db);
        rl_db_destroy(vacuum.db);
        return 1;
    }
    /* Nothing is in flight between batches: what is left is a dead
     * letter's report at most. */
    rd_kafka_flush(rk, RELAY_STOP_WAIT_MS);
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
    rl_thread_name("rl-signals");
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
