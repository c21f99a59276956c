#ifndef RL_DB_RECEIVE_H
#define RL_DB_RECEIVE_H

#include <stddef.h>
#include <stdint.h>

/* The reference receiver's write: `runledger receive`
 * (schema/005_receiver.sql, common/src/db/receive.c). Conventions:
 * rl/db_conn.h; operator statements run unprepared (a command runs each once).
 */

struct rl_db;

/* What the receiver did with one notification. */
enum rl_receive_status {
    RL_RECEIVE_APPLIED,   /* first time this key was seen: row inserted */
    RL_RECEIVE_DUPLICATE, /* the key is known with the same payload */
    RL_RECEIVE_CONFLICT   /* the key is known with another payload: refused,
                             recorded in receiver_conflicts */
};

/* One notification as the receiver read it. Borrowed. */
struct rl_received {
    const char *idempotency_key;
    const char *payload_json;
    const char *topic; /* where it was read */
    int32_t partition;
    int64_t offset;
};

/* `runledger receive`: applies one notification keyed by idempotency_key
 * (INSERT ... ON CONFLICT DO NOTHING into received_notifications); a known
 * key with another payload (compared as jsonb) is never overwritten.
 * Returns 0 with *status set, RL_ERR_INVALID (payload not JSON) or
 * RL_ERR_DB. */
int rl_db_receive(struct rl_db *db, const struct rl_received *msg,
                  enum rl_receive_status *status, char *errstr,
                  size_t errstr_size);

#endif /* RL_DB_RECEIVE_H */
