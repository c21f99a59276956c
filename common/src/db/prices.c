/* prices.c: what a model's tokens cost, as `runledger prices` sets them
 * (schema/062_model_prices.sql), and the cost report that prices live
 * and batch attempts side by side (`report --cost`, the console's costs
 * page). */
#include <stddef.h>

#include "db_int.h"
#include "rl/db_prices.h"
#include "rl/err.h"

static const char price_set[] =
    "INSERT INTO model_prices (model, input_per_mtok, output_per_mtok,"
    "                          batch_discount, updated_by)"
    "VALUES ($1, $2::numeric, $3::numeric, coalesce($4::numeric, 0.5), $5)"
    "    ON CONFLICT (model) DO UPDATE"
    "   SET input_per_mtok = EXCLUDED.input_per_mtok,"
    "       output_per_mtok = EXCLUDED.output_per_mtok,"
    "       batch_discount = EXCLUDED.batch_discount,"
    "       updated_by = EXCLUDED.updated_by, updated_at = now()";

static const char price_remove[] = "DELETE FROM model_prices WHERE model = $1";

static const char prices_list[] =
    "SELECT coalesce(json_agg(x ORDER BY x.model), '[]')::text"
    "  FROM (SELECT p.model, p.input_per_mtok, p.output_per_mtok,"
    "               p.batch_discount, p.updated_by, " DB_TS_S(
        "p.updated_at") " AS updated_at"
                        "          FROM model_prices p) x";

/* Costs are decimal text (six places): the table prints numbers as whole
 * ones. An attempt is a batch's when its line came back in a batch (its
 * batch_runs row); every other attempt with usage was a live call. */
static const char cost_report[] =
    "WITH t AS ("
    "  SELECT r.request->'request'->>'model' AS model,"
    "         (b.run_id IS NOT NULL) AS batch,"
    "         coalesce(a.prompt_tokens, 0) AS pin,"
    "         coalesce(a.completion_tokens, 0) AS pout"
    "    FROM runs r JOIN attempts a ON a.run_id = r.run_id"
    "    LEFT JOIN batch_runs b ON b.run_id = a.run_id"
    "          AND b.attempt_no = a.attempt_no AND b.state = 'completed'"
    "   WHERE r.scheduled_at >= $1::timestamptz"
    "), g AS ("
    "  SELECT model,"
    "         sum(pin) FILTER (WHERE NOT batch) AS lin,"
    "         sum(pout) FILTER (WHERE NOT batch) AS lout,"
    "         sum(pin) FILTER (WHERE batch) AS bin,"
    "         sum(pout) FILTER (WHERE batch) AS bout"
    "    FROM t GROUP BY model"
    ")"
    "SELECT coalesce(json_agg(x ORDER BY x.model), '[]')::text FROM ("
    "  SELECT g.model,"
    "         coalesce(g.lin, 0) AS live_prompt_tokens,"
    "         coalesce(g.lout, 0) AS live_completion_tokens,"
    "         round((coalesce(g.lin, 0) * p.input_per_mtok"
    "                + coalesce(g.lout, 0) * p.output_per_mtok) / 1e6, 6)::text"
    "             AS live_cost,"
    "         coalesce(g.bin, 0) AS batch_prompt_tokens,"
    "         coalesce(g.bout, 0) AS batch_completion_tokens,"
    "         round((coalesce(g.bin, 0) * p.input_per_mtok"
    "                + coalesce(g.bout, 0) * p.output_per_mtok)"
    "               * (1 - p.batch_discount) / 1e6, 6)::text AS batch_cost,"
    "         round((coalesce(g.bin, 0) * p.input_per_mtok"
    "                + coalesce(g.bout, 0) * p.output_per_mtok) / 1e6, 6)::text"
    "             AS batch_at_live_price,"
    "         round((coalesce(g.bin, 0) * p.input_per_mtok"
    "                + coalesce(g.bout, 0) * p.output_per_mtok)"
    "               * p.batch_discount / 1e6, 6)::text AS saved"
    "    FROM g LEFT JOIN model_prices p ON p.model = g.model) x";

int
rl_db_price_set(struct rl_db *db, const char *model, const char *input,
                const char *output, const char *batch_discount,
                const char *actor, char *errstr, size_t errstr_size)
{
    const char *params[5] = {model, input, output, batch_discount,
                             actor && *actor ? actor : "operator"};

    if (!model || !*model || !input || !output) {
        rl_set_err(errstr, errstr_size,
                   "could not set the price: need a model, an input and an "
                   "output price");
        return RL_ERR_INVALID;
    }
    return db_write(db, price_set, 5, params, "set the price", NULL, errstr,
                    errstr_size);
}

int
rl_db_price_remove(struct rl_db *db, const char *model, char *errstr,
                   size_t errstr_size)
{
    const char *params[1] = {model};
    int rows = 0;
    int err = db_write(db, price_remove, 1, params, "remove the price", &rows,
                       errstr, errstr_size);

    if (err)
        return err;
    if (rows == 0) {
        rl_set_err(errstr, errstr_size,
                   "could not remove the price of model %s: there is none",
                   model);
        return RL_ERR_NOTFOUND;
    }
    return 0;
}

int
rl_db_prices_json(struct rl_db *db, char **json, char *errstr,
                  size_t errstr_size)
{
    return db_one_text(db, prices_list, 0, NULL, "list the prices", json,
                       errstr, errstr_size);
}

int
rl_db_cost_report_json(struct rl_db *db, const char *since, char **json,
                       char *errstr, size_t errstr_size)
{
    const char *params[1] = {since};

    return db_one_text(db, cost_report, 1, params, "report the cost", json,
                       errstr, errstr_size);
}
