-- 010_leases_by_run_id.sql: batch writes find their runs by run_id.
--
-- The set-based statements of rl_dispatch_runs and rl_complete_runs
-- checked each run's lease as lock_owner = worker AND lease_epoch = epoch
-- AND status = 'running'. That last condition matches the partial index
-- runs_expiring_leases_idx (WHERE status = 'running'), and with the
-- statistics of a moment when few runs were leased the planner read every
-- leased run (and every dead entry of that index) through it, then joined
-- the batch against all of them, instead of looking the batch's runs up
-- by primary key. A batch then cost more with every run in flight: at
-- 2,048 model calls of 500 ms a 155-run completion took 70 ms (0.45 ms a
-- run, against 0.24 with nothing in flight), and one EXPLAIN ANALYZE read
-- 37,828 index entries and 4,335 heap pages to find the 155 runs of one
-- batch.
--
-- The condition says nothing the lease check does not: a run has a lock
-- owner exactly while it is running (CHECK runs_only_running_is_leased in
-- 001_init.sql), so lock_owner = worker implies status = 'running'. The
-- two functions are restated below without it, unchanged otherwise (an
-- applied migration never changes).

-- rl_dispatch_runs of 007: the lease CTE without the status condition.
CREATE OR REPLACE FUNCTION rl_dispatch_runs(
    p_run_ids   text[],
    p_epochs    bigint[],
    p_keys      text[],
    p_estimates bigint[],
    p_worker    text,
    p_wait_ms   bigint)
RETURNS TABLE (ord bigint, result text, attempt_no integer,
               next_window text, detail text)
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_run record;
BEGIN
    IF p_worker IS NULL
       OR cardinality(p_run_ids) IS DISTINCT FROM cardinality(p_epochs)
       OR cardinality(p_run_ids) IS DISTINCT FROM cardinality(p_keys)
       OR cardinality(p_run_ids) IS DISTINCT FROM cardinality(p_estimates)
       OR array_position(p_keys, NULL) IS NOT NULL
       OR cardinality(p_run_ids)
          <> (SELECT count(DISTINCT x) FROM unnest(p_run_ids) AS x)
    THEN
        RAISE EXCEPTION 'a dispatch batch needs a worker, distinct runs, '
                        'and one epoch, one idempotency key and one '
                        'estimate per run'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    PERFORM rl_lock_runs(p_run_ids);

    IF EXISTS (SELECT 1
                 FROM runs r JOIN budgets b ON b.tenant = r.tenant
                WHERE r.run_id = ANY (p_run_ids)) THEN
        FOR v_run IN
            SELECT u.run_id, u.epoch, u.key, u.estimate, u.ord
              FROM unnest(p_run_ids, p_epochs, p_keys, p_estimates)
                   WITH ORDINALITY AS u(run_id, epoch, key, estimate, ord)
              LEFT JOIN runs r ON r.run_id = u.run_id
             ORDER BY r.tenant, r.job, u.run_id, u.ord
        LOOP
            IF EXISTS (SELECT 1 FROM runs r
                        WHERE r.run_id = v_run.run_id
                          AND r.lock_owner = p_worker
                          AND r.lease_epoch = v_run.epoch
                          AND r.status = 'running'
                          AND r.deadline_at <= now()) THEN
                RETURN QUERY SELECT v_run.ord, 'deadline'::text,
                                    NULL::integer, NULL::text, NULL::text;
                CONTINUE;
            END IF;
            RETURN QUERY
            SELECT v_run.ord, d.result, d.attempt_no, d.next_window, d.detail
              FROM rl_dispatch_within_budget(v_run.run_id, p_worker,
                                             v_run.epoch, v_run.key,
                                             v_run.estimate, p_wait_ms) d;
        END LOOP;
        RETURN;
    END IF;

    RETURN QUERY
    WITH u AS (
        SELECT u.run_id, u.epoch, u.key, u.ord
          FROM unnest(p_run_ids, p_epochs, p_keys) WITH ORDINALITY
               AS u(run_id, epoch, key, ord)
    ), lease AS (
        SELECT DISTINCT ON (u.run_id) u.run_id, u.epoch, u.key,
               coalesce(r.deadline_at <= now(), false) AS late
          FROM u JOIN runs r ON r.run_id = u.run_id
         WHERE r.lock_owner = p_worker AND r.lease_epoch = u.epoch
         ORDER BY u.run_id
    ), prior AS (
        -- Redo after a lost COMMIT: one lease dispatches at most once.
        SELECT DISTINCT ON (a.run_id) a.run_id, a.attempt_no
          FROM attempts a JOIN lease l ON l.run_id = a.run_id
         WHERE a.lease_epoch = l.epoch AND a.worker = p_worker
           AND a.outcome IS NULL AND NOT l.late
         ORDER BY a.run_id, a.attempt_no DESC
    ), bumped AS (
        UPDATE runs r
           SET attempts = r.attempts + 1, updated_at = now()
          FROM lease l
         WHERE r.run_id = l.run_id AND NOT l.late
           AND NOT EXISTS (SELECT 1 FROM prior p WHERE p.run_id = l.run_id)
        RETURNING r.run_id, r.attempts, l.epoch, l.key
    ), ins AS (
        INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker,
                              idempotency_key)
        SELECT b.run_id, b.attempts, b.epoch, p_worker, b.key
          FROM bumped b
         ORDER BY b.run_id
        RETURNING attempts.run_id, attempts.attempt_no
    )
    SELECT u.ord,
           CASE WHEN l.late THEN 'deadline'
                WHEN coalesce(i.attempt_no, p.attempt_no) IS NULL
                THEN 'stale' ELSE 'dispatched' END,
           coalesce(i.attempt_no, p.attempt_no),
           NULL::text, NULL::text
      FROM u
      LEFT JOIN lease l ON l.run_id = u.run_id AND l.epoch = u.epoch
      LEFT JOIN ins i ON i.run_id = u.run_id
      LEFT JOIN prior p ON p.run_id = u.run_id
     ORDER BY u.ord;
END
$fn$;

-- rl_complete_runs of 007: the completing UPDATE without the status
-- condition.
CREATE OR REPLACE FUNCTION rl_complete_runs(
    p_run_ids     text[],
    p_epochs      bigint[],
    p_worker      text,
    p_outputs     jsonb[],
    p_channel_runs  text[],
    p_channel_names text[],
    p_attempt_nos integer[],
    p_http        integer[],
    p_upstream    text[],
    p_prompt      bigint[],
    p_completion  bigint[],
    p_cached      bigint[],
    p_latency     bigint[])
RETURNS TABLE (ord bigint, result text, outbox_rows integer,
               outcome_recorded boolean)
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $fn$
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
        RETURNING r.run_id, r.job, r.tenant, r.scheduled_at, r.version,
                  r.output
    ), ob AS (
        INSERT INTO outbox (run_id, channel, payload)
        SELECT c.run_id, ch.channel,
               jsonb_build_object(
                   'run_id', c.run_id,
                   'job', c.job,
                   'tenant', c.tenant,
                   'scheduled_at',
                   to_char(c.scheduled_at AT TIME ZONE 'UTC',
                           'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
                   'version', c.version,
                   'channel', ch.channel,
                   'output', c.output)
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
$fn$;
