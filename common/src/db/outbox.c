/* outbox.c: the relay's side of the transactional outbox: listening for
 * wake-ups, locking a batch of pending rows, moving delivered ones to
 * outbox_delivered, and vacuuming the outbox on a connection of its own. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_int.h"
#include "rl/db_outbox.h"
#include "rl/err.h"

/* Due first, oldest due first; rows another relay holds are skipped, not
 * waited for; rows backing off after a failure (due_at later than now())
 * are not read at all.
 *
 * The outbox is a queue: its row count swings between a few hundred and
 * a backlog, and the statistics say whatever it held at the last vacuum.
 * Both statements are written so that no estimate can make them cost more
 * than the batch: the inner query locks at most $1 rows through
 * outbox_due_idx, reading it only up to now(), and only those rows look
 * up their run. The join form (outbox JOIN runs ... ORDER BY ... LIMIT
 * ... FOR UPDATE) was planned, with the outbox believed to hold one row,
 * as every pending row joined to its run and sorted before the limit: in
 * a soak each batch then read 160,000 rows, 1.4 s, and the backlog fed
 * itself to 270,000. A filter on the due time over the created_at index
 * would have read every row backing off at every batch: with the broker
 * away, that is the whole backlog. The run's trace (traceparent, and the
 * lease epoch that names its run span) comes from the same run row the
 * join already reads for job and tenant: no copy in the outbox, no other
 * index. So does the standard envelope (explicit_payload NULL):
 * rl_envelope builds it from the run's identity and output, which never
 * change once it is completed, so every read of a row, a re-send
 * included, gives the same bytes.
 *
 * A batch is bounded by bytes as well as rows ($2; 0: rows only): the
 * rows are taken in due order while the notification bytes before them
 * are under the bound, so a batch holds at most the bound plus one
 * notification (a larger one goes alone), and the rows locked after the
 * cut stay pending for the next batch. The bytes are estimated from what
 * is stored, before any envelope is built: twice the stored size of an
 * uncompressed answer (jsonb's binary form against its text), the text's
 * length for a compressed one, which is what can be many times its
 * stored size, and 512 for the rest of the envelope.
 *
 * The rows taken are leased, not held locked while the broker is asked:
 * their due time moves to the end of the lease ($3 ms) and the statement
 * commits on its own, so no transaction stays open while the relay waits
 * for acknowledgements (up to the producer's message timeout when the
 * broker is away), which would hold back vacuum and a pooled server
 * connection. A relay that dies leaves its rows due when the lease ends.
 * The lease finds its rows by the ctids just locked (a TID scan of an
 * array, whatever the statistics say), not by a join on the batch. */
static const struct db_stmt lock_pending_outbox = {
    DB_STMT_LOCK_PENDING_OUTBOX, "lock_pending_outbox",
    "WITH picked AS MATERIALIZED ("
    "SELECT o.run_id, o.channel, o.job, o.tenant,"
    "       coalesce(o.explicit_payload,"
    "                rl_envelope(o.run_id, o.job, o.tenant,"
    "                            o.scheduled_at, o.version,"
    "                            o.channel, o.output)) AS payload,"
    "       o.delivery_count, o.ctid, o.traceparent, o.lease_epoch, o.upto,"
    "       o.due_at"
    "  FROM (SELECT s.*,"
    "               sum(s.est) OVER (ORDER BY s.due_at"
    "                                ROWS UNBOUNDED PRECEDING) AS upto"
    "          FROM (SELECT l.ctid, l.run_id, l.channel, l.explicit_payload,"
    "                       l.delivery_count, l.due_at, r.job, r.tenant,"
    "                       r.scheduled_at, r.version, r.output,"
    "                       r.traceparent, r.lease_epoch,"
    "                       512 + coalesce("
    "                         CASE WHEN pg_column_compression(p.v) IS NULL"
    "                              THEN 2 * pg_column_size(p.v)"
    "                              ELSE octet_length(p.v::text) END, 0)"
    "                         AS est"
    "                  FROM (SELECT ob.ctid, ob.run_id, ob.channel,"
    "                               ob.explicit_payload, ob.delivery_count,"
    "                               ob.due_at"
    "                          FROM outbox ob"
    "                         WHERE ob.due_at <= now()"
    "                         ORDER BY ob.due_at"
    "                         LIMIT $1::int8"
    "                           FOR UPDATE SKIP LOCKED) l"
    "                  JOIN runs r ON r.run_id = l.run_id"
    "                 CROSS JOIN LATERAL (SELECT coalesce(l.explicit_payload,"
    "                                                     r.output) AS v) p"
    "               ) s) o"
    " WHERE $2::int8 <= 0 OR o.upto - o.est < $2::int8"
    "), leased AS ("
    "  UPDATE outbox ob"
    "     SET due_at = now() + $3::float8 * interval '1 millisecond'"
    "   WHERE ob.ctid = ANY (ARRAY(SELECT p.ctid FROM picked p))"
    "  RETURNING ob.ctid AS leased_ctid, ob.run_id, ob.channel"
    ")"
    "SELECT p.run_id, p.channel, p.job, p.tenant, p.payload,"
    "       p.delivery_count, l.leased_ctid, p.traceparent, p.lease_epoch,"
    "       p.upto"
    "  FROM picked p"
    "  JOIN leased l ON l.run_id = p.run_id AND l.channel = p.channel"
    " ORDER BY p.due_at",
    3};

/* Each locked row gets its own outcome ($3, aligned with the ctids in $1
 * and the run ids in $2): 'delivered' rows leave the pending set for the
 * insert-only audit table with explicit_payload as it is (NULL for the
 * standard envelope, which rl_payload_as_sent gives back); 'dead' rows
 * (refused for good) move to outbox_dead with their reason ($4) and the
 * payload that was refused (rl_payload_as_sent: what the read sent);
 * 'retry' rows stay pending with their delivery count raised, the error
 * in last_error and a due time $5 ms * 2^(earlier deliveries) from now,
 * at most $6 ms. The rows are the ones this relay leased, named by the
 * ctid the lease gave them and checked against their run ids: a row whose
 * lease ran out and that another relay leased since has another ctid, and
 * is that relay's to finish. One statement, committed on its own.
 *
 * The batch is unnested once and joined to the outbox by ctid: a TID scan
 * per row of the batch, parameterized by it, whatever the statistics say
 * (the relay's session rules out the sequential scan). The form before it
 * looked each row's outcome up by array_position() in $1 and tested its
 * run id against all of $2, three times: comparisons in the square of the
 * batch: 24 ms for a batch of 1,000 rows against 6.7 ms now (3.6 and
 * 2.2 ms for 300). A join form planned as a nested loop over
 * the whole outbox (believed to hold one row) compared every pending row
 * with every row of the batch: 71 million comparisons, 18.6 s, in one
 * soak. */
static const struct db_stmt finish_outbox_rows = {
    DB_STMT_FINISH_OUTBOX_ROWS, "finish_outbox_rows",
    "WITH b AS ("
    "  SELECT b.tid, b.run_id, b.fate, b.reason"
    "    FROM unnest($1::tid[], $2::text[], $3::text[], $4::text[])"
    "         AS b(tid, run_id, fate, reason)"
    "), moved AS ("
    "  DELETE FROM outbox o USING b"
    "   WHERE o.ctid = b.tid AND o.run_id = b.run_id"
    "     AND b.fate = 'delivered'"
    "  RETURNING o.run_id, o.channel, o.explicit_payload, o.created_at,"
    "            o.delivery_count"
    "), audit AS ("
    "  INSERT INTO outbox_delivered (run_id, channel, explicit_payload,"
    "                                created_at,"
    "                                delivered_at, delivery_count)"
    "  SELECT m.run_id, m.channel, m.explicit_payload, m.created_at, now(),"
    "         m.delivery_count + 1"
    "    FROM moved m"
    "      ON CONFLICT DO NOTHING"
    "  RETURNING 1"
    "), dead AS ("
    "  DELETE FROM outbox o USING b"
    "   WHERE o.ctid = b.tid AND o.run_id = b.run_id AND b.fate = 'dead'"
    "  RETURNING o.run_id, o.channel,"
    "            rl_payload_as_sent(o.run_id, o.channel, o.explicit_payload)"
    "              AS payload,"
    "            o.created_at, o.delivery_count, b.reason"
    "), set_aside AS ("
    "  INSERT INTO outbox_dead (run_id, channel, payload, payload_bytes,"
    "                           created_at, dead_at, delivery_count, reason)"
    "  SELECT d.run_id, d.channel, d.payload,"
    "         octet_length(d.payload::text), d.created_at, now(),"
    "         d.delivery_count + 1, coalesce(d.reason, 'unspecified')"
    "    FROM dead d"
    "      ON CONFLICT DO NOTHING"
    "  RETURNING 1"
    "), retry AS ("
    "  UPDATE outbox o SET delivery_count = o.delivery_count + 1,"
    "         last_error = b.reason,"
    "         due_at = now() + least($6::float8, $5::float8"
    "                  * power(2, least(o.delivery_count, 30)))"
    "                  * interval '1 millisecond'"
    "    FROM b"
    "   WHERE o.ctid = b.tid AND o.run_id = b.run_id AND b.fate = 'retry'"
    "  RETURNING 1"
    ")"
    "SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM dead),"
    "       (SELECT count(*) FROM retry)",
    6};

void
rl_db_outbox_rows_free(struct rl_outbox_row *rows, size_t n)
{
    if (!rows)
        return;
    for (size_t i = 0; i < n; i++) {
        free(rows[i].channel);
        free(rows[i].job);
        free(rows[i].tenant);
        free(rows[i].payload);
    }
    free(rows);
}

/* The schema the session's outbox resolves to: the payload of its
 * wake-ups. */
static const char outbox_schema_sql[] =
    "SELECT n.nspname FROM pg_catalog.pg_class c"
    "  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.oid = 'outbox'::regclass";

/* The relay's session plans by index only. Its statements touch a batch
 * of rows that outbox_due_idx (the due, in order) or their
 * ctids name, and nothing else; the planner's alternatives (a sequential
 * scan, or the primary key, then a sort of every pending row) look cheaper
 * only when the statistics say the outbox is nearly empty, which a queue's
 * statistics often do: a vacuum that met a few live rows, or index entries
 * a long transaction kept from being removed. Off, they cost so much that
 * the index path wins whatever the estimates. That inflated cost (10^10
 * for the sort of the batch, which every plan keeps) would pass
 * jit_above_cost and have each batch compiled: 300 ms a statement, so
 * JIT is off for this session too.
 *
 * With the plan fixed by those settings whatever the statistics, the
 * session keeps one plan a statement (generic), where every other
 * session plans each call for its values: planned per call, the two
 * statements cost 0.48 ms of planning a batch, three times their
 * execution at 50 runs/s (pg_stat_statements with track_planning). */
static const char relay_session_sql[] =
    "SELECT set_config('enable_seqscan', 'off', false),"
    "       set_config('enable_sort', 'off', false),"
    "       set_config('jit', 'off', false),"
    "       set_config('plan_cache_mode', 'force_generic_plan', false)";

int
rl_db_outbox_listen(struct rl_db *db, char *errstr, size_t errstr_size)
{
    int err = RL_ERR_DB;
    PGresult *res =
        db_exec_simple(db, "LISTEN runledger_outbox", 0, NULL, &err, errstr,
                       errstr_size, "listen for the outbox");

    if (!res)
        return err;
    PQclear(res);
    res = db_exec_simple(db, relay_session_sql, 0, NULL, &err, errstr,
                         errstr_size, "set up the relay session");
    if (!res)
        return err;
    PQclear(res);
    res = db_exec_simple(db, outbox_schema_sql, 0, NULL, &err, errstr,
                         errstr_size, "find the outbox");
    if (!res)
        return err;
    free(db->outbox_schema);
    db->outbox_schema =
        PQntuples(res) == 1 ? strdup(PQgetvalue(res, 0, 0)) : NULL;
    PQclear(res);
    if (!db->outbox_schema) {
        rl_set_err(errstr, errstr_size,
                   "could not find the outbox: no outbox table on the path");
        return RL_ERR_DB;
    }
    return 0;
}

/* VACUUM is allowed to the table's owner and the database's owner
 * (superusers included), and from PostgreSQL 17 on to a role granted
 * MAINTAIN on it (runledger_relay is not the outbox's owner:
 * docs/deploying.md, Database roles); anyone else gets a warning and
 * nothing done. The CASE keeps MAINTAIN, unknown before 17, unevaluated
 * there. */
static const char outbox_vacuum_allowed_sql[] =
    "SELECT pg_has_role(c.relowner, 'USAGE')"
    "       OR pg_has_role(d.datdba, 'USAGE')"
    "       OR CASE WHEN current_setting('server_version_num')::int >= 170000"
    "               THEN has_table_privilege(c.oid, 'MAINTAIN')"
    "               ELSE false END"
    "  FROM pg_class c, pg_database d"
    " WHERE c.oid = 'outbox'::regclass AND d.datname = current_database()";

/* TRUNCATE false: the truncation at the end of a vacuum holds an ACCESS
 * EXCLUSIVE lock on the outbox, which every completion (its INSERT) would
 * queue behind; autovacuum still gives back the pages a backlog left. */
static const char outbox_vacuum_sql[] =
    "VACUUM (SKIP_LOCKED, TRUNCATE false) outbox";

int
rl_db_outbox_vacuum_start(struct rl_db *db, char *errstr, size_t errstr_size)
{
    int err = RL_ERR_DB;
    PGresult *res;

    if (db->vacuuming) {
        rl_set_err(errstr, errstr_size,
                   "could not vacuum the outbox: the session is busy");
        return RL_ERR_INVALID;
    }
    if (db->outbox_vacuum == 0) {
        res =
            db_exec_simple(db, outbox_vacuum_allowed_sql, 0, NULL, &err, errstr,
                           errstr_size, "check who may vacuum the outbox");
        if (!res)
            return err;
        db->outbox_vacuum =
            PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0 ? 1
                                                                           : -1;
        PQclear(res);
    }
    if (db->outbox_vacuum < 0)
        return 0;
    if (!PQsendQuery(db->conn, outbox_vacuum_sql)) {
        db_fail_msg(db, NULL, errstr, errstr_size, "vacuum the outbox");
        return RL_ERR_DB;
    }
    db->vacuuming = 1;
    return 1;
}

int
rl_db_outbox_vacuum_poll(struct rl_db *db, char *errstr, size_t errstr_size)
{
    PGresult *res;
    int failed = 0;

    if (!db->vacuuming)
        return 0;
    if (!PQconsumeInput(db->conn)) {
        db->vacuuming = 0;
        db_fail_msg(db, NULL, errstr, errstr_size, "vacuum the outbox");
        return RL_ERR_DB;
    }
    if (PQisBusy(db->conn))
        return 1;
    while ((res = PQgetResult(db->conn))) {
        if (!failed && PQresultStatus(res) != PGRES_COMMAND_OK) {
            db_fail_msg(db, res, errstr, errstr_size, "vacuum the outbox");
            failed = 1;
        }
        PQclear(res);
    }
    db->vacuuming = 0;
    return failed ? RL_ERR_DB : 0;
}

/* Drops the notifications received so far; 1 if one was for this
 * session's outbox. */
static int
drain_notifies(struct rl_db *db)
{
    PGnotify *nf;
    int got = 0;

    while ((nf = PQnotifies(db->conn))) {
        if (db->outbox_schema && strcmp(nf->extra, db->outbox_schema) == 0)
            got = 1;
        PQfreemem(nf);
    }
    return got;
}

int
rl_db_outbox_wait(struct rl_db *db, long timeout_ms, char *errstr,
                  size_t errstr_size)
{
    struct pollfd pfd = {.fd = PQsocket(db->conn), .events = POLLIN};
    int ready;

    if (!PQconsumeInput(db->conn)) {
        db_fail_msg(db, NULL, errstr, errstr_size, "wait for the outbox");
        return RL_ERR_DB;
    }
    if (drain_notifies(db))
        return 1;
    ready = poll(&pfd, 1, timeout_ms < 0 ? 0 : (int)timeout_ms);
    if (ready < 0 && errno != EINTR) {
        rl_set_err(errstr, errstr_size, "could not wait for the outbox: %s",
                   strerror(errno));
        return RL_ERR_DB;
    }
    if (ready <= 0)
        return 0;
    if (!PQconsumeInput(db->conn)) {
        db_fail_msg(db, NULL, errstr, errstr_size, "wait for the outbox");
        return RL_ERR_DB;
    }
    return drain_notifies(db);
}

int
rl_db_outbox_lock_batch_bytes(struct rl_db *db, int limit, long long max_bytes,
                              long lease_ms, struct rl_outbox_row **rows,
                              size_t *n_rows, int *full, char *errstr,
                              size_t errstr_size)
{
    char lim[32], bytes[32], lease[32];
    const char *params[3] = {lim, bytes, lease};
    long long upto = 0;
    struct rl_outbox_row *out = NULL;
    PGresult *res;
    int err = RL_ERR_DB;
    int n;
    int oom = 0;

    *rows = NULL;
    *n_rows = 0;
    if (full)
        *full = 0;
    if (limit <= 0) {
        rl_set_err(errstr, errstr_size,
                   "could not lock outbox rows: limit must be positive");
        return RL_ERR_INVALID;
    }
    snprintf(lim, sizeof(lim), "%d", limit);
    snprintf(bytes, sizeof(bytes), "%lld", max_bytes > 0 ? max_bytes : 0);
    snprintf(lease, sizeof(lease), "%ld", lease_ms > 0 ? lease_ms : 0);
    res = db_exec_stmt(db, &lock_pending_outbox, params, "lease outbox rows",
                       NULL, &err, errstr, errstr_size);
    if (!res)
        return err;
    n = PQntuples(res);
    if (n > 0) {
        out = calloc((size_t)n, sizeof(*out));
        if (!out)
            oom = 1;
    }
    for (int row = 0; out && row < n; row++) {
        struct rl_outbox_row *r = &out[row];

        db_copy_value(res, row, 0, r->run_id, sizeof(r->run_id));
        r->channel = db_dup_value(res, row, 1, &oom);
        r->job = db_dup_value(res, row, 2, &oom);
        r->tenant = db_dup_value(res, row, 3, &oom);
        r->payload = db_dup_value(res, row, 4, &oom);
        r->delivery_count = (int)db_int_value(res, row, 5, 0);
        db_copy_value(res, row, 6, r->ctid, sizeof(r->ctid));
        db_copy_value(res, row, 7, r->traceparent, sizeof(r->traceparent));
        r->lease_epoch = db_int_value(res, row, 8, 0);
    }
    if (n > 0)
        upto = db_int_value(res, n - 1, 9, 0);
    PQclear(res);
    if (oom) {
        /* Leased: due again when the lease ends. */
        rl_db_outbox_rows_free(out, (size_t)n);
        rl_set_err(errstr, errstr_size,
                   "could not lease outbox rows: out of memory");
        return RL_ERR_NOMEM;
    }
    *rows = out;
    *n_rows = (size_t)n;
    /* The rows locked or the bytes read reached their bound: more may be
     * due. */
    if (full)
        *full = n >= limit || (max_bytes > 0 && upto >= max_bytes);
    return 0;
}

static const char *const outcome_names[] = {
    [RL_OUTBOX_RETRY] = "retry",
    [RL_OUTBOX_DELIVERED] = "delivered",
    [RL_OUTBOX_DEAD] = "dead",
};

int
rl_db_outbox_finish_rows(struct rl_db *db, const struct rl_outbox_row *rows,
                         size_t n, const struct rl_outbox_outcome *outcomes,
                         long retry_base_ms, long retry_max_ms, char *errstr,
                         size_t errstr_size)
{
    struct rl_buf arrays[4] = {{0}};
    const char *params[6];
    char base[32], cap[32];
    PGresult *res = NULL;
    int err = RL_ERR_DB;

    if (n == 0)
        return 0;
    db_arrays_open(arrays, 4);
    for (size_t i = 0; i < n; i++) {
        enum rl_outbox_fate fate = outcomes[i].fate;

        if ((int)fate < 0 || fate > RL_OUTBOX_DEAD)
            fate = RL_OUTBOX_RETRY;
        db_array_add(&arrays[0], rows[i].ctid);
        db_array_add(&arrays[1], rows[i].run_id);
        db_array_add(&arrays[2], outcome_names[fate]);
        db_array_add(&arrays[3],
                     outcomes[i].reason[0] ? outcomes[i].reason : NULL);
    }
    if (db_arrays_close(arrays, 4, params) != 0) {
        rl_set_err(errstr, errstr_size,
                   "could not finish outbox batch: out of memory");
        err = RL_ERR_NOMEM;
        goto done;
    }
    snprintf(base, sizeof(base), "%ld", retry_base_ms > 0 ? retry_base_ms : 0);
    snprintf(cap, sizeof(cap), "%ld", retry_max_ms > 0 ? retry_max_ms : 0);
    params[4] = base;
    params[5] = cap;
    res = db_exec_stmt(db, &finish_outbox_rows, params, "finish outbox batch",
                       NULL, &err, errstr, errstr_size);
    if (!res)
        goto done;
    err = 0;

done:
    PQclear(res);
    db_arrays_free(arrays, 4);
    return err;
}
