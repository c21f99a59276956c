-- Complete a run and queue its notifications in one transaction.
--
-- Only the current owner (p_worker, p_epoch) of a running run may complete
-- it. Outbox rows are inserted only by the call that makes the transition,
-- so a run has at most one row per channel across outbox and
-- outbox_delivered, even after the relay moved the first one. A NULL
-- payload (or p_payloads NULL) queues the default envelope: run identity,
-- channel and output. Returns one
-- row: result 'completed' (outbox_rows inserted), 'already_completed' (the
-- stored output; nothing changed), 'stale' or 'not_found'.
CREATE OR REPLACE FUNCTION rl_complete_run(p_run_id text, p_worker text, p_epoch bigint, p_output jsonb, p_channels text[], p_payloads jsonb[])
 RETURNS TABLE(result text, output jsonb, outbox_rows integer)
 LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_status text;
    v_output jsonb;
    v_owner  text;
    v_epoch  bigint;
    v_rows   integer := 0;
BEGIN
    IF p_output IS NULL OR p_output = 'null'::jsonb THEN
        RAISE EXCEPTION 'run % cannot complete without output', p_run_id
            USING ERRCODE = 'null_value_not_allowed';
    END IF;

    SELECT r.status, r.output, r.lock_owner, r.lease_epoch
      INTO v_status, v_output, v_owner, v_epoch
      FROM runs r
     WHERE r.run_id = p_run_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::jsonb, 0;
        RETURN;
    END IF;
    IF v_status = 'completed' THEN
        RETURN QUERY SELECT 'already_completed'::text, v_output, 0;
        RETURN;
    END IF;
    IF v_status <> 'running' OR v_owner IS DISTINCT FROM p_worker
       OR v_epoch <> p_epoch THEN
        RETURN QUERY SELECT 'stale'::text, NULL::jsonb, 0;
        RETURN;
    END IF;

    UPDATE runs r
       SET status = 'completed',
           output = p_output,
           lock_owner = NULL,
           lock_expires_at = NULL,
           next_attempt_at = NULL,
           last_error = NULL,
           error_class = NULL,
           completed_at = now(),
           updated_at = now()
     WHERE r.run_id = p_run_id;

    -- A payload given here is stored as given; none means the standard
    -- envelope, which the relay builds from the run (rl_envelope).
    INSERT INTO outbox (run_id, channel, explicit_payload)
    SELECT p_run_id, m.channel, m.payload
      FROM unnest(p_channels, p_payloads) AS m(channel, payload)
     WHERE m.channel IS NOT NULL
     ORDER BY m.channel
        ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_rows = ROW_COUNT;

    RETURN QUERY SELECT 'completed'::text, p_output, v_rows;
END
$$;
