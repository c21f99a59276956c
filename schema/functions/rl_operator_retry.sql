-- An operator re-opens a parked run (`runs retry`, the console's Retry):
-- a failed or unknown run goes back to pending, and the decision is
-- recorded in run_decisions (whose trigger writes the audit row). An
-- attempt left without an outcome is closed as ambiguous (its result is
-- unknowable, which is what the operator accepted by retrying), so the
-- next claim does not park the run again on that evidence alone; a spent
-- deadline is extended by its original length. p_extra more attempts are
-- granted (attempt_allowance: dispatches that no longer count against the
-- limit); with 0, a run whose attempts ran out gets one more, so a plain
-- retry tries it again. One row: the run's status before, its attempts,
-- and how many runs were updated, decisions recorded and attempts closed
-- (no row: no such run).
--
-- SECURITY DEFINER: runledger_console may change a run only this way,
-- never by UPDATE (schema/072_component_roles.sql).
CREATE OR REPLACE FUNCTION rl_operator_retry(p_run_id text, p_actor text,
                                             p_reason text, p_extra integer)
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
           SET status = 'pending', next_attempt_at = now(),
               attempt_allowance = r.attempt_allowance
                   + CASE WHEN p_extra > 0 THEN p_extra
                          WHEN r.error_class = 'attempts_exhausted' THEN 1
                          ELSE 0 END,
               lock_owner = NULL, lock_expires_at = NULL,
               deadline_at = CASE WHEN r.deadline_at <= now()
                                  THEN now() + (r.deadline_at - r.created_at)
                                  ELSE r.deadline_at END,
               updated_at = now()
          FROM cur
         WHERE r.run_id = cur.run_id AND cur.status IN ('failed', 'unknown')
        RETURNING r.run_id
    ), closed AS (
        UPDATE attempts a
           SET outcome = 'ambiguous', finished_at = now(),
               error = coalesce(a.error, 'no outcome recorded; run re-opened'
                                         ' by an operator')
          FROM upd WHERE a.run_id = upd.run_id AND a.outcome IS NULL
        RETURNING 1
    ), dec AS (
        INSERT INTO run_decisions (run_id, decision, actor, reason,
                                   prior_status, attempts)
        SELECT cur.run_id, 'retry', p_actor, p_reason, cur.status,
               cur.attempts
          FROM cur JOIN upd ON upd.run_id = cur.run_id
        RETURNING 1
    )
    SELECT cur.status, cur.attempts, (SELECT count(*) FROM upd),
           (SELECT count(*) FROM dec), (SELECT count(*) FROM closed)
      FROM cur
$fn$;
REVOKE ALL ON FUNCTION rl_operator_retry(text, text, text, integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rl_operator_retry(text, text, text, integer)
    TO runledger_console;
-- A SECURITY DEFINER function resolves names in the ledger's schema only:
-- a caller's search_path must not lend it a table of the caller's.
DO $sp$ BEGIN
EXECUTE format('ALTER FUNCTION rl_operator_retry(text, text, text, integer)'
               ' SET search_path = %I, pg_temp', current_schema());
END $sp$;
