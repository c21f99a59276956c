-- Records the dispatch of each run (p_run_ids[k] under p_epochs[k], with
-- idempotency key p_keys[k]) as rl_dispatch_within_budget does, with
-- p_estimates[k] tokens reserved when a budget covers the run, unless the
-- run's deadline has passed: then nothing is written and the result is
-- 'deadline' (a run is never dispatched after its deadline, however late
-- its claim was). Returns one
-- row per input element, ord naming it, with rl_dispatch_within_budget's
-- columns. Tenants without budgets (the common case) take one
-- set-based statement; when any run of the batch has a budget, the runs
-- are dispatched one by one in (tenant, job) order, the lock order of the
-- budget rows, so concurrent batches cannot deadlock on them.
--
-- rl_dispatch_runs of 014, taking the model limits first
-- (rl_take_model_limits) and counting the calls of capped models; the rest
-- is unchanged. A run deferred by a limit answers 'rate_limited' with
-- next_window (its due time) and detail.
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
    v_run    record;
    v_held   text[] := '{}';
    v_models text[];
    v_capped boolean := false;
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

    -- 019: the model rate limits, before any attempt is recorded. A run
    -- deferred here is pending again and answers 'rate_limited'; the
    -- paths below leave it out. The EXISTS is the whole cost when no model
    -- is limited; the batch's models are looked up only when some are.
    IF EXISTS (SELECT 1 FROM model_limits) THEN
        SELECT array_agg(m.model ORDER BY m.model)
          INTO v_models
          FROM model_limits m
         WHERE m.model IN (SELECT r.request->'request'->>'model'
                             FROM runs r WHERE r.run_id = ANY (p_run_ids));
    END IF;
    IF v_models IS NOT NULL THEN
        FOR v_run IN
            SELECT t.run_id, t.ord, t.due, t.detail
              FROM rl_take_model_limits(v_models, p_run_ids, p_epochs,
                                        p_estimates, p_worker, p_wait_ms) t
        LOOP
            v_held := v_held || v_run.run_id;
            RETURN QUERY SELECT v_run.ord, 'rate_limited'::text,
                                NULL::integer,
                                to_char(v_run.due AT TIME ZONE 'UTC',
                                        'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
                                v_run.detail;
        END LOOP;
        -- read under the rows' locks: a 429 may have set a cap meanwhile
        v_capped := EXISTS (SELECT 1 FROM model_limits m
                             WHERE m.model = ANY (v_models)
                               AND m.concurrency_cap IS NOT NULL);
    END IF;

    IF EXISTS (SELECT 1
                 FROM runs r JOIN budgets b ON b.tenant = r.tenant
                WHERE r.run_id = ANY (p_run_ids)) THEN
        FOR v_run IN
            SELECT u.run_id, u.epoch, u.key, u.estimate, u.ord
              FROM unnest(p_run_ids, p_epochs, p_keys, p_estimates)
                   WITH ORDINALITY AS u(run_id, epoch, key, estimate, ord)
              LEFT JOIN runs r ON r.run_id = u.run_id
             WHERE u.run_id <> ALL (v_held)
             ORDER BY r.tenant, r.job, u.run_id, u.ord
        LOOP
            IF NOT EXISTS (SELECT 1 FROM runs r
                            WHERE r.run_id = v_run.run_id
                              AND r.lock_owner = p_worker
                              AND r.lease_epoch = v_run.epoch
                              AND r.lock_expires_at > clock_timestamp()) THEN
                RETURN QUERY SELECT v_run.ord, 'stale'::text,
                                    NULL::integer, NULL::text, NULL::text;
                CONTINUE;
            END IF;
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
        IF v_capped THEN
            PERFORM rl_count_model_calls(v_models, p_run_ids);
        END IF;
        RETURN;
    END IF;

    RETURN QUERY
    WITH u AS (
        SELECT u.run_id, u.epoch, u.key, u.ord
          FROM unnest(p_run_ids, p_epochs, p_keys) WITH ORDINALITY
               AS u(run_id, epoch, key, ord)
         WHERE u.run_id <> ALL (v_held)
    ), lease AS (
        SELECT DISTINCT ON (u.run_id) u.run_id, u.epoch, u.key,
               coalesce(r.deadline_at <= now(), false) AS late
          FROM u JOIN runs r ON r.run_id = u.run_id
         WHERE r.lock_owner = p_worker AND r.lease_epoch = u.epoch
           AND r.lock_expires_at > clock_timestamp()
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
    IF v_capped THEN
        PERFORM rl_count_model_calls(v_models, p_run_ids);
    END IF;
END
$fn$;
ALTER FUNCTION rl_dispatch_runs(text[], bigint[], text[], bigint[], text,
                                bigint)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION rl_dispatch_runs(text[], bigint[], text[], bigint[], text,
                                bigint)
    SET enable_seqscan = off;
ALTER FUNCTION rl_dispatch_runs(text[], bigint[], text[], bigint[], text,
                                bigint)
    SET jit = off;
