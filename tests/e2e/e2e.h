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

#include "rl/db_conn.h"
#include "rl/runid.h"

/* Every process a test spawns keeps its slot, restarts included. The
 * chaos test restarts a victim every 1.5 to 3 s for up to 240 s, so a slow
 * machine that takes the whole 240 s spawns up to 166. */
#define E2E_MAX_PROCS 256
#define E2E_MAX_PARAMS 8

struct e2e {
    const char *bootstrap;
    const char *model_base_url;
    char name[96];    /* unique prefix for topics, group, schema */
    char topic[128];  /* schedules */
    char notify[128]; /* notifications */
    char dlq[128];    /* dead letters */
    char schema[128];
    char database_url[1024]; /* DATABASE_URL with the schema's search_path */
    struct rl_db *db;        /* the test's own connection to the ledger */
    rd_kafka_t *producer;
    pid_t procs[E2E_MAX_PROCS];
    int nprocs;
    /* A stub model of the test's own (e2e_stub_start), stopped by
     * e2e_teardown, or at exit when a requirement failed. */
    pid_t stub_pid;
    char stub_url[256]; /* its MODEL_BASE_URL */
};

/* Creates topics (partitions for the schedule topic), the ledger schema,
 * migrates it, and an idempotent producer. Fails the test on error. */
void e2e_setup(struct e2e *t, const char *prefix, int partitions);

/* As e2e_setup, against the given PostgreSQL URL and Kafka bootstrap
 * servers instead of the shared ones (NULL: the shared one), e.g. the
 * private instances of e2e_private_pg / e2e_private_kafka. */
void e2e_setup_at(struct e2e *t, const char *prefix, int partitions,
                  const char *database_url, const char *bootstrap);

/* Starts a PostgreSQL of the test's own in dir (tests/harness/pg.sh start)
 * and copies its URL into url. Killed at e2e_teardown or process exit.
 * Fails the test when it cannot start. Call it before e2e_setup_at. */
void e2e_private_pg(const char *dir, char *url, size_t size);

/* Starts a PostgreSQL primary with one streaming standby in dir
 * (tests/harness/pg_replica.sh start, PG_REPLICA_MODE mode) and copies its
 * multi-host URL into url; the standby restarts on a port of its own at
 * the failover, below the ephemeral range, spread by pid. Destroyed at
 * process exit. Fails the test when it cannot start. */
void e2e_replica_pair(const char *dir, const char *mode, char *url,
                      size_t size);

/* Starts a Kafka broker of the test's own in dir (tests/harness/kafka.sh
 * start) and copies its bootstrap servers into servers. Killed at
 * e2e_teardown or process exit. Call it before e2e_setup_at. */
void e2e_private_kafka(const char *dir, char *servers, size_t size);

/* Runs tests/harness/<script> <cmd> <dir> (e.g. "pg.sh", "kill"); returns
 * its exit status (0 ok). */
int e2e_harness(const char *script, const char *cmd, const char *dir);

/* Starts a stub model of the test's own with extra environment entries
 * (NULL-terminated, e.g. "STUB_DEDUPE=1") and points the processes the
 * test spawns afterwards (and e2e_stub_generations) at it. */
void e2e_stub_start(struct e2e *t, const char *const *env);

/* Stops every process still running (SIGKILL), drops the schema, frees. */
void e2e_teardown(struct e2e *t);

/* Produces value with key to the schedule topic and waits for the ack. */
void e2e_produce(struct e2e *t, const char *key, const char *value);

/* Waits until every produced message is acknowledged. */
void e2e_flush(struct e2e *t);

/* Starts `runledger <cmd>` with the test's environment plus extra
 * NAME=value entries (NULL-terminated, may be NULL), which override both
 * the settings above and the inherited environment. Returns its slot.
 * Its stderr goes to <name>.<slot>.log in the current directory. */
int e2e_spawn(struct e2e *t, const char *cmd, const char *const *extra_env);

/* Writes "DATABASE_URL=<url>" to var: the URL `runledger <cmd>` started
 * with extra_env gets from e2e_spawn. That is t->database_url (the
 * migrating user), or with RL_TEST_DB_ROLES=1 for a service component a
 * login of its role (consume, receive, scheduler, relay, console). For
 * the harnesses that start the binary themselves. A DATABASE_URL entry in
 * extra_env still overrides it where the harness applies extras. */
void e2e_database_url(struct e2e *t, const char *cmd,
                      const char *const *extra_env, char *var, size_t size);

/* 1 when a line of the file at path contains text. */
int e2e_file_has(const char *path, const char *text);

/* 1 when the log of the process in slot (<name>.<slot>.log) has a line
 * holding text, else 0. */
int e2e_log_has(const struct e2e *t, int slot, const char *text);

/* A field of /proc/pid/status (e.g. "VmHWM:", "VmRSS:") in kB, or -1. */
long e2e_status_kb(pid_t pid, const char *field);

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

/* e2e_group_lag for another consumer group on the schedule topic. */
int64_t e2e_group_lag_of(struct e2e *t, const char *group);

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

/* A figure of the stub's /stats?key=key, e.g. "requests" (completion
 * requests that carried the key, faulted ones included) (-1 on error). */
long e2e_stub_key_stat(struct e2e *t, const char *key, const char *name);

/* The most calls the stub had in flight at once for key (its
 * STUB_CONCURRENCY_KEY), since start or reset; 0 for a key never seen,
 * -1 on error. */
long e2e_stub_max_concurrent(struct e2e *t, const char *key);

/* A whole-stub figure of the stub's /stats, e.g. "in_flight",
 * "max_in_flight", "requests" (-1 on error). */
long e2e_stub_stat(struct e2e *t, const char *name);

/* Writes schedule event number i of job for tenant into buf: scheduled
 * 2026-08-07T09:00:00Z + i hours, version v1, input {"doc": i}, model
 * stub-1, one user message "summarise {{input}} <directive>" (directive
 * may be NULL or a stub fault such as "[[fault:500 times=2]]"), notify
 * ["email","slack"]. Fills run_id (RL_HEX_SIZE) when not NULL. */
void e2e_event(char *buf, size_t size, const char *job, const char *tenant,
               int i, const char *directive, char *run_id);

/* Produces e2e_event(...) keyed by tenant; fills run_id when not NULL. */
void e2e_produce_event(struct e2e *t, const char *job, const char *tenant,
                       int i, const char *directive, char *run_id);

/* e2e_int of a printf-formatted query. */
int64_t e2e_intf(struct e2e *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* e2e_text of a printf-formatted query (static buffer). */
const char *e2e_textf(struct e2e *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Polls the formatted one-value query every 100 ms until it returns want
 * or timeout_ms passes. Returns 1 when it did; on timeout prints the query
 * and the last value and returns 0. */
int e2e_wait_intf(struct e2e *t, int64_t want, long timeout_ms, const char *fmt,
                  ...) __attribute__((format(printf, 4, 5)));

/* Waits up to timeout_ms until n runs of job are completed; 1 when they
 * are, 0 otherwise (the query is printed). */
int e2e_wait_completed(struct e2e *t, const char *job, int n, long timeout_ms);

/* Waits up to 60 s until n runs of job are completed, then up to 30 s
 * until the ledger holds 2 n delivered notifications (every run of the
 * test notifies two channels). Returns 1 when both held, 0 otherwise (the
 * query that timed out is printed). */
int e2e_wait_completed_and_delivered(struct e2e *t, const char *job, int n);

/* Waits until the process in slot is stopped (SIGSTOP, e.g. a "pause"
 * failpoint) or exited. Returns 1 when stopped, 0 otherwise. */
int e2e_wait_stopped(struct e2e *t, int slot, long timeout_ms);

/* Waits until the process in slot exits; returns its waitpid status, or
 * -1 when it still runs after timeout_ms. */
int e2e_wait_exit(struct e2e *t, int slot, long timeout_ms);

/* Sends SIGTERM to the process in slot and waits up to timeout_ms for it
 * to exit; returns 1 when it exited with status 0, else 0. */
int e2e_stop(struct e2e *t, int slot, long timeout_ms);

/* Messages of topic whose header name equals value (value NULL: all). */
long e2e_count_with_header(struct e2e *t, const char *topic, const char *name,
                           const char *value);

/* Polls cond(opaque) every 100 ms until it returns non-zero or timeout_ms
 * passes; returns the last value. */
int e2e_wait(int (*cond)(struct e2e *t, void *opaque), struct e2e *t,
             void *opaque, long timeout_ms);

#endif /* RL_E2E_H */
