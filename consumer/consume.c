/* `runledger consume`: the consumer process. This file owns the Kafka
 * thread (poll, validate, offsets, rebalances, seeks back, pause at the
 * cap) and the process lifecycle; the ledger stage is in ledger/, the
 * hand-offs between stages and the model's callback in pipeline.c, the
 * dead-letter producer in deadletters.c, the partitions' epochs in
 * positions.c, the relay in relay.c and the signal thread and watchdog in
 * shutdown.c. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "commands.h"
#include "completer.h"
#include "deadletters.h"
#include "http.h"
#include "item.h"
#include "ledger/ledger.h"
#include "pipeline.h"
#include "positions.h"
#include "relay.h"
#include "rl/clock.h"
#include "rl/deadletter.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/kafka.h"
#include "rl/log.h"
#include "rl/offsets.h"
#include "rl/otlp.h"
#include "shutdown.h"

/* State owned by the Kafka thread. @locality kafka thread */
struct kstate {
    struct rl_pipeline *pl;
    rd_kafka_t *rk;
    struct rl_offsets *offsets;
    rd_kafka_topic_partition_list_t *assignment;
    struct rl_epochs epochs;
    int paused;
    /* Leaving the group at shutdown: the last revoke commits nothing, the
     * bounded commit before it did. */
    int closing;
    long rebalances;
    /* Partitions assigned whose committed offsets are not read yet: the
     * floors of what the ledger held (read_floors). */
    rd_kafka_topic_partition_list_t *floors_pending;
};

/* Stores the done prefix of every assigned partition for the next commit.
 * @locality kafka thread */
static void
store_done(struct kstate *ks)
{
    struct rl_item *item = rl_queue_take(&ks->pl->done, 0);
    rd_kafka_topic_partition_list_t *store;

    while (item) {
        struct rl_item *next = item->next;

        if (item->src.epoch != 0 &&
            item->src.epoch == rl_epochs_get(&ks->epochs, item->src.partition))
            rl_offsets_done(ks->offsets, item->src.partition, item->src.offset);
        atomic_fetch_sub(&ks->pl->in_flight, 1);
        rl_item_destroy(item);
        item = next;
    }
    if (!ks->assignment)
        return;
    store = rd_kafka_topic_partition_list_new(ks->assignment->cnt);
    for (int i = 0; i < ks->assignment->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &ks->assignment->elems[i];
        int64_t pos = rl_offsets_take_committable(ks->offsets, tp->partition);

        if (pos >= 0) {
            rd_kafka_topic_partition_list_add(store, tp->topic, tp->partition)
                ->offset = pos;
            /* Done means registered (or noted) in the ledger first. */
            rl_pipeline_floor_set(ks->pl, tp->partition,
                                  rl_epochs_get(&ks->epochs, tp->partition),
                                  pos);
        }
    }
    if (store->cnt > 0) {
        rd_kafka_resp_err_t err = rd_kafka_offsets_store(ks->rk, store);

        if (err)
            rl_log_warn(NULL, "could not store offsets: %s",
                        rd_kafka_err2str(err));
    }
    rd_kafka_topic_partition_list_destroy(store);
}

/* The shutdown's commit: at most timeout_ms, as the group coordinator
 * may be gone; what is not committed is consumed again and found done. */
static void
commit_bounded(struct kstate *ks, int timeout_ms)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(ks->rk);
    rd_kafka_resp_err_t err;
    rd_kafka_event_t *ev;

    store_done(ks);
    if (!q)
        return;
    err = rd_kafka_commit_queue(ks->rk, NULL, q, NULL, NULL);
    if (err) {
        if (err != RD_KAFKA_RESP_ERR__NO_OFFSET)
            rl_log_warn(NULL, "could not commit offsets on shutdown: %s",
                        rd_kafka_err2str(err));
        rd_kafka_queue_destroy(q);
        return;
    }
    ev = rd_kafka_queue_poll(q, timeout_ms);
    if (!ev)
        rl_log_warn(NULL,
                    "offsets commit on shutdown: no answer within %d ms; "
                    "the uncommitted events are consumed again and found "
                    "done",
                    timeout_ms);
    else if (rd_kafka_event_error(ev) &&
             rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR__NO_OFFSET)
        rl_log_warn(NULL, "could not commit offsets on shutdown: %s",
                    rd_kafka_event_error_string(ev));
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque);

/* Leaves the group, waiting at most timeout_ms: with the group
 * coordinator gone, rd_kafka_consumer_close waits up to the session
 * timeout. The close runs on the library's threads and its ops (the
 * last revoke) are served here. Returns 1 when the consumer closed; when
 * it did not, the group sees it leave once its session times out. */
static int
close_bounded(struct kstate *ks, int timeout_ms)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(ks->rk);
    rd_kafka_error_t *error;
    int64_t deadline = rl_clock_ms() + timeout_ms;
    int closed;

    if (!q)
        return rd_kafka_consumer_close(ks->rk) == RD_KAFKA_RESP_ERR_NO_ERROR;
    error = rd_kafka_consumer_close_queue(ks->rk, q);
    if (error) {
        rl_log_warn(NULL, "could not close the consumer: %s",
                    rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    } else {
        /* Served as events, not callbacks: what else the close moves onto
         * the queue (messages fetched, consumer errors) comes back as an
         * event and is dropped, where rd_kafka_queue_poll_callback asserts
         * on it (librdkafka 2.8); the revoke comes back as an event too,
         * for rebalance_cb. */
        while (!rd_kafka_consumer_closed(ks->rk) && rl_clock_ms() < deadline) {
            rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 100);

            if (ev && rd_kafka_event_type(ev) == RD_KAFKA_EVENT_REBALANCE)
                rebalance_cb(ks->rk, rd_kafka_event_error(ev),
                             rd_kafka_event_topic_partition_list(ev), ks);
            if (ev)
                rd_kafka_event_destroy(ev);
        }
    }
    closed = rd_kafka_consumer_closed(ks->rk);
    if (!closed)
        rl_log_warn(NULL,
                    "the consumer did not leave its group within %d ms (the "
                    "group coordinator away?); the group takes its "
                    "partitions back when its session times out",
                    timeout_ms);
    rd_kafka_queue_destroy(q);
    return closed;
}

static void
commit_sync(struct kstate *ks, const char *why)
{
    rd_kafka_resp_err_t err;

    store_done(ks);
    err = rd_kafka_commit(ks->rk, NULL, 0);
    if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
        rl_log_warn(NULL, "could not commit offsets on %s: %s", why,
                    rd_kafka_err2str(err));
}

/* Starts a new epoch for each partition of parts, and forgets what was
 * read of them before when they are revoked: offsets of an older epoch
 * are no longer this process's to commit. @locality kafka thread */
static void
new_epochs(struct kstate *ks, const rd_kafka_topic_partition_list_t *parts,
           int revoked)
{
    for (int i = 0; i < parts->cnt; i++) {
        int32_t partition = parts->elems[i].partition;

        if (revoked) {
            rl_offsets_forget(ks->offsets, partition);
            rl_pipeline_floor_forget(ks->pl, partition);
        }
        rl_epochs_bump(&ks->epochs, partition);
        if (!revoked) {
            rl_pipeline_floor_set(ks->pl, partition,
                                  rl_epochs_get(&ks->epochs, partition), -1);
            if (!ks->floors_pending)
                ks->floors_pending = rd_kafka_topic_partition_list_new(4);
            if (ks->floors_pending &&
                !rd_kafka_topic_partition_list_find(
                    ks->floors_pending, parts->elems[i].topic, partition))
                rd_kafka_topic_partition_list_add(
                    ks->floors_pending, parts->elems[i].topic, partition);
        }
    }
}

/* Reads the group's committed offsets of the partitions assigned since
 * the last call: each is a floor of what the ledger held (an offset is
 * committed only after its event's registration), compared with the
 * ledger's consumed position even while the partition stays quiet. Out
 * of the rebalance callback, as it waits for the coordinator. A failure
 * keeps them pending for the next turn. @locality kafka thread */
static void
read_floors(struct kstate *ks)
{
    rd_kafka_topic_partition_list_t *parts = ks->floors_pending;
    rd_kafka_resp_err_t err;

    if (!parts || atomic_load(&ks->pl->stopping))
        return;
    err = rd_kafka_committed(ks->rk, parts, 5000);
    if (err) {
        rl_log_warn(NULL,
                    "could not read the committed offsets of %d assigned "
                    "partitions: %s; will retry",
                    parts->cnt, rd_kafka_err2str(err));
        return;
    }
    ks->floors_pending = NULL;
    for (int i = 0; i < parts->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &parts->elems[i];

        if (tp->err || tp->offset < 0 || !ks->assignment ||
            !rd_kafka_topic_partition_list_find(ks->assignment, tp->topic,
                                                tp->partition))
            continue;
        rl_pipeline_floor_set(ks->pl, tp->partition,
                              rl_epochs_get(&ks->epochs, tp->partition),
                              tp->offset);
        rl_epochs_start_at(&ks->epochs, tp->partition, tp->offset);
    }
    rd_kafka_topic_partition_list_destroy(parts);
    rl_pipeline_wake(ks->pl);
}

/* The assignment without the partitions of parts. */
static rd_kafka_topic_partition_list_t *
assignment_less(const rd_kafka_topic_partition_list_t *from,
                const rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_topic_partition_list_t *left =
        rd_kafka_topic_partition_list_new(from ? from->cnt : 0);

    for (int i = 0; from && i < from->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &from->elems[i];

        if (!rd_kafka_topic_partition_list_find(parts, tp->topic,
                                                tp->partition))
            rd_kafka_topic_partition_list_add(left, tp->topic, tp->partition);
    }
    return left;
}

/* Incremental rebalance (cooperative-sticky assignor): only the
 * partitions that move are revoked or assigned; the others keep their
 * runs, offsets and epochs. A revoke commits the durable prefix first,
 * as the eager one does. @locality kafka thread */
static void
rebalance_incremental(struct kstate *ks, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_topic_partition_list_t *next;
    rd_kafka_error_t *error;

    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        rl_log_info(NULL, "assigned %d more partitions", parts->cnt);
        new_epochs(ks, parts, 0);
        next = assignment_less(ks->assignment, parts);
        for (int i = 0; i < parts->cnt; i++)
            rd_kafka_topic_partition_list_add(next, parts->elems[i].topic,
                                              parts->elems[i].partition);
        error = rd_kafka_incremental_assign(ks->rk, parts);
        /* As in the eager assign: a partition keeps its pause across a
         * revoke and a new assign; these follow ks->paused. */
        if (ks->paused)
            rd_kafka_pause_partitions(ks->rk, parts);
        else
            rd_kafka_resume_partitions(ks->rk, parts);
    } else {
        rl_log_info(NULL, "revoking %d partitions", parts->cnt);
        if (ks->assignment && !ks->closing)
            commit_sync(ks, "revoke");
        new_epochs(ks, parts, 1);
        next = assignment_less(ks->assignment, parts);
        error = rd_kafka_incremental_unassign(ks->rk, parts);
    }
    if (error) {
        rl_log_warn(NULL, "incremental rebalance: %s",
                    rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    }
    if (ks->assignment)
        rd_kafka_topic_partition_list_destroy(ks->assignment);
    ks->assignment = next->cnt > 0 ? next : NULL;
    if (!ks->assignment)
        rd_kafka_topic_partition_list_destroy(next);
}

/* Eager rebalance (range assignor): on revoke, commit the durable prefix
 * before giving the partitions up; runs still in flight finish in
 * PostgreSQL and their offsets are redelivered to the new owner, which
 * finds them completed or leased. The cooperative-sticky assignor goes to
 * rebalance_incremental. @locality kafka thread */
static void
rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
             rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    struct kstate *ks = opaque;

    ks->rebalances++;
    rl_http_group(ks->pl->http, err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS,
                  parts->cnt);
    if (strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0) {
        rebalance_incremental(ks, err, parts);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        rl_log_info(NULL, "assigned %d partitions", parts->cnt);
        new_epochs(ks, parts, 0);
        if (ks->assignment)
            rd_kafka_topic_partition_list_destroy(ks->assignment);
        ks->assignment = rd_kafka_topic_partition_list_copy(parts);
        ks->paused = 0;
        rd_kafka_assign(rk, parts);
        /* librdkafka keeps a partition paused across a revoke and a new
         * assign of it: one paused at the in-flight cap before the
         * rebalance would never fetch again. Make the library agree with
         * ks->paused; flow_control() pauses again if still at the cap. */
        rd_kafka_resume_partitions(rk, parts);
        return;
    }
    rl_log_info(NULL, "revoking %d partitions", parts->cnt);
    if (ks->assignment && !ks->closing)
        commit_sync(ks, "revoke");
    new_epochs(ks, parts, 1);
    rl_offsets_forget(ks->offsets, -1);
    if (ks->assignment)
        rd_kafka_topic_partition_list_destroy(ks->assignment);
    ks->assignment = NULL;
    ks->paused = 0;
    rd_kafka_assign(rk, NULL);
}

/* Whether seek sk is still this process's to make: its partition is
 * assigned and not read again since the ledger looked. */
static int
seek_current(const struct kstate *ks, const struct rl_seek *sk)
{
    return ks->assignment &&
           rd_kafka_topic_partition_list_find(
               ks->assignment, ks->pl->cfg->topic, sk->partition) &&
           rl_epochs_get(&ks->epochs, sk->partition) == sk->epoch;
}

/* Turns each RL_SEEK_SINCE request into the offset of the partition's
 * first event stamped at or after its time, when that is before what the
 * group committed; into nothing (-1) otherwise. One ListOffsets request
 * for all of them, bounded: a failure leaves them for the ledger's next
 * comparison. Rare: a partition the ledger keeps nothing of, read by a
 * process that registered nothing of it. @locality kafka thread */
static void
resolve_since(struct kstate *ks, struct rl_seek *seeks, size_t n)
{
    const char *topic = ks->pl->cfg->topic;
    rd_kafka_topic_partition_list_t *list =
        rd_kafka_topic_partition_list_new((int)n);
    rd_kafka_resp_err_t err;

    for (size_t i = 0; i < n; i++) {
        if (seeks[i].offset == RL_SEEK_SINCE && seek_current(ks, &seeks[i]))
            rd_kafka_topic_partition_list_add(list, topic, seeks[i].partition)
                ->offset = seeks[i].since_ms;
    }
    err = list->cnt > 0 ? rd_kafka_offsets_for_times(ks->rk, list, 5000)
                        : RD_KAFKA_RESP_ERR_NO_ERROR;
    if (err)
        rl_log_warn(NULL, "could not look up offsets by time: %s",
                    rd_kafka_err2str(err));
    for (size_t i = 0; i < n; i++) {
        struct rl_seek *sk = &seeks[i];
        const rd_kafka_topic_partition_t *tp;

        if (sk->offset != RL_SEEK_SINCE)
            continue;
        tp = err ? NULL
                 : rd_kafka_topic_partition_list_find(list, topic,
                                                      sk->partition);
        sk->offset = -1;
        if (!tp || tp->err)
            continue;
        if (tp->offset < 0 || tp->offset >= sk->below) {
            rl_log_info(NULL,
                        "partition %d has no consumed position in the "
                        "ledger, and no event the group committed (before "
                        "offset %lld) came after the ledger began keeping "
                        "positions: nothing to read again",
                        (int)sk->partition, (long long)sk->below);
            continue;
        }
        rl_log_warn(NULL,
                    "partition %d has no consumed position in the ledger, "
                    "but the group committed offset %lld and its events "
                    "from offset %lld on came after the ledger began "
                    "keeping positions: the ledger lost their "
                    "registrations (a failover to a standby that had not "
                    "received them): reading from offset %lld again",
                    (int)sk->partition, (long long)sk->below,
                    (long long)tp->offset, (long long)tp->offset);
        sk->offset = tp->offset;
    }
    rd_kafka_topic_partition_list_destroy(list);
}

/* Reads again the partitions whose events the ledger lost the
 * registrations of (rl_pipeline_seek_back, rl_pipeline_seek_since),
 * unless the partition was revoked or read again since the ledger looked.
 * What was read of it is forgotten: those offsets are committed once
 * read again and durable. @locality kafka thread */
static void
apply_seeks(struct kstate *ks)
{
    size_t n;
    struct rl_seek *seeks = rl_pipeline_take_seeks(ks->pl, &n);
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_error_t *error;
    const char *topic = ks->pl->cfg->topic;

    if (!seeks)
        return;
    resolve_since(ks, seeks, n);
    list = rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++) {
        const struct rl_seek *sk = &seeks[i];

        if (sk->offset == -1 || !seek_current(ks, sk))
            continue;
        if (sk->since_ms == 0)
            rl_log_info(NULL,
                        "partition %d: the ledger's consumed position %lld "
                        "is behind the events read, so registrations were "
                        "lost (a failover to a standby that had not "
                        "received them): reading from offset %lld again",
                        (int)sk->partition, (long long)sk->offset,
                        (long long)sk->offset);
        atomic_fetch_add(&ks->pl->counters.seeks_back, 1);
        rl_offsets_forget(ks->offsets, sk->partition);
        rl_epochs_bump(&ks->epochs, sk->partition);
        /* From here the ledger's position is what the events read again
         * are compared with, until they are done. */
        rl_pipeline_floor_set(ks->pl, sk->partition,
                              rl_epochs_get(&ks->epochs, sk->partition), -1);
        rl_epochs_start_at(&ks->epochs, sk->partition, sk->offset);
        rd_kafka_topic_partition_list_add(list, topic, sk->partition)->offset =
            sk->offset == RL_SEEK_BEGINNING ? RD_KAFKA_OFFSET_BEGINNING
                                            : sk->offset;
    }
    /* Asynchronous: what was fetched before the seek is discarded by the
     * library (the seek's version barrier is set before this returns). */
    if (list->cnt > 0 &&
        (error = rd_kafka_seek_partitions(ks->rk, list, 0)) != NULL) {
        rl_log_warn(NULL, "could not seek back: %s",
                    rd_kafka_error_string(error));
        rd_kafka_error_destroy(error);
    }
    rd_kafka_topic_partition_list_destroy(list);
    free(seeks);
}

/* Keeps the event's W3C traceparent header when it is valid. A bad one is
 * the producer's tracing problem, not a bad event: the run goes on with a
 * trace of its own, never to the dead-letter topic. */
static void
intake_traceparent(rd_kafka_message_t *rkm, struct rl_item *item)
{
    rd_kafka_headers_t *hdrs = NULL;
    const void *val = NULL;
    size_t len = 0;
    struct rl_trace_ctx tc;
    char errstr[96];

    if (rd_kafka_message_headers(rkm, &hdrs) != 0 ||
        rd_kafka_header_get_last(hdrs, "traceparent", &val, &len) != 0 || !val)
        return;
    if (rl_trace_parse(val, len, &tc, errstr, sizeof(errstr)) != 0) {
        struct rl_log_ctx ctx = RL_LOG_CTX_INIT;

        ctx.run_id = item->run_id;
        ctx.partition = rkm->partition;
        ctx.offset = rkm->offset;
        rl_log_debug(&ctx, "ignoring the event's traceparent header: %s",
                     errstr);
        return;
    }
    rl_trace_format(tc.trace_id, tc.parent_id, tc.flags, item->traceparent);
}

static void
intake(struct kstate *ks, rd_kafka_message_t *rkm)
{
    struct rl_pipeline *pl = ks->pl;
    struct rl_item *item;
    struct rl_event_limits limits;
    char reason[96], errstr[256];

    if (rl_offsets_add(ks->offsets, rkm->partition, rkm->offset) != 0) {
        rl_log_warn(NULL, "ignoring out-of-order offset %lld of partition %d",
                    (long long)rkm->offset, (int)rkm->partition);
        return;
    }
    atomic_fetch_add(&pl->in_flight, 1);
    atomic_fetch_add(&pl->counters.events, 1);
    item = calloc(1, sizeof(*item));
    if (!item) {
        atomic_fetch_sub(&pl->in_flight, 1);
        return;
    }
    item->src.from_kafka = 1;
    item->src.partition = rkm->partition;
    item->src.offset = rkm->offset;
    item->src.epoch = rl_epochs_get(&ks->epochs, rkm->partition);
    item->src.covers_from =
        rl_epochs_covers_from(&ks->epochs, rkm->partition, rkm->offset);
    item->value_len = rkm->len;
    item->value = malloc(rkm->len + 1);
    if (item->value) {
        memcpy(item->value, rkm->payload ? rkm->payload : "", rkm->len);
        item->value[rkm->len] = '\0';
    }

    rl_event_limits_default(&limits);
    limits.max_bytes = (size_t)pl->cfg->max_event_bytes;
    item->ev =
        rl_event_parse(rkm->payload ? rkm->payload : "", rkm->len, &limits,
                       reason, sizeof(reason), errstr, sizeof(errstr));
    rl_item_charge(item, &pl->counters.held_bytes,
                   (size_t)pl->cfg->max_request_bytes);
    if (!item->ev) {
        /* Dead-lettered by the ledger thread once it has noted the
         * event's position (consumed_positions): read again after a
         * rebalance, it would be dead-lettered twice. */
        atomic_fetch_add(&pl->counters.invalid, 1);
        item->refusal_reason = strdup(reason);
        item->refusal_detail = strdup(errstr);
        rl_queue_push(&pl->intake, item);
        rl_pipeline_wake(pl);
        return;
    }
    memcpy(item->run_id, item->ev->run_id, sizeof(item->run_id));
    intake_traceparent(rkm, item);
    rl_queue_push(&pl->intake, item);
    rl_pipeline_wake(pl);
}

/* Makes librdkafka fetch the resumed partitions now. librdkafka 2.0.2
 * does not wake a broker thread when a partition is resumed; the thread
 * looks again only when it wakes by itself (its outstanding fetch returns
 * after up to fetch.wait.max.ms, or its idle wait of a second ends), and
 * until then the intake runs dry: 0.1-0.7 s after every resume in `make
 * bench` slow, where 20,000 runs paused six times and the model emptied
 * each time. A seek wakes the broker thread ("seek done"). Seeking to a
 * partition's position changes nothing else: the position is the offset
 * after the last message polled, which is where the resumed fetch starts,
 * and nothing is polled between the resume and the seek (both happen on
 * this thread, the seek queued after the resume on the partition's op
 * queue). A partition with no position yet (nothing polled since its
 * assignment) is skipped, having no offset to seek to: the seek of any
 * other partition on its broker wakes the thread that fetches both, and
 * with none to seek the resume is as slow as it was. */
static void
wake_fetcher(struct kstate *ks)
{
    rd_kafka_topic_partition_list_t *pos, *seek;
    rd_kafka_error_t *error;

    pos = rd_kafka_topic_partition_list_copy(ks->assignment);
    if (!pos)
        return;
    seek = rd_kafka_topic_partition_list_new(pos->cnt);
    if (seek && rd_kafka_position(ks->rk, pos) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < pos->cnt; i++) {
            const rd_kafka_topic_partition_t *p = &pos->elems[i];

            if (p->err == RD_KAFKA_RESP_ERR_NO_ERROR && p->offset >= 0)
                rd_kafka_topic_partition_list_add(seek, p->topic, p->partition)
                    ->offset = p->offset;
        }
        /* Asynchronous (timeout 0): never waits, reports nothing. */
        if (seek->cnt > 0 &&
            (error = rd_kafka_seek_partitions(ks->rk, seek, 0)) != NULL)
            rd_kafka_error_destroy(error);
    }
    if (seek)
        rd_kafka_topic_partition_list_destroy(seek);
    rd_kafka_topic_partition_list_destroy(pos);
}

/* Pauses the partitions once the process holds RL_PIPELINE_HOLD_MAX runs,
 * or runs charged RUNLEDGER_MAX_HELD_BYTES, and resumes them when both
 * are at three quarters again. A memory guard: the ledger registers every
 * run it reads whether or not a model slot is free (the rest wait pending
 * in the ledger for a sweeper), so busy slots never pause intake; only a
 * PostgreSQL slower than the intake, or the bytes of the runs held, do.
 * librdkafka drops a paused partition's prefetched messages and fetches
 * them again on resume. The byte pause needs something held: a run larger
 * than the whole limit is taken when nothing else is, or it would never
 * run. This is called before every poll, and a poll returns one message,
 * so at most one run's charge is added past the limit. */
static void
flow_control(struct kstate *ks)
{
    struct rl_pipeline *pl = ks->pl;
    long in_flight = atomic_load(&pl->in_flight);
    long hold = RL_PIPELINE_HOLD_MAX(pl->cfg->max_in_flight);
    long long held = atomic_load(&pl->counters.held_bytes);
    long long max_held = pl->cfg->max_held_bytes;
    int full = in_flight >= hold || (held > 0 && held >= max_held);
    int roomy = in_flight <= hold * 3 / 4 &&
                held <= RL_PIPELINE_HELD_BYTES_RESUME(max_held);

    if (!ks->assignment)
        return;
    if (!ks->paused && (full || atomic_load(&pl->stopping))) {
        rd_kafka_pause_partitions(ks->rk, ks->assignment);
        ks->paused = 1;
        rl_log_debug(NULL, "pausing %d partitions: %ld runs held, %lld bytes",
                     ks->assignment->cnt, in_flight, held);
    } else if (ks->paused && !atomic_load(&pl->stopping) && roomy) {
        rd_kafka_resume_partitions(ks->rk, ks->assignment);
        wake_fetcher(ks);
        ks->paused = 0;
        rl_log_debug(NULL, "resuming %d partitions: %ld runs held, %lld bytes",
                     ks->assignment->cnt, in_flight, held);
    }
}

/* Consumer lag per partition for /metrics. @locality kafka thread */
static int
stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    struct kstate *ks = opaque;

    (void)rk;
    rl_http_kafka_stats(ks->pl->http, json, len);
    return 0; /* librdkafka frees json */
}

static rd_kafka_t *
consumer_new(struct kstate *ks, char *errstr, size_t errstr_size)
{
    const struct rl_config *cfg = ks->pl->cfg;
    rd_kafka_conf_t *conf =
        rl_kafka_consumer_conf_new(cfg, cfg->group_id, errstr, errstr_size);

    if (!conf)
        return NULL;
    if (ks->pl->http) {
        rd_kafka_conf_set_stats_cb(conf, stats_cb);
        if (rl_kafka_conf_set(conf, "statistics.interval.ms", "5000", errstr,
                              errstr_size) != 0) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    }
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rd_kafka_conf_set_opaque(conf, ks);
    return rl_kafka_consumer_new(cfg, conf, cfg->topic, errstr, errstr_size);
}

static void
pipeline_wake_cb(void *opaque)
{
    rl_pipeline_wake(opaque);
}

struct relay_thread {
    struct rl_pipeline *pl;
    atomic_int stop;
    int rc;
};

static void *
relay_main(void *arg)
{
    struct relay_thread *rt = arg;

    rl_thread_name("rl-relay");
    rt->rc =
        rl_relay_run(rt->pl->cfg, &rt->stop, &rt->pl->counters, rt->pl->http);
    return NULL;
}

/* Thousands of model calls in flight are thousands of sockets: take the
 * whole hard limit rather than fail at the soft one (often 1024). */
static void
raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        rl_log_warn(NULL, "could not raise the open file limit: %s",
                    strerror(errno));
}

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: runledger consume [--help]\n\n"
            "Joins the consumer group on the schedule topic and runs every "
            "event to one\naccepted result. Configured by the environment "
            "(see `runledger config`).\nSIGTERM or SIGINT: stop claiming, let "
            "in-flight runs finish within\nRUNLEDGER_SHUTDOWN_GRACE_SECONDS, "
            "commit the durable prefix, leave the group.\n");
}

int
rl_cmd_consume(int argc, char **argv)
{
    struct rl_pipeline pl;
    struct kstate ks;
    struct relay_thread rt;
    pthread_t ledger_tid, completer_tid, relay_tid;
    int ledger_started = 0, completer_started = 0, relay_started = 0;
    char errstr[512];
    struct rl_model_config mcfg;
    struct rl_shutdown *sd = NULL;
    int64_t stop_at = 0;
    int closed;
    int rc = RL_EXIT_FAILURE;

    if (argc > 1) {
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
            usage(stdout);
            return RL_EXIT_OK;
        }
        usage(stderr);
        return RL_EXIT_USAGE;
    }

    memset(&pl, 0, sizeof(pl));
    memset(&ks, 0, sizeof(ks));
    memset(&rt, 0, sizeof(rt));
    pl.cfg = rl_config_load(errstr, sizeof(errstr));
    if (!pl.cfg) {
        fprintf(stderr, "runledger consume: %s\n", errstr);
        return RL_EXIT_USAGE;
    }
    rl_log_set_level(rl_log_level_parse(pl.cfg->log_level) >= 0
                         ? rl_log_level_parse(pl.cfg->log_level)
                         : RL_LOG_INFO);
    rl_queue_init(&pl.intake);
    rl_queue_init(&pl.results);
    rl_queue_init(&pl.done);
    rl_queue_init(&pl.answers);
    rl_queue_init(&pl.landed);
    pthread_mutex_init(&pl.wake_lock, NULL);
    pthread_cond_init(&pl.wake, NULL);
    pthread_mutex_init(&pl.dlq_lock, NULL);
    pthread_mutex_init(&pl.seek_lock, NULL);
    pthread_rwlock_init(&pl.dlq_swap, NULL);
    raise_nofile();

    signal(SIGPIPE, SIG_IGN);
    /* Before any thread starts: they inherit the blocked signals. */
    sd = rl_shutdown_start(pl.cfg, pipeline_wake_cb, &pl, errstr,
                           sizeof(errstr));
    if (!sd) {
        rl_log_error(NULL, "%s", errstr);
        goto done;
    }

    pl.dlq = rl_pipeline_dlq_new(&pl, errstr, sizeof(errstr));
    if (!pl.dlq) {
        rl_log_error(NULL, "could not create dead-letter producer: %s", errstr);
        goto done;
    }
    if (rl_http_start(pl.cfg, "consume", &pl.counters, &pl.in_flight, &pl.http,
                      errstr, sizeof(errstr)) != 0) {
        rl_log_error(NULL, "%s", errstr);
        goto done;
    }

    memset(&mcfg, 0, sizeof(mcfg));
    mcfg.base_url = pl.cfg->model_base_url;
    mcfg.api_key = pl.cfg->model_api_key;
    mcfg.connect_timeout_ms = pl.cfg->model_connect_timeout_ms;
    mcfg.timeout_ms = pl.cfg->model_timeout_ms;
    mcfg.max_response_bytes = (size_t)pl.cfg->max_response_bytes;
    mcfg.auth_header = pl.cfg->model_auth_header;
    mcfg.query = pl.cfg->model_query;
    mcfg.headers = pl.cfg->model_headers;
    pl.model = rl_model_new(&mcfg, rl_pipeline_model_done, &pl, errstr,
                            sizeof(errstr));
    if (!pl.model) {
        rl_log_error(NULL, "could not start model client: %s", errstr);
        goto done;
    }
    {
        struct rl_otlp_config ocfg = {
            .endpoint = pl.cfg->otlp_endpoint,
            .traces_endpoint = pl.cfg->otlp_traces_endpoint,
            .service_name = pl.cfg->otel_service_name,
            .timeout_ms = pl.cfg->otlp_timeout_ms,
            .schedule_delay_ms = pl.cfg->otlp_schedule_delay_ms,
            .max_batch = (size_t)pl.cfg->otlp_max_batch,
            .max_queue = (size_t)pl.cfg->otlp_max_queue,
            .max_queue_bytes = (size_t)pl.cfg->otlp_max_queue_bytes,
        };

        pl.otlp = rl_otlp_new(&ocfg, errstr, sizeof(errstr));
        if (!pl.otlp && errstr[0]) {
            rl_log_error(NULL, "%s", errstr);
            goto done;
        }
    }
    /* dedupe trusts the endpoint with every retry of a timed-out call; a
     * gateway in between may drop the key and generate each time. */
    if (pl.cfg->ambiguous_policy == RL_AMBIGUOUS_DEDUPE)
        rl_log_warn(NULL,
                    "RUNLEDGER_AMBIGUOUS_POLICY=dedupe: a call that timed "
                    "out is retried with the same Idempotency-Key, which "
                    "prevents a second generation only if the model "
                    "endpoint deduplicates by that header; a gateway in "
                    "between must forward it (LiteLLM forwards no client "
                    "headers by default), see docs/gateways.md");

    /* The completer first: the ledger hands it answers from the start. */
    if (pthread_create(&completer_tid, NULL, rl_completer_main, &pl) != 0) {
        rl_log_error(NULL, "could not start completer thread");
        goto done;
    }
    completer_started = 1;
    if (pthread_create(&ledger_tid, NULL, rl_ledger_main, &pl) != 0) {
        rl_log_error(NULL, "could not start ledger thread");
        goto done;
    }
    ledger_started = 1;
    if (pl.cfg->relay_enabled) {
        rt.pl = &pl;
        if (pthread_create(&relay_tid, NULL, relay_main, &rt) != 0) {
            rl_log_error(NULL, "could not start relay thread");
            goto done;
        }
        relay_started = 1;
    }

    ks.pl = &pl;
    ks.offsets = rl_offsets_new();
    ks.rk = ks.offsets ? consumer_new(&ks, errstr, sizeof(errstr)) : NULL;
    if (!ks.rk) {
        rl_log_error(NULL, "could not create consumer: %s", errstr);
        goto done;
    }
    rl_log_info(NULL, "consuming %s as %s in group %s", pl.cfg->topic,
                pl.cfg->worker_id, pl.cfg->group_id);

    for (;;) {
        rd_kafka_message_t *rkm;

        if (rl_shutdown_signal(sd) && !atomic_load(&pl.stopping)) {
            rl_log_info(NULL,
                        "signal %d: stopping, %ld runs in flight, grace "
                        "%d s, exit forced at %d s",
                        rl_shutdown_signal(sd), atomic_load(&pl.in_flight),
                        pl.cfg->shutdown_grace_seconds,
                        pl.cfg->shutdown_grace_seconds +
                            RL_SHUTDOWN_MARGIN_SECONDS);
            atomic_store(&pl.stopping, 1);
            rl_http_stopping(pl.http);
            stop_at = rl_clock_ms() + pl.cfg->shutdown_grace_seconds * 1000LL;
            rl_pipeline_wake(&pl);
        }
        if (atomic_load(&pl.stopping)) {
            if (atomic_load(&pl.in_flight) == 0)
                break;
            if (!atomic_load(&pl.abandon) && rl_clock_ms() >= stop_at) {
                rl_log_warn(NULL,
                            "grace period over: abandoning %ld runs in "
                            "flight",
                            atomic_load(&pl.in_flight));
                atomic_store(&pl.abandon, 1);
                rl_pipeline_wake(&pl);
            }
        }
        rl_http_heartbeat(pl.http);
        rd_kafka_poll(pl.dlq, 0);
        rl_pipeline_dlq_renew_if_fatal(&pl);
        rl_pipeline_retry_dead_letters(&pl, atomic_load(&pl.abandon));
        store_done(&ks);
        apply_seeks(&ks);
        read_floors(&ks);
        flow_control(&ks);

        rkm = rd_kafka_consumer_poll(ks.rk, 50);
        if (!rkm)
            continue;
        if (rkm->err) {
            if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                rl_log_warn(NULL, "consumer error: %s",
                            rd_kafka_message_errstr(rkm));
        } else if (atomic_load(&pl.stopping)) {
            /* Fetched before the pause took effect: not ours to start any
             * more; it stays uncommitted and is consumed again. */
        } else {
            intake(&ks, rkm);
        }
        rd_kafka_message_destroy(rkm);
    }
    rc = RL_EXIT_OK;

done:
    atomic_store(&pl.stopping, 1);
    atomic_store(&pl.abandon, 1);
    rl_http_stopping(pl.http);
    /* The relay stops beside the steps below, not after them: what it
     * still waits for the broker for is bounded on its own, and the rows
     * it leaves stay in the outbox for the next relay. */
    if (relay_started)
        atomic_store(&rt.stop, 1);
    if (ledger_started) {
        rl_pipeline_wake(&pl);
        rl_shutdown_phase(sd, "waiting for the ledger thread");
        pthread_join(ledger_tid, NULL);
    }
    if (completer_started) {
        /* The ledger ended with no run completing: nothing is left. */
        pthread_mutex_lock(&pl.answers.lock);
        atomic_store(&pl.completer_stop, 1);
        pthread_cond_broadcast(&pl.answers.cond);
        pthread_mutex_unlock(&pl.answers.lock);
        pthread_join(completer_tid, NULL);
    }
    if (ks.rk) {
        /* Dead letters still on their way finish their items: flush them
         * before the final commit so their offsets are included. */
        rl_shutdown_phase(sd, "flushing dead letters");
        rd_kafka_flush(pl.dlq, RL_SHUTDOWN_FLUSH_MS);
        rd_kafka_poll(pl.dlq, 0);
        rl_shutdown_phase(sd, "committing offsets");
        commit_bounded(&ks, RL_SHUTDOWN_COMMIT_MS);
        rl_shutdown_phase(sd, "closing the consumer");
        ks.closing = 1;
        closed = close_bounded(&ks, RL_SHUTDOWN_CLOSE_MS);
        /* librdkafka can wait in rd_kafka_destroy long after the offsets
         * are committed and the leases released: before 2.6.1 forever
         * once its broker came back as another cluster, and 2.8 until
         * the session times out when its close met a rebalance (members
         * leaving together under cooperative-sticky). Nothing is left to
         * lose by then: the process goes on without it. */
        rl_shutdown_phase(sd, "destroying the consumer");
        if (!rl_shutdown_destroy_kafka(
                ks.rk, closed ? 0 : RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE,
                RL_SHUTDOWN_DESTROY_MS))
            rl_log_warn(NULL,
                        "librdkafka did not destroy the consumer within %d "
                        "ms; exiting without it (the leases are released "
                        "and the offsets committed as far as the broker took "
                        "them; the group takes the partitions back when the "
                        "session times out)",
                        RL_SHUTDOWN_DESTROY_MS);
        ks.rk = NULL;
    }
    if (relay_started) {
        rl_shutdown_phase(sd, "stopping the relay");
        pthread_join(relay_tid, NULL);
        if (rt.rc != 0)
            rc = RL_EXIT_FAILURE;
    }
    rl_model_destroy(pl.model);
    rl_otlp_destroy(pl.otlp);
    if (pl.dlq) {
        rl_shutdown_phase(sd, "flushing the dead-letter producer");
        rd_kafka_flush(pl.dlq, RL_SHUTDOWN_FLUSH_MS);
        rl_pipeline_retry_dead_letters(&pl, 1);
        rl_shutdown_phase(sd, "destroying the dead-letter producer");
        rd_kafka_destroy(pl.dlq);
    }
    if (ks.assignment)
        rd_kafka_topic_partition_list_destroy(ks.assignment);
    rl_offsets_destroy(ks.offsets);
    rl_epochs_free(&ks.epochs);
    if (ks.floors_pending)
        rd_kafka_topic_partition_list_destroy(ks.floors_pending);
    free(pl.seeks);
    /* The ledger has ended: a second signal has no lease to release, and
     * nothing may wake the pipeline whose locks go below. */
    rl_shutdown_finish(sd);
    rl_queue_destroy(&pl.intake);
    rl_queue_destroy(&pl.results);
    rl_queue_destroy(&pl.done);
    rl_queue_destroy(&pl.answers);
    rl_queue_destroy(&pl.landed);
    pthread_cond_destroy(&pl.wake);
    pthread_mutex_destroy(&pl.wake_lock);
    pthread_mutex_destroy(&pl.dlq_lock);
    pthread_mutex_destroy(&pl.seek_lock);
    free(pl.floors);
    pthread_rwlock_destroy(&pl.dlq_swap);
    rl_log_info(NULL,
                "stopped: events=%lld completed=%lld duplicates=%lld "
                "dead_letters=%lld",
                (long long)pl.counters.events, (long long)pl.counters.completed,
                (long long)pl.counters.duplicates,
                (long long)pl.counters.dead_letters);
    rl_http_stop(pl.http);
    rl_config_destroy(pl.cfg);
    return rc;
}
