-- Decide on the proposal of a run waiting for approval, in one
-- transaction, for `runs approve|reject` (p_via 'cli') and the console
-- (p_via 'console', p_actor the signed-in user). p_decision is 'approve'
-- or 'reject'. Refusals change nothing. Returns one row, result:
--   approved         the approval is recorded, the run completed with the
--                    proposal's content and outbox_rows queued (one per
--                    destination channel, the envelope of rl_complete_run)
--   rejected         the rejection is recorded, the run failed with
--                    error_class 'rejected'; nothing is queued
--   not_found        no such run
--   not_waiting      the run is not awaiting_approval (status says what it
--                    is; for a run already decided, decided_by, decided_at
--                    and decision say by whom, when and how)
--   digest_mismatch  p_digest is not the stored proposal's digest
--   not_allowed      (console) p_actor is no console user with the role
--                    approver or operator, or was revoked
--   not_approver     p_actor is not an approver of the run's tenant, or
--                    is scoped to channels that do not cover every
--                    destination of the proposal (rl_may_approve)
-- A decision appends its audit row (who, what, address, digest) in the
-- same transaction. The run's row lock serialises concurrent decisions
-- (approvals' UNIQUE (run_id) is the guard under it); the console user's
-- row is share-locked, so a revoke that commits first is seen.
CREATE OR REPLACE FUNCTION rl_decide_proposal(p_run_id text, p_digest text,
                                              p_actor text, p_decision text,
                                              p_reason text, p_via text,
                                              p_address text)
 RETURNS TABLE(result text, status text, digest text, outbox_rows integer,
               decided_by text, decided_at timestamptz, decision text)
 LANGUAGE plpgsql
 SECURITY DEFINER
AS $$
#variable_conflict use_column
DECLARE
    v_status   text;
    v_tenant   text;
    v_digest   text;
    v_proposal jsonb;
    v_rows     integer := 0;
    v_prior    record;
BEGIN
    IF p_decision IS NULL OR p_decision NOT IN ('approve', 'reject') THEN
        RAISE EXCEPTION 'unknown decision %', p_decision
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_via IS NULL OR p_via NOT IN ('cli', 'console') THEN
        RAISE EXCEPTION 'unknown decision channel %', p_via
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT r.status, r.tenant, r.proposal_digest, r.proposal
      INTO v_status, v_tenant, v_digest, v_proposal
      FROM runs r
     WHERE r.run_id = p_run_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::text, NULL::text, 0,
                            NULL::text, NULL::timestamptz, NULL::text;
        RETURN;
    END IF;
    SELECT a.actor, a.decided_at, a.decision INTO v_prior
      FROM approvals a WHERE a.run_id = p_run_id;
    IF v_status <> 'awaiting_approval' OR FOUND THEN
        RETURN QUERY SELECT 'not_waiting'::text, v_status, v_digest, 0,
                            v_prior.actor, v_prior.decided_at,
                            v_prior.decision;
        RETURN;
    END IF;
    IF p_digest IS DISTINCT FROM v_digest THEN
        RETURN QUERY SELECT 'digest_mismatch'::text, v_status, v_digest, 0,
                            NULL::text, NULL::timestamptz, NULL::text;
        RETURN;
    END IF;
    IF p_via = 'console' THEN
        PERFORM 1 FROM console_users u
          WHERE u.name = p_actor AND u.revoked_at IS NULL
            AND u.role IN ('approver', 'operator')
            FOR SHARE;
    END IF;
    IF p_via = 'console' AND NOT FOUND THEN
        RETURN QUERY SELECT 'not_allowed'::text, v_status, v_digest, 0,
                            NULL::text, NULL::timestamptz, NULL::text;
        RETURN;
    END IF;
    IF NOT rl_may_approve(v_tenant, p_actor, v_proposal) THEN
        RETURN QUERY SELECT 'not_approver'::text, v_status, v_digest, 0,
                            NULL::text, NULL::timestamptz, NULL::text;
        RETURN;
    END IF;

    INSERT INTO approvals (run_id, digest, actor, decision, reason)
    VALUES (p_run_id, v_digest, p_actor, p_decision, nullif(p_reason, ''));
    INSERT INTO audit (actor, action, run_id, address, digest, via, detail)
    VALUES (p_actor, p_decision, p_run_id, p_address, v_digest, p_via,
            nullif(p_reason, ''));

    IF p_decision = 'reject' THEN
        UPDATE runs r
           SET status = 'failed',
               error_class = 'rejected',
               last_error = 'proposal rejected by ' || p_actor
                            || coalesce(': ' || nullif(p_reason, ''), ''),
               updated_at = now()
         WHERE r.run_id = p_run_id;
        RETURN QUERY SELECT 'rejected'::text, 'failed'::text, v_digest, 0,
                            p_actor, now(), p_decision;
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

    RETURN QUERY SELECT 'approved'::text, 'completed'::text, v_digest, v_rows,
                        p_actor, now(), p_decision;
END
$$;
-- SECURITY DEFINER: runledger_console completes or fails a run
-- only through a decision, never by UPDATE (schema/072_component_roles.sql).
REVOKE ALL ON FUNCTION rl_decide_proposal(text, text, text, text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rl_decide_proposal(text, text, text, text, text, text, text)
    TO runledger_console;
-- A SECURITY DEFINER function resolves names in the ledger's schema only:
-- a caller's search_path must not lend it a table of the caller's.
DO $sp$ BEGIN
EXECUTE format('ALTER FUNCTION rl_decide_proposal(text, text, text, text, text, text, text)'
               ' SET search_path = %I, pg_temp', current_schema());
END $sp$;
