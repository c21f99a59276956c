/* Invariant: one runs row per logical run. Registering the same run again
 * (another event, another batch, or twice within one batch) never adds a
 * row, never changes the stored request, and the claim results say who
 * holds it. */
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[\"email\"],\"request\":{\"messages\":[],\"model\":\"m\"}}";

static void
same_run_twice_is_one_row(struct rl_db *db)
{
    struct fixture_run run;
    struct rl_claim first, second;
    char errstr[512];

    fixture_run_init(&run, "register-twice", request, "{\"docs\":[1]}");
    RL_CHECK_INTEQ(
        rltest_db_claim(db, &run.reg, "w1", 30, &first, errstr, sizeof(errstr)),
        0);
    RL_CHECK_INTEQ(first.status, RL_CLAIM_WON);
    RL_CHECK_INTEQ(first.lease_epoch, 1);
    RL_CHECK_INTEQ(first.attempts, 0);
    RL_CHECK_INTEQ(first.ambiguous_prior, 0);
    RL_CHECK_STREQ(first.run_id, run.run_id);
    RL_CHECK_INTEQ(first.run_status, RL_RUN_RUNNING);
    RL_CHECK_STREQ(first.job, "register-twice");
    RL_CHECK_STREQ(first.scheduled_at, "2026-08-07T09:00:00+00:00");
    RL_CHECK_STREQ(first.raw_input, "{\"docs\": [1]}");
    RL_CHECK(first.request_json != NULL);
    RL_CHECK_INTEQ(first.source_offset, 42);

    /* The duplicate event, from another worker, with other input. */
    run.reg.input_json = "{\"docs\":[2]}";
    run.reg.source_offset = 43;
    RL_CHECK_INTEQ(rltest_db_claim(db, &run.reg, "w2", 30, &second, errstr,
                                   sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(second.status, RL_CLAIM_LEASED);
    RL_CHECK_INTEQ(second.lease_epoch, 1);
    RL_CHECK_STREQ(second.raw_input, "{\"docs\": [1]}");
    RL_CHECK_INTEQ(second.source_offset, 42);

    RL_CHECK_INTEQ(fixture_int(db, "SELECT count(*) FROM runs WHERE job = $1",
                               "register-twice"),
                   1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT lease_epoch FROM runs "
                               "WHERE run_id = $1",
                               run.run_id),
                   1);
    rl_claim_clear(&first);
    rl_claim_clear(&second);
}

static void
duplicates_in_one_batch_are_one_row_one_winner(struct rl_db *db)
{
    struct fixture_run runs[3];
    struct rl_run_reg regs[5];
    struct rl_claim claims[5];
    char errstr[512];

    fixture_run_init(&runs[0], "batch-a", request, NULL);
    fixture_run_init(&runs[1], "batch-b", request, NULL);
    fixture_run_init(&runs[2], "batch-c", request, "null");
    regs[0] = runs[1].reg;
    regs[1] = runs[0].reg;
    regs[2] = runs[1].reg; /* duplicate of regs[0] */
    regs[3] = runs[2].reg;
    regs[4] = runs[0].reg; /* duplicate of regs[1] */
    RL_CHECK_INTEQ(rl_db_register_claim_some(
                       db, regs, 5,
                       &(struct rl_claim_opts){
                           .worker = "w1", .lease_seconds = 30, .max = -1},
                       claims, errstr, sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(claims[0].status, RL_CLAIM_WON);
    RL_CHECK_INTEQ(claims[1].status, RL_CLAIM_WON);
    RL_CHECK_INTEQ(claims[2].status, RL_CLAIM_LEASED);
    RL_CHECK_INTEQ(claims[3].status, RL_CLAIM_WON);
    RL_CHECK_INTEQ(claims[4].status, RL_CLAIM_LEASED);
    RL_CHECK_STREQ(claims[0].run_id, runs[1].run_id);
    RL_CHECK_STREQ(claims[1].run_id, runs[0].run_id);
    RL_CHECK_STREQ(claims[3].run_id, runs[2].run_id);
    RL_CHECK(claims[3].raw_input == NULL); /* "null" input stores nothing */
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs "
                               "WHERE job LIKE 'batch-%'",
                               NULL),
                   3);
    for (int i = 0; i < 5; i++)
        rl_claim_clear(&claims[i]);
}

static void
a_large_batch_registers_every_run(struct rl_db *db)
{
    enum { N = 300 };
    static struct fixture_run runs[N];
    static struct rl_run_reg regs[N];
    static struct rl_claim claims[N];
    char job[32];
    char errstr[512];
    int won = 0;

    for (int i = 0; i < N; i++) {
        snprintf(job, sizeof(job), "bulk-%03d", i);
        /* quotes and backslashes survive the array encoding */
        fixture_run_init(&runs[i], job, request,
                         "{\"q\":\"a \\\"quoted\\\" \\\\ text\"}");
        regs[i] = runs[i].reg;
    }
    RL_CHECK_INTEQ(rl_db_register_claim_some(
                       db, regs, N,
                       &(struct rl_claim_opts){
                           .worker = "w1", .lease_seconds = 30, .max = -1},
                       claims, errstr, sizeof(errstr)),
                   0);
    for (int i = 0; i < N; i++) {
        won += claims[i].status == RL_CLAIM_WON;
        if (i == 7)
            RL_CHECK_STREQ(claims[i].raw_input,
                           "{\"q\": \"a \\\"quoted\\\" \\\\ text\"}");
        rl_claim_clear(&claims[i]);
    }
    RL_CHECK_INTEQ(won, N);
    RL_CHECK_INTEQ(rl_db_register_claim_some(
                       db, regs, N,
                       &(struct rl_claim_opts){
                           .worker = "w2", .lease_seconds = 30, .max = -1},
                       claims, errstr, sizeof(errstr)),
                   0);
    for (int i = 0; i < N; i++) {
        RL_CHECK_INTEQ(claims[i].status, RL_CLAIM_LEASED);
        rl_claim_clear(&claims[i]);
    }
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs "
                               "WHERE job LIKE 'bulk-%'",
                               NULL),
                   N);
}

static void
invalid_registrations_are_refused(struct rl_db *db)
{
    struct fixture_run run;
    struct rl_claim claim;
    char errstr[512];

    fixture_run_init(&run, "invalid", request, NULL);
    run.reg.run_id = "not-hex";
    RL_CHECK_INTEQ(
        rltest_db_claim(db, &run.reg, "w1", 30, &claim, errstr, sizeof(errstr)),
        RL_ERR_INVALID);
    RL_CHECK(strstr(errstr, "could not claim run not-hex") == errstr);
    fixture_run_init(&run, "invalid", "{not json", NULL);
    RL_CHECK_INTEQ(
        rltest_db_claim(db, &run.reg, "w1", 30, &claim, errstr, sizeof(errstr)),
        RL_ERR_INVALID);
    fixture_run_init(&run, "invalid", request, NULL);
    RL_CHECK_INTEQ(
        rltest_db_claim(db, &run.reg, "", 30, &claim, errstr, sizeof(errstr)),
        RL_ERR_INVALID);
    RL_CHECK_INTEQ(
        rltest_db_claim(db, &run.reg, "w1", 0, &claim, errstr, sizeof(errstr)),
        RL_ERR_INVALID);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs "
                               "WHERE job = 'invalid'",
                               NULL),
                   0);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);

    same_run_twice_is_one_row(db);
    duplicates_in_one_batch_are_one_row_one_winner(db);
    a_large_batch_registers_every_run(db);
    invalid_registrations_are_refused(db);
    fixture_drop(db, schema);
    RL_TEST_END();
}
