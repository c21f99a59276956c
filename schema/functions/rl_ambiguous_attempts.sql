-- Attempts that may have generated without anyone knowing the result:
-- dispatched with no outcome, or ended ambiguous. Input to the ambiguity
-- policy ("one retry, then unknown").
CREATE OR REPLACE FUNCTION rl_ambiguous_attempts(p_run_id text) RETURNS integer
LANGUAGE sql STABLE
AS $fn$
    SELECT count(*)::integer
      FROM attempts a
     WHERE a.run_id = p_run_id
       AND (a.outcome IS NULL OR a.outcome = 'ambiguous')
$fn$;
