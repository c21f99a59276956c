/* Invariant: no write by a stale lease owner succeeds. Once another worker
 * has reclaimed the run, the old owner's renew, dispatch, store_raw_input,
 * complete, release and fail are all refused with RL_ERR_STALE and change
 * nothing, while the new owner's writes work. Each write goes through the
 * statement the service runs (the batched dispatch and completion in a
 * batch of one). */
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_complete.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[\"email\"],\"request\":{\"messages\":[],\"model\":\"m\"}}";

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run run;
    struct rl_claim old_claim, new_claim;
    const char *channels[1] = {"email"};
    struct rl_attempt_ok oc = {1, 200, "req-1", 10, 5, 0, 40};
    int completed = -1;
    struct rltest_run before, after;
    char errstr[512];
    char *stored = NULL;
    const char *ids[1];
    int64_t epochs[1];
    int held[1] = {1};
    int attempt_no = -1;
    int64_t old_epoch, new_epoch;

    fixture_run_init(&run, "stale", request, NULL);
    RL_CHECK_INTEQ(rltest_db_claim(db, &run.reg, "old", 1, &old_claim, errstr,
                                   sizeof(errstr)),
                   0);
    RL_REQUIRE(old_claim.status == RL_CLAIM_WON);
    old_epoch = old_claim.lease_epoch;
    fixture_wait_lease_expired(db, run.run_id);
    RL_CHECK_INTEQ(rltest_db_claim(db, &run.reg, "new", 300, &new_claim, errstr,
                                   sizeof(errstr)),
                   0);
    RL_REQUIRE(new_claim.status == RL_CLAIM_WON);
    new_epoch = new_claim.lease_epoch;
    RL_CHECK(new_epoch > old_epoch);
    RL_REQUIRE(rltest_db_get_run(db, run.run_id, &before, errstr,
                                 sizeof(errstr)) == 0);

    ids[0] = run.run_id;
    epochs[0] = old_epoch;
    RL_CHECK_INTEQ(
        rl_db_renew_leases(db, &(struct rl_lease_set){"old", ids, epochs, 1},
                           300, held, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(held[0], 0);
    /* the right owner with the old epoch is stale too */
    epochs[0] = old_epoch;
    RL_CHECK_INTEQ(
        rl_db_renew_leases(db, &(struct rl_lease_set){"new", ids, epochs, 1},
                           300, held, errstr, sizeof(errstr)),
        0);

    RL_CHECK_INTEQ(rltest_db_dispatch(db, run.run_id, "old", old_epoch,
                                      run.run_id, &attempt_no, errstr,
                                      sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK(strstr(errstr, "lease lost") != NULL);
    RL_CHECK_INTEQ(rl_db_store_raw_input(
                       db,
                       &(struct rl_lease){.run_id = run.run_id,
                                          .worker = "old",
                                          .epoch = old_epoch},
                       "{\"stale\":true}", &stored, errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK(stored == NULL);
    RL_CHECK_INTEQ(rltest_db_complete(db, run.run_id, "old", old_epoch, NULL,
                                      "{\"text\":\"stale\"}", channels, 1,
                                      &completed, errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK(strstr(errstr, "could not complete run") == errstr);
    RL_CHECK_INTEQ(rl_db_release(db,
                                 &(struct rl_lease){.run_id = run.run_id,
                                                    .worker = "old",
                                                    .epoch = old_epoch},
                                 0, "transient", "stale release", errstr,
                                 sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(rl_db_fail(db,
                              &(struct rl_lease){.run_id = run.run_id,
                                                 .worker = "old",
                                                 .epoch = old_epoch},
                              RL_RUN_FAILED, "permanent", "stale fail", errstr,
                              sizeof(errstr)),
                   RL_ERR_STALE);
    RL_CHECK_INTEQ(rl_db_fail(db,
                              &(struct rl_lease){.run_id = run.run_id,
                                                 .worker = "old",
                                                 .epoch = old_epoch},
                              RL_RUN_UNKNOWN, "ambiguous", "stale fail", errstr,
                              sizeof(errstr)),
                   RL_ERR_STALE);
    /* a forged owner name with the current epoch is no better */
    RL_CHECK_INTEQ(rl_db_release(db,
                                 &(struct rl_lease){.run_id = run.run_id,
                                                    .worker = "old",
                                                    .epoch = new_epoch},
                                 0, "transient", "forged", errstr,
                                 sizeof(errstr)),
                   RL_ERR_STALE);

    /* nothing changed */
    RL_REQUIRE(
        rltest_db_get_run(db, run.run_id, &after, errstr, sizeof(errstr)) == 0);
    RL_CHECK_STREQ(after.status, "running");
    RL_CHECK_STREQ(after.lock_owner, "new");
    RL_CHECK_INTEQ(after.lease_epoch, new_epoch);
    RL_CHECK_INTEQ(after.attempts, 0);
    RL_CHECK(after.raw_input == NULL);
    RL_CHECK(after.output_json == NULL);
    RL_CHECK(after.last_error == NULL);
    RL_CHECK_STREQ(after.lock_expires_at, before.lock_expires_at);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM attempts", NULL), 0);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 0);
    rltest_run_clear(&before);
    rltest_run_clear(&after);

    /* the current owner's writes work */
    epochs[0] = new_epoch;
    RL_CHECK_INTEQ(
        rl_db_renew_leases(db, &(struct rl_lease_set){"new", ids, epochs, 1},
                           300, held, errstr, sizeof(errstr)),
        1);
    RL_CHECK_INTEQ(rl_db_store_raw_input(
                       db,
                       &(struct rl_lease){.run_id = run.run_id,
                                          .worker = "new",
                                          .epoch = new_epoch},
                       "{\"fresh\":true}", &stored, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_STREQ(stored, "{\"fresh\": true}");
    free(stored);
    RL_CHECK_INTEQ(rltest_db_dispatch(db, run.run_id, "new", new_epoch,
                                      run.run_id, &attempt_no, errstr,
                                      sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(attempt_no, 1);
    oc.attempt_no = attempt_no;
    RL_CHECK_INTEQ(rltest_db_complete(db, run.run_id, "new", new_epoch, &oc,
                                      "{\"text\":\"fresh\"}", channels, 1,
                                      &completed, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(completed, 1);
    /* after completion, the stale owner learns the run is done but still
     * writes nothing: not the output, not a second outbox row */
    RL_CHECK_INTEQ(rltest_db_complete(db, run.run_id, "old", old_epoch, NULL,
                                      "{\"text\":\"stale\"}", channels, 1,
                                      &completed, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(completed, 0);
    RL_REQUIRE(
        rltest_db_get_run(db, run.run_id, &after, errstr, sizeof(errstr)) == 0);
    RL_CHECK_STREQ(after.output_json, "{\"text\": \"fresh\"}");
    rltest_run_clear(&after);
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM outbox", NULL), 1);
    RL_CHECK_INTEQ(rl_db_release(db,
                                 &(struct rl_lease){.run_id = run.run_id,
                                                    .worker = "new",
                                                    .epoch = new_epoch},
                                 0, "transient", "after completion", errstr,
                                 sizeof(errstr)),
                   RL_ERR_STALE);

    rl_claim_clear(&old_claim);
    rl_claim_clear(&new_claim);
    fixture_drop(db, schema);
    RL_TEST_END();
}
