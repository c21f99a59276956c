#ifndef RL_DEADLETTER_H
#define RL_DEADLETTER_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

/* The dead-letter record, the same whatever produced it: the consumer's
 * intake, a run that failed for good, or the outbox relay. Every dead
 * letter carries each header of RL_DEADLETTER_HEADERS exactly once (empty
 * when unknown), so `runledger dlq` and any other reader find the same
 * fields everywhere (docs/operations.md, "Dead letters"). */

/* What produced a dead letter: the "source" header. */
enum rl_deadletter_source {
    RL_DEADLETTER_INTAKE, /* an event refused before it became a run */
    RL_DEADLETTER_RUN,    /* a run that failed for good */
    RL_DEADLETTER_OUTBOX, /* a notification the broker refused for good */
};

/* What the value of a dead letter is: the "value_kind" header. */
enum rl_deadletter_value {
    RL_DEADLETTER_VALUE_NONE,    /* empty: nothing to replay */
    RL_DEADLETTER_VALUE_EVENT,   /* the original Kafka event, byte for byte */
    RL_DEADLETTER_VALUE_REBUILT, /* the event rebuilt from the ledger row */
};

/* The headers every dead letter carries, in this order, and how many. */
extern const char *const rl_deadletter_header_names[];
#define RL_DEADLETTER_NHEADERS 12

/* The fields of one dead letter; strings are borrowed, NULL is "". */
struct rl_deadletter {
    const char *reason; /* stable machine-readable code */
    const char *detail; /* a human sentence */
    enum rl_deadletter_source source;
    enum rl_deadletter_value value_kind;
    const char *source_topic; /* where the event was read */
    int32_t source_partition; /* < 0: unknown */
    int64_t source_offset;    /* < 0: unknown */
    const char *run_id;
    const char *job;
    const char *tenant;
    const char *channel; /* outbox dead letters */
};

/* "intake", "run" or "outbox". */
const char *rl_deadletter_source_name(enum rl_deadletter_source source);

/* "none", "event" or "rebuilt". */
const char *rl_deadletter_value_name(enum rl_deadletter_value kind);

/* New headers for dl: every name of rl_deadletter_header_names once,
 * dead_lettered_at set to now (UTC, RFC 3339 with milliseconds). The
 * caller adds extras (payload_bytes, truncated_from) and hands them to
 * rd_kafka_producev, or destroys them. Never NULL (librdkafka aborts on
 * out of memory). */
rd_kafka_headers_t *rl_deadletter_headers_new(const struct rl_deadletter *dl);

/* Rebuilds the schedule event of a run from what the ledger stores:
 * job, tenant, scheduled_at (UTC, floored), version, request (the
 * effective request {"notify":[...],"request":{...}[,"approval":{...}]})
 * and raw_input (JSON or NULL). The rebuilt event validates to the same
 * run ID and fingerprint as the original (no window: scheduled_at is
 * already floored). Returns a malloc'd NUL-terminated string (its length
 * in *len) or NULL with errstr set. */
char *rl_deadletter_event_rebuild(const char *job, const char *tenant,
                                  const char *scheduled_at, const char *version,
                                  const char *request, const char *raw_input,
                                  size_t *len, char *errstr,
                                  size_t errstr_size);

#endif /* RL_DEADLETTER_H */
