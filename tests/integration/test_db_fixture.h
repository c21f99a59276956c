#ifndef RL_TEST_DB_FIXTURE_H
#define RL_TEST_DB_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/runid.h"
#include "rl/timefmt.h"

/* Shared setup of the PostgreSQL integration tests. Every test process
 * works in a schema of its own (rl_test_<pid>_<n>_<ms>) in the database
 * DATABASE_URL names, so tests run in parallel and repeatedly; the schema
 * is dropped at the end. Without DATABASE_URL a test skips (77), or fails
 * when RL_REQUIRE_SERVICES is set. */

/* A fresh ledger: creates a unique schema, connects to it and migrates.
 * schema receives its name (RL_DB_SCHEMA_MAX + 1 bytes). */
struct rl_db *fixture_ledger(char *schema);

/* Another connection to the same ledger (for a second worker or thread). */
struct rl_db *fixture_connect(const char *schema);

/* Drops the schema and closes db. */
void fixture_drop(struct rl_db *db, const char *schema);

/* A registration for a synthetic run. The run_id is the SHA-256 of
 * "job|tenant|scheduled_at|version" as docs/design.md defines it; buffers are
 * owned by the struct fixture_run. */
struct fixture_run {
    char run_id[RL_HEX_SIZE];
    char fingerprint[RL_HEX_SIZE];
    char job[64];
    char scheduled_at[RL_TIME_UTC_SIZE];
    struct rl_run_reg reg;
};

/* Fills run for job name `job` (unique per test) and request variant
 * `request` (its fingerprint is sha256 of the request text). */
void fixture_run_init(struct fixture_run *run, const char *job,
                      const char *request_json, const char *input_json);

/* fixture_run_init for the schedule window scheduled_at (UTC, as
 * "2026-08-07T09:00:00+00:00"): runs of one job, a run id each. */
void fixture_run_init_at(struct fixture_run *run, const char *job,
                         const char *scheduled_at, const char *request_json,
                         const char *input_json);

/* Fills run (fixture_run_init, no input), claims it as worker "w1" and
 * completes it with output_json and n_channels channels through the
 * service's statements, which queue its outbox rows; fails the test
 * unless the claim is won and the run completed. */
void fixture_complete_run(struct rl_db *db, struct fixture_run *run,
                          const char *job, const char *request_json,
                          const char *output_json, const char *const *channels,
                          size_t n_channels);

/* Integer value of a one-column query with up to one text parameter;
 * fails the test on error. */
int64_t fixture_int(struct rl_db *db, const char *sql, const char *param);

/* Runs sql (no parameters, no rows wanted); fails the test on error. */
void fixture_exec(struct rl_db *db, const char *sql);

/* Inserts runs 1..count completed (run id and fingerprint the sha256 of
 * the number's text, job "queue", tenant "workspace-acme", notifying
 * email and slack), for outbox rows to name; fails the test unless all
 * count went in. */
void fixture_completed_runs(struct rl_db *db, int count);

/* A column of pg_stat_xact_user_tables for table (n_tup_ins, n_tup_upd,
 * n_tup_hot_upd, ...): counts of this backend not yet reported, so only a
 * difference across one transaction is that transaction's own. */
int64_t fixture_table_stat(struct rl_db *db, const char *table,
                           const char *column);

/* fixture_table_stat for runs. */
int64_t fixture_runs_stat(struct rl_db *db, const char *column);

/* Waits until the database clock has passed the lease of run_id (polls;
 * fails the test after 15 s). */
void fixture_wait_lease_expired(struct rl_db *db, const char *run_id);

/* Runs `$RUNLEDGER_BIN <args...>` (args NULL-terminated) with the
 * environment plus env (NAME=value entries, NULL-terminated, may be NULL;
 * an entry "NAME" without '=' unsets NAME), its stdout and stderr into out
 * (cut to size, NUL-terminated) and the milliseconds it took into
 * *took_ms. Returns its exit status, or -1 when it did not exit normally.
 * Fails the test when RUNLEDGER_BIN is not runnable. */
int fixture_run_cli(const char *const *args, const char *const *env, char *out,
                    size_t size, int64_t *took_ms);

#endif /* RL_TEST_DB_FIXTURE_H */
