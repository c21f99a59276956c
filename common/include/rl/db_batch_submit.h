#ifndef RL_DB_BATCH_SUBMIT_H
#define RL_DB_BATCH_SUBMIT_H

/* The submit stage of a batch (common/src/db/batch_submit.c): intents
 * formed from the waiting runs before any upload
 * (schema/functions/rl_batch_form.sql), intents leased, and the request
 * file written from the ledger. Conventions: rl/db_conn.h. */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rl/db_batch_lease.h"

struct rl_db;

/* rl_batch_form: the intents of at most max batches whose runs are due,
 * committed; *formed gets how many. Returns 0 or RL_ERR_DB. */
int rl_db_batch_form(struct rl_db *db, int max, int *formed, char *errstr,
                     size_t errstr_size);

/* Leases up to max intents whose lease is free or expired, for lease_ms,
 * the epoch bumped. Returns 0 with *n set, or RL_ERR_DB. */
int rl_db_batch_take(struct rl_db *db, const char *owner, int64_t lease_ms,
                     struct rl_batch *out, size_t max, size_t *n, char *errstr,
                     size_t errstr_size);

/* Writes the request file of b into f: one JSON line per run,
 * {"custom_id": "<run_id>:<attempt>", "method": "POST", "url": endpoint,
 * "body": ...}, read from the ledger a page at a time. *bytes gets the
 * file's size. Returns 0, RL_ERR_IO or RL_ERR_DB. */
int rl_db_batch_write_requests(struct rl_db *db, const struct rl_batch *b,
                               FILE *f, int64_t *bytes, char *errstr,
                               size_t errstr_size);

#endif /* RL_DB_BATCH_SUBMIT_H */
