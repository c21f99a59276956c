-- Decide on the proposal of a run waiting for approval, in one
-- transaction. p_decision is 'approve' or 'reject'. Refusals change
-- nothing. Returns one row, result:
--   approved         the approval is recorded, the run completed with the
--                    proposal's content and outbox_rows queued (one per
--                    destination channel, the envelope of rl_complete_run)
--   rejected         the rejection is recorded, the run failed with
--                    error_class 'rejected'; nothing is queued
--   not_found        no such run
--   not_waiting      the run is not awaiting_approval (status says what it
--                    is; a run already decided is refused here)
--   digest_mismatch  p_digest is not the stored proposal's digest
--   not_approver     p_actor is not an approver of the run's tenant
-- The decision itself is rl_decide_proposal's (which also appends the
-- audit row and honours channel-scoped approvers); this signature stays
-- for the statements of earlier releases.
CREATE OR REPLACE FUNCTION rl_decide_run(p_run_id text, p_digest text, p_actor text, p_decision text, p_reason text)
 RETURNS TABLE(result text, status text, digest text, outbox_rows integer)
 LANGUAGE plpgsql
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT d.result, d.status, d.digest, d.outbox_rows
      FROM rl_decide_proposal(p_run_id, p_digest, p_actor, p_decision,
                              p_reason, 'cli', NULL) d;
END
$$;
