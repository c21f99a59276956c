/* receive.c: the reference downstream consumer (`runledger receive`,
 * schema/005_receiver.sql): a notification is applied once per
 * idempotency key, and a known key with another payload is refused and
 * recorded, never overwritten. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_receive.h"
#include "rl/err.h"

static const char ops_receive_insert[] =
    "INSERT INTO received_notifications (idempotency_key, payload, topic,"
    "                                    kafka_partition, kafka_offset)"
    "VALUES ($1, $2::jsonb, $3, $4::int4, $5::int8)"
    "    ON CONFLICT DO NOTHING"
    " RETURNING 1";

static const char ops_receive_duplicate[] =
    "UPDATE received_notifications SET duplicates = duplicates + 1"
    " WHERE idempotency_key = $1 AND payload = $2::jsonb"
    " RETURNING 1";

static const char ops_receive_conflict[] =
    "INSERT INTO receiver_conflicts (idempotency_key, payload, topic,"
    "                                kafka_partition, kafka_offset)"
    "VALUES ($1, $2::jsonb, $3, $4::int4, $5::int8)";

int
rl_db_receive(struct rl_db *db, const struct rl_received *msg,
              enum rl_receive_status *status, char *errstr, size_t errstr_size)
{
    char part[16], off[32];
    const char *params[5] = {msg->idempotency_key, msg->payload_json,
                             msg->topic, part, off};
    PGresult *res;
    int err = RL_ERR_DB;
    int hit;

    *status = RL_RECEIVE_APPLIED;
    snprintf(part, sizeof(part), "%" PRId32, msg->partition);
    snprintf(off, sizeof(off), "%" PRId64, msg->offset);
    if (db_apply_schema(db, errstr, errstr_size) != 0)
        return RL_ERR_DB;
    res = db_exec_simple(db, ops_receive_insert, 5, params, &err, errstr,
                         errstr_size, "apply the notification");
    if (!res)
        return err;
    hit = PQntuples(res);
    PQclear(res);
    if (hit)
        return 0;
    /* A separate statement: it must see the row a concurrent receiver
     * committed after the insert's snapshot. */
    res = db_exec_simple(db, ops_receive_duplicate, 2, params, &err, errstr,
                         errstr_size, "compare the notification");
    if (!res)
        return err;
    hit = PQntuples(res);
    PQclear(res);
    if (hit) {
        *status = RL_RECEIVE_DUPLICATE;
        return 0;
    }
    *status = RL_RECEIVE_CONFLICT;
    res = db_exec_simple(db, ops_receive_conflict, 5, params, &err, errstr,
                         errstr_size, "record the conflicting notification");
    if (!res)
        return err;
    PQclear(res);
    return 0;
}
