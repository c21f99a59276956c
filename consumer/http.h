#ifndef RL_HTTP_H
#define RL_HTTP_H

/* Health and metrics of one process on RUNLEDGER_HTTP_PORT
 * (libmicrohttpd, its own epoll thread: descriptors above 1024 are served;
 * up to 4096 connections, 1024 from one address, idle ones closed after
 * 5 s):
 *
 *   /healthz  200 while the main loop turned within
 *             RUNLEDGER_LIVENESS_SECONDS and (consume) the ledger thread
 *             within RUNLEDGER_LEDGER_LIVENESS_SECONDS, else 503
 *   /readyz   200 when PostgreSQL answers (checked every
 *             RUNLEDGER_HEALTH_INTERVAL_SECONDS on a connection of its
 *             own) and, for `consume`, the process is in the consumer
 *             group; else 503 with the reason (a class such as
 *             "postgresql: could not connect: connection refused", never
 *             a host, user or database name: those go to the log); 503
 *             while dead letters are undelivered; 503 once stopping
 *   /metrics  Prometheus text format 0.0.4 (names in docs/operations.md)
 *
 * Every function accepts h == NULL and then does nothing, so the callers
 * need no "is the port on" checks: with RUNLEDGER_HTTP_PORT=0 there is no
 * server, no thread and no connection.
 * @locality any thread unless noted */

#include <stddef.h>

#include "counters.h"
#include "rl/config.h"
#include "rl/model.h"

struct rl_http;

/* Starts the server for role "consume" or "relay". counters and in_flight
 * (both may be NULL) are read at every scrape and must outlive the server.
 * Sets *out to the new server (free with rl_http_stop), or to NULL when
 * cfg->http_port is 0. Returns 0, or -1 with errstr set (e.g. the port is
 * taken). */
int rl_http_start(const struct rl_config *cfg, const char *role,
                  struct rl_counters *counters, atomic_long *in_flight,
                  struct rl_http **out, char *errstr, size_t errstr_size);

/* Stops the server and its health thread and frees h. */
void rl_http_stop(struct rl_http *h);

/* The main loop turned: /healthz stays 200. */
void rl_http_heartbeat(struct rl_http *h);

/* The ledger thread's loop turned. Once it has, /healthz also answers 503
 * when it has not turned for RUNLEDGER_LEDGER_LIVENESS_SECONDS.
 * @locality any thread */
void rl_http_ledger_turned(struct rl_http *h);

/* The relay loop turned: the liveness of `runledger relay`. Ignored in
 * `consume`, whose liveness is its Kafka loop (a relay thread turning
 * must not hide a stalled consumer). */
void rl_http_relay_turned(struct rl_http *h);

/* Consumer group membership for /readyz: joined after an assignment
 * (of any number of partitions), not joined after a revoke. Counts a
 * rebalance of that kind. @locality kafka thread */
void rl_http_group(struct rl_http *h, int joined, int partitions);

/* The scheduler's figures (consumer/scheduler.c): the gauge of missing
 * windows is cleared before each audit, so a removed schedule leaves no
 * series; then one series per schedule. */
void rl_http_schedules_reset(struct rl_http *h);
void rl_http_schedule_missed(struct rl_http *h, const char *schedule,
                             double missed);
void rl_http_scheduler_state(struct rl_http *h, int active,
                             long long published);

/* The process is shutting down: /readyz answers 503 from now on. */
void rl_http_stopping(struct rl_http *h);

/* A model call finished: attempt outcome, generations, ambiguous
 * attempts, tokens by kind, attempt latency. @locality model thread */
void rl_http_model_call(struct rl_http *h, const struct rl_model_call *call);

/* An ambiguous call's answer was found in the endpoint's record and
 * adopted (consumer/ledger/reconcile.c): its tokens were billed and are
 * counted by kind, but it is no attempt and no new generation.
 * @locality ledger thread */
void rl_http_reconciled(struct rl_http *h, const struct rl_model_call *call);

/* A dead letter was acknowledged by the broker with reason (its code
 * before any ':' is the label, to keep the label set bounded). */
void rl_http_dead_letter(struct rl_http *h, const char *reason);

/* librdkafka statistics JSON (statistics.interval.ms): consumer lag per
 * assigned partition. @locality kafka thread */
void rl_http_kafka_stats(struct rl_http *h, const char *json, size_t len);

/* A relay batch of rows was acknowledged seconds after it was locked. */
void rl_http_relay_batch(struct rl_http *h, size_t rows, double seconds);

/* The relay set an outbox row aside, refused for good by the broker or
 * the producer; reason is the Kafka error's name (the label). */
void rl_http_outbox_dead_lettered(struct rl_http *h, const char *reason);

/* The ledger's statements fail on every new connection (reason), or
 * work again (NULL): meanwhile /readyz answers 503 with the reason.
 * @locality ledger thread */
void rl_http_ledger_failing(struct rl_http *h, const char *reason);

/* Dead letters produced and not acknowledged (undelivered, being
 * retried): while count > 0, /readyz answers 503 with "kafka: <count>
 * dead letters undelivered: <reason>", because the offsets of their events
 * cannot be committed past them. @locality kafka thread */
void rl_http_dead_letters_undelivered(struct rl_http *h, long count,
                                      const char *reason);

/* The relay vacuumed the outbox in seconds. */
void rl_http_outbox_vacuumed(struct rl_http *h, double seconds);

#endif /* RL_HTTP_H */
