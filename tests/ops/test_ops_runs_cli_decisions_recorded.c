/* `runledger runs` against a real ledger: list filters and formats, show
 * (attempts with outcomes and tokens, outbox rows, decisions), retry of a
 * failed or unknown run under the same run ID (and refusal, exit 3, of a
 * completed or running one), resolve of an unknown run as failed or as
 * completed from a file (output write-once, outbox rows written with it),
 * each decision recorded with who and why; bad input exits 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ops.h"
#include "rl/db_claim.h"
#include "rl/db_dispatch.h"
#include "rl/db_lease.h"
#include "rl/runid.h"
#include "rltest.h"
#include "rltest_db.h"

#define WORKER "ops-test-worker"
#define REQUEST                                                                \
    "{\"notify\":[\"email\",\"slack\"],\"request\":{\"model\":\"stub-1\","     \
    "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}}"

static char out[1 << 18], err[65536];

/* Registers a run for job and claims it; returns its lease epoch. */
static int64_t
new_run(struct e2e *t, const char *job, char *run_id)
{
    struct rl_run_reg reg;
    struct rl_claim claim;
    char errstr[512];
    char fp[RL_HEX_SIZE];
    struct rl_run_identity id = {job, "tenant-ops", "2026-08-07T09:00:00Z",
                                 NULL, "v1"};
    const char *reason;
    int64_t epoch;

    RL_REQUIRE(rl_runid_compute(&id, run_id, NULL, &reason, errstr,
                                sizeof(errstr)) == 0);
    rl_sha256_hex(REQUEST, strlen(REQUEST), fp);
    memset(&reg, 0, sizeof(reg));
    reg.run_id = run_id;
    reg.job = job;
    reg.tenant = "tenant-ops";
    reg.scheduled_at = "2026-08-07T09:00:00+00:00";
    reg.version = "v1";
    reg.fingerprint = fp;
    reg.request_json = REQUEST;
    reg.input_json = "{\"doc\":1}";
    reg.source_partition = -1;
    reg.source_offset = -1;
    memset(&claim, 0, sizeof(claim));
    RL_REQUIRE(rltest_db_claim(t->db, &reg, WORKER, 60, &claim, errstr,
                               sizeof(errstr)) == 0);
    RL_REQUIRE(claim.status == RL_CLAIM_WON);
    epoch = claim.lease_epoch;
    rl_claim_clear(&claim);
    return epoch;
}

static int
dispatch(struct e2e *t, const char *run_id, int64_t epoch)
{
    char errstr[512];
    int attempt = 0;

    RL_REQUIRE(rltest_db_dispatch(t->db, run_id, WORKER, epoch, run_id,
                                  &attempt, errstr, sizeof(errstr)) == 0);
    return attempt;
}

/* A run parked as unknown: dispatched, no outcome. */
static void
unknown_run(struct e2e *t, const char *job, char *run_id)
{
    char errstr[512];
    int64_t epoch = new_run(t, job, run_id);

    dispatch(t, run_id, epoch);
    RL_REQUIRE(rl_db_fail(t->db,
                          &(struct rl_lease){.run_id = run_id,
                                             .worker = WORKER,
                                             .epoch = epoch},
                          RL_RUN_UNKNOWN, "ambiguous", "timeout after sending",
                          errstr, sizeof(errstr)) == 0);
}

static int
runs(struct e2e *t, const char *a1, const char *a2, const char *a3,
     const char *a4, const char *a5, const char *a6, const char *a7)
{
    const char *args[] = {"runs", a1, a2, a3, a4, a5, a6, a7, NULL};

    return ops_run(t, args, NULL, NULL, out, sizeof(out), err, sizeof(err));
}

int
main(void)
{
    struct e2e t;
    char failed_id[RL_HEX_SIZE], unknown_id[RL_HEX_SIZE], done_id[RL_HEX_SIZE],
        running_id[RL_HEX_SIZE], res_f[RL_HEX_SIZE], res_c[RL_HEX_SIZE],
        errstr[512], path[256];
    const char *missing =
        "0000000000000000000000000000000000000000000000000000000000000000";
    int64_t epoch;
    int attempt;
    cJSON *json, *attempts;
    FILE *fp;

    e2e_setup(&t, "opsruns", 1);

    /* failed: one transient attempt with tokens, then given up */
    epoch = new_run(&t, "ops-failed", failed_id);
    attempt = dispatch(&t, failed_id, epoch);
    RL_REQUIRE(rl_db_record_outcome(t.db, failed_id,
                                    &(struct rl_attempt_outcome){
                                        .outcome = RL_OUTCOME_TRANSIENT,
                                        .call = {.attempt_no = attempt,
                                                 .http_status = 503,
                                                 .upstream_request_id = "req-1",
                                                 .prompt_tokens = 11,
                                                 .latency_ms = 120},
                                        .error = "503"},
                                    errstr, sizeof(errstr)) == 0);
    RL_REQUIRE(rl_db_fail(t.db,
                          &(struct rl_lease){.run_id = failed_id,
                                             .worker = WORKER,
                                             .epoch = epoch},
                          RL_RUN_FAILED, "attempts_exhausted",
                          "no attempts left", errstr, sizeof(errstr)) == 0);
    unknown_run(&t, "ops-unknown", unknown_id);
    /* completed */
    epoch = new_run(&t, "ops-done", done_id);
    attempt = dispatch(&t, done_id, epoch);
    RL_REQUIRE(rl_db_record_outcome(t.db, done_id,
                                    &(struct rl_attempt_outcome){
                                        .outcome = RL_OUTCOME_OK,
                                        .call = {.attempt_no = attempt,
                                                 .http_status = 200,
                                                 .upstream_request_id = "req-2",
                                                 .prompt_tokens = 12,
                                                 .completion_tokens = 34,
                                                 .cached_tokens = 5,
                                                 .latency_ms = 80}},
                                    errstr, sizeof(errstr)) == 0);
    {
        const char *ch[] = {"email", "slack"};
        int completed = 0;

        RL_REQUIRE(rltest_db_complete(t.db, done_id, WORKER, epoch, NULL,
                                      "{\"text\":\"model answer\"}", ch, 2,
                                      &completed, errstr, sizeof(errstr)) == 0);
    }
    new_run(&t, "ops-running", running_id);

    /* ---- list ---- */
    RL_CHECK(runs(&t, "list", "--json", NULL, NULL, NULL, NULL, NULL) == 0);
    json = cJSON_Parse(out);
    RL_CHECK(cJSON_GetArraySize(json) == 4);
    cJSON_Delete(json);
    RL_CHECK(runs(&t, "list", "--status", "unknown", "--json", NULL, NULL,
                  NULL) == 0);
    json = cJSON_Parse(out);
    RL_CHECK(cJSON_GetArraySize(json) == 1);
    RL_CHECK(strstr(out, unknown_id) != NULL);
    cJSON_Delete(json);
    RL_CHECK(runs(&t, "list", "--job", "ops-done", "--since",
                  "2026-08-07T00:00:00Z", NULL, NULL) == 0);
    RL_CHECK(strstr(out, "RUN_ID") == out);
    RL_CHECK(strstr(out, done_id) && !strstr(out, failed_id));
    RL_CHECK(runs(&t, "list", "--since", "2026-08-08T00:00:00Z", "--json", NULL,
                  NULL, NULL) == 0);
    RL_CHECK(strcmp(out, "[]\n") == 0);
    RL_CHECK(runs(&t, "list", "--status", "bogus", NULL, NULL, NULL, NULL) ==
             2);
    RL_CHECK(runs(&t, "list", "--since", "yesterday", NULL, NULL, NULL, NULL) ==
             2);
    RL_CHECK(runs(&t, "list", "--limit", "1", "--json", NULL, NULL, NULL) == 0);
    json = cJSON_Parse(out);
    RL_CHECK(cJSON_GetArraySize(json) == 1);
    cJSON_Delete(json);

    /* ---- show ---- */
    RL_CHECK(runs(&t, "show", done_id, "--json", NULL, NULL, NULL, NULL) == 0);
    json = cJSON_Parse(out);
    RL_REQUIRE(json);
    attempts = cJSON_GetObjectItem(json, "attempts");
    RL_CHECK(cJSON_GetArraySize(attempts) == 1);
    RL_CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(attempts, 0),
                                 "completion_tokens")
                 ->valuedouble == 34);
    RL_CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(json, "outbox")) == 2);
    RL_CHECK_STREQ(
        cJSON_GetObjectItem(cJSON_GetObjectItem(json, "run"), "status")
            ->valuestring,
        "completed");
    cJSON_Delete(json);
    RL_CHECK(runs(&t, "show", done_id, NULL, NULL, NULL, NULL, NULL) == 0);
    RL_CHECK(strstr(out, "attempts:") && strstr(out, "outbox:") &&
             strstr(out, "model answer") && strstr(out, "email"));
    RL_CHECK(runs(&t, "show", missing, NULL, NULL, NULL, NULL, NULL) == 3);
    RL_CHECK(runs(&t, "show", "xyz", NULL, NULL, NULL, NULL, NULL) == 2);

    /* ---- retry ---- */
    RL_CHECK(runs(&t, "retry", done_id, NULL, NULL, NULL, NULL, NULL) == 3);
    RL_CHECK(strstr(err, "completed") != NULL);
    RL_CHECK(runs(&t, "retry", running_id, NULL, NULL, NULL, NULL, NULL) == 3);
    RL_CHECK(runs(&t, "retry", missing, NULL, NULL, NULL, NULL, NULL) == 3);
    RL_CHECK(runs(&t, "retry", failed_id, "--actor", "alice", "--reason",
                  "upstream fixed", NULL) == 0);
    RL_CHECK(e2e_intf(&t,
                      "SELECT count(*) FROM runs WHERE run_id = '%s' AND "
                      "status = 'pending' AND next_attempt_at <= now()",
                      failed_id) == 1);
    RL_CHECK(runs(&t, "retry", unknown_id, NULL, NULL, NULL, NULL, NULL) == 0);
    RL_CHECK(e2e_intf(&t,
                      "SELECT count(*) FROM attempts WHERE run_id = '%s' AND "
                      "outcome = 'ambiguous'",
                      unknown_id) == 1);
    RL_CHECK(
        e2e_intf(&t, "SELECT count(*) FROM run_decisions WHERE decision = "
                     "'retry' AND prior_status IN ('failed', 'unknown')") == 2);
    RL_CHECK(e2e_intf(&t,
                      "SELECT count(*) FROM run_decisions WHERE run_id = "
                      "'%s' AND actor = 'alice' AND reason = 'upstream fixed'",
                      failed_id) == 1);
    /* The same run ID is claimable again, and the closed attempt is no
     * longer evidence that parks it at once. */
    {
        struct rl_claim claim;

        memset(&claim, 0, sizeof(claim));
        RL_CHECK(e2e_intf(&t,
                          "SELECT count(*) FROM runs WHERE run_id = '%s' AND "
                          "status = 'pending'",
                          unknown_id) == 1);
        RL_CHECK(rl_db_claim_due(
                     t.db,
                     &(struct rl_claim_opts){
                         .worker = WORKER, .lease_seconds = 30, .max = 1},
                     &claim, &(size_t){0}, errstr, sizeof(errstr)) == 0);
        rl_claim_clear(&claim);
    }
    RL_CHECK(runs(&t, "retry", failed_id, NULL, NULL, NULL, NULL, NULL) == 3);

    /* ---- resolve --failed ---- */
    unknown_run(&t, "ops-resolve-failed", res_f);
    RL_CHECK(runs(&t, "resolve", res_f, "--failed", NULL, NULL, NULL, NULL) ==
             2);
    RL_CHECK(runs(&t, "resolve", res_f, "--failed", "--actor", "bob",
                  "--reason", "customer confirmed nothing arrived") == 0);
    RL_CHECK(e2e_intf(&t,
                      "SELECT count(*) FROM runs WHERE run_id = '%s' AND "
                      "status = 'failed' AND error_class = 'operator'",
                      res_f) == 1);
    RL_CHECK(e2e_intf(&t,
                      "SELECT count(*) FROM run_decisions WHERE run_id = "
                      "'%s' AND decision = 'resolve_failed' AND actor = 'bob'",
                      res_f) == 1);
    RL_CHECK(runs(&t, "resolve", res_f, "--failed", "--actor", "bob",
                  "--reason", "again") == 3);

    /* ---- resolve --completed-from ---- */
    unknown_run(&t, "ops-resolve-completed", res_c);
    snprintf(path, sizeof(path), "%s.bad.json", t.name);
    fp = fopen(path, "w");
    RL_REQUIRE(fp);
    fputs("{not json", fp);
    fclose(fp);
    {
        const char *args[] = {"runs", "resolve", res_c,   "--completed-from",
                              path,   "--actor", "carol", "--reason",
                              "r",    NULL};
        RL_CHECK(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                         sizeof(err)) == 2);
    }
    RL_CHECK(runs(&t, "resolve", res_c, "--failed", "--completed-from", path,
                  "--actor", "x") == 2);
    snprintf(path, sizeof(path), "%s.output.json", t.name);
    fp = fopen(path, "w");
    RL_REQUIRE(fp);
    fputs("{\"text\": \"found in the upstream console\"}\n", fp);
    fclose(fp);
    {
        const char *args[] = {"runs",
                              "resolve",
                              res_c,
                              "--completed-from",
                              path,
                              "--actor",
                              "carol",
                              "--reason",
                              "generation 42 in the provider log",
                              NULL};
        RL_CHECK(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                         sizeof(err)) == 0);
        RL_CHECK(strstr(out, "2 notifications") != NULL);
        /* Write-once: a second resolution is refused, output unchanged. */
        RL_CHECK(ops_run(&t, args, NULL, NULL, out, sizeof(out), err,
                         sizeof(err)) == 3);
    }
    RL_CHECK(e2e_intf(&t,
                      "SELECT count(*) FROM runs WHERE run_id = '%s' AND "
                      "status = 'completed' AND output->>'text' = "
                      "'found in the upstream console' AND lock_owner IS NULL",
                      res_c) == 1);
    RL_CHECK(e2e_intf(&t, "SELECT count(*) FROM outbox WHERE run_id = '%s'",
                      res_c) == 2);
    RL_CHECK(e2e_intf(&t,
                      "SELECT count(*) FROM run_decisions WHERE run_id = "
                      "'%s' AND decision = 'resolve_completed' AND actor = "
                      "'carol'",
                      res_c) == 1);
    RL_CHECK(runs(&t, "retry", res_c, NULL, NULL, NULL, NULL, NULL) == 3);
    RL_CHECK(runs(&t, "show", res_c, NULL, NULL, NULL, NULL, NULL) == 0);
    RL_CHECK(strstr(out, "resolve_completed by carol") != NULL);

    /* An unreachable ledger: exit 1. */
    {
        const char *args[] = {"runs", "list", NULL};
        const char *env[] = {"DATABASE_URL=postgresql://rl@127.0.0.1:1/x",
                             NULL};
        RL_CHECK(ops_run(&t, args, env, NULL, out, sizeof(out), err,
                         sizeof(err)) == 1);
    }
    e2e_teardown(&t);
    RL_TEST_END();
}
