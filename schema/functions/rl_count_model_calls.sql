-- Dispatches of an adaptively capped model are counted while in flight
-- (model_calls): rl_dispatch_runs inserts them after the attempts.
CREATE OR REPLACE FUNCTION rl_count_model_calls(p_models text[], p_run_ids text[])
RETURNS void
LANGUAGE sql
AS $fn$
    INSERT INTO model_calls (run_id, attempt_no, model)
    SELECT a.run_id, a.attempt_no, m.model
      FROM runs r
      JOIN model_limits m ON m.model = r.request->'request'->>'model'
      JOIN attempts a ON a.run_id = r.run_id AND a.attempt_no = r.attempts
     WHERE r.run_id = ANY (p_run_ids) AND m.model = ANY (p_models)
       AND m.concurrency_cap IS NOT NULL
       AND a.outcome IS NULL
        ON CONFLICT DO NOTHING
$fn$;
