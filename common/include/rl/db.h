#ifndef RL_DB_H
#define RL_DB_H

#include <stddef.h>
#include <stdint.h>

#include "rl/runid.h"
#include "rl/timefmt.h"

/* The ledger in PostgreSQL as the service runs it: connections,
 * migrations, claims, the writes under a lease, completion, the outbox
 * relay and the health thread's gauges, against the runs, attempts and
 * outbox tables (schema/NNN_<what>.sql). The operator's statements
 * (`runledger runs`, `budgets`, `report`, ...) are in rl/db_ops.h.
 *
 * Rules every write follows:
 * - the database clock decides lease expiry: callers pass durations;
 * - every write after a claim names the lease (worker, lease_epoch) and is
 *   refused with RL_ERR_STALE once another worker has claimed the run, so a
 *   worker that lost its lease can never commit;
 * - output and raw_input are write-once (guarded statements, and a trigger
 *   underneath); a completed run stays completed.
 *
 * Functions return 0 (or a count) on success, or a negative enum rl_err and
 * fill errstr with a lowercase sentence such as
 * "could not claim run <id>: <server message>". Messages never carry the
 * password of the connection string.
 *
 * @locality a struct rl_db is one PostgreSQL connection: use it from one
 * thread at a time. Open one per thread (they are cheap to hold, not to
 * open). */

struct rl_db;

/* Key of the session advisory lock that serialises `runledger migrate`
 * across processes: the bytes "runledgr" as a big-endian int64. */
#define RL_DB_MIGRATE_LOCK_KEY INT64_C(0x72756e6c65646772)

/* Longest schema name rl_db_connect_schema accepts. */
#define RL_DB_SCHEMA_MAX 63

/* Opens a connection. conninfo is a libpq URL or key=value string; NULL
 * means the environment variable DATABASE_URL, or when that is unset or
 * empty, libpq's own PG* variables and defaults. Returns a new connection
 * (free with rl_db_destroy) or NULL with errstr set. */
struct rl_db *rl_db_connect(const char *conninfo, char *errstr,
                            size_t errstr_size);

/* As rl_db_connect, and sets the session's search_path to schema (1 to
 * RL_DB_SCHEMA_MAX of [a-z0-9_], not starting with a digit), so one
 * database can hold several independent ledgers (tests use one each).
 * rl_db_migrate creates the schema if it is missing. schema NULL is
 * rl_db_connect. */
struct rl_db *rl_db_connect_schema(const char *conninfo, const char *schema,
                                   char *errstr, size_t errstr_size);

struct rl_config;

/* What a connection of the service is for: its application_name
 * (runledger-<role>, in pg_stat_activity) and its timeouts. */
enum rl_db_role {
    RL_DB_ROLE_LEDGER,    /* claims, dispatches, the sweeper */
    RL_DB_ROLE_RENEW,     /* lease renewals */
    RL_DB_ROLE_COMPLETER, /* completions and their outbox rows */
    RL_DB_ROLE_RELAY,     /* the outbox relay's batches */
    RL_DB_ROLE_VACUUM,    /* the relay's vacuums of the outbox */
    RL_DB_ROLE_HEALTH     /* /readyz checks and gauges */
};

/* "ledger", "renew", ... */
const char *rl_db_role_name(enum rl_db_role role);

/* Opens a service connection to cfg->database_url (as rl_db_connect) for
 * role. The session gets statement_timeout, lock_timeout and
 * idle_in_transaction_session_timeout from cfg (RUNLEDGER_PG_*_MS; the
 * renewal session at most a third and a sixth of the lease, the vacuum
 * session no statement_timeout, the relay's no idle-in-transaction
 * timeout), libpq's TCP keepalives and tcp_user_timeout, and
 * application_name runledger-<role>. Every connection parameter the
 * connection string sets wins, and its `options` are applied after these
 * settings, so its own -c statement_timeout=... wins as well. Returns a
 * new connection (rl_db_destroy) or NULL with errstr set. */
struct rl_db *rl_db_connect_role(const struct rl_config *cfg,
                                 enum rl_db_role role, char *errstr,
                                 size_t errstr_size);

/* Closes the connection and frees db; NULL is accepted. An open relay
 * transaction is rolled back by the server. */
void rl_db_destroy(struct rl_db *db);

/* Checks the connection with a round trip; when it was lost, reconnects
 * once (prepared statements and the schema setting are restored lazily).
 * Returns 0 or RL_ERR_DB. */
int rl_db_ping(struct rl_db *db, char *errstr, size_t errstr_size);

/* Applies the migrations compiled into this build (rl_migrations[], from
 * schema/NNN_*.sql, in name order). Creates schema_migrations(name,
 * checksum, applied_at) if missing, holds the advisory lock
 * RL_DB_MIGRATE_LOCK_KEY for the whole call, and applies each pending file
 * in its own transaction. Running it again is a no-op.
 * Sets *applied (may be NULL) to the number applied by this call.
 * An applied migration whose stored SHA-256 is a superseded one of its
 * file (an earlier text that differs in comments only, listed in
 * common/src/db/migrate.c) gets this build's checksum, logged at info.
 * Returns 0, RL_ERR_CHECKSUM when an applied migration's SHA-256 is
 * neither this build's nor a superseded one (errstr names the file;
 * nothing is changed or applied), or RL_ERR_DB. */
int rl_db_migrate(struct rl_db *db, int *applied, char *errstr,
                  size_t errstr_size);

/* ---- register + claim ------------------------------------------------ */

/* One logical run as an event registers it. Borrowed, not freed. */
struct rl_run_reg {
    const char *run_id; /* 64 lowercase hex (rl_runid_compute) */
    const char *job;
    const char *tenant;
    const char *scheduled_at; /* UTC, "YYYY-MM-DDTHH:MM:SS+00:00" */
    const char *version;
    const char *fingerprint;  /* 64 lowercase hex of request_json */
    const char *request_json; /* effective request {"notify":[..],
                                 "request":{..}} */
    const char *input_json;   /* raw input; NULL or "null": none yet */
    int deadline_seconds;     /* overall deadline counted from the first
                                 registration; 0: none */
    const char *source_topic; /* NULL when not from Kafka */
    int32_t source_partition; /* -1: unknown */
    int64_t source_offset;    /* -1: unknown */
    const char *traceparent;  /* validated W3C traceparent (rl/trace.h);
                                 NULL or "": none. Stored only when the run
                                 is inserted */
};

/* What a claim found for one run. */
enum rl_claim_status {
    RL_CLAIM_WON,       /* this worker holds the lease (new lease_epoch) */
    RL_CLAIM_COMPLETED, /* already completed: output_json is the answer */
    RL_CLAIM_LEASED,    /* another live owner holds it (or an earlier
                           duplicate in the same batch won it) */
    RL_CLAIM_CONFLICT,  /* same run_id, different fingerprint (or the
                           logical run exists under another run_id): the
                           row is untouched and nothing stored is given */
    RL_CLAIM_PARKED,    /* status failed or unknown */
    RL_CLAIM_NOT_DUE,   /* pending, next_attempt_at in the future: the
                           sweeper owns it */
    RL_CLAIM_QUEUED,    /* registered (or found) pending and due, left for
                           a sweeper: rl_db_register_claim_some had no
                           slot for it, or a concurrency limit covers it */
    RL_CLAIM_PURGED     /* no run, but its tombstone with this fingerprint:
                           it finished and was purged, and is never
                           registered again; nothing stored is given */
};

/* Short stable name ("won", "completed", ...). */
const char *rl_claim_status_name(enum rl_claim_status status);

/* One run as a claim returns it. Strings are owned by the struct (free
 * with rl_claim_clear; take one by setting the member to NULL); NULL when
 * the database holds NULL. */
struct rl_claim {
    enum rl_claim_status status;
    char run_id[RL_HEX_SIZE];
    char run_status[24];           /* the row's status ("running" if WON) */
    char fingerprint[RL_HEX_SIZE]; /* stored fingerprint */
    int64_t lease_epoch;           /* WON: the fencing token to write with */
    int attempts;                  /* dispatches recorded so far */
    int ambiguous_prior; /* the latest attempt was dispatched and has no
                            outcome: a previous owner may have generated */
    int ambiguous_count; /* attempts without outcome or ended ambiguous */
    int deadline_passed; /* the run's deadline_at is in the past */
    char *job;
    char *tenant;
    char scheduled_at[RL_TIME_UTC_SIZE];
    char *version;
    char *request_json; /* stored effective request (not on CONFLICT) */
    char *raw_input;    /* stored raw input JSON (not on CONFLICT) */
    char *output_json;  /* stored output (COMPLETED only) */
    char *source_topic;
    int32_t source_partition; /* -1: unknown */
    int64_t source_offset;    /* -1: unknown */
    char *traceparent;        /* stored at registration; NULL: none */
};

/* Frees the strings of claim and zeroes it; NULL is accepted. */
void rl_claim_clear(struct rl_claim *claim);

/* Registers n runs (inserting the missing ones) and claims each one that is
 * pending or running, has no live lease, is due and matches its stored
 * fingerprint: status running, lock_owner worker, expiry now() +
 * lease_seconds on the database clock, lease_epoch + 1. An existing row's
 * raw_input is filled from input_json if it had none. One round trip, one
 * transaction (plpgsql rl_claim_runs).
 * claims[k] (n entries, caller-allocated, overwritten) describes regs[k].
 * Returns 0 (per-run results in claims), RL_ERR_INVALID or RL_ERR_DB; on
 * failure claims hold nothing to free. */
int rl_db_register_claim(struct rl_db *db, const struct rl_run_reg *regs,
                         size_t n, const char *worker, int lease_seconds,
                         struct rl_claim *claims, char *errstr,
                         size_t errstr_size);

/* As rl_db_register_claim, but claims at most claim_max runs of the batch
 * (the model slots the caller has; -1: every due run, as
 * rl_db_register_claim): the first claim_max claimable runs in the
 * batch's order, a new one inserted already running. Every other new run
 * is registered pending and due now; the runs not claimed, those of a
 * tenant or job with a concurrency limit included, answer RL_CLAIM_QUEUED
 * and are a sweeper's to claim (rl_db_claim_due). Returns as
 * rl_db_register_claim. */
int rl_db_register_claim_some(struct rl_db *db, const struct rl_run_reg *regs,
                              size_t n, const char *worker, int lease_seconds,
                              long claim_max, struct rl_claim *claims,
                              char *errstr, size_t errstr_size);

/* Sweeper: claims up to limit runs that are running with an expired lease,
 * or pending and due, these in a fair order across tenants (round-robin,
 * weighted by run_limits.weight) and within the concurrency limits of
 * run_limits (schema/018_fair_claims.sql), skipping rows other
 * transactions hold (SKIP LOCKED), so several sweepers share the work. Every
 * returned claim is RL_CLAIM_WON with its identity, stored request and raw
 * input, lease_epoch and ambiguity evidence. claims holds limit entries; sets
 * *n_claimed. Returns 0 or RL_ERR_INVALID / RL_ERR_DB. */
int rl_db_claim_due(struct rl_db *db, const char *worker, int lease_seconds,
                    size_t limit, struct rl_claim *claims, size_t *n_claimed,
                    char *errstr, size_t errstr_size);

/* ---- writes under a lease ------------------------------------------- */

/* Stores raw input once: the first value written stays. *stored receives
 * the stored value (malloc'd, free with free(); NULL if none), which the
 * caller must use instead of its own. input_json NULL or "null" stores
 * nothing. Returns 0, RL_ERR_STALE (lease lost), RL_ERR_INVALID (not
 * JSON) or RL_ERR_DB. */
int rl_db_store_raw_input(struct rl_db *db, const char *run_id,
                          const char *worker, int64_t lease_epoch,
                          const char *input_json, char **stored, char *errstr,
                          size_t errstr_size);

/* What a dispatch under a budget did. */
enum rl_dispatch_status {
    RL_DISPATCH_RECORDED,    /* the attempt is recorded: send the request */
    RL_DISPATCH_DEFERRED,    /* a budget is spent for today: no attempt was
                                recorded and the run is already pending until
                                the next UTC day (error_class "budget") */
    RL_DISPATCH_WAIT,        /* only reservations of calls in flight stand in
                                the way: as DEFERRED, due again after wait_ms */
    RL_DISPATCH_DEADLINE,    /* the run's deadline has passed: nothing was
                                recorded; fail the run (error_class deadline) */
    RL_DISPATCH_RATE_LIMITED /* the model's rate limit (or the provider's
                                pause) has no room: as WAIT, due again at
                                next_window (error_class rate_limit,
                                schema/019_model_rate_limits.sql) */
};

/* One run of a dispatch batch. */
struct rl_dispatch_req {
    const char *run_id;
    int64_t lease_epoch;
    const char *idempotency_key;
    int64_t estimate;
};

/* What a dispatch batch did for one run. */
struct rl_dispatch_res {
    int err; /* 0 or RL_ERR_STALE (nothing written for this run) */
    enum rl_dispatch_status status;
    int attempt_no;                     /* RECORDED */
    char next_window[RL_TIME_UTC_SIZE]; /* DEFERRED, WAIT, RATE_LIMITED:
                                           when due again */
    char detail[320];                   /* DEFERRED, WAIT, RATE_LIMITED:
                                           why */
};

/* Records the model dispatches of n runs BEFORE their requests are sent
 * (plpgsql rl_dispatch_runs in schema/007_batches.sql and 010), in one
 * statement and one transaction, each run under its own lease; out[k]
 * tells what happened to reqs[k]. For each run, estimate tokens are first
 * reserved against every budget of its tenant (and job) for today's UTC
 * date (rl_dispatch_within_budget of schema/004_budgets.sql); the attempt's
 * outcome settles the reservation. A recorded dispatch increments
 * runs.attempts and inserts attempts(run_id, attempt_no, lease_epoch,
 * worker, idempotency_key, dispatched_at = now()). Idempotent per lease:
 * when this worker already recorded a dispatch under lease_epoch that has
 * no outcome yet (the first call's COMMIT went through but its answer was
 * lost), that attempt is returned and nothing is added. No two reqs may
 * name the same run. Returns 0, RL_ERR_INVALID, RL_ERR_NOMEM or RL_ERR_DB
 * (nothing known; safe to redo: a lease dispatches at most once). */
int rl_db_dispatch_runs(struct rl_db *db, const struct rl_dispatch_req *reqs,
                        size_t n, const char *worker, int64_t wait_ms,
                        struct rl_dispatch_res *out, char *errstr,
                        size_t errstr_size);

/* Sets the outcome of attempt attempt_no of run_id, once. outcome is one of
 * "ok", "transient", "permanent", "ambiguous", "invalid_output",
 * "not_sent", "connect_failed", "cancelled", "lease_lost" (the schema's
 * CHECK). Negative numbers and NULL strings are stored as NULL. Not
 * lease-guarded: an attempt's outcome is a fact about what was sent, and a
 * worker that lost its lease still tells the truth about its call.
 * Returns 0, RL_ERR_NOTFOUND (no such attempt, or it has an outcome),
 * RL_ERR_INVALID (unknown outcome) or RL_ERR_DB. */
int rl_db_record_outcome(struct rl_db *db, const char *run_id, int attempt_no,
                         const char *outcome, int http_status,
                         const char *upstream_request_id, int64_t prompt_tokens,
                         int64_t completion_tokens, int64_t cached_tokens,
                         int64_t latency_ms, const char *error, char *errstr,
                         size_t errstr_size);

/* Extends the leases of n runs held by worker to now() + lease_seconds in
 * one statement. held[k] (caller-allocated) is set to 1 when run_ids[k]
 * with epochs[k] is still this worker's, else 0 (the run moved on: abandon
 * it). Returns the number still held (>= 0) or RL_ERR_INVALID / RL_ERR_DB. */
int rl_db_renew_leases(struct rl_db *db, const char *worker, int lease_seconds,
                       const char *const *run_ids, const int64_t *epochs,
                       size_t n, int *held, char *errstr, size_t errstr_size);

/* As rl_db_renew_leases without extending anything: held[k] says whether
 * run_ids[k] with epochs[k] is still worker's lease (an operator's cancel
 * clears it at once). Read-only. Returns the number still held (>= 0) or
 * RL_ERR_INVALID / RL_ERR_DB. */
int rl_db_check_leases(struct rl_db *db, const char *worker,
                       const char *const *run_ids, const int64_t *epochs,
                       size_t n, int *held, char *errstr, size_t errstr_size);

/* Gives a run back for a later attempt: status pending, lease cleared,
 * next_attempt_at = now() + delay_ms (database clock), error_class and
 * error recorded. Returns 0, RL_ERR_STALE or RL_ERR_DB. */
int rl_db_release(struct rl_db *db, const char *run_id, const char *worker,
                  int64_t lease_epoch, int64_t delay_ms,
                  const char *error_class, const char *error, char *errstr,
                  size_t errstr_size);

/* Parks a run for good: status "failed" or "unknown" (the outcome of a
 * dispatched call is unknowable), lease cleared, error recorded.
 * Returns 0, RL_ERR_STALE, RL_ERR_INVALID (other status) or RL_ERR_DB. */
int rl_db_fail(struct rl_db *db, const char *run_id, const char *worker,
               int64_t lease_epoch, const char *status, const char *error_class,
               const char *error, char *errstr, size_t errstr_size);

/* What an attempt that produced the output returned (outcome "ok").
 * Negative numbers and NULL or "" strings are stored as NULL. */
struct rl_attempt_ok {
    int attempt_no;
    int http_status;
    const char *upstream_request_id;
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;
    int64_t latency_ms;
};

/* One run of a completion batch. Under the lease (worker, lease_epoch):
 * status completed, output (write-once), completed_at, the lease cleared,
 * and one outbox row per distinct channel with the envelope {"run_id",
 * "job", "tenant", "scheduled_at", "version", "channel", "output"} (ON
 * CONFLICT DO NOTHING). Outbox rows are only written by the call that
 * completes the run, so a run never has two rows for one channel. In the
 * same transaction, outcome "ok" for attempt oc.attempt_no, once (an
 * attempt that already has an outcome keeps it), even when the lease is
 * stale: it is the call's truth. A worker that dies before this commits
 * leaves the attempt without an outcome, which the next claimer treats as
 * ambiguous; it never leaves an "ok" attempt whose answer nobody stored. */
struct rl_complete_req {
    const char *run_id;
    int64_t lease_epoch;
    const char *output_json; /* JSON, not null */
    const char *const *channels;
    size_t n_channels;
    struct rl_attempt_ok oc;
};

/* What a completion batch did to one run. */
struct rl_complete_res {
    int err;         /* 0, RL_ERR_STALE (nothing of the run written but the
                        outcome) or RL_ERR_NOTFOUND */
    int completed;   /* 1: this call completed the run; 0: done before (a
                        caller holding a stale lease also gets 0 and err 0
                        once the run is completed) */
    int outbox_rows; /* outbox rows this call queued */
    int outcome_set; /* 1: this call recorded the attempt's outcome */
};

/* Completes n runs (plpgsql rl_complete_runs in schema/007_batches.sql and
 * 010) in one statement and one transaction, each run under its own lease;
 * out[k] tells what happened to reqs[k]. No two reqs may name the same
 * run. Returns 0 (every run has its result, a stale one never holds up the
 * others), RL_ERR_INVALID (no output, or the database refused a value of
 * some run, e.g. an output jsonb rejects: nothing was written; complete
 * the runs one by one to find it), RL_ERR_NOMEM or RL_ERR_DB (nothing
 * known; every step is safe to redo). */
int rl_db_complete_runs(struct rl_db *db, const struct rl_complete_req *reqs,
                        size_t n, const char *worker,
                        struct rl_complete_res *out, char *errstr,
                        size_t errstr_size);

/* What storing a proposal did. */
enum rl_propose_status {
    RL_PROPOSE_WAITING,    /* stored: the run is awaiting_approval */
    RL_PROPOSE_ALREADY,    /* the same proposal was stored before (a redo) */
    RL_PROPOSE_SUPERSEDED, /* the run already held another proposal: the new
                              answer is refused and the run failed with
                              error_class "proposal_immutable" (errstr) */
    RL_PROPOSE_COMPLETED   /* the run is already completed: nothing changed */
};

/* For an approval-required run, in place of its completion: records
 * outcome "ok" for attempt oc->attempt_no and, under the lease (worker,
 * lease_epoch), stores proposal_json (write-once) with its digest and
 * moves the run to awaiting_approval, releasing the lease, in one
 * statement. No outbox row is written. Returns 0 with *status set,
 * RL_ERR_STALE (lease gone, or no such run), RL_ERR_INVALID or RL_ERR_DB. */
int rl_db_propose_attempt(struct rl_db *db, const char *run_id,
                          const char *worker, int64_t lease_epoch,
                          const struct rl_attempt_ok *oc,
                          const char *proposal_json, const char *digest,
                          enum rl_propose_status *status, char *errstr,
                          size_t errstr_size);

/* ---- outbox relay ----------------------------------------------------- */

/* One pending notification with its run's identity. */
struct rl_outbox_row {
    char run_id[RL_HEX_SIZE];
    char *channel;
    char *job;
    char *tenant;
    char *payload;        /* JSON text */
    int delivery_count;   /* earlier delivery attempts */
    char ctid[32];        /* the locked row's tuple id, e.g. "(12,3)" */
    char traceparent[56]; /* the run's stored traceparent, "" when none */
    int64_t lease_epoch;  /* the run's epoch: names its last run span */
};

/* Opens a transaction and locks up to limit of the oldest pending outbox
 * rows that no other relay holds (FOR UPDATE SKIP LOCKED). *rows receives a
 * new array of *n_rows rows (free with rl_db_outbox_rows_free; NULL when
 * none). The transaction stays open until rl_db_outbox_finish_batch, so
 * give the relay a connection of its own. Returns 0 or RL_ERR_INVALID /
 * RL_ERR_DB / RL_ERR_NOMEM (nothing left open). */
int rl_db_outbox_lock_batch(struct rl_db *db, int limit,
                            struct rl_outbox_row **rows, size_t *n_rows,
                            char *errstr, size_t errstr_size);

/* As rl_db_outbox_lock_batch, bounded by bytes as well (max_bytes > 0):
 * rows are taken in due order while the notification bytes before them
 * (estimated from what is stored) are under max_bytes, so a batch holds
 * at most max_bytes plus one notification, and at least one row when any
 * is due. *full (when not NULL) is set when the batch reached either
 * bound, so that more rows may be due at once. */
int rl_db_outbox_lock_batch_bytes(struct rl_db *db, int limit,
                                  long long max_bytes,
                                  struct rl_outbox_row **rows, size_t *n_rows,
                                  int *full, char *errstr, size_t errstr_size);

/* What became of one locked row. */
enum rl_outbox_fate {
    RL_OUTBOX_RETRY = 0, /* not acknowledged: stays pending, backs off */
    RL_OUTBOX_DELIVERED, /* acknowledged: moves to outbox_delivered */
    RL_OUTBOX_DEAD,      /* refused for good: moves to outbox_dead */
};

struct rl_outbox_outcome {
    enum rl_outbox_fate fate;
    char reason[128]; /* RETRY: last_error; DEAD: the reason ("" none) */
};

/* Ends the batch transaction with an outcome per row (outcomes[i] for
 * rows[i]): delivered rows move to outbox_delivered (delivered_at now(),
 * delivery_count + 1), dead ones to outbox_dead with their reason, and
 * retried ones stay pending with delivery_count + 1, last_error set and
 * due again in retry_base_ms * 2^(earlier delivery attempts), at most
 * retry_max_ms (0 and 0: due at once). n == 0 just closes the
 * transaction. Returns 0, or RL_ERR_NOMEM / RL_ERR_DB after rolling back
 * (every row stays pending as it was; the idempotency-key header makes
 * the redelivery harmless). */
int rl_db_outbox_finish_rows(struct rl_db *db, const struct rl_outbox_row *rows,
                             size_t n, const struct rl_outbox_outcome *outcomes,
                             long retry_base_ms, long retry_max_ms,
                             char *errstr, size_t errstr_size);

/* rl_db_outbox_finish_rows with one outcome for the batch: delivered, or
 * retried (due again at once). */
int rl_db_outbox_finish_batch(struct rl_db *db,
                              const struct rl_outbox_row *rows, size_t n,
                              int delivered, char *errstr, size_t errstr_size);

/* Frees an array from rl_db_outbox_lock_batch; NULL is accepted. */
void rl_db_outbox_rows_free(struct rl_outbox_row *rows, size_t n);

/* Subscribes the session to the outbox's wake-ups: every statement that
 * queues outbox rows notifies channel runledger_outbox at commit
 * (schema/009_outbox_wakeup.sql), and makes it a relay session, whose
 * plans read the outbox by index only (enable_seqscan and enable_sort
 * off: see common/src/db/outbox.c). Call it on the relay's own connection
 * before its first batch. Returns 0 or RL_ERR_DB. */
int rl_db_outbox_listen(struct rl_db *db, char *errstr, size_t errstr_size);

/* On a listening session outside a transaction: waits up to timeout_ms
 * for a wake-up (one already received counts). Returns 1 (woken), 0 (the
 * time passed) or RL_ERR_DB (the connection is gone). */
int rl_db_outbox_wait(struct rl_db *db, long timeout_ms, char *errstr,
                      size_t errstr_size);

/* The outbox's rows are all deleted within moments of their insert.
 * Autovacuum visits a database at most once per autovacuum_naptime (a
 * minute by default); between visits every insert extends the heap, so at
 * thousands of notifications a second the pending set of a few hundred
 * rows spreads over a hundred megabytes that every relay scan and insert
 * walks. The relay therefore vacuums it every RUNLEDGER_RELAY_VACUUM_ROWS
 * delivered rows, on a connection of its own so delivery goes on
 * meanwhile.
 *
 * rl_db_outbox_vacuum_start sends VACUUM (SKIP_LOCKED, TRUNCATE false)
 * outbox on db (a connection used for nothing else, outside a
 * transaction) and returns at once: 1 when sent, 0 when this session's
 * role may not vacuum the outbox (neither its owner nor the database's;
 * checked once per session), or RL_ERR_INVALID / RL_ERR_DB.
 * rl_db_outbox_vacuum_poll then returns 1 while it runs, 0 once it is
 * done (or none was sent), RL_ERR_DB if it failed. */
int rl_db_outbox_vacuum_start(struct rl_db *db, char *errstr,
                              size_t errstr_size);
int rl_db_outbox_vacuum_poll(struct rl_db *db, char *errstr,
                             size_t errstr_size);

/* ---- health --------------------------------------------------------- */

/* The health thread's reading, declared here rather than in rl/db_ops.h
 * because the service process itself runs it (every /metrics scrape); it
 * reads what an operator reads, so it lives with the operator's statements
 * in common/src/db/ops.c. */

/* Ledger-wide gauges for /metrics (every replica reports the same values:
 * aggregate them with max, not sum). */
struct rl_db_gauges {
    int64_t outbox_backlog;         /* undelivered outbox rows */
    int backlog_estimated;          /* over 100,000: pg_class.reltuples */
    double oldest_pending_seconds;  /* age of the oldest undelivered row */
    int64_t unknown_runs;           /* runs waiting for an operator */
    int64_t awaiting_approval_runs; /* proposals waiting for a decision */
    int64_t cancelled_runs;         /* runs an operator cancelled */
    int64_t runs_rows;              /* estimated rows of runs, */
    int64_t attempts_rows;          /* attempts and outbox_delivered */
    int64_t delivered_rows;         /* (pg_stat_get_live_tuples) */
    int64_t waiting_runs;           /* pending and due now (to 100,000) */
    /* One per run_limits row with a concurrency (at most
     * RL_DB_GAUGE_LIMITS_MAX, in key order): owned, freed by
     * rl_db_gauges_clear. */
    struct rl_db_limit_use *limits;
    size_t nlimits;
};

/* Runs running under one concurrency limit; job "" is tenant-wide. */
struct rl_db_limit_use {
    char *tenant;
    char *job;
    int64_t concurrency;
    int64_t running;
};

/* Limits reported by rl_db_ops_gauges: keeps a scrape and the label
 * cardinality of /metrics bounded whatever an operator configures. */
#define RL_DB_GAUGE_LIMITS_MAX 1000

/* Reads the gauges in two round trips (cheap: bounded counts, index
 * scans). Fills *g, whose limits the caller frees with
 * rl_db_gauges_clear (also on failure). Returns 0, RL_ERR_DB or
 * RL_ERR_NOMEM. */
int rl_db_ops_gauges(struct rl_db *db, struct rl_db_gauges *g, char *errstr,
                     size_t errstr_size);

/* Frees what rl_db_ops_gauges allocated in g; g may be NULL. */
void rl_db_gauges_clear(struct rl_db_gauges *g);

#endif /* RL_DB_H */
