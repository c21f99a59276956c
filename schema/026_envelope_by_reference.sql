-- 026_envelope_by_reference.sql: a notification's standard envelope is
-- built from its run when the relay reads it, not stored with it.
--
-- The envelope (run_id, job, tenant, scheduled_at, version, channel and
-- the run's whole output) was built by the completion and stored in the
-- outbox row of each channel, then copied into outbox_delivered when the
-- relay delivered it: with the run's own output column, five copies of
-- every answer for two channels. For the bench's 250-byte answers that
-- was about 1.8 kB of the 6.5 kB of WAL a run; for a 50 kB report it is
-- 200 kB more a run, compressed four times on the way. Every field of
-- the envelope is on the run and never changes once the run is completed
-- (identity columns are immutable, the output write-once), so the relay
-- builds it from the run it already joins for job and tenant: the bytes
-- on the topic are those the stored envelope had.
--
-- The column is renamed with its meaning: explicit_payload is NULL for a
-- standard envelope, and holds a payload given explicitly
-- (rl_complete_run's p_payloads) as before. Rows queued before this
-- migration keep their stored envelopes there, which the relay sends as
-- they are. The rename is also the fence for a rolling upgrade: a relay
-- of an older version, still running while this one rolls out, would
-- read NULL as its payload and send an empty notification; its read now
-- fails on the missing column (an error it logs and retries until it is
-- replaced), so it sends nothing. rl_payload_as_sent() gives any outbox or
-- outbox_delivered row's payload as the topic carries it; outbox_dead
-- keeps the full payload it was refused with (the relay builds it when it
-- sets a row aside). A later change to rl_envelope changes what the
-- audit shows for envelopes sent before it: such a migration first
-- writes the old envelope into explicit_payload of the rows delivered so
-- far.

CREATE FUNCTION rl_envelope(p_run_id text, p_job text, p_tenant text,
                            p_scheduled_at timestamptz, p_version text,
                            p_channel text, p_output jsonb)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
               'run_id', p_run_id,
               'job', p_job,
               'tenant', p_tenant,
               'scheduled_at',
               to_char(p_scheduled_at AT TIME ZONE 'UTC',
                       'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
               'version', p_version,
               'channel', p_channel,
               'output', p_output)
$$;

-- The payload of an outbox or outbox_delivered row as the topic carries
-- it: the one given explicitly, or the standard envelope of its run.
CREATE FUNCTION rl_payload_as_sent(p_run_id text, p_channel text,
                                   p_explicit_payload jsonb)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(p_explicit_payload,
                    (SELECT rl_envelope(r.run_id, r.job, r.tenant,
                                        r.scheduled_at, r.version, p_channel,
                                        r.output)
                       FROM runs r
                      WHERE r.run_id = p_run_id))
$$;

ALTER TABLE outbox RENAME COLUMN payload TO explicit_payload;
ALTER TABLE outbox ALTER COLUMN explicit_payload DROP NOT NULL;
ALTER TABLE outbox_delivered RENAME COLUMN payload TO explicit_payload;
ALTER TABLE outbox_delivered ALTER COLUMN explicit_payload DROP NOT NULL;

CREATE OR REPLACE FUNCTION rl_complete_runs(p_run_ids text[], p_epochs bigint[], p_worker text, p_outputs jsonb[], p_channel_runs text[], p_channel_names text[], p_attempt_nos integer[], p_http integer[], p_upstream text[], p_prompt bigint[], p_completion bigint[], p_cached bigint[], p_latency bigint[])
 RETURNS TABLE(ord bigint, result text, outbox_rows integer, outcome_recorded boolean)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
AS $$
#variable_conflict use_column
DECLARE
    v_n integer := cardinality(p_run_ids);
BEGIN
    IF p_worker IS NULL
       OR v_n IS DISTINCT FROM cardinality(p_epochs)
       OR v_n IS DISTINCT FROM cardinality(p_outputs)
       OR cardinality(p_channel_runs)
          IS DISTINCT FROM cardinality(p_channel_names)
       OR v_n IS DISTINCT FROM cardinality(p_attempt_nos)
       OR v_n IS DISTINCT FROM cardinality(p_http)
       OR v_n IS DISTINCT FROM cardinality(p_upstream)
       OR v_n IS DISTINCT FROM cardinality(p_prompt)
       OR v_n IS DISTINCT FROM cardinality(p_completion)
       OR v_n IS DISTINCT FROM cardinality(p_cached)
       OR v_n IS DISTINCT FROM cardinality(p_latency)
       OR v_n <> (SELECT count(DISTINCT x) FROM unnest(p_run_ids) AS x)
    THEN
        RAISE EXCEPTION 'a completion batch needs a worker, distinct runs '
                        'and every array with one element per run'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_outputs) AS o(output)
                WHERE o.output IS NULL OR o.output = 'null'::jsonb) THEN
        RAISE EXCEPTION 'a run cannot complete without output'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;

    PERFORM rl_lock_runs(p_run_ids);

    RETURN QUERY
    WITH u AS (
        SELECT u.*
          FROM unnest(p_run_ids, p_epochs, p_outputs, p_attempt_nos, p_http,
                      p_upstream, p_prompt, p_completion, p_cached,
                      p_latency) WITH ORDINALITY
               AS u(run_id, epoch, output, attempt_no, http, upstream,
                    prompt, completion, cached, latency, ord)
    ), cur AS (
        -- before this statement's own updates (one snapshot)
        SELECT r.run_id, r.status FROM runs r
         WHERE r.run_id = ANY (p_run_ids)
    ), o AS (
        UPDATE attempts a
           SET outcome = 'ok', http_status = u.http,
               upstream_request_id = nullif(u.upstream, ''),
               prompt_tokens = u.prompt, completion_tokens = u.completion,
               cached_tokens = u.cached, latency_ms = u.latency,
               error = NULL, finished_at = now()
          FROM u
         WHERE a.run_id = u.run_id AND a.attempt_no = u.attempt_no
           AND a.outcome IS NULL
        RETURNING a.run_id, a.attempt_no
    ), c AS (
        UPDATE runs r
           SET status = 'completed',
               output = u.output,
               lock_owner = NULL,
               lock_expires_at = NULL,
               next_attempt_at = NULL,
               last_error = NULL,
               error_class = NULL,
               completed_at = now(),
               updated_at = now()
          FROM u
         WHERE r.run_id = u.run_id
           AND r.lock_owner = p_worker AND r.lease_epoch = u.epoch
        RETURNING r.run_id
    ), ob AS (
        INSERT INTO outbox (run_id, channel)
        SELECT c.run_id, ch.channel
          FROM c
          JOIN (SELECT DISTINCT p.run_id, p.channel
                  FROM unnest(p_channel_runs, p_channel_names)
                       AS p(run_id, channel)
                 WHERE p.channel IS NOT NULL) ch ON ch.run_id = c.run_id
         ORDER BY c.run_id, ch.channel
            ON CONFLICT DO NOTHING
        RETURNING outbox.run_id
    ), queued AS (
        SELECT ob.run_id, count(*)::integer AS n FROM ob GROUP BY ob.run_id
    )
    SELECT u.ord,
           CASE WHEN c.run_id IS NOT NULL THEN 'completed'
                WHEN cur.run_id IS NULL THEN 'not_found'
                WHEN cur.status = 'completed' THEN 'already_completed'
                ELSE 'stale' END,
           CASE WHEN c.run_id IS NOT NULL THEN coalesce(q.n, 0) ELSE 0 END,
           o.run_id IS NOT NULL
      FROM u
      LEFT JOIN cur ON cur.run_id = u.run_id
      LEFT JOIN (SELECT DISTINCT c.run_id FROM c) c ON c.run_id = u.run_id
      LEFT JOIN queued q ON q.run_id = u.run_id
      LEFT JOIN o ON o.run_id = u.run_id AND o.attempt_no = u.attempt_no
     ORDER BY u.ord;
END
$$;

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
