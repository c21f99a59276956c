#ifndef RL_E2E_H
#define RL_E2E_H

/* Support for end-to-end tests: real Kafka broker, real PostgreSQL, the
 * stub model, and `runledger` processes started as a user would. Every test
 * gets topics, a consumer group and a ledger schema of its own, so tests
 * run in parallel and repeatedly against the same services. */

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rl/db.h"

#define E2E_MAX_PROCS 16

struct e2e {
    const char *bootstrap;
    const char *model_base_url;
    char name[96];      /* unique prefix for topics, group, schema */
    char topic[128];    /* schedules */
    char notify[128];   /* notifications */
    char dlq[128];      /* dead letters */
    char schema[128];
    char database_url[1024]; /* DATABASE_URL with the schema's search_path */
    struct rl_db *db;        /* the test's own connection to the ledger */
    rd_kafka_t *producer;
    pid_t procs[E2E_MAX_PROCS];
    int nprocs;
};

/* Creates topics (partitions for the schedule topic), the ledger schema,
 * migrates it, and an idempotent producer. Fails the test on error. */
void e2e_setup(struct e2e *t, const char *prefix, int partitions);

/* Stops every process still running (SIGKILL), drops the schema, frees. */
void e2e_teardown(struct e2e *t);

/* Produces value with key to the schedule topic and waits for the ack. */
void e2e_produce(struct e2e *t, const char *key, const char *value);

/* Waits until every produced message is acknowledged. */
void e2e_flush(struct e2e *t);

/* Starts `runledger <cmd>` with the test's environment plus extra
 * NAME=value entries (NULL-terminated, may be NULL). Returns its slot.
 * Its stderr goes to <name>.<slot>.log in the current directory. */
int e2e_spawn(struct e2e *t, const char *cmd, const char *const *extra_env);

/* Sends sig to the process in slot; with wait, reaps it and returns its
 * exit status as from waitpid (else 0). */
int e2e_signal(struct e2e *t, int slot, int sig, int wait);

/* 1 while the process in slot runs. */
int e2e_alive(struct e2e *t, int slot);

/* Integer value of a one-column query on the test's ledger (-1 on error). */
int64_t e2e_int(struct e2e *t, const char *sql);

/* Text value of a one-column query (static buffer, "" on error). */
const char *e2e_text(struct e2e *t, const char *sql);

/* Sum over partitions of (high watermark - committed offset of the
 * test's group); -1 when it cannot be read. 0 means every offset of the
 * schedule topic is committed. */
int64_t e2e_group_lag(struct e2e *t);

/* Reads every message of topic from the beginning to the current end.
 * Calls fn for each. Returns the number read. */
typedef void(e2e_msg_fn)(const rd_kafka_message_t *rkm, void *opaque);
long e2e_read_topic(struct e2e *t, const char *topic, e2e_msg_fn *fn,
                    void *opaque);

/* Value of header name of rkm copied into buf ("" when absent). */
void e2e_header(const rd_kafka_message_t *rkm, const char *name, char *buf,
                size_t size);

/* Generations the stub counted for Idempotency-Key key (-1 on error). */
long e2e_stub_generations(struct e2e *t, const char *key);

/* Polls cond(opaque) every 100 ms until it returns non-zero or timeout_ms
 * passes; returns the last value. */
int e2e_wait(int (*cond)(struct e2e *t, void *opaque), struct e2e *t,
             void *opaque, long timeout_ms);

#endif /* RL_E2E_H */
