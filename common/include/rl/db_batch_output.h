#ifndef RL_DB_BATCH_OUTPUT_H
#define RL_DB_BATCH_OUTPUT_H

/* The output of a finished batch (common/src/db/batch_output.c): its
 * runs read, its answered lines stored as live answers are
 * (schema/functions/rl_batch_store_answers.sql), the runs it fails failed
 * for good under the batch's lease, and each run's state in the batch.
 * Conventions: rl/db_conn.h. */

#include <stddef.h>
#include <stdint.h>

#include "rl/batch_state.h"
#include "rl/timefmt.h"

struct rl_db;

/* What the ledger holds of one run of a batch. */
struct rl_batch_run {
    char run_id[96];
    int attempt_no;
    int64_t lease_epoch;
    enum rl_batch_run_state state;
    char on_expiry[16];
    char *request_json; /* the run's effective request (malloc'd) */
};

/* The run of batch_id named by run_id and attempt_no into *r (free
 * r->request_json). Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_batch_run(struct rl_db *db, const char *batch_id, const char *run_id,
                    int attempt_no, struct rl_batch_run *r, char *errstr,
                    size_t errstr_size);

/* The runs of batch_id still in the batch (no line of the batch's files
 * named them), in run ID order past the first skip of them, up to max,
 * into out (free each request_json). */
int rl_db_batch_unanswered(struct rl_db *db, const char *batch_id, size_t skip,
                           struct rl_batch_run *out, size_t max, size_t *n,
                           char *errstr, size_t errstr_size);

/* One answered line of a batch's output file. */
struct rl_batch_answer {
    const char *run_id;
    int attempt_no;
    const char *output_json; /* the run's output (JSON), as a live one's */
    const char *upstream_request_id; /* NULL or "": none */
    int64_t prompt_tokens;           /* negative: unknown */
    int64_t completion_tokens;
    int64_t cached_tokens;
};

/* What storing one answered line did. */
enum rl_batch_answer_result {
    RL_BATCH_ANSWER_COMPLETED, /* the run completed with it */
    RL_BATCH_ANSWER_IGNORED,   /* refused: the run was cancelled, completed
                                  before, or its lease is gone */
    RL_BATCH_ANSWER_HANDLED,   /* stored by an earlier read of the file */
    RL_BATCH_ANSWER_NOT_FOUND  /* no such run in the batch */
};

/* rl_batch_store_answers: n answered lines of batch_id in one statement
 * and one transaction, each run completed under the batcher's lease as a
 * live answer is (output, outbox rows, the attempt's usage) and its
 * batch_runs row set with it; out[k] says what became of answers[k]. No
 * two answers may name the same run. Returns 0, RL_ERR_INVALID (the
 * database refused a value of some line, e.g. an output jsonb rejects:
 * nothing was written; store the lines one by one to find it),
 * RL_ERR_NOMEM or RL_ERR_DB (nothing known; safe to redo). */
int rl_db_batch_store_answers(struct rl_db *db, const char *batch_id,
                              const struct rl_batch_answer *answers, size_t n,
                              enum rl_batch_answer_result *out, char *errstr,
                              size_t errstr_size);

/* Sets the state of one run of batch_id (completed, ignored, failed,
 * retried or go_live). Returns 0 or RL_ERR_DB. */
int rl_db_batch_run_state(struct rl_db *db, const char *batch_id,
                          const char *run_id, int attempt_no,
                          enum rl_batch_run_state state, char *errstr,
                          size_t errstr_size);

/* A run the batcher failed: what its dead letter needs to rebuild its
 * event and name where it was read (as the sweeper's claim returns it). */
struct rl_batch_failed_run {
    char *job, *tenant, *version;        /* malloc'd */
    char scheduled_at[RL_TIME_UTC_SIZE]; /* UTC, floored */
    char *request_json;                  /* the effective request */
    char *raw_input;                     /* NULL when none */
    char *source_topic;                  /* NULL when not read from Kafka */
    int32_t source_partition;            /* -1: unknown */
    int64_t source_offset;               /* -1: unknown */
};

/* Frees what f holds (NULL accepted) and zeroes it. */
void rl_batch_failed_run_clear(struct rl_batch_failed_run *f);

/* Fails run_id for good under the batch's lease (RL_BATCH_OWNER,
 * lease_epoch), as rl_db_fail does, and fills *f (release with
 * rl_batch_failed_run_clear). A run already failed at that epoch with
 * error_class (by an earlier read of the same files) fills *f too, so its
 * dead letter is produced at least once. Returns 0, RL_ERR_STALE
 * (cancelled, completed, or no longer the batch's), RL_ERR_NOMEM or
 * RL_ERR_DB. */
int rl_db_batch_fail_run(struct rl_db *db, const char *run_id,
                         int64_t lease_epoch, const char *error_class,
                         const char *error, struct rl_batch_failed_run *f,
                         char *errstr, size_t errstr_size);

#endif /* RL_DB_BATCH_OUTPUT_H */
