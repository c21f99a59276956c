/* dlq.c: reading the dead-letter topic and replaying its events, for
 * `runledger dlq` (cmd_dlq.c) and the console's dead-letters page alike,
 * so both list and replay exactly the same way (rl/cli dlq.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlq.h"
#include "publish.h"
#include "rl/clock.h"
#include "rl/config.h"
#include "rl/err.h"
#include "rl/event.h"
#include "rl/kafka.h"

/* How long one read of the topic may go without a message before it gives
 * up: the end it reads to was known when it started. */
#define DLQ_IDLE_TIMEOUT_MS 30000
#define DLQ_META_TIMEOUT_MS 10000

void
rl_cli_dlq_header(const rd_kafka_message_t *rkm, const char *name, char *buf,
                  size_t size)
{
    rd_kafka_headers_t *hdrs = NULL;
    const void *val = NULL;
    size_t len = 0;

    buf[0] = '\0';
    if (rd_kafka_message_headers(rkm, &hdrs) != 0 ||
        rd_kafka_header_get_last(hdrs, name, &val, &len) != 0 || !val)
        return;
    if (len >= size)
        len = size - 1;
    memcpy(buf, val, len);
    buf[len] = '\0';
}

static int
selected(const struct rl_cli_dlq_filter *f, const rd_kafka_message_t *rkm)
{
    char buf[256];

    if (f->reason) {
        size_t n = strlen(f->reason);

        rl_cli_dlq_header(rkm, "reason", buf, sizeof(buf));
        if (strncmp(buf, f->reason, n) != 0 || (buf[n] && buf[n] != ':'))
            return 0;
    }
    if (f->run_id) {
        rl_cli_dlq_header(rkm, "run_id", buf, sizeof(buf));
        if (strcmp(buf, f->run_id) != 0)
            return 0;
    }
    if (f->since_ms >= 0) {
        rd_kafka_timestamp_type_t tstype;
        int64_t ts = rd_kafka_message_timestamp(rkm, &tstype);

        if (ts >= 0 && ts < f->since_ms)
            return 0;
    }
    return 1;
}

int
rl_cli_dlq_read(const struct rl_config *cfg, const struct rl_cli_dlq_filter *f,
                rl_cli_dlq_fn *fn, void *opaque, char *errstr,
                size_t errstr_size)
{
    char kerr[512];
    rd_kafka_conf_t *conf = rl_kafka_conf_new(cfg, kerr, sizeof(kerr));
    rd_kafka_t *rk = NULL;
    rd_kafka_topic_t *rkt = NULL;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_partition_list_t *parts = NULL;
    int64_t *end = NULL;
    int nparts = 0, remaining = 0, rc = RL_ERR_KAFKA;
    rd_kafka_resp_err_t err;
    int64_t idle_since;

    errstr[0] = '\0';
    if (!conf) {
        rl_set_err(errstr, errstr_size, "%s", kerr);
        return RL_ERR_INVALID;
    }
    /* A group id only because librdkafka's consumer wants one: nothing is
     * subscribed, stored or committed under it. */
    if (rl_kafka_conf_set(conf, "group.id", "runledger-dlq-cli", kerr,
                          sizeof(kerr)) != 0 ||
        rl_kafka_conf_set(conf, "enable.auto.commit", "false", kerr,
                          sizeof(kerr)) != 0 ||
        rl_kafka_conf_set(conf, "enable.auto.offset.store", "false", kerr,
                          sizeof(kerr)) != 0) {
        rd_kafka_conf_destroy(conf);
        rl_set_err(errstr, errstr_size, "%s", kerr);
        return RL_ERR_INVALID;
    }
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, kerr, sizeof(kerr));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        rl_set_err(errstr, errstr_size, "could not create consumer: %s", kerr);
        return RL_ERR_KAFKA;
    }
    rd_kafka_poll_set_consumer(rk);
    rkt = rd_kafka_topic_new(rk, cfg->dlq_topic, NULL);
    err = rkt ? rd_kafka_metadata(rk, 0, rkt, &md, DLQ_META_TIMEOUT_MS)
              : rd_kafka_last_error();
    if (!err && md->topic_cnt == 1)
        err = md->topics[0].err;
    if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        rl_set_err(errstr, errstr_size,
                   "topic %s does not exist: no dead letters", cfg->dlq_topic);
        rc = 0;
        goto done;
    }
    if (err || md->topic_cnt != 1) {
        rl_set_err(
            errstr, errstr_size, "could not read the metadata of %s: %s",
            cfg->dlq_topic,
            rd_kafka_err2str(err ? err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
        goto done;
    }
    nparts = md->topics[0].partition_cnt;
    end = calloc((size_t)nparts + 1, sizeof(*end));
    parts = rd_kafka_topic_partition_list_new(nparts > 0 ? nparts : 1);
    if (!end || !parts) {
        rl_set_err(errstr, errstr_size, "out of memory");
        goto done;
    }
    for (int i = 0; i < nparts; i++) {
        int32_t p = md->topics[0].partitions[i].id;
        int64_t lo = 0, hi = 0;

        if (f->partition >= 0 && p != f->partition)
            continue;
        err = rd_kafka_query_watermark_offsets(rk, cfg->dlq_topic, p, &lo, &hi,
                                               DLQ_META_TIMEOUT_MS);
        if (err) {
            rl_set_err(errstr, errstr_size,
                       "could not read the end of %s [%d]: %s", cfg->dlq_topic,
                       (int)p, rd_kafka_err2str(err));
            goto done;
        }
        /* A page's end: the cursor's, never past what is there now. */
        if (f->ends && p >= 0 && (size_t)p < f->nends && f->ends[p] >= 0 &&
            f->ends[p] < hi)
            hi = f->ends[p];
        if (hi < lo)
            hi = lo;
        if (f->ends && p >= 0 && (size_t)p < f->nends)
            f->ends[p] = hi;
        if (f->offset >= 0) {
            if (f->offset < lo || f->offset >= hi)
                continue;
            lo = f->offset;
            hi = f->offset + 1;
        } else if (f->since_ms >= 0) {
            lo = f->since_ms; /* offsets_for_times turns it into an offset */
        } else if (f->tail > 0 && hi - f->tail > lo) {
            lo = hi - f->tail;
        }
        if (p >= 0 && p < nparts)
            end[p] = hi;
        if (hi > 0)
            rd_kafka_topic_partition_list_add(parts, cfg->dlq_topic, p)
                ->offset = lo;
    }
    if (f->since_ms >= 0 && f->offset < 0 && parts->cnt > 0) {
        err = rd_kafka_offsets_for_times(rk, parts, DLQ_META_TIMEOUT_MS);
        if (err) {
            rl_set_err(errstr, errstr_size,
                       "could not find the offsets of %s at --since: %s",
                       cfg->dlq_topic, rd_kafka_err2str(err));
            goto done;
        }
    }
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &parts->elems[i];

        /* -1: nothing at or after --since in this partition. */
        if (tp->err || tp->offset < 0 || tp->offset >= end[tp->partition]) {
            end[tp->partition] = -1;
            tp->offset = RD_KAFKA_OFFSET_END;
            continue;
        }
        remaining++;
    }
    if (remaining == 0) {
        rc = 0;
        goto done;
    }
    err = rd_kafka_assign(rk, parts);
    if (err) {
        rl_set_err(errstr, errstr_size, "could not assign %s: %s",
                   cfg->dlq_topic, rd_kafka_err2str(err));
        goto done;
    }
    idle_since = rl_clock_ms();
    while (remaining > 0) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rk, 500);
        int32_t p;
        int stop = 0;

        if (!rkm) {
            if (rl_clock_ms() - idle_since > DLQ_IDLE_TIMEOUT_MS) {
                rl_set_err(errstr, errstr_size,
                           "timed out reading %s: no record for %d s before "
                           "its end",
                           cfg->dlq_topic, DLQ_IDLE_TIMEOUT_MS / 1000);
                goto done;
            }
            continue;
        }
        idle_since = rl_clock_ms();
        if (rkm->err) {
            if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                fprintf(stderr, "runledger dlq: reading %s: %s\n",
                        cfg->dlq_topic, rd_kafka_message_errstr(rkm));
            rd_kafka_message_destroy(rkm);
            continue;
        }
        p = rkm->partition;
        if (p >= 0 && p < nparts && end[p] > 0 && rkm->offset < end[p]) {
            if (selected(f, rkm))
                stop = fn(rkm, opaque);
            if (rkm->offset + 1 >= end[p]) {
                end[p] = -1;
                remaining--;
            }
        }
        rd_kafka_message_destroy(rkm);
        if (stop)
            break;
    }
    rc = 0;

done:
    if (parts)
        rd_kafka_topic_partition_list_destroy(parts);
    free(end);
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

void
rl_cli_dlq_not_replayable(const rd_kafka_message_t *rkm, char *why, size_t size)
{
    char source[32], kind[32], trunc[32];

    rl_cli_dlq_header(rkm, "source", source, sizeof(source));
    rl_cli_dlq_header(rkm, "value_kind", kind, sizeof(kind));
    rl_cli_dlq_header(rkm, "truncated_from", trunc, sizeof(trunc));
    why[0] = '\0';
    if (strcmp(source, "outbox") == 0)
        snprintf(why, size,
                 "an outbox dead letter carries no event (the notification "
                 "stays in outbox_dead)");
    else if (strcmp(kind, "none") == 0 || !rkm->payload || rkm->len == 0)
        snprintf(why, size, "the dead letter carries no event");
    else if (trunc[0])
        snprintf(why, size, "the event was cut from %s bytes", trunc);
}

/* ---- replay ---------------------------------------------------------- */

/* Events are sent in batches, so memory stays bounded however many dead
 * letters are selected. */
#define REPLAY_BATCH_EVENTS 256
#define REPLAY_BATCH_BYTES (32L * 1024 * 1024)

struct replay_state {
    const char *command;
    const struct rl_config *cfg;
    int dry_run;
    rl_cli_dlq_outcome_fn *outcome;
    void *opaque;
    struct rl_cli_event batch[REPLAY_BATCH_EVENTS];
    char pos[REPLAY_BATCH_EVENTS][40];
    size_t n;
    long bytes;
    struct rl_cli_dlq_replay_counts counts;
};

static void
report(struct replay_state *rs, const char *pos, const char *outcome,
       const char *run_id, const char *detail)
{
    if (rs->outcome)
        rs->outcome(rs->opaque, pos, outcome, run_id, detail);
}

static void
replay_flush(struct replay_state *rs)
{
    int rc = 0;

    if (rs->n == 0)
        return;
    if (!rs->dry_run)
        rc = rl_cli_events_send(rs->command, rs->cfg, rs->cfg->topic, rs->batch,
                                rs->n, NULL);
    for (size_t i = 0; i < rs->n; i++) {
        if (rc == 0) {
            report(rs, rs->pos[i], rs->dry_run ? "would-send" : "sent",
                   rs->batch[i].ev->run_id, NULL);
            rs->counts.sent++;
        }
        free(rs->batch[i].value);
        rl_event_destroy(rs->batch[i].ev);
    }
    if (rc != 0)
        rs->counts.failed = 1;
    rs->n = 0;
    rs->bytes = 0;
}

static int
replay_one(const rd_kafka_message_t *rkm, void *opaque)
{
    struct replay_state *rs = opaque;
    char pos[40], why[256], reason[96], errstr[512], source[32], detail[640];
    struct rl_event *ev;
    char *value;

    snprintf(pos, sizeof(pos), "%d/%" PRId64, (int)rkm->partition, rkm->offset);
    rl_cli_dlq_not_replayable(rkm, why, sizeof(why));
    if (why[0]) {
        report(rs, pos, "not-replayable", NULL, why);
        rs->counts.unreplayable++;
        return 0;
    }
    ev = rl_cli_event_validate(rkm->payload, rkm->len,
                               (size_t)rs->cfg->max_event_bytes, reason,
                               sizeof(reason), errstr, sizeof(errstr));
    if (!ev) {
        snprintf(detail, sizeof(detail), "%s: %s", reason, errstr);
        report(rs, pos, "invalid", NULL, detail);
        rs->counts.invalid++;
        return 0;
    }
    rl_cli_dlq_header(rkm, "source", source, sizeof(source));
    if (strcmp(source, "run") == 0)
        report(rs, pos, "failed-run", ev->run_id, NULL);
    value = malloc(rkm->len + 1);
    if (!value) {
        rl_event_destroy(ev);
        fprintf(stderr, "runledger %s: out of memory\n", rs->command);
        rs->counts.failed = 1;
        return 1;
    }
    memcpy(value, rkm->payload, rkm->len);
    value[rkm->len] = '\0';
    rs->batch[rs->n].value = value;
    rs->batch[rs->n].ev = ev;
    snprintf(rs->pos[rs->n], sizeof(rs->pos[rs->n]), "%s", pos);
    rs->n++;
    rs->bytes += (long)rkm->len;
    if (rs->n == REPLAY_BATCH_EVENTS || rs->bytes >= REPLAY_BATCH_BYTES)
        replay_flush(rs);
    return rs->counts.failed;
}

int
rl_cli_dlq_replay(const char *command, const struct rl_config *cfg,
                  const struct rl_cli_dlq_filter *f, int dry_run,
                  rl_cli_dlq_outcome_fn *outcome, void *opaque,
                  struct rl_cli_dlq_replay_counts *counts, char *errstr,
                  size_t errstr_size)
{
    struct replay_state *rs = calloc(1, sizeof(*rs));
    int rc;

    memset(counts, 0, sizeof(*counts));
    if (!rs) {
        rl_set_err(errstr, errstr_size, "out of memory");
        counts->failed = 1;
        return RL_ERR_NOMEM;
    }
    rs->command = command;
    rs->cfg = cfg;
    rs->dry_run = dry_run;
    rs->outcome = outcome;
    rs->opaque = opaque;
    rc = rl_cli_dlq_read(cfg, f, replay_one, rs, errstr, errstr_size);
    if (!rs->counts.failed) {
        replay_flush(rs);
    } else {
        for (size_t i = 0; i < rs->n; i++) {
            free(rs->batch[i].value);
            rl_event_destroy(rs->batch[i].ev);
        }
    }
    *counts = rs->counts;
    free(rs);
    return rc;
}
