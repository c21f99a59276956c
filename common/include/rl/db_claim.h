#ifndef RL_DB_CLAIM_H
#define RL_DB_CLAIM_H

#include <stddef.h>
#include <stdint.h>

#include "rl/run_status.h"
#include "rl/runid.h"
#include "rl/timefmt.h"

/* Registering runs and claiming their leases: the intake's batches and
 * the sweeper's due runs (common/src/db/claim.c). Conventions:
 * rl/db_conn.h. */

struct rl_db;

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
                                 claim, moved by waits the provider or an
                                 operator imposed; 0: none */
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

/* One run as a claim returns it. Strings are owned by the struct (free
 * with rl_claim_clear; take one by setting the member to NULL); NULL when
 * the database holds NULL. */
struct rl_claim {
    enum rl_claim_status status;
    char run_id[RL_HEX_SIZE];
    enum rl_run_status run_status; /* the row's status (RUNNING if WON);
                                      PENDING when no row was read
                                      (PURGED) */
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

/* Who claims, for how long, and how many runs at most. */
struct rl_claim_opts {
    const char *worker; /* lock_owner of what is claimed */
    int lease_seconds;  /* the lease's term, on the database clock */
    long max;           /* rl_db_register_claim_some: the model slots the
                           caller has, -1 for every claimable run;
                           rl_db_claim_due: > 0, the entries of claims */
};

/* Registers n runs (inserting the missing ones) and claims at most
 * opts->max of them: the first opts->max runs of the batch, in its order,
 * that are pending or running, have no live lease, are due and match
 * their stored fingerprint become running, lock_owner opts->worker,
 * expiry now() + opts->lease_seconds on the database clock,
 * lease_epoch + 1; a new one is
 * inserted already running. Every other new run is registered pending and
 * due now; the runs not claimed, those of a tenant or job with a
 * concurrency limit included, answer RL_CLAIM_QUEUED and are a sweeper's
 * to claim (rl_db_claim_due). An existing row's raw_input is filled from
 * input_json if it had none. One round trip, one transaction (plpgsql
 * rl_claim_runs). claims[k] (n entries, caller-allocated, overwritten)
 * describes regs[k]. Returns 0 (per-run results in claims),
 * RL_ERR_INVALID or RL_ERR_DB; on failure claims hold nothing to free. */
int rl_db_register_claim_some(struct rl_db *db, const struct rl_run_reg *regs,
                              size_t n, const struct rl_claim_opts *opts,
                              struct rl_claim *claims, char *errstr,
                              size_t errstr_size);

/* Sweeper: claims up to opts->max runs (for opts->worker, for
 * opts->lease_seconds) that are running with an expired lease,
 * or pending and due, these in a fair order across tenants (round-robin,
 * weighted by run_limits.weight) and within the concurrency limits of
 * run_limits (schema/018_fair_claims.sql), skipping rows other
 * transactions hold (SKIP LOCKED), so several sweepers share the work. Every
 * returned claim is RL_CLAIM_WON with its identity, stored request and raw
 * input, lease_epoch and ambiguity evidence. claims holds opts->max entries;
 * sets *n_claimed. Returns 0 or RL_ERR_INVALID / RL_ERR_DB. */
int rl_db_claim_due(struct rl_db *db, const struct rl_claim_opts *opts,
                    struct rl_claim *claims, size_t *n_claimed, char *errstr,
                    size_t errstr_size);

#endif /* RL_DB_CLAIM_H */
