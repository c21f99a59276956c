/* The ledger steps a worker redoes after a connection lost around COMMIT
 * (it cannot know whether the COMMIT happened) are idempotent, so the redo
 * resolves the doubt by re-reading instead of writing twice:
 * - a dispatch under the same lease returns the attempt already
 *   recorded (no phantom attempt without an outcome, which the next
 *   claimer would count as ambiguous);
 * - completing with the outcome again returns "already completed", keeps
 *   the first output and outbox rows, and keeps the recorded outcome;
 * - a completion whose statement never ran leaves the attempt without an
 *   outcome: the evidence the ambiguity policy needs. */
#include <stdio.h>
#include <string.h>

#include "faults.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"

static const char request[] =
    "{\"notify\":[\"email\",\"slack\"],\"request\":{\"model\":\"m\","
    "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}}";

int
main(void)
{
    struct e2e t;
    struct rl_run_reg reg;
    struct rl_claim claim;
    char run_id[RL_HEX_SIZE], fingerprint[RL_HEX_SIZE], errstr[512];
    const char *const channels[] = {"email", "slack"};
    struct rl_attempt_ok oc = {0, 200, "req-1", 1, 2, 0, 5};
    int first = 0, again = 0, completed = -1;

    e2e_setup(&t, "fredo", 1);
    RL_REQUIRE(rl_sha256_hex(t.name, strlen(t.name), run_id) == 0);
    RL_REQUIRE(rl_sha256_hex(request, strlen(request), fingerprint) == 0);
    memset(&reg, 0, sizeof(reg));
    reg.run_id = run_id;
    reg.job = "redo";
    reg.tenant = t.name;
    reg.scheduled_at = "2026-08-07T09:00:00+00:00";
    reg.version = "v1";
    reg.fingerprint = fingerprint;
    reg.request_json = request;
    reg.input_json = "{\"doc\":1}";
    reg.source_partition = -1;
    reg.source_offset = -1;
    RL_REQUIRE(rltest_db_claim(t.db, &reg, "w1", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);

    RL_CHECK_INTEQ(rltest_db_dispatch(t.db, run_id, "w1", claim.lease_epoch,
                                      run_id, &first, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(rltest_db_dispatch(t.db, run_id, "w1", claim.lease_epoch,
                                      run_id, &again, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(first, 1);
    RL_CHECK_INTEQ(again, first);
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, "*"), 1);
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT attempts FROM runs WHERE run_id='%s'", run_id), 1);
    /* Another worker, or another epoch, never borrows that attempt. */
    RL_CHECK_INTEQ(rltest_db_dispatch(t.db, run_id, "w2", claim.lease_epoch,
                                      run_id, &again, errstr, sizeof(errstr)),
                   RL_ERR_STALE);

    /* No completion yet: the attempt is the ambiguity evidence. */
    RL_CHECK_INTEQ(fx_attempts(&t, run_id, NULL), 1);

    oc.attempt_no = first;
    RL_CHECK_INTEQ(rltest_db_complete(t.db, run_id, "w1", claim.lease_epoch,
                                      &oc, "{\"text\":\"first\"}", channels, 2,
                                      &completed, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(completed, 1);
    oc.upstream_request_id = "req-2";
    RL_CHECK_INTEQ(rltest_db_complete(t.db, run_id, "w1", claim.lease_epoch,
                                      &oc, "{\"text\":\"second\"}", channels, 2,
                                      &completed, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(completed, 0);
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT output->>'text' FROM runs WHERE "
                             "run_id='%s'",
                             run_id),
                   "first");
    RL_CHECK_STREQ(e2e_textf(&t,
                             "SELECT outcome || '/' || upstream_request_id "
                             "FROM attempts WHERE run_id='%s'",
                             run_id),
                   "ok/req-1");
    RL_CHECK_INTEQ(
        e2e_intf(&t, "SELECT count(*) FROM outbox WHERE run_id='%s'", run_id),
        2);
    /* After completion no dispatch can be recorded at all. */
    RL_CHECK_INTEQ(rltest_db_dispatch(t.db, run_id, "w1", claim.lease_epoch,
                                      run_id, &again, errstr, sizeof(errstr)),
                   RL_ERR_STALE);
    rl_claim_clear(&claim);
    e2e_teardown(&t);
    RL_TEST_END();
}
