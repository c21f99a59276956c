#ifndef RL_DB_PURGE_H
#define RL_DB_PURGE_H

#include <stddef.h>
#include <stdint.h>

#include "rl/db_conn.h"
#include "rl/run_status.h"
#include "rl/runid.h"

/* Retention: `runledger purge` removes finished runs in small batches
 * (common/src/db/purge.c). Conventions: rl/db_conn.h; operator
 * statements run unprepared (a command runs each once). */

struct rl_db;

/* Rows a purge removed, or a dry run would remove, per table. */
struct rl_purge_counts {
    int64_t runs;
    int64_t attempts;
    int64_t decisions;    /* run_decisions: operator decisions */
    int64_t approvals;    /* approvals: the decision on a proposal */
    int64_t delivered;    /* outbox_delivered: delivered notifications */
    int64_t reservations; /* budget_reservations left by an attempt */
    int64_t model_calls;  /* model_calls: calls counted for rate limits */
    int64_t tombstones;   /* run_tombstones written (one per run) */
};

/* What is left of a purged run (run_tombstones): enough to answer its
 * event delivered again, and `runs show`. */
struct rl_tombstone {
    char run_id[RL_HEX_SIZE];
    char fingerprint[RL_HEX_SIZE];
    char job[256];
    char tenant[256];
    char scheduled_at[RL_DB_TIME_SIZE];
    char version[256];
    char final_status[32];
    char finished_at[RL_DB_TIME_SIZE]; /* updated_at of the run when purged */
    char purged_at[RL_DB_TIME_SIZE];
};

/* The statuses a purge may remove (the final ones), *n of them; static. */
const enum rl_run_status *rl_db_purge_statuses(size_t *n);

/* 1 when status is one of rl_db_purge_statuses. */
int rl_db_purge_status_known(enum rl_run_status status);

/* The cutoff of a purge, now() on the server minus older_than_seconds, as
 * "YYYY-MM-DDTHH:MM:SS.ffffff+00:00" into cutoff (RL_DB_TIME_SIZE). Every
 * batch of one purge uses the same cutoff. Returns 0 or RL_ERR_DB. */
int rl_db_purge_cutoff(struct rl_db *db, int64_t older_than_seconds,
                       char *cutoff, size_t cutoff_size, char *errstr,
                       size_t errstr_size);

/* What a purge of runs in one of statuses (nstatuses, each one of
 * rl_db_purge_statuses) last updated before cutoff would remove: runs
 * with no undelivered outbox row and no dead-lettered one (outbox_dead),
 * and their attempts, decisions,
 * approvals, delivered notifications and budget reservations. Reads only.
 * Returns 0, RL_ERR_INVALID (a status that is not final) or RL_ERR_DB. */
int rl_db_purge_count(struct rl_db *db, const enum rl_run_status *statuses,
                      size_t nstatuses, const char *cutoff,
                      struct rl_purge_counts *out, char *errstr,
                      size_t errstr_size);

/* Removes at most batch (<= 0: 1,000) of the runs rl_db_purge_count
 * counts, with their rows in the other tables, in one transaction; runs
 * another session has locked are skipped. out->runs is 0 when none is
 * left. Returns 0, RL_ERR_INVALID (a status that is not final, or a
 * notification queued for a run meanwhile: nothing removed) or
 * RL_ERR_DB. */
int rl_db_purge_batch(struct rl_db *db, const enum rl_run_status *statuses,
                      size_t nstatuses, const char *cutoff, int batch,
                      struct rl_purge_counts *out, char *errstr,
                      size_t errstr_size);

/* Removes at most batch (<= 0: 1,000) tombstones of runs that finished
 * before cutoff, in one transaction, into *removed (0: none left); with
 * dry_run, counts all of them and removes nothing. Returns 0 or
 * RL_ERR_DB. Whether the cutoff is safe (older than the topics'
 * retention) is the caller's check. */
int rl_db_purge_tombstones(struct rl_db *db, const char *cutoff, int batch,
                           int dry_run, int64_t *removed, char *errstr,
                           size_t errstr_size);

/* The tombstone of run_id into out. Returns 0, RL_ERR_NOTFOUND (none) or
 * RL_ERR_DB. */
int rl_db_tombstone_get(struct rl_db *db, const char *run_id,
                        struct rl_tombstone *out, char *errstr,
                        size_t errstr_size);

#endif /* RL_DB_PURGE_H */
