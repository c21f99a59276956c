-- Store the answer of an approval-required run as its proposal, in place of
-- rl_complete_run. Only the current owner (p_worker, p_epoch) of a running
-- run may do so, or the owner that released it when nobody claimed it
-- since (pending, no owner, the epoch unchanged), as rl_complete_runs
-- allows and for the same reason. Returns one row, result:
--   proposed          the run now waits in awaiting_approval
--   already_proposed  it already did (a redo after a lost COMMIT): nothing
--                     changed
--   superseded        the run holds another proposal (a retried run that
--                     answered differently): the new answer is refused,
--                     the run fails with error_class 'proposal_immutable'
--   already_completed, stale, not_found  as rl_complete_run
CREATE OR REPLACE FUNCTION rl_propose_run(
    p_run_id   text,
    p_worker   text,
    p_epoch    bigint,
    p_proposal jsonb,
    p_digest   text)
RETURNS TABLE (result text, digest text)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    v_status text;
    v_owner  text;
    v_epoch  bigint;
    v_digest text;
BEGIN
    IF p_proposal IS NULL OR p_digest IS NULL THEN
        RAISE EXCEPTION 'run % cannot wait for approval without a proposal',
            p_run_id USING ERRCODE = 'null_value_not_allowed';
    END IF;

    SELECT r.status, r.lock_owner, r.lease_epoch, r.proposal_digest
      INTO v_status, v_owner, v_epoch, v_digest
      FROM runs r
     WHERE r.run_id = p_run_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::text;
        RETURN;
    END IF;
    IF v_status = 'completed' THEN
        RETURN QUERY SELECT 'already_completed'::text, v_digest;
        RETURN;
    END IF;
    IF v_status = 'awaiting_approval' AND v_digest = p_digest THEN
        RETURN QUERY SELECT 'already_proposed'::text, v_digest;
        RETURN;
    END IF;
    IF v_epoch <> p_epoch
       OR NOT ((v_status = 'running' AND v_owner = p_worker)
               OR (v_status = 'pending' AND v_owner IS NULL)) THEN
        RETURN QUERY SELECT 'stale'::text, NULL::text;
        RETURN;
    END IF;

    IF v_digest IS NOT NULL THEN
        UPDATE runs r
           SET status = 'failed',
               lock_owner = NULL,
               lock_expires_at = NULL,
               next_attempt_at = NULL,
               error_class = 'proposal_immutable',
               last_error = 'the run already holds proposal ' || v_digest
                            || '; a new answer needs a new version',
               updated_at = now()
         WHERE r.run_id = p_run_id;
        RETURN QUERY SELECT 'superseded'::text, v_digest;
        RETURN;
    END IF;

    UPDATE runs r
       SET status = 'awaiting_approval',
           proposal = p_proposal,
           proposal_digest = p_digest,
           lock_owner = NULL,
           lock_expires_at = NULL,
           next_attempt_at = NULL,
           last_error = NULL,
           error_class = NULL,
           updated_at = now()
     WHERE r.run_id = p_run_id;
    RETURN QUERY SELECT 'proposed'::text, p_digest;
END
$fn$;
