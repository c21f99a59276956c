-- Start of the next budget window (next UTC midnight).
CREATE OR REPLACE FUNCTION rl_next_budget_window() RETURNS timestamptz
LANGUAGE sql STABLE
AS $fn$
    SELECT (date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day')
           AT TIME ZONE 'UTC'
$fn$;
