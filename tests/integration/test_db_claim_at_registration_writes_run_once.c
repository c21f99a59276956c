/* Invariant: registering a batch with claim room (rl_db_register_claim_some,
 * rl_claim_runs of schema/020_claim_new_runs_at_insert.sql) writes each new
 * run it claims once: the INSERT writes it running, and no UPDATE follows
 * (pg_stat_xact_user_tables counts the rows the transaction inserted and
 * updated). And the claim stays what it was:
 *   - room 3 on 5 new unlimited runs: the first 3 won (running, epoch 1,
 *     their raw input), the other 2 queued (pending, due now);
 *   - a new run of a tenant or job with a concurrency limit is never
 *     claimed at its insert, whatever the room;
 *   - a batch mixing runs that already exist with new ones never claims
 *     more than the room: an existing pending run takes its slot in the
 *     batch's order, and a slot that went to an existing run that cannot
 *     be claimed passes to the next claimable run of the batch. */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_limits.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

enum { MAXBATCH = 8 };

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

static const char *const inputs[MAXBATCH] = {
    "{\"doc\":0}", "{\"doc\":1}", "{\"doc\":2}", "{\"doc\":3}",
    "{\"doc\":4}", "{\"doc\":5}", "{\"doc\":6}", "{\"doc\":7}",
};

static const char *const stored_inputs[MAXBATCH] = {
    "{\"doc\": 0}", "{\"doc\": 1}", "{\"doc\": 2}", "{\"doc\": 3}",
    "{\"doc\": 4}", "{\"doc\": 5}", "{\"doc\": 6}", "{\"doc\": 7}",
};

/* n new runs of tenant, jobs "<prefix>-0" ... */
static void
make_runs(struct fixture_run *runs, size_t n, const char *prefix,
          const char *tenant)
{
    char job[64];

    RL_REQUIRE(n <= MAXBATCH);
    for (size_t i = 0; i < n; i++) {
        snprintf(job, sizeof(job), "%s-%zu", prefix, i);
        fixture_run_init(&runs[i], job, request, inputs[i]);
        runs[i].reg.tenant = tenant;
    }
}

/* Registers regs with claim room `room` in a transaction of its own and
 * returns how many runs rows that transaction updated; *inserted gets how
 * many it inserted. */
static int64_t
register_counting(struct rl_db *db, const struct rl_run_reg *regs, size_t n,
                  const char *worker, long room, struct rl_claim *claims,
                  int64_t *inserted)
{
    char errstr[512];
    int64_t ins0, upd0, updated;
    int err;

    fixture_exec(db, "BEGIN");
    ins0 = fixture_runs_stat(db, "n_tup_ins");
    upd0 = fixture_runs_stat(db, "n_tup_upd");
    err = rl_db_register_claim_some(db, regs, n,
                                    &(struct rl_claim_opts){.worker = worker,
                                                            .lease_seconds = 30,
                                                            .max = room},
                                    claims, errstr, sizeof(errstr));
    if (err != 0)
        fprintf(stderr, "register: %s\n", errstr);
    RL_REQUIRE(err == 0);
    *inserted = fixture_runs_stat(db, "n_tup_ins") - ins0;
    updated = fixture_runs_stat(db, "n_tup_upd") - upd0;
    fixture_exec(db, "COMMIT");
    return updated;
}

static void
check_won(struct rl_db *db, const struct rl_claim *c, const char *worker,
          const char *raw_input)
{
    const char *params[1] = {c->run_id};
    char owner[64], errstr[512];

    RL_CHECK_INTEQ(c->status, RL_CLAIM_WON);
    RL_CHECK_INTEQ(c->run_status, RL_RUN_RUNNING);
    RL_CHECK_INTEQ(c->lease_epoch, 1);
    if (raw_input)
        RL_CHECK(c->raw_input && strcmp(c->raw_input, raw_input) == 0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE run_id = $1 "
                               "AND status = 'running' AND lease_epoch = 1 "
                               "AND lock_expires_at > now() "
                               "AND next_attempt_at IS NULL",
                               c->run_id),
                   1);
    RL_CHECK_INTEQ(
        rl_db_exec(db, "SELECT lock_owner FROM runs WHERE run_id = $1", 1,
                   params, owner, sizeof(owner), errstr, sizeof(errstr)),
        1);
    RL_CHECK_STREQ(owner, worker);
}

static void
check_queued(struct rl_db *db, const struct rl_claim *c)
{
    RL_CHECK_INTEQ(c->status, RL_CLAIM_QUEUED);
    RL_CHECK_INTEQ(c->run_status, RL_RUN_PENDING);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE run_id = $1 "
                               "AND status = 'pending' AND lease_epoch = 0 "
                               "AND lock_owner IS NULL "
                               "AND next_attempt_at <= now()",
                               c->run_id),
                   1);
}

static int64_t
running_of(struct rl_db *db, const char *worker)
{
    return fixture_int(db,
                       "SELECT count(*) FROM runs WHERE status = 'running' "
                       "AND lock_owner = $1",
                       worker);
}

static void
clear_claims(struct rl_claim *claims, size_t n)
{
    for (size_t i = 0; i < n; i++)
        rl_claim_clear(&claims[i]);
}

/* Room 3, 5 new unlimited runs: 3 won, written once; 2 queued. */
static void
test_room_three_of_five_written_once(struct rl_db *db)
{
    struct fixture_run runs[5];
    struct rl_run_reg regs[5];
    struct rl_claim claims[5];
    int64_t inserted = 0, updated;

    make_runs(runs, 5, "once", "tenant-a");
    for (size_t i = 0; i < 5; i++)
        regs[i] = runs[i].reg;
    updated = register_counting(db, regs, 5, "w1", 3, claims, &inserted);
    printf("room 3 of 5 new runs: %lld rows inserted, %lld updated\n",
           (long long)inserted, (long long)updated);
    RL_CHECK_INTEQ(inserted, 5);
    RL_CHECK_INTEQ(updated, 0);
    for (size_t i = 0; i < 3; i++) {
        RL_CHECK_STREQ(claims[i].run_id, runs[i].run_id);
        check_won(db, &claims[i], "w1", stored_inputs[i]);
    }
    for (size_t i = 3; i < 5; i++)
        check_queued(db, &claims[i]);
    RL_CHECK_INTEQ(running_of(db, "w1"), 3);
    clear_claims(claims, 5);
}

/* A run id twice in one batch: its first occurrence is the one claimed,
 * once; the second answers as the holder's. */
static void
test_duplicate_in_batch_claimed_once(struct rl_db *db)
{
    struct fixture_run runs[2];
    struct rl_run_reg regs[3];
    struct rl_claim claims[3];
    int64_t inserted = 0;

    make_runs(runs, 2, "dup", "tenant-a");
    regs[0] = runs[0].reg;
    regs[1] = runs[0].reg;
    regs[1].input_json = "{\"doc\":9}";
    regs[2] = runs[1].reg;
    RL_CHECK_INTEQ(register_counting(db, regs, 3, "w2", 1, claims, &inserted),
                   0);
    RL_CHECK_INTEQ(inserted, 2);
    check_won(db, &claims[0], "w2", stored_inputs[0]);
    RL_CHECK_INTEQ(claims[1].status, RL_CLAIM_LEASED);
    check_queued(db, &claims[2]);
    RL_CHECK_INTEQ(running_of(db, "w2"), 1);
    clear_claims(claims, 3);
}

/* Limited tenant and limited job: never claimed at insert, even with room
 * for all; the unlimited runs around them are. */
static void
test_limited_never_claimed_at_insert(struct rl_db *db)
{
    struct fixture_run lim[2], job[2], free_runs[2];
    struct rl_run_reg regs[6];
    struct rl_claim claims[6];
    char errstr[512];
    int64_t inserted = 0;

    RL_REQUIRE(rl_db_limit_set(db, "tenant-l", NULL, 10, 0, errstr,
                               sizeof(errstr)) == 0);
    make_runs(lim, 2, "lim", "tenant-l");
    make_runs(job, 2, "jobl", "tenant-m");
    RL_REQUIRE(rl_db_limit_set(db, "tenant-m", job[0].job, 10, 0, errstr,
                               sizeof(errstr)) == 0);
    make_runs(free_runs, 2, "free", "tenant-u");
    regs[0] = lim[0].reg;
    regs[1] = free_runs[0].reg;
    regs[2] = job[0].reg; /* its job is limited */
    regs[3] = lim[1].reg;
    regs[4] = job[1].reg; /* another job of tenant-m: not limited */
    regs[5] = free_runs[1].reg;
    RL_CHECK_INTEQ(register_counting(db, regs, 6, "w3", 100, claims, &inserted),
                   0);
    RL_CHECK_INTEQ(inserted, 6);
    check_queued(db, &claims[0]);
    check_won(db, &claims[1], "w3", stored_inputs[0]);
    check_queued(db, &claims[2]);
    check_queued(db, &claims[3]);
    check_won(db, &claims[4], "w3", stored_inputs[1]);
    check_won(db, &claims[5], "w3", stored_inputs[1]);
    RL_CHECK_INTEQ(running_of(db, "w3"), 3);
    clear_claims(claims, 6);
}

/* Existing runs mixed with new ones: never more claims than the room. */
static void
test_existing_and_new_within_room(struct rl_db *db)
{
    struct fixture_run old[2], fresh[4];
    struct rl_run_reg regs[4];
    struct rl_claim claims[4];
    int64_t inserted = 0, updated;

    /* old[0] pending and due (no room at its registration); old[1] held by
     * another worker's live lease. */
    make_runs(old, 2, "old", "tenant-a");
    regs[0] = old[0].reg;
    updated = register_counting(db, regs, 1, "kafka", 0, claims, &inserted);
    RL_CHECK_INTEQ(updated, 0);
    check_queued(db, &claims[0]);
    clear_claims(claims, 1);
    regs[0] = old[1].reg;
    register_counting(db, regs, 1, "other", 1, claims, &inserted);
    check_won(db, &claims[0], "other", stored_inputs[1]);
    clear_claims(claims, 1);

    /* Room 2 on [new, existing pending, new, new]: the new one and the
     * existing one, in the batch's order; the existing one is updated,
     * the new one written once. */
    make_runs(fresh, 4, "mixed", "tenant-a");
    regs[0] = fresh[0].reg;
    regs[1] = old[0].reg;
    regs[2] = fresh[1].reg;
    regs[3] = fresh[2].reg;
    updated = register_counting(db, regs, 4, "w4", 2, claims, &inserted);
    RL_CHECK_INTEQ(inserted, 3);
    RL_CHECK_INTEQ(updated, 1);
    check_won(db, &claims[0], "w4", stored_inputs[0]);
    check_won(db, &claims[1], "w4", stored_inputs[0]);
    check_queued(db, &claims[2]);
    check_queued(db, &claims[3]);
    RL_CHECK_INTEQ(running_of(db, "w4"), 2);
    clear_claims(claims, 4);

    /* Room 1 on [existing leased elsewhere, new, new]: the slot the
     * existing run could not use goes to the first new run, and only it. */
    regs[0] = old[1].reg;
    regs[1] = fresh[3].reg;
    make_runs(fresh, 1, "after-leased", "tenant-a");
    regs[2] = fresh[0].reg;
    register_counting(db, regs, 3, "w5", 1, claims, &inserted);
    RL_CHECK_INTEQ(inserted, 2);
    RL_CHECK_INTEQ(claims[0].status, RL_CLAIM_LEASED);
    check_won(db, &claims[1], "w5", stored_inputs[3]);
    check_queued(db, &claims[2]);
    RL_CHECK_INTEQ(running_of(db, "w5"), 1);
    clear_claims(claims, 3);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);

    test_room_three_of_five_written_once(db);
    test_duplicate_in_batch_claimed_once(db);
    test_limited_never_claimed_at_insert(db);
    test_existing_and_new_within_room(db);
    fixture_drop(db, schema);
    RL_TEST_END();
}
