-- 014_dispatch_requires_live_lease.sql: a dispatch needs an unexpired
-- lease.
--
-- rl_dispatch_runs checked the lease as owner and epoch only. A worker
-- whose process or connection stalled past its lease (SIGSTOP, a failover
-- without a reset, a row lock held elsewhere) could wake and record a
-- dispatch, then call the model, for a run whose lease had run out just
-- before another worker's sweeper claimed it: two generations for one
-- lease's worth of attempts. The lease now has to be unexpired as well,
-- on the database clock; clock_timestamp() rather than now(), because the
-- statement may have waited for the runs' row locks (rl_lock_runs) after
-- its transaction began. A run refused this way reads 'stale', which the
-- worker treats as a lost lease. Both paths check it: the set-based one in
-- its lease CTE, the per-run one (tenants with budgets) before
-- rl_dispatch_within_budget. The function is otherwise restated unchanged
-- from 010_leases_by_run_id.sql.

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
END
$fn$;
