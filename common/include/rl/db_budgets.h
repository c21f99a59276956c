#ifndef RL_DB_BUDGETS_H
#define RL_DB_BUDGETS_H

#include <stddef.h>
#include <stdint.h>

/* Token budgets and the cost report: `runledger budgets` and `report`
 * (schema/004_budgets.sql, common/src/db/budget.c). Conventions: rl/db_conn.h;
 * operator statements run unprepared (a command runs each once). */

struct rl_db;

/* `budgets set`: the daily token budget of tenant (job NULL or "": the
 * whole tenant). Returns 0, RL_ERR_INVALID or RL_ERR_DB. */
int rl_db_budget_set(struct rl_db *db, const char *tenant, const char *job,
                     int64_t daily_tokens, const char *actor, char *errstr,
                     size_t errstr_size);

/* `budgets remove`. Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_budget_remove(struct rl_db *db, const char *tenant, const char *job,
                        char *errstr, size_t errstr_size);

/* `budgets wake`: the budget-deferred runs of tenant (of job too, when
 * not NULL or "") waiting for a later window become due now, each with a
 * 'wake' decision (actor, reason) in run_decisions; a deadline the
 * deferral extended gives back the part of the wait that was skipped. A
 * run that still does not fit is deferred again at its dispatch. Works
 * in batches of 500. *woken is the number made due. Returns 0,
 * RL_ERR_INVALID (no tenant) or RL_ERR_DB. */
int rl_db_budget_wake(struct rl_db *db, const char *tenant, const char *job,
                      const char *actor, const char *reason, int64_t *woken,
                      char *errstr, size_t errstr_size);

/* `budgets show`: every budget (of tenant when not NULL) with today's
 * (UTC) reserved, spent, left and deferrals, as a JSON array. *json is
 * malloc'd. Returns 0 or RL_ERR_DB. */
int rl_db_budgets_json(struct rl_db *db, const char *tenant, char **json,
                       char *errstr, size_t errstr_size);

/* `report`: runs scheduled at or after since, grouped by "tenant", "job"
 * (tenant and job) or NULL (one total row), as a JSON array of objects:
 * tenant, job, runs, completed, generations (attempts with outcome ok),
 * extra_generations (per run, attempts that may have generated - ok,
 * ambiguous, lease_lost, or no outcome - beyond the first), dispatches,
 * budget_deferred (runs waiting for the next budget window),
 * prompt_tokens, completion_tokens, cached_tokens. *json is malloc'd.
 * Returns 0, RL_ERR_INVALID (since is not a timestamp) or RL_ERR_DB. */
int rl_db_report_json(struct rl_db *db, const char *since, const char *by,
                      char **json, char *errstr, size_t errstr_size);

#endif /* RL_DB_BUDGETS_H */
