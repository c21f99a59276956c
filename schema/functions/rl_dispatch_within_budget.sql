-- Records a dispatch under the lease (as record_dispatch_under_lease in
-- db.c), reserving p_estimate tokens first when a budget covers the run.
-- Returns one row:
--   result 'dispatched'  attempt_no is the new (or this lease's earlier,
--                        outcome-less) attempt
--   result 'deferred'    a budget is spent for today (settled spend +
--                        estimate over the limit): no attempt was
--                        recorded (runs.attempts unchanged), the run is
--                        pending until next_window with error_class
--                        'budget', its deadline moved by the same delay
--   result 'wait'        only reservations of calls in flight stand in
--                        the way: as 'deferred', but due again after
--                        p_wait_ms, when they have settled (usually below
--                        their estimate)
--   result 'stale'       the lease is gone; nothing written
CREATE OR REPLACE FUNCTION rl_dispatch_within_budget(
    p_run_id   text,
    p_worker   text,
    p_epoch    bigint,
    p_key      text,
    p_estimate bigint,
    p_wait_ms  bigint)
RETURNS TABLE (result text, attempt_no integer, next_window text,
               detail text)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    v_tenant  text;
    v_job     text;
    v_prior   integer;
    v_day     date := (now() AT TIME ZONE 'UTC')::date;
    v_scopes  text[] := '{}';
    v_budget  record;
    v_ok      boolean;
    v_wait    boolean;
    v_left    bigint;
    v_attempt integer;
    v_next    timestamptz;
BEGIN
    SELECT r.tenant, r.job INTO v_tenant, v_job
      FROM runs r
     WHERE r.run_id = p_run_id AND r.lock_owner = p_worker
       AND r.lease_epoch = p_epoch AND r.status = 'running'
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'stale'::text, NULL::integer, NULL::text,
                            NULL::text;
        RETURN;
    END IF;

    -- Redo after a lost COMMIT: one lease dispatches at most once.
    SELECT a.attempt_no INTO v_prior
      FROM attempts a
     WHERE a.run_id = p_run_id AND a.lease_epoch = p_epoch
       AND a.worker = p_worker AND a.outcome IS NULL
     ORDER BY a.attempt_no DESC LIMIT 1;
    IF FOUND THEN
        RETURN QUERY SELECT 'dispatched'::text, v_prior, NULL::text,
                            NULL::text;
        RETURN;
    END IF;

    -- Scopes in job order ('' first), the lock order of every worker.
    FOR v_budget IN
        SELECT b.job, b.daily_tokens FROM budgets b
         WHERE b.tenant = v_tenant AND b.job IN ('', v_job)
         ORDER BY b.job
    LOOP
        INSERT INTO budget_usage (tenant, job, day)
        VALUES (v_tenant, v_budget.job, v_day)
            ON CONFLICT DO NOTHING;
        UPDATE budget_usage u
           SET reserved = u.reserved + greatest(p_estimate, 0),
               updated_at = now()
         WHERE u.tenant = v_tenant AND u.job = v_budget.job
           AND u.day = v_day
           AND u.reserved + u.spent + greatest(p_estimate, 0)
               <= v_budget.daily_tokens;
        v_ok := FOUND;
        IF NOT v_ok THEN
            SELECT v_budget.daily_tokens - u.reserved - u.spent,
                   u.spent + greatest(p_estimate, 0) <= v_budget.daily_tokens
              INTO v_left, v_wait
              FROM budget_usage u
             WHERE u.tenant = v_tenant AND u.job = v_budget.job
               AND u.day = v_day;
            -- Give back what the earlier scopes of this call reserved.
            UPDATE budget_usage u
               SET reserved = u.reserved - greatest(p_estimate, 0)
             WHERE u.tenant = v_tenant AND u.job = ANY (v_scopes)
               AND u.day = v_day;
            IF v_wait THEN
                UPDATE runs r
                   SET status = 'pending', lock_owner = NULL,
                       lock_expires_at = NULL,
                       next_attempt_at = now() + make_interval(
                           secs => greatest(p_wait_ms, 1) / 1000.0),
                       error_class = 'budget',
                       last_error = format(
                           'token budget of tenant %s%s held by calls in '
                           'flight: needs %s, %s left; waiting for them to '
                           'settle',
                           v_tenant,
                           CASE WHEN v_budget.job = '' THEN ''
                                ELSE ' job ' || v_budget.job END,
                           greatest(p_estimate, 0), greatest(v_left, 0)),
                       updated_at = now()
                 WHERE r.run_id = p_run_id;
                RETURN QUERY
                SELECT 'wait'::text, NULL::integer, NULL::text, r.last_error
                  FROM runs r WHERE r.run_id = p_run_id;
                RETURN;
            END IF;
            UPDATE budget_usage u
               SET deferrals = u.deferrals + 1, updated_at = now()
             WHERE u.tenant = v_tenant AND u.job = v_budget.job
               AND u.day = v_day;
            v_next := rl_next_budget_window();
            UPDATE runs r
               SET status = 'pending', lock_owner = NULL,
                   lock_expires_at = NULL, next_attempt_at = v_next,
                   deadline_at = r.deadline_at + (v_next - now()),
                   error_class = 'budget',
                   last_error = format(
                       'token budget of tenant %s%s spent for %s: '
                       'needs %s, %s left; deferred to %s',
                       v_tenant,
                       CASE WHEN v_budget.job = '' THEN ''
                            ELSE ' job ' || v_budget.job END,
                       v_day, greatest(p_estimate, 0),
                       greatest(v_left, 0),
                       to_char(v_next AT TIME ZONE 'UTC',
                               'YYYY-MM-DD"T"HH24:MI:SS"+00:00"')),
                   updated_at = now()
             WHERE r.run_id = p_run_id;
            RETURN QUERY
            SELECT 'deferred'::text, NULL::integer,
                   to_char(v_next AT TIME ZONE 'UTC',
                           'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
                   r.last_error
              FROM runs r WHERE r.run_id = p_run_id;
            RETURN;
        END IF;
        v_scopes := v_scopes || v_budget.job;
    END LOOP;

    UPDATE runs r SET attempts = r.attempts + 1, updated_at = now()
     WHERE r.run_id = p_run_id
    RETURNING r.attempts INTO v_attempt;
    INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker,
                          idempotency_key)
    VALUES (p_run_id, v_attempt, p_epoch, p_worker, p_key);
    IF cardinality(v_scopes) > 0 THEN
        INSERT INTO budget_reservations (run_id, attempt_no, tenant, scopes,
                                         day, tokens)
        VALUES (p_run_id, v_attempt, v_tenant, v_scopes, v_day,
                greatest(p_estimate, 0));
    END IF;
    RETURN QUERY SELECT 'dispatched'::text, v_attempt, NULL::text,
                        NULL::text;
END
$fn$;
