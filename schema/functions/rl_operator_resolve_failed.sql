-- An operator resolves an unknown run as failed (`runs resolve --failed`,
-- the console's Resolve): its status becomes failed with error_class
-- 'operator', and the decision is recorded in run_decisions (whose
-- trigger writes the audit row). One row: the run's status before, its
-- attempts, and how many runs were updated and decisions recorded, then 0
-- (no row: no such run).
--
-- SECURITY DEFINER: runledger_console may change a run only this way,
-- never by UPDATE (schema/072_component_roles.sql).
CREATE OR REPLACE FUNCTION rl_operator_resolve_failed(p_run_id text,
                                                      p_actor text,
                                                      p_reason text)
 RETURNS TABLE(o_prior_status text, o_attempts integer, o_updated bigint,
               o_decided bigint, o_closed bigint)
 LANGUAGE sql
 SECURITY DEFINER
AS $fn$
    WITH cur AS (
        SELECT run_id, status, attempts FROM runs WHERE run_id = p_run_id
           FOR NO KEY UPDATE
    ), upd AS (
        UPDATE runs r
           SET status = 'failed', error_class = 'operator',
               last_error = format('resolved failed by %s: %s', p_actor,
                                   p_reason),
               updated_at = now()
          FROM cur WHERE r.run_id = cur.run_id AND cur.status = 'unknown'
        RETURNING r.run_id
    ), dec AS (
        INSERT INTO run_decisions (run_id, decision, actor, reason,
                                   prior_status, attempts)
        SELECT cur.run_id, 'resolve_failed', p_actor, p_reason, cur.status,
               cur.attempts
          FROM cur JOIN upd ON upd.run_id = cur.run_id
        RETURNING 1
    )
    SELECT cur.status, cur.attempts, (SELECT count(*) FROM upd),
           (SELECT count(*) FROM dec), 0::bigint
      FROM cur
$fn$;
REVOKE ALL ON FUNCTION rl_operator_resolve_failed(text, text, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rl_operator_resolve_failed(text, text, text)
    TO runledger_console;
-- A SECURITY DEFINER function resolves names in the ledger's schema only:
-- a caller's search_path must not lend it a table of the caller's.
DO $sp$ BEGIN
EXECUTE format('ALTER FUNCTION rl_operator_resolve_failed(text, text, text)'
               ' SET search_path = %I, pg_temp', current_schema());
END $sp$;
