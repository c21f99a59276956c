-- Brings each model's rate-limit horizon (model_limits.queued_until: the
-- due time of the last run its bucket deferred, behind which a new run
-- queues) back to the runs that still wait for it. rl_take_model_limits
-- only moves the horizon forward, so a burst of 10,000 deferred runs that
-- an operator then cancelled kept every later run of the model waiting
-- for hours behind runs that no longer exist. Called after a cancel and a
-- purge, never on the hot path: it reads the pending runs due in the
-- future (runs_due_retries_idx) once per model whose horizon is ahead.
CREATE OR REPLACE FUNCTION rl_model_horizon_refresh()
RETURNS integer
LANGUAGE sql
 SECURITY DEFINER
AS $fn$
    WITH w AS (
        SELECT l.model,
               (SELECT max(r.next_attempt_at)
                  FROM runs r
                 WHERE r.status = 'pending'
                   AND r.next_attempt_at > now()
                   AND r.error_class = 'rate_limit'
                   AND r.request->'request'->>'model' = l.model) AS horizon
          FROM model_limits l
         WHERE l.queued_until > now()
    ), upd AS (
        UPDATE model_limits m
           SET queued_until = w.horizon
          FROM w
         WHERE m.model = w.model
           AND m.queued_until IS DISTINCT FROM w.horizon
        RETURNING 1
    )
    SELECT count(*)::integer FROM upd
$fn$;
-- SECURITY DEFINER: the console's cancel refreshes the horizons
-- without holding UPDATE on model_limits.
REVOKE ALL ON FUNCTION rl_model_horizon_refresh() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rl_model_horizon_refresh()
    TO runledger_console;
-- A SECURITY DEFINER function resolves names in the ledger's schema only:
-- a caller's search_path must not lend it a table of the caller's.
DO $sp$ BEGIN
EXECUTE format('ALTER FUNCTION rl_model_horizon_refresh()'
               ' SET search_path = %I, pg_temp', current_schema());
END $sp$;
