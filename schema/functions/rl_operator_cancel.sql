-- An operator cancels one run (`runs cancel RUN_ID`, the console's
-- Cancel; schema/015_cancel.sql). The run's lease is cleared and its
-- epoch bumped in the statement that cancels it, so its worker's next
-- write (dispatch, outcome, completion, proposal) names a lease that no
-- longer exists and is refused as stale. The attempt in flight is closed
-- as cancelled: the call may have generated, and the reservation it held
-- is settled as spent (rl_settle_budget), as for a lost lease. The
-- decision is recorded in run_decisions (whose trigger writes the audit
-- row). One row: the run's status before, its attempts, and how many
-- runs were updated, decisions recorded and attempts closed (no row: no
-- such run). A cancel by filter (common/src/db/runs.c) runs the same
-- statements over many runs.
--
-- SECURITY DEFINER: runledger_console may change a run only this way,
-- never by UPDATE (schema/072_component_roles.sql).
CREATE OR REPLACE FUNCTION rl_operator_cancel(p_run_id text, p_actor text,
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
           SET status = 'cancelled', lock_owner = NULL,
               lock_expires_at = NULL, next_attempt_at = NULL,
               lease_epoch = CASE WHEN cur.status = 'running'
                                  THEN r.lease_epoch + 1
                                  ELSE r.lease_epoch END,
               error_class = 'cancelled',
               last_error = format('cancelled by %s: %s', p_actor, p_reason),
               updated_at = now()
          FROM cur
         WHERE r.run_id = cur.run_id
           AND cur.status IN ('pending', 'running', 'awaiting_approval')
        RETURNING r.run_id
    ), closed AS (
        UPDATE attempts a
           SET outcome = 'cancelled', finished_at = now(),
               error = coalesce(a.error,
                                format('run cancelled by %s while the call'
                                       ' was in flight: %s', p_actor,
                                       p_reason))
          FROM upd WHERE a.run_id = upd.run_id AND a.outcome IS NULL
        RETURNING 1
    ), dec AS (
        INSERT INTO run_decisions (run_id, decision, actor, reason,
                                   prior_status, attempts)
        SELECT cur.run_id, 'cancel', p_actor, p_reason, cur.status,
               cur.attempts
          FROM cur JOIN upd ON upd.run_id = cur.run_id
        RETURNING 1
    )
    SELECT cur.status, cur.attempts, (SELECT count(*) FROM upd),
           (SELECT count(*) FROM dec), (SELECT count(*) FROM closed)
      FROM cur
$fn$;
REVOKE ALL ON FUNCTION rl_operator_cancel(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rl_operator_cancel(text, text, text)
    TO runledger_console;
-- A SECURITY DEFINER function resolves names in the ledger's schema only:
-- a caller's search_path must not lend it a table of the caller's.
DO $sp$ BEGIN
EXECUTE format('ALTER FUNCTION rl_operator_cancel(text, text, text)'
               ' SET search_path = %I, pg_temp', current_schema());
END $sp$;
