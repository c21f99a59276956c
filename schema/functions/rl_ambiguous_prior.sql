-- The latest attempt was dispatched and never got an outcome: a previous
-- owner may have generated and died before it could say so.
CREATE OR REPLACE FUNCTION rl_ambiguous_prior(p_run_id text) RETURNS boolean
LANGUAGE sql STABLE
AS $fn$
    SELECT coalesce((SELECT a.outcome IS NULL
                       FROM attempts a
                      WHERE a.run_id = p_run_id
                      ORDER BY a.attempt_no DESC
                      LIMIT 1), false)
$fn$;
