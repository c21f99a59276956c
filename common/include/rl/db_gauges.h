#ifndef RL_DB_GAUGES_H
#define RL_DB_GAUGES_H

#include <stddef.h>
#include <stdint.h>

/* The health thread's reading, declared apart from the operator's headers
 * because the service process itself runs it (every /metrics scrape):
 * common/src/db/gauges.c. Conventions: rl/db_conn.h. */

struct rl_db;

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

#endif /* RL_DB_GAUGES_H */
