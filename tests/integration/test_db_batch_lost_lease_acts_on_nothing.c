/* Invariant: a batcher that lost a batch's lease acts on nothing of it.
 * rl_db_batch_fence (the transaction each stored answer and each error
 * line's act runs in) holds the batch row under (owner, epoch) and
 * refuses a lost lease, leaving the session out of any transaction; the
 * lease renewal and the failure count are refused alike. A held fence
 * makes a second session's take of the batch wait for its commit, after
 * which the first owner's next fence is refused. The failure count grows
 * under the lease and a good poll resets it. */
#include <string.h>

#include "rl/db_batch_lease.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1], errstr[512];
    struct rl_db *db = fixture_ledger(schema);
    struct rl_batch b;
    int failures = 0;

    fixture_exec(db, "INSERT INTO batches (batch_id, endpoint, model, state,"
                     " provider_batch_id, lock_owner, lock_epoch,"
                     " lock_expires_at) VALUES ('b1', '/v1/chat/completions',"
                     " 'm', 'submitted', 'pb1', 'w1', 1,"
                     " now() + interval '1 minute')");
    memset(&b, 0, sizeof(b));
    snprintf(b.batch_id, sizeof(b.batch_id), "b1");
    b.epoch = 1;

    /* Held: the fence opens and commits; renewal and failures counted. */
    RL_CHECK_INTEQ(rl_db_batch_fence(db, &b, "w1", errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(rl_db_batch_fence_end(db, 1, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(
        rl_db_batch_renew(db, &b, "w1", 60000, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(rl_db_batch_failure(db, &b, "w1", "poll: 404", 60000,
                                       &failures, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(failures, 1);
    RL_CHECK_INTEQ(rl_db_batch_failure(db, &b, "w1", "poll: 404", 60000,
                                       &failures, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(failures, 2);
    RL_CHECK_INTEQ(rl_db_batch_step(db, &b, "w1", RL_BATCH_STEP_POLL,
                                    "in_progress", 0, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT failures FROM batches WHERE batch_id = $1",
                    "b1"),
        0);

    /* Taken by w2 (epoch 2) while w1's fence is held: the take waits for
     * w1's commit. */
    {
        struct rl_db *other = fixture_connect(schema);
        char value[64];
        const char *params[1] = {"b1"};

        fixture_exec(db, "UPDATE batches SET lock_owner = 'w1',"
                         " lock_expires_at = now() + interval '1 minute'"
                         " WHERE batch_id = 'b1'");
        RL_CHECK_INTEQ(rl_db_batch_fence(db, &b, "w1", errstr, sizeof(errstr)),
                       0);
        fixture_exec(other, "SET lock_timeout = '200ms'");
        RL_CHECK(rl_db_exec(other,
                            "UPDATE batches SET lock_owner = 'w2',"
                            " lock_epoch = lock_epoch + 1 WHERE batch_id = $1",
                            1, params, value, sizeof(value), errstr,
                            sizeof(errstr)) < 0);
        RL_CHECK_INTEQ(rl_db_batch_fence_end(db, 1, errstr, sizeof(errstr)), 0);
        RL_CHECK(rl_db_exec(other,
                            "UPDATE batches SET lock_owner = 'w2',"
                            " lock_epoch = lock_epoch + 1 WHERE batch_id = $1",
                            1, params, value, sizeof(value), errstr,
                            sizeof(errstr)) >= 0);
        rl_db_destroy(other);
    }

    /* Lost: every fenced write refused, the session left usable. */
    RL_CHECK_INTEQ(rl_db_batch_fence(db, &b, "w1", errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(
        rl_db_batch_renew(db, &b, "w1", 60000, errstr, sizeof(errstr)),
        RL_ERR_STALE);
    RL_CHECK_INTEQ(rl_db_batch_failure(db, &b, "w1", "poll: 404", 60000,
                                       &failures, errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(rl_db_batch_finish(db, &b, "w1", RL_BATCH_FAILED, "x", "",
                                      "", 0, "given up", errstr,
                                      sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(
        fixture_int(db,
                    "SELECT lock_epoch FROM batches WHERE batch_id = $1 AND "
                    "lock_owner = 'w2' AND state = 'submitted'",
                    "b1"),
        2);
    fixture_drop(db, schema);
    RL_TEST_END();
}
