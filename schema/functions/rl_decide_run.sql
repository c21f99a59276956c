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
-- The row lock serialises concurrent decisions; approvals' UNIQUE (run_id)
-- is the guard under it.
CREATE OR REPLACE FUNCTION rl_decide_run(p_run_id text, p_digest text, p_actor text, p_decision text, p_reason text)
 RETURNS TABLE(result text, status text, digest text, outbox_rows integer)
 LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_status text;
    v_tenant text;
    v_digest text;
    v_rows   integer := 0;
BEGIN
    IF p_decision IS NULL OR p_decision NOT IN ('approve', 'reject') THEN
        RAISE EXCEPTION 'unknown decision %', p_decision
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT r.status, r.tenant, r.proposal_digest
      INTO v_status, v_tenant, v_digest
      FROM runs r
     WHERE r.run_id = p_run_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::text, NULL::text, 0;
        RETURN;
    END IF;
    IF v_status <> 'awaiting_approval'
       OR EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = p_run_id) THEN
        RETURN QUERY SELECT 'not_waiting'::text, v_status, v_digest, 0;
        RETURN;
    END IF;
    IF p_digest IS DISTINCT FROM v_digest THEN
        RETURN QUERY SELECT 'digest_mismatch'::text, v_status, v_digest, 0;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM approvers p
                    WHERE p.tenant = v_tenant AND p.actor = p_actor) THEN
        RETURN QUERY SELECT 'not_approver'::text, v_status, v_digest, 0;
        RETURN;
    END IF;

    INSERT INTO approvals (run_id, digest, actor, decision, reason)
    VALUES (p_run_id, v_digest, p_actor, p_decision, nullif(p_reason, ''));

    IF p_decision = 'reject' THEN
        UPDATE runs r
           SET status = 'failed',
               error_class = 'rejected',
               last_error = 'proposal rejected by ' || p_actor
                            || coalesce(': ' || nullif(p_reason, ''), ''),
               updated_at = now()
         WHERE r.run_id = p_run_id;
        RETURN QUERY SELECT 'rejected'::text, 'failed'::text, v_digest, 0;
        RETURN;
    END IF;

    UPDATE runs r
       SET status = 'completed',
           output = r.proposal -> 'content',
           completed_at = now(),
           updated_at = now()
     WHERE r.run_id = p_run_id;

    -- Queued as rl_complete_runs queues them (the standard envelope, built
    -- by the relay from the run: rl_envelope), so relays and receivers see
    -- an approved notification exactly as any other (idempotency key
    -- <run_id>:<channel>).
    INSERT INTO outbox (run_id, channel)
    SELECT r.run_id, d.channel
      FROM runs r,
           LATERAL (SELECT e ->> 'channel' AS channel
                      FROM jsonb_array_elements(r.proposal -> 'destination')
                           AS e) d
     WHERE r.run_id = p_run_id AND d.channel IS NOT NULL
     ORDER BY d.channel
        ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_rows = ROW_COUNT;

    RETURN QUERY SELECT 'approved'::text, 'completed'::text, v_digest, v_rows;
END
$$;
