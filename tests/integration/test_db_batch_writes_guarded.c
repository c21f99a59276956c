/* Invariant: a batch write keeps every guard of its single-run form, run by
 * run. rl_db_dispatch_runs records one attempt per held lease, refuses a
 * stale lease without holding up the rest, and a redo adds no attempt.
 * rl_db_complete_runs completes only under the lease but records the
 * attempt's outcome even for a stale one (a fact about the call), queues
 * one outbox row per distinct channel, never changes a stored output,
 * writes nothing at all when the database refuses one value of the batch,
 * and reports an unknown run by itself. A budget defers its own run
 * only, and a run whose deadline passed is never dispatched. */
#include <string.h>

#include "rl/db_budgets.h"
#include "rl/db_claim.h"
#include "rl/db_complete.h"
#include "rl/db_conn.h"
#include "rl/db_dispatch.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

#define BATCH 6
#define STALE 2 /* the run of the first batch given a wrong epoch */

static const char request[] = "{\"notify\":[\"email\",\"slack\"],"
                              "\"request\":{\"messages\":[],\"model\":\"m\"}}";

static const char *const two_channels[] = {"email", "slack"};
static const char *const dup_channels[] = {"email", "slack", "email"};
static const char *const one_channel[] = {"email"};

/* Registers and claims runs[0..n) for worker w1; every claim must win. */
static void
claim_won(struct rl_db *db, struct fixture_run *runs, size_t n, int64_t *epochs)
{
    struct rl_run_reg regs[BATCH];
    struct rl_claim claims[BATCH];
    char errstr[512];
    int err;

    RL_REQUIRE(n <= BATCH);
    for (size_t i = 0; i < n; i++)
        regs[i] = runs[i].reg;
    err = rl_db_register_claim_some(
        db, regs, n,
        &(struct rl_claim_opts){
            .worker = "w1", .lease_seconds = 300, .max = -1},
        claims, errstr, sizeof(errstr));
    if (err != 0)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(err == 0);
    for (size_t i = 0; i < n; i++) {
        RL_REQUIRE(claims[i].status == RL_CLAIM_WON);
        epochs[i] = claims[i].lease_epoch;
        rl_claim_clear(&claims[i]);
    }
}

/* The dispatch requests of runs[0..n) under their leases, each reserving
 * estimate tokens. */
static void
dispatch_reqs(const struct fixture_run *runs, const int64_t *epochs, size_t n,
              int64_t estimate, struct rl_dispatch_req *reqs)
{
    for (size_t i = 0; i < n; i++) {
        reqs[i].run_id = runs[i].run_id;
        reqs[i].lease_epoch = epochs[i];
        reqs[i].idempotency_key = runs[i].run_id;
        reqs[i].estimate = estimate;
    }
}

/* Dispatches runs[0..n) under their leases; every one must be recorded
 * as attempt 1. */
static void
dispatch_won(struct rl_db *db, struct fixture_run *runs, size_t n,
             const int64_t *epochs)
{
    struct rl_dispatch_req reqs[BATCH];
    struct rl_dispatch_res out[BATCH];
    char errstr[512];
    int err;

    RL_REQUIRE(n <= BATCH);
    dispatch_reqs(runs, epochs, n, 100, reqs);
    err = rl_db_dispatch_runs(db, reqs, n, "w1", 1000, out, errstr,
                              sizeof(errstr));
    if (err != 0)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(err == 0);
    for (size_t i = 0; i < n; i++) {
        RL_REQUIRE(out[i].err == 0);
        RL_REQUIRE(out[i].status == RL_DISPATCH_RECORDED);
        RL_REQUIRE(out[i].attempt_no == 1);
    }
}

/* A completion of run under epoch, with what attempt 1 returned. */
static struct rl_complete_req
completion(const struct fixture_run *run, int64_t epoch, const char *output,
           const char *const *channels, size_t n_channels)
{
    struct rl_complete_req req;

    memset(&req, 0, sizeof(req));
    req.run_id = run->run_id;
    req.lease_epoch = epoch;
    req.output_json = output;
    req.channels = channels;
    req.n_channels = n_channels;
    req.oc.attempt_no = 1;
    req.oc.http_status = 200;
    req.oc.upstream_request_id = "req-1";
    req.oc.prompt_tokens = 10;
    req.oc.completion_tokens = 20;
    req.oc.cached_tokens = 0;
    req.oc.latency_ms = 5;
    return req;
}

/* The outputs of the completed runs whose job matches pattern, in run_id
 * order, as PostgreSQL prints them. */
static void
completed_outputs(struct rl_db *db, const char *pattern, char *value,
                  size_t size)
{
    const char *params[1] = {pattern};
    char errstr[512];
    int rows;

    rows = rl_db_exec(db,
                      "SELECT string_agg(output::text, '|' ORDER BY run_id) "
                      "FROM runs WHERE job LIKE $1 AND status = 'completed'",
                      1, params, value, size, errstr, sizeof(errstr));
    if (rows < 0)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(rows == 1);
}

/* Checks 1 and 2: one stale lease in a dispatch batch is refused alone;
 * the same batch again (a redo after a lost COMMIT) returns the same
 * attempts and adds none. */
static void
dispatch_refuses_only_stale_and_redo_adds_nothing(struct rl_db *db,
                                                  struct fixture_run *runs,
                                                  const int64_t *epochs)
{
    struct rl_dispatch_req reqs[BATCH];
    struct rl_dispatch_res out[BATCH];
    char errstr[512];

    dispatch_reqs(runs, epochs, BATCH, 100, reqs);
    reqs[STALE].lease_epoch = epochs[STALE] + 1;
    for (int pass = 0; pass < 2; pass++) {
        RL_CHECK_INTEQ(rl_db_dispatch_runs(db, reqs, BATCH, "w1", 1000, out,
                                           errstr, sizeof(errstr)),
                       0);
        for (int i = 0; i < BATCH; i++) {
            if (i == STALE) {
                RL_CHECK_INTEQ(out[i].err, RL_ERR_STALE);
                RL_CHECK_INTEQ(out[i].attempt_no, 0);
                continue;
            }
            RL_CHECK_INTEQ(out[i].err, 0);
            RL_CHECK_INTEQ(out[i].status, RL_DISPATCH_RECORDED);
            RL_CHECK_INTEQ(out[i].attempt_no, 1);
        }
        /* no phantom attempt, on the first pass or the redo */
        RL_CHECK_INTEQ(fixture_int(db,
                                   "SELECT count(*) FROM attempts a "
                                   "JOIN runs r USING (run_id) "
                                   "WHERE r.job LIKE $1",
                                   "guard-%"),
                       BATCH - 1);
        RL_CHECK_INTEQ(fixture_int(db,
                                   "SELECT count(*) FROM attempts a "
                                   "JOIN runs r USING (run_id) "
                                   "WHERE r.job LIKE $1 AND a.attempt_no = 1 "
                                   "AND a.worker = 'w1' AND a.outcome IS NULL "
                                   "AND a.lease_epoch = r.lease_epoch "
                                   "AND a.idempotency_key = r.run_id",
                                   "guard-%"),
                       BATCH - 1);
        RL_CHECK_INTEQ(fixture_int(db,
                                   "SELECT sum(attempts) FROM runs "
                                   "WHERE job LIKE $1",
                                   "guard-%"),
                       BATCH - 1);
        RL_CHECK_INTEQ(fixture_int(db,
                                   "SELECT count(*) FROM attempts "
                                   "WHERE run_id = $1",
                                   runs[STALE].run_id),
                       0);
    }
}

/* Checks 3 and 4: a completion batch completes the runs under their
 * leases with one outbox row per distinct channel, refuses the stale one
 * but records its attempt's outcome; completing again changes nothing. */
static void
complete_guards_each_run_and_never_rewrites(struct rl_db *db,
                                            struct fixture_run *runs,
                                            const int64_t *epochs)
{
    /* the five dispatched runs; the one at index 3 of this batch (runs[4])
     * carries a wrong epoch */
    static const int picked[5] = {0, 1, 3, 4, 5};
    enum { N = 5, WRONG = 3 };
    struct rl_complete_req reqs[N];
    struct rl_complete_res out[N];
    struct rltest_run row;
    char errstr[512];
    char before[2048], after[2048];

    for (int k = 0; k < N; k++) {
        int i = picked[k];

        reqs[k] = completion(&runs[i], k == WRONG ? epochs[i] + 1 : epochs[i],
                             "{\"text\":\"first\"}", two_channels, 2);
    }
    /* a channel named twice queues one row */
    reqs[0].channels = dup_channels;
    reqs[0].n_channels = 3;
    RL_CHECK_INTEQ(
        rl_db_complete_runs(db, reqs, N, "w1", out, errstr, sizeof(errstr)), 0);
    for (int k = 0; k < N; k++) {
        if (k == WRONG) {
            RL_CHECK_INTEQ(out[k].err, RL_ERR_STALE);
            RL_CHECK_INTEQ(out[k].completed, 0);
            RL_CHECK_INTEQ(out[k].outbox_rows, 0);
            /* the outcome is a fact about the call, lease or not */
            RL_CHECK_INTEQ(out[k].outcome_set, 1);
            continue;
        }
        RL_CHECK_INTEQ(out[k].err, 0);
        RL_CHECK_INTEQ(out[k].completed, 1);
        RL_CHECK_INTEQ(out[k].outbox_rows, 2);
        RL_CHECK_INTEQ(out[k].outcome_set, 1);
    }
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs "
                               "WHERE job LIKE $1 AND status = 'completed'",
                               "guard-%"),
                   N - 1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox o "
                               "JOIN runs r USING (run_id) "
                               "WHERE r.job LIKE $1",
                               "guard-%"),
                   2 * (N - 1));
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox "
                               "WHERE run_id = $1",
                               runs[picked[0]].run_id),
                   2);
    /* each row carries the default envelope with the stored output, built
     * from the run (the row stores no copy of it) */
    RL_CHECK_INTEQ(
        fixture_int(db,
                    "SELECT count(*) FROM (SELECT o.*, "
                    "rl_payload_as_sent(o.run_id, o.channel, "
                    "o.explicit_payload) AS p FROM outbox o) o "
                    "JOIN runs r USING (run_id) "
                    "WHERE r.job LIKE $1 AND o.explicit_payload IS NULL "
                    "AND o.p->>'run_id' = o.run_id "
                    "AND o.p->>'channel' = o.channel "
                    "AND o.p->>'job' = r.job "
                    "AND o.p->>'tenant' = r.tenant "
                    "AND o.p->'output' = r.output "
                    "AND r.output->>'text' = 'first'",
                    "guard-%"),
        2 * (N - 1));
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM attempts a "
                               "JOIN runs r USING (run_id) "
                               "WHERE r.job LIKE $1 AND a.outcome = 'ok' "
                               "AND a.http_status = 200 "
                               "AND a.prompt_tokens = 10 "
                               "AND a.completion_tokens = 20 "
                               "AND a.upstream_request_id = 'req-1' "
                               "AND a.finished_at IS NOT NULL",
                               "guard-%"),
                   N);

    /* the stale run: outcome recorded, nothing else */
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM attempts "
                               "WHERE run_id = $1 AND outcome = 'ok'",
                               runs[picked[WRONG]].run_id),
                   1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox "
                               "WHERE run_id = $1",
                               runs[picked[WRONG]].run_id),
                   0);
    RL_REQUIRE(rltest_db_get_run(db, runs[picked[WRONG]].run_id, &row, errstr,
                                 sizeof(errstr)) == 0);
    RL_CHECK_STREQ(row.status, "running");
    RL_CHECK_STREQ(row.lock_owner, "w1");
    RL_CHECK_INTEQ(row.lease_epoch, epochs[picked[WRONG]]);
    RL_CHECK(row.output_json == NULL);
    rltest_run_clear(&row);

    /* check 4: the four completed runs again, with another output */
    completed_outputs(db, "guard-%", before, sizeof(before));
    RL_CHECK(strstr(before, "first") != NULL);
    RL_CHECK(strstr(before, "second") == NULL);
    reqs[WRONG] = reqs[N - 1];
    for (int k = 0; k < N - 1; k++)
        reqs[k].output_json = "{\"text\":\"second\"}";
    RL_CHECK_INTEQ(
        rl_db_complete_runs(db, reqs, N - 1, "w1", out, errstr, sizeof(errstr)),
        0);
    for (int k = 0; k < N - 1; k++) {
        RL_CHECK_INTEQ(out[k].err, 0);
        RL_CHECK_INTEQ(out[k].completed, 0);
        RL_CHECK_INTEQ(out[k].outbox_rows, 0);
        RL_CHECK_INTEQ(out[k].outcome_set, 0);
    }
    completed_outputs(db, "guard-%", after, sizeof(after));
    RL_CHECK_STREQ(after, before);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox o "
                               "JOIN runs r USING (run_id) "
                               "WHERE r.job LIKE $1",
                               "guard-%"),
                   2 * (N - 1));
}

/* Check 5: an output jsonb refuses fails the whole batch, and nothing of
 * the valid run beside it is written either. Completed one by one, the
 * valid run then goes through. */
static void
refused_output_writes_nothing(struct rl_db *db)
{
    struct fixture_run runs[2];
    struct rl_complete_req reqs[2];
    struct rl_complete_res out[2];
    int64_t epochs[2];
    char errstr[512];

    fixture_run_init(&runs[0], "refused-valid", request, NULL);
    fixture_run_init(&runs[1], "refused-nul", request, NULL);
    claim_won(db, runs, 2, epochs);
    dispatch_won(db, runs, 2, epochs);

    reqs[0] =
        completion(&runs[0], epochs[0], "{\"text\":\"fine\"}", two_channels, 2);
    /* valid JSON, but jsonb cannot hold the NUL character */
    reqs[1] = completion(&runs[1], epochs[1], "{\"text\":\"a\\u0000b\"}",
                         two_channels, 2);
    RL_CHECK_INTEQ(
        rl_db_complete_runs(db, reqs, 2, "w1", out, errstr, sizeof(errstr)),
        RL_ERR_INVALID);
    RL_CHECK(errstr[0] != '\0');
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE job LIKE $1 "
                               "AND status = 'running' AND output IS NULL "
                               "AND lock_owner = 'w1'",
                               "refused-%"),
                   2);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM attempts a "
                               "JOIN runs r USING (run_id) "
                               "WHERE r.job LIKE $1 AND a.outcome IS NULL "
                               "AND a.finished_at IS NULL",
                               "refused-%"),
                   2);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox o "
                               "JOIN runs r USING (run_id) "
                               "WHERE r.job LIKE $1",
                               "refused-%"),
                   0);

    RL_CHECK_INTEQ(
        rl_db_complete_runs(db, reqs, 1, "w1", out, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(out[0].err, 0);
    RL_CHECK_INTEQ(out[0].completed, 1);
    RL_CHECK_INTEQ(out[0].outbox_rows, 2);
    RL_CHECK_INTEQ(out[0].outcome_set, 1);
}

/* Check 6: a run id the ledger does not hold is reported by itself; the
 * run beside it completes. */
static void
unknown_run_reported_alone(struct rl_db *db)
{
    static const char missing[] = "00000000000000000000000000000000"
                                  "00000000000000000000000000000000";
    struct fixture_run run, ghost;
    struct rl_complete_req reqs[2];
    struct rl_complete_res out[2];
    int64_t epoch;
    char errstr[512];

    fixture_run_init(&run, "unknown-peer", request, NULL);
    claim_won(db, &run, 1, &epoch);
    dispatch_won(db, &run, 1, &epoch);
    memset(&ghost, 0, sizeof(ghost));
    snprintf(ghost.run_id, sizeof(ghost.run_id), "%s", missing);

    reqs[0] = completion(&ghost, 1, "{\"text\":\"ghost\"}", one_channel, 1);
    reqs[1] = completion(&run, epoch, "{\"text\":\"peer\"}", one_channel, 1);
    RL_CHECK_INTEQ(
        rl_db_complete_runs(db, reqs, 2, "w1", out, errstr, sizeof(errstr)), 0);
    RL_CHECK_INTEQ(out[0].err, RL_ERR_NOTFOUND);
    RL_CHECK_INTEQ(out[0].completed, 0);
    RL_CHECK_INTEQ(out[0].outbox_rows, 0);
    RL_CHECK_INTEQ(out[0].outcome_set, 0);
    RL_CHECK_INTEQ(out[1].err, 0);
    RL_CHECK_INTEQ(out[1].completed, 1);
    RL_CHECK_INTEQ(out[1].outbox_rows, 1);
    RL_CHECK_INTEQ(out[1].outcome_set, 1);
    RL_CHECK_INTEQ(
        fixture_int(db, "SELECT count(*) FROM runs WHERE run_id = $1", missing),
        0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM outbox "
                               "WHERE run_id = $1",
                               missing),
                   0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs "
                               "WHERE run_id = $1 AND status = 'completed'",
                               run.run_id),
                   1);
}

/* Check 7: a spent budget defers its own run (no attempt, pending until
 * the next window) while a run of a tenant without a budget in the same
 * batch is recorded; when only a call in flight holds the budget, the run
 * waits instead. */
static void
budget_defers_only_its_run(struct rl_db *db)
{
    struct fixture_run runs[2];
    struct rl_dispatch_req reqs[2];
    struct rl_dispatch_res out[2];
    int64_t epochs[2];
    char errstr[512];

    RL_REQUIRE(rl_db_budget_set(db, "tenant-capped", NULL, 10, "test", errstr,
                                sizeof(errstr)) == 0);
    fixture_run_init(&runs[0], "budget-capped", request, NULL);
    runs[0].reg.tenant = "tenant-capped";
    fixture_run_init(&runs[1], "budget-free", request, NULL);
    claim_won(db, runs, 2, epochs);
    dispatch_reqs(runs, epochs, 2, 1000, reqs);
    RL_CHECK_INTEQ(rl_db_dispatch_runs(db, reqs, 2, "w1", 1000, out, errstr,
                                       sizeof(errstr)),
                   0);
    RL_CHECK_INTEQ(out[0].err, 0);
    RL_CHECK_INTEQ(out[0].status, RL_DISPATCH_DEFERRED);
    RL_CHECK_INTEQ(out[0].attempt_no, 0);
    RL_CHECK(out[0].detail[0] != '\0');
    RL_CHECK(strstr(out[0].detail, "tenant-capped") != NULL);
    RL_CHECK(out[0].next_window[0] != '\0');
    RL_CHECK_INTEQ(out[1].err, 0);
    RL_CHECK_INTEQ(out[1].status, RL_DISPATCH_RECORDED);
    RL_CHECK_INTEQ(out[1].attempt_no, 1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM attempts "
                               "WHERE run_id = $1",
                               runs[0].run_id),
                   0);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM runs WHERE run_id = $1 "
                               "AND status = 'pending' AND attempts = 0 "
                               "AND error_class = 'budget' "
                               "AND lock_owner IS NULL "
                               "AND next_attempt_at > now()",
                               runs[0].run_id),
                   1);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM attempts "
                               "WHERE run_id = $1",
                               runs[1].run_id),
                   1);

    /* room for one call: a second one waits for the first to settle */
    RL_REQUIRE(rl_db_budget_set(db, "tenant-roomy", NULL, 1500, "test", errstr,
                                sizeof(errstr)) == 0);
    fixture_run_init(&runs[0], "budget-roomy-a", request, NULL);
    runs[0].reg.tenant = "tenant-roomy";
    fixture_run_init(&runs[1], "budget-roomy-b", request, NULL);
    runs[1].reg.tenant = "tenant-roomy";
    claim_won(db, runs, 2, epochs);
    dispatch_reqs(runs, epochs, 2, 1000, reqs);
    RL_CHECK_INTEQ(rl_db_dispatch_runs(db, reqs, 2, "w1", 1000, out, errstr,
                                       sizeof(errstr)),
                   0);
    /* budgeted runs are dispatched in (tenant, job, run_id) order: -a's
     * run id sorts first, so it reserves first */
    RL_CHECK_INTEQ(out[0].err, 0);
    RL_CHECK_INTEQ(out[0].status, RL_DISPATCH_RECORDED);
    RL_CHECK_INTEQ(out[0].attempt_no, 1);
    RL_CHECK_INTEQ(out[1].err, 0);
    RL_CHECK_INTEQ(out[1].status, RL_DISPATCH_WAIT);
    RL_CHECK(out[1].detail[0] != '\0');
    RL_CHECK(strstr(out[1].detail, "in flight") != NULL);
    RL_CHECK_INTEQ(fixture_int(db,
                               "SELECT count(*) FROM attempts a "
                               "JOIN runs r USING (run_id) "
                               "WHERE r.job LIKE $1",
                               "budget-roomy-%"),
                   1);
}

/* A run whose deadline passed after its claim is never dispatched: the
 * batch says so for it alone, writes nothing for it, and the run beside it
 * is dispatched. Also through the budget path. */
static void
late_run_never_dispatched(struct rl_db *db)
{
    struct fixture_run runs[2];
    int64_t epochs[2];
    struct rl_dispatch_req reqs[2];
    struct rl_dispatch_res out[2];
    char errstr[512];

    for (int pass = 0; pass < 2; pass++) {
        fixture_run_init(&runs[0], pass ? "late-budget" : "late", request,
                         NULL);
        fixture_run_init(&runs[1], pass ? "in-time-budget" : "in-time", request,
                         NULL);
        if (pass) {
            /* a budget on the tenant takes the one-by-one path */
            runs[0].reg.tenant = runs[1].reg.tenant = "tenant-late";
            RL_REQUIRE(rl_db_budget_set(db, "tenant-late", NULL, 1000000,
                                        "test", errstr, sizeof(errstr)) == 0);
        }
        claim_won(db, runs, 2, epochs);
        RL_REQUIRE(fixture_int(db,
                               "UPDATE runs SET deadline_at = now() - "
                               "interval '1 second' WHERE run_id = $1 "
                               "RETURNING 1",
                               runs[0].run_id) == 1);
        dispatch_reqs(runs, epochs, 2, 100, reqs);
        RL_CHECK_INTEQ(rl_db_dispatch_runs(db, reqs, 2, "w1", 1000, out, errstr,
                                           sizeof(errstr)),
                       0);
        RL_CHECK_INTEQ(out[0].err, 0);
        RL_CHECK_INTEQ(out[0].status, RL_DISPATCH_DEADLINE);
        RL_CHECK_INTEQ(out[0].attempt_no, 0);
        RL_CHECK_INTEQ(out[1].err, 0);
        RL_CHECK_INTEQ(out[1].status, RL_DISPATCH_RECORDED);
        RL_CHECK_INTEQ(out[1].attempt_no, 1);
        RL_CHECK_INTEQ(fixture_int(db,
                                   "SELECT count(*) FROM attempts "
                                   "WHERE run_id = $1",
                                   runs[0].run_id),
                       0);
        RL_CHECK_INTEQ(fixture_int(db,
                                   "SELECT attempts FROM runs "
                                   "WHERE run_id = $1",
                                   runs[0].run_id),
                       0);
    }
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    struct fixture_run runs[BATCH];
    int64_t epochs[BATCH];
    char job[32];

    for (int i = 0; i < BATCH; i++) {
        snprintf(job, sizeof(job), "guard-%d", i + 1);
        fixture_run_init(&runs[i], job, request, NULL);
    }
    claim_won(db, runs, BATCH, epochs);
    dispatch_refuses_only_stale_and_redo_adds_nothing(db, runs, epochs);
    complete_guards_each_run_and_never_rewrites(db, runs, epochs);
    refused_output_writes_nothing(db);
    unknown_run_reported_alone(db);
    budget_defers_only_its_run(db);
    late_run_never_dispatched(db);
    fixture_drop(db, schema);
    RL_TEST_END();
}
