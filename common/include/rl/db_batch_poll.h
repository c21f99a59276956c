#ifndef RL_DB_BATCH_POLL_H
#define RL_DB_BATCH_POLL_H

/* The poll stage of a batch (common/src/db/batch_poll.c): a submitted
 * batch leased together with a poll slot of its provider
 * (schema/functions/rl_batch_take_poll.sql), whether anyone still
 * waits for its answers, and, for the orphan sweep of the provider's
 * list, whether the ledger reads a provider batch at all. Conventions:
 * rl/db_conn.h. */

#include <stddef.h>
#include <stdint.h>

#include "rl/db_batch_lease.h"

struct rl_db;

/* rl_batch_take_poll: leases the submitted batch whose poll is most
 * overdue, as rl_db_batch_take does, only together with a poll slot of
 * provider (the group's polls of it spaced at least spacing_ms apart,
 * schema/063_batch_poll_slots.sql). *taken gets 1 with *out filled, or 0
 * (no batch due, or no slot free: nothing changed). Returns 0 or
 * RL_ERR_DB. */
int rl_db_batch_take_poll(struct rl_db *db, const char *owner, int64_t lease_ms,
                          const char *provider, int64_t spacing_ms,
                          struct rl_batch *out, int *taken, char *errstr,
                          size_t errstr_size);

/* *live gets the runs of batch_id neither cancelled nor finished. */
int rl_db_batch_live_runs(struct rl_db *db, const char *batch_id, int *live,
                          char *errstr, size_t errstr_size);

/* *in_use gets 1 when batch mode is or was used in this ledger (a job
 * set to it, or a batch formed), 0 otherwise: a ledger that never
 * batched has no provider batches to sweep. Returns 0 or RL_ERR_DB. */
int rl_db_batch_in_use(struct rl_db *db, int *in_use, char *errstr,
                       size_t errstr_size);

/* *unread gets 1 when the ledger never reads provider batch
 * provider_batch_id of the intent local_id: it holds no intent of
 * local_id (lost by a failover to a standby that lacked it), or that
 * intent has ended without adopting provider_batch_id. 0 when the
 * intent is open (intent or submitted: its own poll deals with strays)
 * or ended with that batch. Returns 0 or RL_ERR_DB. */
int rl_db_batch_unread(struct rl_db *db, const char *local_id,
                       const char *provider_batch_id, int *unread, char *errstr,
                       size_t errstr_size);

#endif /* RL_DB_BATCH_POLL_H */
