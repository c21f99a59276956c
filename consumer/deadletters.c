/* The dead-letter producer of `runledger consume`: an event or run that
 * cannot go on is produced to RUNLEDGER_DLQ_TOPIC with the headers of
 * rl/deadletter.h, and its offset is done only once the broker has it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deadletters.h"
#include "http.h"
#include "item.h"
#include "pipeline.h"
#include "rl/clock.h"
#include "rl/deadletter.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/kafka.h"
#include "rl/log.h"

/* A dead letter kept until the broker acknowledges it. Its event's
 * offset is done only then: a dead letter the broker does not take
 * (missing topic, ACL denial, broker away past message.timeout.ms) is
 * produced again after a backoff, and meanwhile the partition's
 * committed offset stays before it, /readyz answers 503 and
 * runledger_dead_letters_undelivered counts it. */
struct rl_dead_letter {
    struct rl_item *item; /* finished on acknowledgement; may be NULL */
    char *value;          /* a copy of what is produced */
    size_t len;
    rd_kafka_headers_t *hdrs; /* copied for every try */
    int failures;
    int64_t due_ms; /* rl_clock_ms() of the next try */
    struct rl_log_ctx ctx;
    struct rl_dead_letter *next;
};

#define DEAD_LETTER_RETRY_BASE_MS 500
#define DEAD_LETTER_RETRY_MAX_MS 30000

static void
dead_letter_destroy(struct rl_dead_letter *dl)
{
    if (!dl)
        return;
    if (dl->hdrs)
        rd_kafka_headers_destroy(dl->hdrs);
    free(dl->value);
    free(dl);
}

static void dead_letter_send(struct rl_pipeline *pl, struct rl_dead_letter *dl);

/* The broker or the producer did not take dl: say so and queue it for
 * another try after a backoff. @locality any thread */
static void
dead_letter_failed(struct rl_pipeline *pl, struct rl_dead_letter *dl,
                   rd_kafka_resp_err_t err)
{
    long wait = DEAD_LETTER_RETRY_BASE_MS;
    long count;
    char reason[160];

    for (int i = 0; i < dl->failures && wait < DEAD_LETTER_RETRY_MAX_MS; i++)
        wait *= 2;
    if (wait > DEAD_LETTER_RETRY_MAX_MS)
        wait = DEAD_LETTER_RETRY_MAX_MS;
    snprintf(reason, sizeof(reason), "could not write dead letter to %s: %s",
             pl->cfg->dlq_topic, rd_kafka_err2str(err));
    pthread_mutex_lock(&pl->dlq_lock);
    if (dl->failures == 0)
        pl->dlq_undelivered++;
    dl->failures++;
    dl->due_ms = rl_clock_ms() + wait;
    dl->next = pl->dlq_retry;
    pl->dlq_retry = dl;
    count = pl->dlq_undelivered;
    pthread_mutex_unlock(&pl->dlq_lock);
    rl_log_warn(&dl->ctx,
                "%s (try %d); trying again in %ld ms, and the offsets of "
                "its partition are not committed past it meanwhile",
                reason, dl->failures, wait);
    rl_http_dead_letters_undelivered(pl->http, count, reason);
}

/* Dead-letter delivery report: the item's offset is done only once the
 * dead letter is durable on the broker. @locality kafka thread (served by
 * rd_kafka_poll on the dead-letter producer) */
void
rl_pipeline_dlq_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm,
                      void *opaque)
{
    struct rl_pipeline *pl = opaque;
    struct rl_dead_letter *dl = rkm->_private;

    (void)rk;
    if (!dl)
        return;
    if (rkm->err) {
        dead_letter_failed(pl, dl, rkm->err);
        return;
    }
    if (dl->failures > 0) {
        long count;

        pthread_mutex_lock(&pl->dlq_lock);
        count = --pl->dlq_undelivered;
        pthread_mutex_unlock(&pl->dlq_lock);
        rl_log_info(&dl->ctx, "dead letter written to %s after %d failed tries",
                    pl->cfg->dlq_topic, dl->failures);
        rl_http_dead_letters_undelivered(pl->http, count,
                                         count > 0 ? NULL : "");
    }
    atomic_fetch_add(&pl->counters.dead_letters, 1);
    if (pl->http) {
        rd_kafka_headers_t *hdrs = NULL;
        const void *val = NULL;
        size_t len = 0;
        char reason[64] = "unspecified";

        if (rd_kafka_message_headers(rkm, &hdrs) == 0 &&
            rd_kafka_header_get_last(hdrs, "reason", &val, &len) == 0 && val)
            snprintf(reason, sizeof(reason), "%.*s", (int)len,
                     (const char *)val);
        rl_http_dead_letter(pl->http, reason);
    }
    if (dl->item)
        rl_pipeline_finish(pl, dl->item);
    dl->item = NULL;
    dead_letter_destroy(dl);
}

/* Produces dl (again). @locality any thread */
static void
dead_letter_send(struct rl_pipeline *pl, struct rl_dead_letter *dl)
{
    rd_kafka_headers_t *hdrs = rd_kafka_headers_copy(dl->hdrs);
    rd_kafka_resp_err_t err;

    /* Read-locked: the Kafka thread may swap in a new producer. */
    pthread_rwlock_rdlock(&pl->dlq_swap);
    err = rd_kafka_producev(pl->dlq, RD_KAFKA_V_TOPIC(pl->cfg->dlq_topic),
                            RD_KAFKA_V_VALUE(dl->value, dl->len),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                            RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(dl),
                            RD_KAFKA_V_END);
    pthread_rwlock_unlock(&pl->dlq_swap);
    if (err) {
        rd_kafka_headers_destroy(hdrs);
        dead_letter_failed(pl, dl, err);
    }
}

/* Sends the dead letters whose next try is due; at shutdown past the
 * grace period (abandon), drops them instead: their events stay
 * uncommitted and are consumed again after a restart. @locality kafka
 * thread */
void
rl_pipeline_retry_dead_letters(struct rl_pipeline *pl, int abandon)
{
    struct rl_dead_letter *due = NULL, **link;
    int64_t now = rl_clock_ms();
    long dropped = 0, count;

    pthread_mutex_lock(&pl->dlq_lock);
    link = &pl->dlq_retry;
    while (*link) {
        struct rl_dead_letter *dl = *link;

        if (abandon || dl->due_ms <= now) {
            *link = dl->next;
            dl->next = due;
            due = dl;
        } else {
            link = &dl->next;
        }
    }
    pthread_mutex_unlock(&pl->dlq_lock);
    while (due) {
        struct rl_dead_letter *dl = due;

        due = dl->next;
        dl->next = NULL;
        if (!abandon) {
            dead_letter_send(pl, dl);
            continue;
        }
        if (dl->item) {
            atomic_fetch_sub(&pl->in_flight, 1);
            rl_item_destroy(dl->item);
        }
        dead_letter_destroy(dl);
        dropped++;
    }
    if (dropped > 0) {
        pthread_mutex_lock(&pl->dlq_lock);
        pl->dlq_undelivered -= dropped;
        count = pl->dlq_undelivered;
        pthread_mutex_unlock(&pl->dlq_lock);
        rl_log_error(NULL,
                     "abandoning %ld undelivered dead letters: their events "
                     "are not committed and are consumed again after a "
                     "restart",
                     dropped);
        rl_http_dead_letters_undelivered(pl->http, count, "");
    }
}

/* The value of item's dead letter: the original event when the process
 * read it, else (a run the sweeper claimed) the event rebuilt from the
 * ledger row the claim returned. Sets *kind; *owned is a malloc'd rebuilt
 * value the caller frees. */
static const char *
dead_letter_value(const struct rl_item *item, size_t *len,
                  enum rl_deadletter_value *kind, char **owned)
{
    char errstr[256];

    *owned = NULL;
    *len = 0;
    *kind = RL_DEADLETTER_VALUE_NONE;
    if (!item)
        return NULL;
    if (item->value) {
        *kind = RL_DEADLETTER_VALUE_EVENT;
        *len = item->value_len;
        return item->value;
    }
    *owned = rl_deadletter_event_rebuild(
        item->job, item->tenant, item->scheduled_at, item->version,
        item->request_json, item->raw_input, len, errstr, sizeof(errstr));
    if (!*owned) {
        struct rl_log_ctx ctx = RL_LOG_CTX_INIT;

        ctx.run_id = item->run_id;
        rl_log_warn(&ctx, "dead letter without its event: %s", errstr);
        return NULL;
    }
    *kind = RL_DEADLETTER_VALUE_REBUILT;
    return *owned;
}

void
rl_pipeline_dead_letter(struct rl_pipeline *pl, struct rl_item *item,
                        enum rl_deadletter_source source, const char *reason,
                        const char *detail)
{
    struct rl_dead_letter *dl = calloc(1, sizeof(*dl));
    struct rl_deadletter fields = {0};
    rd_kafka_headers_t *hdrs;
    char orig[24], *owned = NULL;
    const char *value;
    size_t len;
    const size_t cap = 900000; /* below the broker's default message size */
    struct rl_log_ctx ctx = RL_LOG_CTX_INIT;

    value = dead_letter_value(item, &len, &fields.value_kind, &owned);
    fields.reason = reason;
    fields.detail = detail;
    fields.source = source;
    fields.source_partition = -1;
    fields.source_offset = -1;
    if (item && item->run_id[0]) {
        fields.run_id = item->run_id;
        ctx.run_id = item->run_id;
    }
    if (item) {
        fields.job = item->ev ? item->ev->job : item->job;
        fields.tenant = item->ev ? item->ev->tenant : item->tenant;
    }
    if (item && item->src.from_kafka) {
        fields.source_topic = pl->cfg->topic;
        fields.source_partition = item->src.partition;
        fields.source_offset = item->src.offset;
        ctx.topic = pl->cfg->topic;
        ctx.partition = item->src.partition;
        ctx.offset = item->src.offset;
    } else if (item && item->origin_topic) {
        /* A swept run: where its event was read, as the ledger stored it. */
        fields.source_topic = item->origin_topic;
        fields.source_partition = item->origin_partition;
        fields.source_offset = item->origin_offset;
    }
    hdrs = rl_deadletter_headers_new(&fields);
    if (len > cap) {
        snprintf(orig, sizeof(orig), "%zu", len);
        rd_kafka_header_add(hdrs, "truncated_from", -1, orig, -1);
        len = cap;
    }
    rl_log_warn(&ctx, "dead-lettering %s: %s%s%s",
                source == RL_DEADLETTER_RUN ? "run" : "event", reason,
                detail ? ": " : "", detail ? detail : "");
    if (dl)
        dl->value = malloc(len + 1);
    if (!dl || !dl->value) {
        rd_kafka_headers_destroy(hdrs);
        free(dl);
        free(owned);
        rl_log_error(&ctx, "could not produce dead letter: out of memory");
        if (item) {
            atomic_fetch_sub(&pl->in_flight, 1);
            rl_item_destroy(item);
        }
        return;
    }
    if (len > 0)
        memcpy(dl->value, value, len);
    free(owned);
    dl->len = len;
    if (item) {
        item->dead_letter_bytes = len + 1;
        rl_item_recount(item);
    }
    dl->item = item;
    dl->hdrs = hdrs;
    dl->ctx = ctx;
    /* The context points into the item, which lives as long as dl. */
    dead_letter_send(pl, dl);
}

rd_kafka_t *
rl_pipeline_dlq_new(struct rl_pipeline *pl, char *errstr, size_t errstr_size)
{
    rd_kafka_conf_t *conf = rl_kafka_conf_new(pl->cfg, errstr, errstr_size);

    if (!conf)
        return NULL;
    rd_kafka_conf_set_dr_msg_cb(conf, rl_pipeline_dlq_dr_cb);
    rd_kafka_conf_set_opaque(conf, pl);
    return rl_kafka_producer_new(conf, 1, errstr, errstr_size);
}

/* How long the producer that failed for good is polled for the reports
 * of its purged dead letters before it goes. */
#define DLQ_PURGE_WAIT_MS 2000

/* An idempotent producer can fail for good: librdkafka before 2.3.0 turns
 * a NOT_LEADER_FOR_PARTITION after a partition leader change into a fatal
 * OUT_OF_ORDER_SEQUENCE_NUMBER. Such a producer refuses every dead letter,
 * which would hold the offsets of their partitions back until the process
 * restarts. A new producer takes its place; what the old one held is
 * purged, reported failed, and produced again by the new one after the
 * backoff (at least once, like any retry). @locality kafka thread */
void
rl_pipeline_dlq_renew_if_fatal(struct rl_pipeline *pl)
{
    char reason[512], errstr[512];
    rd_kafka_resp_err_t err;
    rd_kafka_t *fresh, *old;
    int64_t until;

    if (rl_failpoint("dlq_producer_fatal"))
        rd_kafka_test_fatal_error(
            pl->dlq, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
            "failpoint dlq_producer_fatal");
    err = rd_kafka_fatal_error(pl->dlq, reason, sizeof(reason));
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    fresh = rl_pipeline_dlq_new(pl, errstr, sizeof(errstr));
    if (!fresh) {
        /* Tried again at the next turn. */
        rl_log_error(NULL,
                     "the dead-letter producer failed for good (%s: %s) and "
                     "no new one could be made: %s",
                     rd_kafka_err2name(err), reason, errstr);
        return;
    }
    rl_log_error(NULL,
                 "the dead-letter producer failed for good (%s: %s), "
                 "starting a new producer",
                 rd_kafka_err2name(err), reason);
    pthread_rwlock_wrlock(&pl->dlq_swap);
    old = pl->dlq;
    pl->dlq = fresh;
    pthread_rwlock_unlock(&pl->dlq_swap);
    rd_kafka_purge(old, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    until = rl_clock_ms() + DLQ_PURGE_WAIT_MS;
    while (rd_kafka_outq_len(old) > 0 && rl_clock_ms() < until)
        rd_kafka_poll(old, 100);
    rd_kafka_destroy(old);
}
