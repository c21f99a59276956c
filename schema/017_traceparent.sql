-- 017_traceparent.sql: a run keeps the W3C traceparent of the event that
-- registered it.
--
-- A schedule event may carry a `traceparent` Kafka header. Whichever
-- worker claims the run, first or after a retry, a lost lease or a
-- restart, sends the same trace on to the model and the notification, so
-- the value is stored with the run when it is inserted and returned by
-- every claim. It is validated by the service (version 00, non-zero ids);
-- NULL when the event had none (the run's trace id is then derived from
-- its run_id, docs/operations.md#tracing). Not indexed: no statement
-- looks runs up by it, and an unindexed column keeps later updates of the
-- row HOT-eligible.
ALTER TABLE runs ADD COLUMN traceparent text;

-- rl_claim_runs of 015 with one more argument (the traceparents, aligned
-- with the run ids; NULL for none) and one more result column (the
-- stored traceparent). Only an inserted run takes the given value: a
-- redelivered event never rewrites the trace of a run that exists. The
-- 14-argument form stays, so a worker of the previous release keeps
-- claiming while a deployment rolls; it inserts runs without a trace.
CREATE FUNCTION rl_claim_runs(
    p_run_ids        text[],
    p_jobs           text[],
    p_tenants        text[],
    p_scheduled_ats  timestamptz[],
    p_versions       text[],
    p_fingerprints   text[],
    p_requests       jsonb[],
    p_inputs         jsonb[],
    p_deadline_secs  double precision[],
    p_topics         text[],
    p_partitions     integer[],
    p_offsets        bigint[],
    p_traceparents   text[],
    p_worker         text,
    p_lease_secs     double precision)
RETURNS TABLE (
    ord              bigint,
    run_id           text,
    claim            text,
    status           text,
    fingerprint      text,
    lease_epoch      bigint,
    attempts         integer,
    ambiguous_prior  boolean,
    ambiguous_count  integer,
    deadline_passed  boolean,
    job              text,
    tenant           text,
    scheduled_at     text,
    version          text,
    request          jsonb,
    raw_input        jsonb,
    output           jsonb,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    traceparent      text)
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_new text[];
BEGIN
    IF p_worker IS NULL OR p_lease_secs IS NULL OR p_lease_secs <= 0 THEN
        RAISE EXCEPTION 'a claim needs a worker and a positive lease'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    WITH ins AS (
        INSERT INTO runs AS r (run_id, job, tenant, scheduled_at, version,
                               fingerprint, request, raw_input, status,
                               lock_owner, lock_expires_at, lease_epoch,
                               next_attempt_at, deadline_at, source_topic,
                               source_partition, source_offset,
                               traceparent)
        SELECT u.run_id, u.job, u.tenant, u.scheduled_at, u.version,
               u.fingerprint, u.request, nullif(u.input, 'null'::jsonb),
               'running', p_worker,
               now() + make_interval(secs => p_lease_secs), 1, NULL,
               CASE WHEN u.deadline_secs > 0
                    THEN now() + make_interval(secs => u.deadline_secs) END,
               u.topic, u.part, u.off, u.tp
          FROM unnest(p_run_ids, p_jobs, p_tenants, p_scheduled_ats,
                      p_versions, p_fingerprints, p_requests, p_inputs,
                      p_deadline_secs, p_topics, p_partitions, p_offsets,
                      p_traceparents)
               WITH ORDINALITY
               AS u(run_id, job, tenant, scheduled_at, version, fingerprint,
                    request, input, deadline_secs, topic, part, off, tp,
                    ord)
         ORDER BY u.run_id, u.ord
            ON CONFLICT DO NOTHING
        RETURNING r.run_id
    )
    SELECT coalesce(array_agg(ins.run_id), '{}') INTO v_new FROM ins;

    -- The rows this function inserted are its own until it commits: only
    -- the others are locked, in run_id order.
    PERFORM 1
       FROM runs r
      WHERE r.run_id = ANY (p_run_ids) AND NOT r.run_id = ANY (v_new)
      ORDER BY r.run_id
        FOR NO KEY UPDATE;

    RETURN QUERY
    WITH i AS (
        SELECT u.run_id, u.fingerprint, u.input, u.ord,
               u.ord = min(u.ord) OVER (PARTITION BY u.run_id) AS first,
               u.run_id = ANY (v_new) AS new
          FROM unnest(p_run_ids, p_fingerprints, p_inputs)
               WITH ORDINALITY AS u(run_id, fingerprint, input, ord)
    ), won AS (
        UPDATE runs r
           SET status = 'running',
               lock_owner = p_worker,
               lock_expires_at = now() + make_interval(secs => p_lease_secs),
               lease_epoch = r.lease_epoch + 1,
               next_attempt_at = NULL,
               raw_input = coalesce(r.raw_input,
                                    nullif(i.input, 'null'::jsonb)),
               updated_at = now()
          FROM i
         WHERE i.first AND NOT i.new
           AND r.run_id = i.run_id
           AND r.fingerprint = i.fingerprint
           AND r.status IN ('pending', 'running')
           AND (r.lock_owner IS NULL OR r.lock_expires_at < now())
           AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= now())
        RETURNING r.run_id, r.lease_epoch, r.raw_input
    ), c AS (
        SELECT i.ord, i.run_id, i.new, cur.status AS cur_status,
               CASE
               WHEN cur.run_id IS NULL OR cur.fingerprint <> i.fingerprint
                   THEN 'conflict'
               WHEN i.first AND (w.run_id IS NOT NULL OR i.new) THEN 'won'
               WHEN cur.status = 'completed' THEN 'completed'
               WHEN cur.status IN ('failed', 'unknown', 'cancelled')
                   THEN 'parked'
               WHEN cur.status = 'pending' AND cur.next_attempt_at > now()
                   THEN 'not_due'
               ELSE 'leased'
               END AS claim,
               cur.fingerprint, cur.lease_epoch, cur.attempts,
               cur.deadline_at, cur.job, cur.tenant, cur.scheduled_at,
               cur.version, cur.request, cur.raw_input, cur.output,
               cur.source_topic, cur.source_partition, cur.source_offset,
               cur.traceparent,
               -- a new run: the row this function inserted, which the
               -- statement's snapshot (cur) already shows
               CASE WHEN i.new THEN cur.lease_epoch ELSE w.lease_epoch END
                   AS won_epoch,
               CASE WHEN i.new THEN cur.raw_input ELSE w.raw_input END
                   AS won_raw_input
          FROM i
          LEFT JOIN runs cur ON cur.run_id = i.run_id
          LEFT JOIN won w ON w.run_id = i.run_id
    )
    SELECT c.ord, c.run_id, c.claim,
           CASE WHEN c.claim = 'won' THEN 'running' ELSE c.cur_status END,
           c.fingerprint,
           CASE WHEN c.claim = 'won' THEN c.won_epoch ELSE c.lease_epoch END,
           c.attempts,
           c.claim <> 'conflict' AND NOT c.new
               AND rl_ambiguous_prior(c.run_id),
           CASE WHEN c.claim <> 'conflict' AND NOT c.new
                THEN rl_ambiguous_attempts(c.run_id) ELSE 0 END,
           coalesce(c.deadline_at <= now(), false),
           c.job, c.tenant,
           to_char(c.scheduled_at AT TIME ZONE 'UTC',
                   'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
           c.version,
           CASE WHEN c.claim <> 'conflict' THEN c.request END,
           CASE WHEN c.claim = 'won' THEN c.won_raw_input
                WHEN c.claim <> 'conflict' THEN c.raw_input END,
           CASE WHEN c.claim = 'completed' THEN c.output END,
           c.source_topic, c.source_partition, c.source_offset,
           c.traceparent
      FROM c
     ORDER BY c.ord;
END
$fn$;
