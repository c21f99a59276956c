-- A submitted batch whose poll is due, leased to p_owner for p_lease_ms
-- (its lock_epoch bumped), together with a poll slot of p_provider
-- (schema/063_batch_poll_slots.sql): the slot is free when its next_at has
-- passed, and taking it moves next_at p_spacing_ms past the moment it was
-- taken. Both or neither: without a due batch no slot is spent, and
-- without a slot the batch is left as it was (still due, the first in
-- line at the next try). Two workers updating the slot at once are
-- serialised by its row lock, and the second, rechecking next_at after
-- the first committed, finds it taken. Returns the batch's columns, as
-- rl_db_batch_take reads them, or no row.
CREATE OR REPLACE FUNCTION rl_batch_take_poll(p_owner text,
                                              p_lease_ms bigint,
                                              p_provider text,
                                              p_spacing_ms bigint)
RETURNS TABLE (o_batch_id text, o_epoch bigint, o_state text,
               o_endpoint text, o_model text, o_completion_window text,
               o_input_file_id text, o_provider_batch_id text,
               o_upload_tries integer, o_create_tries integer,
               o_lookup_ms bigint, o_polls integer, o_runs integer)
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_id text;
BEGIN
    SELECT d.batch_id INTO v_id
      FROM batches d
     WHERE d.state = 'submitted'
       AND d.next_poll_at <= now()
       AND (d.lock_expires_at IS NULL OR d.lock_expires_at < now())
     ORDER BY d.next_poll_at
     LIMIT 1
       FOR UPDATE SKIP LOCKED;
    IF v_id IS NULL THEN
        RETURN;
    END IF;
    -- clock_timestamp(), not now(): the slot is spaced from when it is
    -- taken, which is when the poll follows, not from when the
    -- transaction began.
    UPDATE batch_poll_slots s
       SET next_at = clock_timestamp()
                     + p_spacing_ms * interval '1 millisecond',
           polls = s.polls + 1
     WHERE s.provider = p_provider AND s.next_at <= clock_timestamp();
    IF NOT FOUND THEN
        -- The provider's first poll, or a slot not due yet (the insert
        -- then meets the row and does nothing).
        INSERT INTO batch_poll_slots (provider, next_at, polls)
        VALUES (p_provider,
                clock_timestamp() + p_spacing_ms * interval '1 millisecond',
                1)
            ON CONFLICT (provider) DO NOTHING;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    UPDATE batches b
       SET lock_owner = p_owner, lock_epoch = b.lock_epoch + 1,
           lock_expires_at = now() + p_lease_ms * interval '1 millisecond'
     WHERE b.batch_id = v_id
    RETURNING b.batch_id, b.lock_epoch, b.state, b.endpoint, b.model,
              b.completion_window, coalesce(b.input_file_id, ''),
              coalesce(b.provider_batch_id, ''), b.upload_tries,
              b.create_tries,
              CASE WHEN b.lookup_since IS NULL THEN -1::int8
                   ELSE (extract(epoch FROM now() - b.lookup_since)
                         * 1000)::int8 END,
              b.polls, b.runs;
END
$fn$;
