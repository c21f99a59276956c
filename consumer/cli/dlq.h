#ifndef RL_CLI_DLQ_H
#define RL_CLI_DLQ_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

struct rl_config;

/* The dead-letter topic as `runledger dlq` and the console's dead-letters
 * page read it, and the replay both run (dlq.c): a consumer of its own
 * that assigns partitions and commits nothing, so it never moves a
 * group's offsets; the replay re-publishes a dead letter's original event
 * to the schedule topic after `publish`'s validation. The headers read
 * are those of rl/deadletter.h. */

/* The dead letters a read selects. */
struct rl_cli_dlq_filter {
    const char *reason; /* the reason header is it, or starts "<it>:" */
    const char *run_id; /* the run_id header is it */
    int64_t since_ms;   /* -1: all */
    int32_t partition;  /* -1: all */
    int64_t offset;     /* -1: all (with partition) */
    /* Bounded reads (the console's pages): > 0 reads at most the last
     * tail records of each partition before its end; 0 from the start. */
    int64_t tail;
    /* ends[p] (p < nends), in: the end (exclusive) to read partition p
     * to, -1 for its high watermark; out: the end it read to (0 when the
     * partition holds nothing). NULL: every partition to its high
     * watermark. */
    int64_t *ends;
    size_t nends;
};

/* The filter that selects every dead letter. */
#define RL_CLI_DLQ_ALL                                                         \
    {                                                                          \
        NULL, NULL, -1, -1, -1, 0, NULL, 0                                     \
    }

/* Called for each selected dead letter, partition by partition in offset
 * order; returns 1 to stop reading. rkm is borrowed for the call. */
typedef int(rl_cli_dlq_fn)(const rd_kafka_message_t *rkm, void *opaque);

/* Reads RUNLEDGER_DLQ_TOPIC from the start the filter asks for to the high
 * watermarks found first (or f->ends), calling fn for each selected
 * record. Returns 0 (with errstr "" or, when the topic does not exist, a
 * note saying so), RL_ERR_INVALID (bad Kafka settings) or RL_ERR_KAFKA;
 * errstr says why. Every wait is bounded (a read idle for 30 s fails). */
int rl_cli_dlq_read(const struct rl_config *cfg,
                    const struct rl_cli_dlq_filter *f, rl_cli_dlq_fn *fn,
                    void *opaque, char *errstr, size_t errstr_size);

/* The last value of header name of rkm into buf ("" when absent), cut to
 * size. */
void rl_cli_dlq_header(const rd_kafka_message_t *rkm, const char *name,
                       char *buf, size_t size);

/* Why the dead letter cannot be replayed into why ("" when it can):
 * outbox dead letters and dead letters without an event carry none to
 * replay; an event cut to fit (truncated_from) is not the original. */
void rl_cli_dlq_not_replayable(const rd_kafka_message_t *rkm, char *why,
                               size_t size);

/* What the replay did with one selected dead letter: outcome is "sent",
 * "would-send" (dry run), "invalid" (the event fails validation; detail
 * "reason: error"), "not-replayable" (detail: why) or "failed-run" (a
 * note before it is sent: its run failed, and the ledger acknowledges
 * the event as a duplicate while it stays failed). pos is "P/O"; run_id
 * is NULL when there is none. Everything is borrowed for the call. */
typedef void(rl_cli_dlq_outcome_fn)(void *opaque, const char *pos,
                                    const char *outcome, const char *run_id,
                                    const char *detail);

struct rl_cli_dlq_replay_counts {
    long sent; /* sent and acknowledged (or would be, dry run) */
    long invalid;
    long unreplayable;
    int failed; /* a batch was not acknowledged, or out of memory */
};

/* `dlq replay`: re-publishes the original events of the dead letters f
 * selects to RUNLEDGER_TOPIC (key = tenant) with `publish`'s producer,
 * each validated as `publish` does, in batches so memory stays bounded;
 * with dry_run it validates and sends nothing. outcome is called for each
 * (may be NULL). command names the caller in the producer's messages.
 * Returns what rl_cli_dlq_read returns; counts says what was done. */
int rl_cli_dlq_replay(const char *command, const struct rl_config *cfg,
                      const struct rl_cli_dlq_filter *f, int dry_run,
                      rl_cli_dlq_outcome_fn *outcome, void *opaque,
                      struct rl_cli_dlq_replay_counts *counts, char *errstr,
                      size_t errstr_size);

#endif /* RL_CLI_DLQ_H */
