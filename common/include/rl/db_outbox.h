#ifndef RL_DB_OUTBOX_H
#define RL_DB_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "rl/runid.h"

/* The outbox relay's statements: batches locked and finished, wake-ups,
 * and the outbox's vacuum (common/src/db/outbox.c). Conventions:
 * rl/db_conn.h. */

struct rl_db;

/* One pending notification with its run's identity. */
struct rl_outbox_row {
    char run_id[RL_HEX_SIZE];
    char *channel;
    char *job;
    char *tenant;
    char *payload;        /* JSON text */
    int delivery_count;   /* earlier delivery attempts */
    char ctid[32];        /* the locked row's tuple id, e.g. "(12,3)" */
    char traceparent[56]; /* the run's stored traceparent, "" when none */
    int64_t lease_epoch;  /* the run's epoch: names its last run span */
};

/* Leases up to limit of the oldest due outbox rows that no other relay
 * is taking (FOR UPDATE SKIP LOCKED, then due again only lease_ms from
 * now), bounded by bytes as well when max_bytes > 0: rows are taken in
 * due order while the notification bytes before them (estimated from
 * what is stored) are under max_bytes, so a batch holds at most max_bytes
 * plus one notification, and at least one row when any is due. One
 * statement, committed: nothing stays open while the broker is asked.
 * *rows receives a new array of *n_rows rows (free with
 * rl_db_outbox_rows_free; NULL when none). *full (when not NULL) is set
 * when the batch reached either bound, so that more rows may be due at
 * once. Returns 0 or RL_ERR_INVALID / RL_ERR_DB / RL_ERR_NOMEM. */
int rl_db_outbox_lock_batch_bytes(struct rl_db *db, int limit,
                                  long long max_bytes, long lease_ms,
                                  struct rl_outbox_row **rows, size_t *n_rows,
                                  int *full, char *errstr, size_t errstr_size);

/* What became of one locked row. */
enum rl_outbox_fate {
    RL_OUTBOX_RETRY = 0, /* not acknowledged: stays pending, backs off */
    RL_OUTBOX_DELIVERED, /* acknowledged: moves to outbox_delivered */
    RL_OUTBOX_DEAD,      /* refused for good: moves to outbox_dead */
};

struct rl_outbox_outcome {
    enum rl_outbox_fate fate;
    char reason[128]; /* RETRY: last_error; DEAD: the reason ("" none) */
};

/* Records an outcome per leased row (outcomes[i] for rows[i]), in one
 * statement: delivered rows move to outbox_delivered (delivered_at now(),
 * delivery_count + 1), dead ones to outbox_dead with their reason, and
 * retried ones stay pending with delivery_count + 1, last_error set and
 * due again in retry_base_ms * 2^(earlier delivery attempts), at most
 * retry_max_ms (0 and 0: due at once). A row another relay leased since
 * (this lease ran out) is left to it. n == 0 does nothing. Returns 0, or
 * RL_ERR_NOMEM / RL_ERR_DB (every row stays pending, due when its lease
 * ends; the idempotency-key header makes the redelivery harmless). */
int rl_db_outbox_finish_rows(struct rl_db *db, const struct rl_outbox_row *rows,
                             size_t n, const struct rl_outbox_outcome *outcomes,
                             long retry_base_ms, long retry_max_ms,
                             char *errstr, size_t errstr_size);

/* Frees an array from rl_db_outbox_lock_batch_bytes; NULL is accepted. */
void rl_db_outbox_rows_free(struct rl_outbox_row *rows, size_t n);

/* Subscribes the session to the outbox's wake-ups: every statement that
 * queues outbox rows notifies channel runledger_outbox at commit
 * (schema/009_outbox_wakeup.sql), and makes it a relay session, whose
 * plans read the outbox by index only (enable_seqscan and enable_sort
 * off: see common/src/db/outbox.c). Call it on the relay's own connection
 * before its first batch. Returns 0 or RL_ERR_DB. */
int rl_db_outbox_listen(struct rl_db *db, char *errstr, size_t errstr_size);

/* On a listening session outside a transaction: waits up to timeout_ms
 * for a wake-up (one already received counts). Returns 1 (woken), 0 (the
 * time passed) or RL_ERR_DB (the connection is gone). */
int rl_db_outbox_wait(struct rl_db *db, long timeout_ms, char *errstr,
                      size_t errstr_size);

/* The outbox's rows are all deleted within moments of their insert.
 * Autovacuum visits a database at most once per autovacuum_naptime (a
 * minute by default); between visits every insert extends the heap, so at
 * thousands of notifications a second the pending set of a few hundred
 * rows spreads over a hundred megabytes that every relay scan and insert
 * walks. The relay therefore vacuums it every RUNLEDGER_RELAY_VACUUM_ROWS
 * delivered rows, on a connection of its own so delivery goes on
 * meanwhile.
 *
 * rl_db_outbox_vacuum_start sends VACUUM (SKIP_LOCKED, TRUNCATE false)
 * outbox on db (a connection used for nothing else, outside a
 * transaction) and returns at once: 1 when sent, 0 when this session's
 * role may not vacuum the outbox (neither its owner nor the database's;
 * checked once per session), or RL_ERR_INVALID / RL_ERR_DB.
 * rl_db_outbox_vacuum_poll then returns 1 while it runs, 0 once it is
 * done (or none was sent), RL_ERR_DB if it failed. */
int rl_db_outbox_vacuum_start(struct rl_db *db, char *errstr,
                              size_t errstr_size);
int rl_db_outbox_vacuum_poll(struct rl_db *db, char *errstr,
                             size_t errstr_size);

#endif /* RL_DB_OUTBOX_H */
