#ifndef RL_DB_BATCH_H
#define RL_DB_BATCH_H

/* Batch mode: which jobs are sent through the provider's batch API, as
 * `runledger batch` sets them (schema/060_batch_mode.sql,
 * common/src/db/batch.c). Conventions: rl/db_conn.h; operator statements
 * run unprepared (a command runs each once). */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rl/timefmt.h"

struct rl_db;

/* One job's batch mode (tenant NULL or "": every tenant of the job). */
struct rl_batch_setting {
    const char *job;
    const char *tenant;
    int64_t window_ms;             /* collect a group at most this long */
    int64_t max_runs;              /* 1..50000 runs in one batch */
    int64_t max_bytes;             /* 1 KiB..200 MiB of request lines */
    const char *completion_window; /* asked of the provider, e.g. "24h" */
    const char *on_expiry;         /* "live", "rebatch" or "fail" */
};

/* `batch set`: creates or replaces the batch mode of s->job (and
 * s->tenant). Runs dispatched before keep the way they were sent.
 * Returns 0, RL_ERR_INVALID (a value out of range) or RL_ERR_DB. */
int rl_db_batch_setting_set(struct rl_db *db, const struct rl_batch_setting *s,
                            const char *actor, char *errstr,
                            size_t errstr_size);

/* `batch remove`: the job's runs not yet in a batch are sent live again.
 * Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_batch_setting_remove(struct rl_db *db, const char *job,
                               const char *tenant, char *errstr,
                               size_t errstr_size);

/* `batch show`: every setting (of job when not NULL) as a JSON array of
 * objects (job, tenant, window_seconds, max_runs, max_bytes,
 * completion_window, on_expiry, updated_by, updated_at) in *json
 * (malloc'd, the caller frees it). Returns 0 or RL_ERR_DB. */
int rl_db_batch_settings_json(struct rl_db *db, const char *job, char **json,
                              char *errstr, size_t errstr_size);

/* ---- the batcher (consumer/ledger/batch.c, schema/061_batches.sql) ---- */

/* The lease owner of every run waiting in or for a batch. */
#define RL_BATCH_OWNER "runledger-batch"

/* A run whose dispatch the worker recorded, to hand to the batcher. */
struct rl_batch_park_req {
    const char *run_id;
    int64_t lease_epoch;
    int attempt_no;
    const char *endpoint; /* "/v1/chat/completions" or "/v1/responses" */
    const char *model;
    const char *body; /* the request line's body (JSON) */
};

enum rl_batch_park_status {
    RL_BATCH_PARKED = 0, /* the batcher's now: nothing to send */
    RL_BATCH_LIVE,       /* not in batch mode (any more): call it live */
    RL_BATCH_LOST        /* the worker's lease is gone: send nothing */
};

/* rl_batch_park: in one statement, the runs of reqs in batch mode pass
 * from worker's lease to the batcher's and wait in batch_runs; status[k]
 * says what became of reqs[k]. Returns 0, RL_ERR_NOMEM or RL_ERR_DB
 * (nothing changed). */
int rl_db_batch_park(struct rl_db *db, const char *worker,
                     const struct rl_batch_park_req *reqs, size_t n,
                     enum rl_batch_park_status *status, char *errstr,
                     size_t errstr_size);

/* The (job, tenant) pairs in batch mode, as "job\ttenant" lines (tenant
 * "" for every tenant) in *text (malloc'd). Returns 0 or RL_ERR_DB. */
int rl_db_batch_modes(struct rl_db *db, char **text, char *errstr,
                      size_t errstr_size);

/* rl_batch_form: the intents of at most max batches whose runs are due,
 * committed; *formed gets how many. Returns 0 or RL_ERR_DB. */
int rl_db_batch_form(struct rl_db *db, int max, int *formed, char *errstr,
                     size_t errstr_size);

/* One batch as the batcher leases it. */
struct rl_batch {
    char batch_id[64];
    int64_t epoch; /* lock_epoch of this lease */
    char state[16];
    char endpoint[64];
    char model[256];
    char completion_window[16];
    char input_file_id[128];
    char provider_batch_id[128];
    int upload_tries;
    int create_tries;
    int64_t lookup_ms; /* since the first lookup found nothing; -1: none */
    int polls;
    int runs;
};

/* Leases up to max intents whose lease is free or expired, for lease_ms,
 * the epoch bumped. Returns 0 with *n set, or RL_ERR_DB. */
int rl_db_batch_take(struct rl_db *db, const char *owner, int64_t lease_ms,
                     struct rl_batch *out, size_t max, size_t *n, char *errstr,
                     size_t errstr_size);

/* rl_batch_take_poll: leases the submitted batch whose poll is most
 * overdue, as rl_db_batch_take does, only together with a poll slot of
 * provider (the group's polls of it spaced at least spacing_ms apart,
 * schema/063_batch_poll_slots.sql). *taken gets 1 with *out filled, or 0
 * (no batch due, or no slot free: nothing changed). Returns 0 or
 * RL_ERR_DB. */
int rl_db_batch_take_poll(struct rl_db *db, const char *owner, int64_t lease_ms,
                          const char *provider, int64_t spacing_ms,
                          struct rl_batch *out, int *taken, char *errstr,
                          size_t errstr_size);

/* The steps of a leased batch, each written under (owner, b->epoch). */
enum rl_batch_step {
    RL_BATCH_STEP_UPLOAD,    /* an upload begins: upload_tries + 1, the
                                lease extended by ms */
    RL_BATCH_STEP_UPLOADED,  /* arg: the provider's file id */
    RL_BATCH_STEP_CREATE,    /* a create begins: create_tries + 1 */
    RL_BATCH_STEP_SUBMITTED, /* arg: the provider's batch id; the first
                                poll in ms; the lease released */
    RL_BATCH_STEP_LOOKUP,    /* not found at the provider (yet): looked
                                up again in ms; the lease released */
    RL_BATCH_STEP_POLL,      /* arg: the provider's status; polled again
                                in ms; the lease released */
    RL_BATCH_STEP_RELEASE    /* arg: why; the step redone in ms; the
                                lease released */
};

/* Writes step of b under its lease. Returns 0, RL_ERR_STALE (another
 * worker leases it now: stop) or RL_ERR_DB. */
int rl_db_batch_step(struct rl_db *db, const struct rl_batch *b,
                     const char *owner, enum rl_batch_step step,
                     const char *arg, int64_t ms, char *errstr,
                     size_t errstr_size);

/* Writes the request file of b into f: one JSON line per run,
 * {"custom_id": "<run_id>:<attempt>", "method": "POST", "url": endpoint,
 * "body": ...}, read from the ledger a page at a time. *bytes gets the
 * file's size. Returns 0, RL_ERR_IO or RL_ERR_DB. */
int rl_db_batch_write_requests(struct rl_db *db, const struct rl_batch *b,
                               FILE *f, int64_t *bytes, char *errstr,
                               size_t errstr_size);

/* What the ledger holds of one run of a batch. */
struct rl_batch_run {
    char run_id[96];
    int attempt_no;
    int64_t lease_epoch;
    char state[16];
    char on_expiry[16];
    char *request_json; /* the run's effective request (malloc'd) */
};

/* The run of batch_id named by run_id and attempt_no into *r (free
 * r->request_json). Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_batch_run(struct rl_db *db, const char *batch_id, const char *run_id,
                    int attempt_no, struct rl_batch_run *r, char *errstr,
                    size_t errstr_size);

/* The runs of batch_id still 'in_batch' (no line of the batch's files
 * named them), up to max, into out (free each request_json). */
int rl_db_batch_unanswered(struct rl_db *db, const char *batch_id,
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
 * retried, go_live). Returns 0 or RL_ERR_DB. */
int rl_db_batch_run_state(struct rl_db *db, const char *batch_id,
                          const char *run_id, int attempt_no, const char *state,
                          char *errstr, size_t errstr_size);

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

/* *live gets the runs of batch_id neither cancelled nor finished. */
int rl_db_batch_live_runs(struct rl_db *db, const char *batch_id, int *live,
                          char *errstr, size_t errstr_size);

/* Ends b under its lease: state (completed, failed, expired, cancelled),
 * the provider's status and files, and the lines counted. Returns 0,
 * RL_ERR_STALE or RL_ERR_DB. */
int rl_db_batch_finish(struct rl_db *db, const struct rl_batch *b,
                       const char *owner, const char *state,
                       const char *provider_status, const char *output_file_id,
                       const char *error_file_id, int ok, int failed,
                       int ignored, char *errstr, size_t errstr_size);

/* ---- what operators read ----------------------------------------------- */

/* The batch of run_id's latest batch attempt as a JSON object (batch_id,
 * provider_batch_id, batch_state, provider_status, attempt_no,
 * run_state, parked_at, submitted_at) in *json (malloc'd), or "null"
 * when the run never waited for a batch. Returns 0 or RL_ERR_DB. */
int rl_db_batch_of_run(struct rl_db *db, const char *run_id, char **json,
                       char *errstr, size_t errstr_size);

/* Ledger-wide batch gauges for /metrics. */
struct rl_db_batch_gauges {
    int64_t by_state[6];        /* intent, submitted, completed, failed,
                                   expired, cancelled */
    int64_t runs_waiting;       /* runs waiting for or in a batch */
    double oldest_open_seconds; /* age of the oldest batch not finished */
};

/* The state names of rl_db_batch_gauges.by_state, in its order. */
extern const char *const rl_db_batch_states[6];

/* Reads g in one statement. Returns 0 or RL_ERR_DB. */
int rl_db_batch_gauges(struct rl_db *db, struct rl_db_batch_gauges *g,
                       char *errstr, size_t errstr_size);

/* ---- prices (schema/062_model_prices.sql) --------------------------- */

/* `prices set`: the model's price per million input and output tokens
 * (decimal text, >= 0) and the part of it a batch does not charge
 * (0..1). Returns 0, RL_ERR_INVALID or RL_ERR_DB. */
int rl_db_price_set(struct rl_db *db, const char *model, const char *input,
                    const char *output, const char *batch_discount,
                    const char *actor, char *errstr, size_t errstr_size);

/* `prices remove`. Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_price_remove(struct rl_db *db, const char *model, char *errstr,
                       size_t errstr_size);

/* `prices show`: every price as a JSON array (model, input_per_mtok,
 * output_per_mtok, batch_discount, updated_by, updated_at). */
int rl_db_prices_json(struct rl_db *db, char **json, char *errstr,
                      size_t errstr_size);

/* `report --cost`: per model (the request's "model") of the runs
 * scheduled at or after since, the tokens of live and of batch attempts
 * and what they cost at the model's price (decimal strings; null without
 * a price), as a JSON
 * array: model, live_prompt_tokens, live_completion_tokens, live_cost,
 * batch_prompt_tokens, batch_completion_tokens, batch_cost,
 * batch_at_live_price, saved. */
int rl_db_cost_report_json(struct rl_db *db, const char *since, char **json,
                           char *errstr, size_t errstr_size);

#endif /* RL_DB_BATCH_H */
