/* `runledger receive`: the reference downstream consumer of the
 * notification topic. It shows the contract every receiver must follow:
 * apply each notification once per `idempotency-key` header (the relay
 * delivers at least once), refuse the same key with another payload
 * instead of overwriting, and move the Kafka offset only after the
 * effect is durable (schema/005_receiver.sql). @locality main thread */
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/db_receive.h"
#include "rl/err.h"
#include "rl/kafka.h"
#include "rl/log.h"

static volatile sig_atomic_t got_signal;

static void
on_signal(int sig)
{
    got_signal = sig;
}

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger receive\n"
"\n"
"Consumes RUNLEDGER_NOTIFY_TOPIC as consumer group RUNLEDGER_RECEIVER_GROUP_ID\n"
"and applies each notification exactly once into the ledger table\n"
"received_notifications, keyed by its idempotency-key header (INSERT ...\n"
"ON CONFLICT DO NOTHING). A redelivery with the same payload is counted as a\n"
"duplicate; the same key with another payload is refused, logged and kept in\n"
"receiver_conflicts, never overwritten. Offsets are committed only after\n"
"the row is durable. SIGTERM or SIGINT: commit and leave the group.\n";
/* clang-format on */

static rd_kafka_t *
receiver_new(const struct rl_config *cfg, char *errstr, size_t errstr_size)
{
    /* The consumer's at-least-once pattern: only offsets stored after the
     * insert committed are committed. */
    rd_kafka_conf_t *conf = rl_kafka_consumer_conf_new(
        cfg, cfg->receiver_group_id, errstr, errstr_size);

    if (!conf)
        return NULL;
    return rl_kafka_consumer_new(cfg, conf, cfg->notify_topic, errstr,
                                 errstr_size);
}

/* Applies one message. Returns 0 when its offset may be stored (applied,
 * duplicate, conflict, or unusable), RL_ERR_DB when it must be retried. */
static int
apply(struct rl_db *db, const rd_kafka_message_t *rkm, long long *counts)
{
    rd_kafka_headers_t *hdrs = NULL;
    const void *val = NULL;
    size_t len = 0;
    char key[512], errstr[512], *payload;
    enum rl_receive_status status;
    struct rl_log_ctx ctx = RL_LOG_CTX_INIT;
    int err;

    ctx.partition = rkm->partition;
    ctx.offset = rkm->offset;
    if (rd_kafka_message_headers(rkm, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(hdrs, "idempotency-key", &val, &len) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        !val || len == 0 || len >= sizeof(key)) {
        /* Not a Runledger notification: nothing to apply, and nothing
         * may stop the receiver. */
        counts[3]++;
        rl_log_warn(&ctx, "notification without an idempotency-key header: "
                          "skipped");
        return 0;
    }
    memcpy(key, val, len);
    key[len] = '\0';
    payload = malloc(rkm->len + 1);
    if (!payload)
        return RL_ERR_NOMEM;
    memcpy(payload, rkm->payload, rkm->len);
    payload[rkm->len] = '\0';
    err = rl_db_receive(
        db,
        &(struct rl_received){.idempotency_key = key,
                              .payload_json = payload,
                              .topic = rd_kafka_topic_name(rkm->rkt),
                              .partition = rkm->partition,
                              .offset = rkm->offset},
        &status, errstr, sizeof(errstr));
    free(payload);
    if (err == RL_ERR_INVALID) {
        counts[3]++;
        rl_log_warn(&ctx, "notification %s refused: %s", key, errstr);
        return 0;
    }
    if (err) {
        rl_log_warn(&ctx, "could not apply notification %s: %s; will retry",
                    key, errstr);
        return err;
    }
    counts[status]++;
    if (status == RL_RECEIVE_CONFLICT)
        rl_log_error(&ctx,
                     "notification %s conflicts with the one applied under "
                     "the same idempotency key: refused, kept in "
                     "receiver_conflicts",
                     key);
    return 0;
}

/* The row is durable: the next offset of its partition may be committed
 * (auto commit commits stored offsets only). */
static void
store_offset(rd_kafka_t *rk, const rd_kafka_message_t *rkm)
{
    rd_kafka_topic_partition_list_t *store =
        rd_kafka_topic_partition_list_new(1);
    rd_kafka_resp_err_t err;

    rd_kafka_topic_partition_list_add(store, rd_kafka_topic_name(rkm->rkt),
                                      rkm->partition)
        ->offset = rkm->offset + 1;
    err = rd_kafka_offsets_store(rk, store);
    if (err)
        rl_log_warn(NULL, "receive: could not store offset: %s",
                    rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(store);
}

int
rl_cmd_receive(int argc, char **argv)
{
    struct rl_config *cfg = NULL;
    struct rl_db *db = NULL;
    rd_kafka_t *rk = NULL;
    rd_kafka_message_t *pending = NULL;
    char errstr[512];
    long long counts[4] = {0, 0, 0, 0}; /* applied, dup, conflict, bad */
    struct sigaction sa;
    int rc = RL_EXIT_FAILURE;

    if (argc > 1 &&
        (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage_text, stdout);
        return RL_EXIT_OK;
    }
    if (argc > 1) {
        fputs(usage_text, stderr);
        return RL_EXIT_USAGE;
    }
    if (rl_cli_config_load("receive", &cfg) != RL_EXIT_OK)
        return RL_EXIT_USAGE;
    rl_cli_log_init(cfg);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    rk = receiver_new(cfg, errstr, sizeof(errstr));
    if (!rk) {
        rl_log_error(NULL, "receive: %s", errstr);
        goto done;
    }
    rl_log_info(NULL, "receiving %s as group %s", cfg->notify_topic,
                cfg->receiver_group_id);
    while (!got_signal) {
        rd_kafka_message_t *rkm = pending;

        if (!db) {
            db = rl_db_connect(cfg->database_url, errstr, sizeof(errstr));
            if (!db) {
                struct timespec ts = {0, 500000000L};

                rl_log_warn(NULL, "receive: %s", errstr);
                nanosleep(&ts, NULL);
                continue;
            }
        }
        if (!rkm)
            rkm = rd_kafka_consumer_poll(rk, 200);
        pending = NULL;
        if (!rkm)
            continue;
        if (rkm->err) {
            if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                rl_log_warn(NULL, "receive: %s", rd_kafka_message_errstr(rkm));
            rd_kafka_message_destroy(rkm);
            continue;
        }
        if (apply(db, rkm, counts) != 0) {
            /* Keep the message: it is applied before anything after it. */
            rl_db_destroy(db);
            db = NULL;
            pending = rkm;
            continue;
        }
        store_offset(rk, rkm);
        rd_kafka_message_destroy(rkm);
    }
    rc = RL_EXIT_OK;
done:
    if (pending)
        rd_kafka_message_destroy(pending);
    if (rk) {
        rd_kafka_consumer_close(rk);
        rd_kafka_destroy(rk);
    }
    rl_log_info(NULL,
                "receiver stopped: applied=%lld duplicates=%lld "
                "conflicts=%lld skipped=%lld",
                counts[0], counts[1], counts[2], counts[3]);
    rl_db_destroy(db);
    rl_config_destroy(cfg);
    return rc;
}
