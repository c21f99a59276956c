#ifndef RL_DB_POSITIONS_H
#define RL_DB_POSITIONS_H

#include <stddef.h>
#include <stdint.h>

#include "rl/db_conn.h"

/* Each partition's consumed position in the ledger (consumed_positions,
 * schema/033_consumed_positions.sql): one past the contiguous offsets
 * whose events the ledger handled, never past one it does not hold
 * (rl_advance_positions). rl_claim_runs moves it in the transaction
 * that registers the runs; a consumer reads it to find registrations a
 * failover lost (common/src/db/positions.c). Conventions: rl/db_conn.h. */

struct rl_db;

/* Notes events the ledger handled without registering a run, such as
 * those the intake dead-lettered: element i is the range [firsts[i],
 * next_offsets[i]) of topic's partitions[i], an event and the offsets
 * before it that Kafka never delivered. Each position moves over the
 * ranges contiguous with it (never back, never past a gap); ranges of
 * events registered in transactions committed before may be named too.
 * n may be 0. Returns 0 or an rl_err. */
int rl_db_note_positions(struct rl_db *db, const char *topic,
                         const int32_t *partitions, const int64_t *firsts,
                         const int64_t *next_offsets, size_t n, char *errstr,
                         size_t errstr_size);

/* Reads the positions of topic's partitions[0..n) into next_offsets
 * (-1 where the ledger has none). Returns 0 or an rl_err. */
int rl_db_read_positions(struct rl_db *db, const char *topic,
                         const int32_t *partitions, size_t n,
                         int64_t *next_offsets, char *errstr,
                         size_t errstr_size);

/* Since when the ledger keeps consumed positions (positions_kept,
 * schema/088_positions_kept_since.sql), in ms since the epoch, into
 * *since_ms (0 when unknown). Returns 0 or an rl_err. */
int rl_db_positions_kept_since(struct rl_db *db, int64_t *since_ms,
                               char *errstr, size_t errstr_size);

/* The server's synchronous_standby_names into out ("" when empty: no
 * commit waits for a standby). Returns 0 or an rl_err. */
int rl_db_synchronous_standby_names(struct rl_db *db, char *out,
                                    size_t out_size, char *errstr,
                                    size_t errstr_size);

#endif /* RL_DB_POSITIONS_H */
