#ifndef RL_DB_LIMITS_H
#define RL_DB_LIMITS_H

#include <stddef.h>
#include <stdint.h>

/* Concurrency limits and weights per tenant and job, as `runledger
 * limits` sets them (schema/018_fair_claims.sql, common/src/db/limits.c).
 * Conventions: rl/db_conn.h; operator statements run unprepared (a command runs
 * each once). */

struct rl_db;

/* `limits set`: the concurrency limit (runs running at once across every
 * worker; -1: keep what is set, none when new) and the weight (fair share
 * of slots; 0: keep, 1 when new) of tenant, or with job (not NULL or "")
 * the concurrency limit of that job alone. Returns 0, RL_ERR_INVALID or
 * RL_ERR_DB. */
int rl_db_limit_set(struct rl_db *db, const char *tenant, const char *job,
                    int concurrency, int weight, char *errstr,
                    size_t errstr_size);

/* `limits remove`. Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_limit_remove(struct rl_db *db, const char *tenant, const char *job,
                       char *errstr, size_t errstr_size);

/* `limits show`: every limit (of tenant when not NULL) with its runs
 * running and waiting (pending and due), as a JSON array. *json is
 * malloc'd. Returns 0 or RL_ERR_DB. */
int rl_db_limits_json(struct rl_db *db, const char *tenant, char **json,
                      char *errstr, size_t errstr_size);

#endif /* RL_DB_LIMITS_H */
