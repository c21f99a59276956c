-- Register and claim a batch of runs in one round trip.
--
-- Arrays are parallel (element k of each describes run k). Each run is
-- inserted if missing, then claimed when its fingerprint matches, its status
-- is pending or running, nobody holds a live lease (the database clock
-- decides) and it is due. A claim sets status running, lock_owner, the
-- expiry now() + p_lease_secs and lease_epoch + 1. One row comes back per
-- input element, in input order (ord), with claim one of
--   won        this worker now holds the lease (new lease_epoch)
--   completed  the stored output is returned
--   leased     another live owner holds it (or an earlier duplicate in this
--              batch won it)
--   conflict   same run_id with another fingerprint, or the logical run
--              exists under another run_id: the row is untouched and
--              nothing stored is returned
--   parked     failed or unknown
--   purged     no run, but a tombstone with this fingerprint: the run
--              finished and was purged; it is never registered again
--   not_due    pending with next_attempt_at in the future (sweeper's)
-- and ambiguous_prior / ambiguous_attempts as defined above. A run's
-- deadline (p_deadline_secs) runs from its first claim, not from its
-- registration: a run registered pending waits for a slot on purpose.
-- attempts is
-- the dispatches that count against the limit (attempts less the
-- attempt_allowance an operator's `runs retry --attempts` granted).
--
-- This is plpgsql, not one statement, because the claim must see rows the
-- register step inserted, which a single INSERT .. ON CONFLICT + UPDATE CTE
-- cannot. Rows are inserted and locked in run_id order so batches that
-- share runs queue behind each other instead of deadlocking.
--
-- rl_claim_runs of 020, with the batch's distinct (tenant, job) pairs
-- materialised before rl_run_limited is asked about them. The filter on
-- the pairs was pushed below their DISTINCT, so the function (a SQL
-- function the planner cannot inline: its body is a sub-select) ran once
-- per run of the batch: 20,000 calls for 20,000 runs in `make bench` zero.
CREATE OR REPLACE FUNCTION rl_claim_runs(
    p_run_ids text[], p_jobs text[], p_tenants text[],
    p_scheduled_ats timestamp with time zone[], p_versions text[],
    p_fingerprints text[], p_requests jsonb[], p_inputs jsonb[],
    p_deadline_secs double precision[], p_topics text[],
    p_partitions integer[], p_offsets bigint[], p_traceparents text[],
    p_worker text, p_lease_secs double precision, p_claim_max integer)
RETURNS TABLE(ord bigint, run_id text, claim text, status text,
              fingerprint text, lease_epoch bigint, attempts integer,
              ambiguous_prior boolean, ambiguous_count integer,
              deadline_passed boolean, job text, tenant text,
              scheduled_at text, version text, request jsonb,
              raw_input jsonb, output jsonb, source_topic text,
              source_partition integer, source_offset bigint,
              traceparent text)
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET jit TO 'off'
    AS $$
#variable_conflict use_column
DECLARE
    v_new  text[];
    v_pick text[] := '{}';
    v_all  boolean := p_claim_max IS NULL;
    -- the claims the UPDATE may still make: p_claim_max minus the new
    -- runs the INSERT claimed
    v_room integer;
    v_gone text[];
    v_gone_held integer;
BEGIN
    IF p_worker IS NULL OR p_lease_secs IS NULL OR p_lease_secs <= 0 THEN
        RAISE EXCEPTION 'a claim needs a worker and a positive lease'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    WITH u AS (
        SELECT *
          FROM unnest(p_run_ids, p_jobs, p_tenants, p_scheduled_ats,
                      p_versions, p_fingerprints, p_requests, p_inputs,
                      p_deadline_secs, p_topics, p_partitions, p_offsets,
                      p_traceparents)
               WITH ORDINALITY
               AS u(run_id, job, tenant, scheduled_at, version, fingerprint,
                    request, input, deadline_secs, topic, part, off, tp,
                    ord)
    ), pairs AS MATERIALIZED (
        -- the batch's (tenant, job) pairs, each asked about once below
        SELECT DISTINCT u.tenant, u.job FROM u
    ), unlimited AS (
        -- the batch's (tenant, job) pairs no concurrency limit covers
        SELECT g.tenant, g.job
          FROM pairs g
         WHERE NOT v_all AND NOT rl_run_limited(g.tenant, g.job)
    ), take AS (
        -- the first occurrence of each of the first p_claim_max distinct
        -- unlimited run ids (the occurrence the INSERT below writes)
        SELECT f.ord
          FROM (SELECT DISTINCT ON (u.run_id) u.run_id, u.tenant, u.job,
                       u.ord
                  FROM u
                 ORDER BY u.run_id, u.ord) f
          JOIN unlimited l ON l.tenant = f.tenant AND l.job = f.job
         ORDER BY f.ord
         LIMIT greatest(p_claim_max, 0)
    ), ins AS (
        INSERT INTO runs AS r (run_id, job, tenant, scheduled_at, version,
                               fingerprint, request, raw_input, status,
                               lock_owner, lock_expires_at, lease_epoch,
                               next_attempt_at, deadline_at, source_topic,
                               source_partition, source_offset,
                               traceparent)
        SELECT u.run_id, u.job, u.tenant, u.scheduled_at, u.version,
               u.fingerprint, u.request, nullif(u.input, 'null'::jsonb),
               CASE WHEN c.held THEN 'running' ELSE 'pending' END,
               CASE WHEN c.held THEN p_worker END,
               CASE WHEN c.held
                    THEN now() + make_interval(secs => p_lease_secs) END,
               CASE WHEN c.held THEN 1 ELSE 0 END,
               CASE WHEN c.held THEN NULL ELSE now() END,
               CASE WHEN u.deadline_secs > 0
                    THEN now() + make_interval(secs => u.deadline_secs) END,
               u.topic, u.part, u.off, u.tp
          FROM u
          LEFT JOIN take t ON t.ord = u.ord
         CROSS JOIN LATERAL (SELECT v_all OR t.ord IS NOT NULL AS held) c
         ORDER BY u.run_id, u.ord
            ON CONFLICT DO NOTHING
        RETURNING r.run_id, r.status = 'running' AS held
    )
    SELECT coalesce(array_agg(ins.run_id), '{}'),
           greatest(p_claim_max, 0) - count(*) FILTER (WHERE ins.held)
      INTO v_new, v_room
      FROM ins;

    -- Each partition's consumed position, in this transaction: a ledger
    -- that loses it in a failover loses these registrations with it, and
    -- its consumers read the events again (consumed_positions). The
    -- position moves over the offsets of this batch contiguous with it,
    -- never past one missing (an event not registered here nor before):
    -- a failover keeps a prefix of the transactions, and a position past
    -- a registration it lost would leave that run unread for good. A
    -- partition with no row starts at the batch's first offset. Rows are
    -- written in (topic, partition) order so batches of two workers that
    -- share partitions, during a rebalance, queue instead of deadlocking.
    PERFORM rl_advance_positions(
        p_topics, p_partitions, p_offsets,
        (SELECT array_agg(o.off + 1 ORDER BY o.i)
           FROM unnest(p_offsets) WITH ORDINALITY AS o(off, i)));

    -- A run purged since (run_tombstones) is never registered again. The
    -- check follows the INSERT as a statement of its own: it sees a purge
    -- that committed while the INSERT waited on the run's row, which the
    -- INSERT's snapshot could not. The run inserted here is this
    -- function's own, so it is simply taken back.
    IF cardinality(v_new) > 0 THEN
        WITH gone AS (
            DELETE FROM runs r
             USING run_tombstones t
             WHERE t.run_id = ANY (v_new) AND r.run_id = t.run_id
            RETURNING r.run_id, r.status = 'running' AS held
        )
        SELECT coalesce(array_agg(gone.run_id), '{}'),
               count(*) FILTER (WHERE gone.held)
          INTO v_gone, v_gone_held
          FROM gone;
        IF cardinality(v_gone) > 0 THEN
            v_new := ARRAY(SELECT unnest(v_new) EXCEPT SELECT unnest(v_gone));
            v_room := v_room + v_gone_held;
        END IF;
    END IF;

    -- The rows this function inserted are its own until it commits: only
    -- the others are locked, in run_id order.
    PERFORM 1
       FROM runs r
      WHERE r.run_id = ANY (p_run_ids) AND NOT r.run_id = ANY (v_new)
      ORDER BY r.run_id
        FOR NO KEY UPDATE;

    -- Which other runs of the batch this worker has model slots for: the
    -- first v_room claimable ones in the batch's order, none of a limited
    -- tenant or job (rl_claim_due counts those under the limit's lock).
    -- The runs the INSERT claimed hold a live lease, so they are not
    -- claimable here; with no room left nothing is read.
    IF NOT v_all AND v_room > 0 THEN
        SELECT coalesce(array_agg(s.run_id), '{}') INTO v_pick
          FROM (SELECT r.run_id
                  FROM (SELECT DISTINCT ON (u.run_id) u.run_id,
                               u.fingerprint, u.ord
                          FROM unnest(p_run_ids, p_fingerprints)
                               WITH ORDINALITY AS u(run_id, fingerprint, ord)
                         ORDER BY u.run_id, u.ord) i
                  JOIN runs r ON r.run_id = i.run_id
                 WHERE r.fingerprint = i.fingerprint
                   AND r.status IN ('pending', 'running')
                   AND (r.lock_owner IS NULL OR r.lock_expires_at < now())
                   AND (r.next_attempt_at IS NULL
                        OR r.next_attempt_at <= now())
                   AND NOT rl_run_limited(r.tenant, r.job)
                 ORDER BY i.ord
                 LIMIT v_room) s;
    END IF;

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
               -- the deadline measures from the first claim: waiting for
               -- a slot (a tenant's limit, the fair share) is on purpose
               deadline_at = CASE WHEN r.lease_epoch = 0
                                  THEN now() + (r.deadline_at - r.created_at)
                                  ELSE r.deadline_at END,
               updated_at = now()
          FROM i
         WHERE i.first AND (v_all AND NOT i.new OR i.run_id = ANY (v_pick))
           AND r.run_id = i.run_id
           AND r.fingerprint = i.fingerprint
           AND r.status IN ('pending', 'running')
           AND (r.lock_owner IS NULL OR r.lock_expires_at < now())
           AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= now())
        RETURNING r.run_id, r.lease_epoch, r.raw_input, r.deadline_at
    ), c AS (
        SELECT i.ord, i.run_id, i.new, cur.status AS cur_status,
               CASE
               WHEN cur.run_id IS NULL
                    AND EXISTS (SELECT 1 FROM run_tombstones t
                                 WHERE t.run_id = i.run_id
                                   AND t.fingerprint = i.fingerprint)
                   THEN 'purged'
               WHEN cur.run_id IS NULL OR cur.fingerprint <> i.fingerprint
                   THEN 'conflict'
               WHEN i.first AND (w.run_id IS NOT NULL
                                 OR (i.new AND cur.status = 'running'))
                   THEN 'won'
               WHEN cur.status = 'completed' THEN 'completed'
               WHEN cur.status IN ('failed', 'unknown', 'cancelled')
                   THEN 'parked'
               WHEN cur.status = 'pending' AND cur.next_attempt_at > now()
                   THEN 'not_due'
               WHEN i.first AND NOT v_all AND cur.status = 'pending'
                   THEN 'queued'
               ELSE 'leased'
               END AS claim,
               cur.fingerprint, cur.lease_epoch,
               cur.attempts - cur.attempt_allowance AS attempts,
               coalesce(w.deadline_at, cur.deadline_at) AS deadline_at,
               cur.job, cur.tenant, cur.scheduled_at,
               cur.version, cur.request, cur.raw_input, cur.output,
               cur.source_topic, cur.source_partition, cur.source_offset,
               cur.traceparent,
               -- a new run claimed at its insert: the row this function
               -- inserted running, which the statement's snapshot (cur)
               -- shows as the INSERT wrote it (the UPDATE above leaves it
               -- alone: its lease is live)
               CASE WHEN i.new AND cur.status = 'running'
                    THEN cur.lease_epoch ELSE w.lease_epoch END AS won_epoch,
               CASE WHEN i.new AND cur.status = 'running'
                    THEN cur.raw_input ELSE w.raw_input END AS won_raw_input
          FROM i
          LEFT JOIN runs cur ON cur.run_id = i.run_id
          LEFT JOIN won w ON w.run_id = i.run_id
    )
    SELECT c.ord, c.run_id, c.claim,
           CASE WHEN c.claim = 'won' THEN 'running' ELSE c.cur_status END,
           c.fingerprint,
           CASE WHEN c.claim = 'won' THEN c.won_epoch ELSE c.lease_epoch END,
           c.attempts,
           c.claim NOT IN ('conflict', 'purged') AND NOT c.new
               AND rl_ambiguous_prior(c.run_id),
           CASE WHEN c.claim NOT IN ('conflict', 'purged') AND NOT c.new
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
$$;
