#ifndef RL_DB_MODEL_LIMITS_H
#define RL_DB_MODEL_LIMITS_H

/* Model rate limits shared by every worker of a ledger
 * (schema/019_model_rate_limits.sql, 021_rate_limit_queue.sql): the
 * operator's limits per model (`runledger limits --model`), and the
 * statement a worker runs when the provider throttled a model. Taking the
 * allowances is part of recording a batch's dispatches
 * (rl_db_dispatch_runs in rl/db_dispatch.h). Same conventions as
 * rl/db_conn.h: 0 or a
 * negative enum rl_err with errstr filled, one connection per thread. */

#include <stddef.h>
#include <stdint.h>

#include "rl/db_conn.h"

/* The limits of one model as the operator sets them. rpm and tpm are
 * allowances per window_ms (a minute unless shortened, e.g. by a test);
 * 0 means none of that kind. endpoint (NULL or "": none) only labels the
 * row. */
struct rl_model_limit {
    const char *model;
    const char *endpoint;
    int64_t rpm;
    int64_t tpm;
    int64_t window_ms;
};

/* `limits set --model`: creates or replaces the limits of one model,
 * refills its bucket and ends its pause (the old limit's 429s caused it;
 * a provider that still refuses pauses it again at the next one); a row a
 * 429 created becomes the operator's. At least one of rpm, tpm must be
 * > 0. Returns 0, RL_ERR_INVALID or RL_ERR_DB. */
int rl_db_model_limit_set(struct rl_db *db, const struct rl_model_limit *lim,
                          const char *actor, char *errstr, size_t errstr_size);

/* `limits remove --model`: drops the model's row (limits, bucket, pause
 * and adaptive cap). Returns 0, RL_ERR_NOTFOUND or RL_ERR_DB. */
int rl_db_model_limit_remove(struct rl_db *db, const char *model, char *errstr,
                             size_t errstr_size);

/* `limits show --model`: every model row (model NULL or "": all) as a JSON
 * array of objects (model, endpoint, rpm, tpm, window_seconds,
 * requests_left, tokens_left, paused_until, pause_reason,
 * concurrency_cap, in_flight, waits, throttles, waiting_runs) in *json
 * (malloc'd, the caller frees it). Returns 0 or RL_ERR_DB. */
int rl_db_model_limits_json(struct rl_db *db, const char *model, char **json,
                            char *errstr, size_t errstr_size);

/* A provider's refusal of one call, for rl_db_model_throttled. */
struct rl_model_throttle {
    const char *model;
    int64_t pause_ms;   /* how long the provider asked the model to wait */
    int adaptive;       /* no rate-limit headers: halve the adaptive cap */
    int in_flight;      /* the caller's calls of the model in flight, the
                           refused one included */
    const char *reason; /* shown by `runs show` on deferred runs; NULL */
    const char *run_id; /* the refused call's run and attempt (NULL: not */
    int attempt_no;     /* known, and every refusal cuts the cap) */
};

/* The provider throttled t->model: every worker's dispatch statement
 * defers the model's runs until t->pause_ms from now (rl_model_throttled).
 * t->adaptive: the provider published no rate-limit headers, so the
 * model's adaptive concurrency cap is halved (when no operator limit
 * exists), once per congestion event: a refused call dispatched before
 * the cap's last cut belongs to the burst that cut it. The first cap is
 * half the larger of t->in_flight and the group's calls the ledger
 * counts, at least 1. On success paused_until (33 bytes or more, may be
 * NULL) gets the pause's end and *cap (may be NULL) the cap, 0 for none.
 * A model without a row gets an implicit one, forgotten ten minutes after
 * its last pause ends. Returns 0, RL_ERR_INVALID (no model) or
 * RL_ERR_DB. */
int rl_db_model_throttled(struct rl_db *db, const struct rl_model_throttle *t,
                          char *paused_until, size_t paused_until_size,
                          int *cap, char *errstr, size_t errstr_size);

#endif /* RL_DB_MODEL_LIMITS_H */
