#ifndef RL_DB_SCHEDULES_H
#define RL_DB_SCHEDULES_H

/* Schedules in the ledger (schema/080_schedules.sql,
 * common/src/db/schedules.c): what `runledger schedules` sets, what
 * `runledger scheduler` reads and marks under its fenced lease, and what
 * the completeness audit compares with the runs. Conventions: rl/db_conn.h;
 * statements run unprepared. */

#include <stddef.h>
#include <stdint.h>

#include "rl/schedule.h"

struct rl_db;

/* `schedules set`: creates s->name or replaces its definition. A new
 * schedule's cursor starts now (no past window is published); a replaced
 * one keeps its cursor, pause state and creation time. Returns 0,
 * RL_ERR_INVALID or RL_ERR_DB. */
int rl_db_schedule_set(struct rl_db *db, const struct rl_schedule *s,
                       const char *actor, char *errstr, size_t errstr_size);

/* `schedules remove`. Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_schedule_remove(struct rl_db *db, const char *name, char *errstr,
                          size_t errstr_size);

/* `schedules pause` (pause 1) and `resume` (0). A pause is recorded so the
 * audit expects no window inside it; resuming moves the cursor to now, so
 * the windows of the pause are not caught up. Pausing a paused schedule
 * (or resuming a running one) changes nothing. Returns 0, RL_ERR_NOTFOUND
 * or RL_ERR_DB. */
int rl_db_schedule_pause(struct rl_db *db, const char *name, int pause,
                         const char *actor, char *errstr, size_t errstr_size);

/* `schedules list|show`: every schedule (name NULL) or one as a JSON array
 * in *json (malloc'd). Returns 0 or RL_ERR_DB. */
int rl_db_schedules_json(struct rl_db *db, const char *name, char **json,
                         char *errstr, size_t errstr_size);

/* Every schedule (name NULL) or one, unprepared (rl_schedule_prepare is
 * the caller's), into *out (n entries; free each with rl_schedule_clear,
 * then the array with free). *now gets the database's clock (epoch
 * seconds). Returns 0, RL_ERR_NOMEM or RL_ERR_DB. */
int rl_db_schedules_load(struct rl_db *db, const char *name,
                         struct rl_schedule **out, size_t *n, int64_t *now,
                         char *errstr, size_t errstr_size);

/* The console's schedules page: as rl_db_schedules_load, only the
 * schedules of tenants the console user viewer may read, the one named
 * name (NULL: any) with a name after after (NULL: from the first), in
 * name order, at most limit. Returns 0, RL_ERR_NOMEM or RL_ERR_DB. */
int rl_db_console_schedules_load(struct rl_db *db, const char *viewer,
                                 const char *name, const char *after, int limit,
                                 struct rl_schedule **out, size_t *n,
                                 int64_t *now, char *errstr,
                                 size_t errstr_size);

/* The pauses of schedule name as [from, until) pairs of epoch seconds
 * (until INT64_MAX while paused) into *pairs (2 * *n values, malloc'd).
 * Returns 0 or RL_ERR_DB. */
int rl_db_schedule_pauses(struct rl_db *db, const char *name, int64_t **pairs,
                          size_t *n, char *errstr, size_t errstr_size);

/* The scheduler's lease: takes or renews it for holder for ttl_ms on the
 * database's clock. On success *epoch is the fencing epoch, which grows
 * whenever the holder changes. Returns 0, RL_ERR_STALE (another holder's
 * lease is live) or RL_ERR_DB. */
int rl_db_scheduler_lease(struct rl_db *db, const char *holder, int64_t ttl_ms,
                          int64_t *epoch, char *errstr, size_t errstr_size);

/* Ends holder's lease at once (a clean stop), if it still holds epoch. */
int rl_db_scheduler_release(struct rl_db *db, const char *holder, int64_t epoch,
                            char *errstr, size_t errstr_size);

/* Moves the cursors of n schedules forward, names[i]'s to throughs[i], in
 * one statement, only while holder holds the live lease at epoch (a
 * cursor never moves back). Returns 0, RL_ERR_STALE (fenced: the lease is
 * another's or expired; nothing moved), RL_ERR_NOMEM or RL_ERR_DB. */
int rl_db_schedules_mark(struct rl_db *db, const char *const *names,
                         const int64_t *throughs, size_t n, const char *holder,
                         int64_t epoch, char *errstr, size_t errstr_size);

/* For each of the n run IDs, the fingerprint of the run registered under
 * it (in runs, or purged in run_tombstones), or NULL when there is none,
 * into fingerprints[i] (malloc'd; the caller frees each). Returns 0,
 * RL_ERR_NOMEM or RL_ERR_DB. */
int rl_db_runs_fingerprints(struct rl_db *db, const char *const *run_ids,
                            size_t n, char **fingerprints, char *errstr,
                            size_t errstr_size);

#endif /* RL_DB_SCHEDULES_H */
