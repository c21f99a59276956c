/* Invariant: the same run_id with a different request fingerprint is a
 * conflict: the stored row is untouched (status, lease, epoch, request,
 * updated_at) and no stored answer is handed out, whatever state the run
 * is in. */
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request_v1[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m1\"}}";
static const char request_v2[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m2\"}}";

static const char row_text[] =
    "SELECT md5(row(r.*)::text) FROM runs r WHERE run_id = $1";

static void
row_digest(struct rl_db *db, const char *run_id, char *out, size_t size)
{
    const char *params[1] = {run_id};
    char errstr[512];

    RL_REQUIRE(rl_db_exec(db, row_text, 1, params, out, size, errstr,
                          sizeof(errstr)) == 1);
}

static void
conflict_leaves_row_untouched(struct rl_db *db, struct fixture_run *stored,
                              const char *state)
{
    struct fixture_run other;
    struct rl_claim claim;
    char before[64], after[64];
    char errstr[512];

    fixture_run_init(&other, stored->job, request_v2, "{\"other\":1}");
    RL_REQUIRE(strcmp(other.run_id, stored->run_id) == 0);
    RL_REQUIRE(strcmp(other.fingerprint, stored->fingerprint) != 0);
    row_digest(db, stored->run_id, before, sizeof(before));
    RL_CHECK_INTEQ(rltest_db_claim(db, &other.reg, "intruder", 30, &claim,
                                   errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(claim.status, RL_CLAIM_CONFLICT);
    RL_CHECK_STREQ(claim.fingerprint, stored->fingerprint);
    RL_CHECK(claim.output_json == NULL);
    RL_CHECK(claim.request_json == NULL);
    RL_CHECK(claim.raw_input == NULL);
    row_digest(db, stored->run_id, after, sizeof(after));
    RL_CHECK_STREQ(before, after);
    if (strcmp(before, after) != 0)
        fprintf(stderr, "row changed in state %s\n", state);
    rl_claim_clear(&claim);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run run;
    struct rl_claim claim;
    char errstr[512];
    int completed = 0;

    /* running under a live lease */
    fixture_run_init(&run, "conflicted", request_v1, "{\"mine\":1}");
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "owner", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    conflict_leaves_row_untouched(db, &run, "running");

    /* pending, due */
    RL_REQUIRE(rl_db_release(db,
                             &(struct rl_lease){.run_id = run.run_id,
                                                .worker = "owner",
                                                .epoch = claim.lease_epoch},
                             0, "transient", "retry", errstr,
                             sizeof(errstr)) == 0);
    conflict_leaves_row_untouched(db, &run, "pending");
    rl_claim_clear(&claim);

    /* completed: the old answer is never returned to the new request */
    RL_REQUIRE(rltest_db_claim(db, &run.reg, "owner", 30, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    RL_REQUIRE(rltest_db_complete(db, run.run_id, "owner", claim.lease_epoch,
                                  NULL, "{\"text\":\"v1 answer\"}", NULL, 0,
                                  &completed, errstr, sizeof(errstr)) == 0);
    RL_CHECK_INTEQ(completed, 1);
    conflict_leaves_row_untouched(db, &run, "completed");
    rl_claim_clear(&claim);

    /* within one batch, next to its original */
    {
        struct fixture_run a, b;
        struct rl_run_reg regs[2];
        struct rl_claim claims[2];

        fixture_run_init(&a, "batch-conflict", request_v1, NULL);
        fixture_run_init(&b, "batch-conflict", request_v2, NULL);
        regs[0] = a.reg;
        regs[1] = b.reg;
        RL_CHECK_INTEQ(rl_db_register_claim_some(
                           db, regs, 2,
                           &(struct rl_claim_opts){
                               .worker = "w", .lease_seconds = 30, .max = -1},
                           claims, errstr, sizeof(errstr)),
                       0);
        RL_CHECK_INTEQ(claims[0].status, RL_CLAIM_WON);
        RL_CHECK_INTEQ(claims[1].status, RL_CLAIM_CONFLICT);
        RL_CHECK_STREQ(claims[1].fingerprint, a.fingerprint);
        rl_claim_clear(&claims[0]);
        rl_claim_clear(&claims[1]);
    }
    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM runs", NULL), 2);
    fixture_drop(db, schema);
    RL_TEST_END();
}
