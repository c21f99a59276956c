#ifndef RL_DB_PRICES_H
#define RL_DB_PRICES_H

/* What a model's tokens cost, as `runledger prices` sets them
 * (schema/062_model_prices.sql), and the cost report of live and batch
 * attempts side by side (common/src/db/prices.c). Conventions:
 * rl/db_conn.h; operator statements run unprepared. */

#include <stddef.h>

struct rl_db;

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

#endif /* RL_DB_PRICES_H */
