-- Locks the rows of the runs named, in run_id order.
CREATE OR REPLACE FUNCTION rl_lock_runs(p_run_ids text[]) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $fn$
BEGIN
    PERFORM 1
       FROM runs r
      WHERE r.run_id = ANY (p_run_ids)
      ORDER BY r.run_id
        FOR NO KEY UPDATE;
END
$fn$;
ALTER FUNCTION rl_lock_runs(text[])
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION rl_lock_runs(text[])
    SET enable_seqscan = off;
ALTER FUNCTION rl_lock_runs(text[])
    SET jit = off;
