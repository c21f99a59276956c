-- 019_model_rate_limits.sql: requests and tokens per minute per model,
-- shared by every worker of the group, taken in the statement that records
-- a batch's dispatches; a 429 pauses the model for every worker.
--
-- model_limits has one row per model (the "model" field of the run's
-- request): the operator's limits (rpm, tpm per window_ms, a minute unless
-- a test shortens it) and the bucket state every worker's dispatch
-- statement reads and writes under the row's lock (FOR UPDATE, once per
-- model per statement, in model order, so two batches cannot deadlock on
-- them).
--
-- The bucket. Each limit is a token bucket holding at most burst = one
-- second's worth of the limit (a tenth of the window when that is
-- shorter; at least 1) and refilled at (limit - burst) per window, so that in
-- ANY window of window_ms at most burst + (limit - burst) = limit
-- allowances are handed out: a fixed or sliding window at the provider
-- never sees more than the limit from the group. A request costs one
-- request allowance and its estimate in tokens (the estimate the budget
-- reservation uses: the body's bytes / 4 + max_tokens). A run whose
-- estimate exceeds the token burst is let through when the bucket is full,
-- leaving it in debt. A run that cannot get both allowances is not
-- dispatched: it goes back to pending (no attempt counted, no lease kept,
-- as a budget 'wait' does) with error_class 'rate_limit' and
-- next_attempt_at = when the bucket will have room for it, counting the
-- runs deferred before it in the same statement, so they come back spread
-- out instead of all at once.
--
-- The provider. paused_until is set by rl_model_throttled, which a worker
-- calls when the provider answered 429 (or said it has no requests or
-- tokens left): until then every worker's dispatch statement defers the
-- model's runs to that time. When neither the operator nor the provider
-- gives a limit (no rpm/tpm here, no x-ratelimit-* headers), a 429 also
-- sets an adaptive concurrency cap: halved on every 429 (from the calls in
-- flight when none was set), +1 after each cap's worth of successful
-- calls (additive increase, multiplicative decrease). Calls in flight are
-- counted through model_calls, one row per dispatch of a capped model
-- whose attempt has no outcome yet. Nothing happens when an attempt gets
-- its outcome: the statements that record outcomes run for every run and
-- stay as they were (no trigger, no extra row). The next dispatch
-- statement that locks the model's row settles its calls instead: it
-- deletes the rows whose attempt has an outcome and counts the 'ok' ones
-- toward the cap's growth, then counts the rest as in flight.
--
-- The hot path. With no model_limits row at all, rl_dispatch_runs costs
-- one probe of an empty table and behaves as in 014; with rows for other
-- models only, one more look-up of the batch's models; nothing else in
-- the ledger changes.

CREATE TABLE model_limits (
    model          text        PRIMARY KEY,
    -- which provider endpoint the limits were read from (informational:
    -- every worker of a ledger calls one endpoint)
    endpoint       text        NOT NULL DEFAULT '',
    rpm            bigint      CONSTRAINT model_limits_rpm_positive
                               CHECK (rpm > 0),
    tpm            bigint      CONSTRAINT model_limits_tpm_positive
                               CHECK (tpm > 0),
    window_ms      integer     NOT NULL DEFAULT 60000
                               CONSTRAINT model_limits_window_ms_min
                               CHECK (window_ms >= 100),
    -- bucket state: allowances left at refilled_at (NULL: full)
    requests_left  double precision,
    tokens_left    double precision,
    refilled_at    timestamptz,
    -- the provider's 429 (or remaining 0): nothing dispatched before this
    paused_until   timestamptz,
    pause_reason   text,
    -- adaptive concurrency cap (NULL: none) and successes since it grew
    concurrency_cap integer    CONSTRAINT model_limits_cap_positive
                               CHECK (concurrency_cap > 0),
    cap_successes  integer     NOT NULL DEFAULT 0,
    -- counters: runs deferred by the limits or the pause, 429s recorded
    waits          bigint      NOT NULL DEFAULT 0,
    throttles      bigint      NOT NULL DEFAULT 0,
    updated_by     text,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- One row per call in flight of a model with an adaptive cap.
CREATE TABLE model_calls (
    run_id     text        NOT NULL,
    attempt_no integer     NOT NULL,
    model      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, attempt_no),
    FOREIGN KEY (run_id, attempt_no) REFERENCES attempts (run_id, attempt_no)
        DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX model_calls_model_idx ON model_calls (model);

-- The provider refused a call of p_model with 429 (or said nothing is
-- left): every worker defers the model's runs until now + p_pause_ms
-- (never earlier than a pause already recorded). p_adaptive: the provider
-- published no limits, so the concurrency cap is halved as well (when the
-- operator set none either). Creates the model's row when missing.
CREATE FUNCTION rl_model_throttled(
    p_model    text,
    p_pause_ms bigint,
    p_adaptive boolean,
    p_reason   text)
RETURNS TABLE (paused_until text, concurrency_cap integer)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    v_flight integer;
BEGIN
    INSERT INTO model_limits (model) VALUES (p_model) ON CONFLICT DO NOTHING;
    SELECT count(*) INTO v_flight
      FROM model_calls c
      JOIN attempts a ON a.run_id = c.run_id AND a.attempt_no = c.attempt_no
     WHERE c.model = p_model AND a.outcome IS NULL
       AND c.created_at > now() - interval '10 minutes';
    RETURN QUERY
    UPDATE model_limits m
       SET paused_until = greatest(m.paused_until, clock_timestamp()
                          + make_interval(secs => greatest(p_pause_ms, 0)
                                                  / 1000.0)),
           pause_reason = p_reason,
           throttles = m.throttles + 1,
           concurrency_cap =
               CASE WHEN p_adaptive AND m.rpm IS NULL AND m.tpm IS NULL
                    THEN greatest(1, coalesce(m.concurrency_cap,
                                              greatest(v_flight, 2)) / 2)
                    ELSE m.concurrency_cap END,
           cap_successes = 0,
           updated_at = now()
     WHERE m.model = p_model
    RETURNING to_char(m.paused_until AT TIME ZONE 'UTC',
                      'YYYY-MM-DD"T"HH24:MI:SS.MS"+00:00"'),
              m.concurrency_cap;
END
$fn$;

-- Takes the rate-limit allowances of a dispatch batch: for every model of
-- p_models (the batch's models that have a model_limits row; locked once,
-- in model order), first settles the model's finished calls (see above),
-- then its
-- runs that would be dispatched (live lease, deadline not passed, no
-- outcome-less attempt of this lease) take a request and their estimate in
-- tokens, or are moved back to pending until the bucket has room (or the
-- pause ends). Returns the runs it deferred: ord, due time, why. Called by
-- rl_dispatch_runs after the runs are locked.
CREATE FUNCTION rl_take_model_limits(
    p_models    text[],
    p_run_ids   text[],
    p_epochs    bigint[],
    p_estimates bigint[],
    p_worker    text,
    p_wait_ms   bigint)
RETURNS TABLE (run_id text, ord bigint, due timestamptz, detail text)
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_now     timestamptz := clock_timestamp();
    v_m       model_limits%ROWTYPE;
    v_run     record;
    v_burst_r double precision;
    v_burst_t double precision;
    v_rate_r  double precision; -- allowances per ms
    v_rate_t  double precision;
    v_req     double precision;
    v_tok     double precision;
    v_q_req   double precision;
    v_q_tok   double precision;
    v_flight  integer;
    v_cost    double precision;
    v_wait    double precision;
    v_due     timestamptz;
    v_why     text;
    v_waits   integer;
    v_ok      integer;
BEGIN
    FOR v_m IN
        SELECT m.* FROM model_limits m
         WHERE m.model = ANY (p_models)
         ORDER BY m.model
           FOR UPDATE
    LOOP
        -- Settle the calls that got an outcome since the last dispatch:
        -- additive increase, one step per cap's worth of 'ok' calls.
        IF v_m.concurrency_cap IS NOT NULL THEN
            WITH settled AS (
                DELETE FROM model_calls c
                 USING attempts a
                 WHERE c.model = v_m.model
                   AND a.run_id = c.run_id AND a.attempt_no = c.attempt_no
                   AND a.outcome IS NOT NULL
                RETURNING a.outcome)
            SELECT count(*) FILTER (WHERE s.outcome = 'ok') INTO v_ok
              FROM settled s;
            v_m.cap_successes := v_m.cap_successes + v_ok;
            WHILE v_m.cap_successes >= v_m.concurrency_cap LOOP
                v_m.cap_successes := v_m.cap_successes - v_m.concurrency_cap;
                v_m.concurrency_cap := v_m.concurrency_cap + 1;
            END LOOP;
        ELSE
            -- left over from a cap the operator reset
            DELETE FROM model_calls c WHERE c.model = v_m.model;
        END IF;
        v_burst_r := greatest(1, floor(v_m.rpm
                     * least(1000, v_m.window_ms / 10) / v_m.window_ms));
        v_burst_t := greatest(1, floor(v_m.tpm
                     * least(1000, v_m.window_ms / 10) / v_m.window_ms));
        v_rate_r := greatest(v_m.rpm - v_burst_r, 1) / v_m.window_ms;
        v_rate_t := greatest(v_m.tpm - v_burst_t, 1) / v_m.window_ms;
        v_req := least(v_burst_r, coalesce(v_m.requests_left, v_burst_r)
                 + coalesce(extract(epoch FROM v_now - v_m.refilled_at)
                            * 1000, 0) * v_rate_r);
        v_tok := least(v_burst_t, coalesce(v_m.tokens_left, v_burst_t)
                 + coalesce(extract(epoch FROM v_now - v_m.refilled_at)
                            * 1000, 0) * v_rate_t);
        v_q_req := 0;
        v_q_tok := 0;
        v_waits := 0;
        v_flight := NULL;
        IF v_m.concurrency_cap IS NOT NULL THEN
            SELECT count(*) INTO v_flight FROM model_calls c
             WHERE c.model = v_m.model
               AND c.created_at > now() - interval '10 minutes';
        END IF;
        FOR v_run IN
            SELECT u.run_id, u.estimate, u.ord, r.attempts
              FROM unnest(p_run_ids, p_epochs, p_estimates) WITH ORDINALITY
                   AS u(run_id, epoch, estimate, ord)
              JOIN runs r ON r.run_id = u.run_id
             WHERE r.request->'request'->>'model' = v_m.model
               AND r.lock_owner = p_worker AND r.lease_epoch = u.epoch
               AND r.lock_expires_at > clock_timestamp()
               AND NOT coalesce(r.deadline_at <= now(), false)
               AND NOT EXISTS (SELECT 1 FROM attempts a
                                WHERE a.run_id = u.run_id
                                  AND a.lease_epoch = u.epoch
                                  AND a.worker = p_worker
                                  AND a.outcome IS NULL)
             ORDER BY u.ord
        LOOP
            v_cost := greatest(v_run.estimate, 0);
            v_due := NULL;
            IF v_m.paused_until > v_now THEN
                v_due := v_m.paused_until
                         + make_interval(secs => v_waits * 0.002);
                v_why := format('model %s paused by the provider until %s: %s',
                                v_m.model,
                                to_char(v_m.paused_until AT TIME ZONE 'UTC',
                                        'HH24:MI:SS.MS'),
                                coalesce(v_m.pause_reason, '429'));
            ELSIF (v_m.rpm IS NOT NULL AND v_req - v_q_req < 1)
                  OR (v_m.tpm IS NOT NULL
                      AND v_tok - v_q_tok < least(v_cost, v_burst_t)) THEN
                v_wait := 0;
                IF v_m.rpm IS NOT NULL THEN
                    v_wait := greatest(v_wait,
                                       (v_q_req + 1 - v_req) / v_rate_r);
                END IF;
                IF v_m.tpm IS NOT NULL THEN
                    v_wait := greatest(v_wait,
                                       (v_q_tok + least(v_cost, v_burst_t)
                                        - v_tok) / v_rate_t);
                END IF;
                v_due := v_now + make_interval(secs => ceil(v_wait) / 1000.0);
                v_q_req := v_q_req + 1;
                v_q_tok := v_q_tok + least(v_cost, v_burst_t);
                v_why := format('model %s rate limit (%s): waiting for '
                                'room in its bucket',
                                v_m.model,
                                concat_ws(', ',
                                          v_m.rpm || ' requests',
                                          v_m.tpm || ' tokens')
                                || ' per ' || (v_m.window_ms / 1000.0)::float8
                                || ' s');
            ELSIF v_flight IS NOT NULL AND v_flight >= v_m.concurrency_cap THEN
                v_due := v_now + make_interval(
                             secs => greatest(p_wait_ms, 1) / 1000.0);
                v_why := format('model %s at its adaptive concurrency cap '
                                '(%s calls in flight) after a 429',
                                v_m.model, v_m.concurrency_cap);
            END IF;
            IF v_due IS NULL THEN
                v_req := v_req - 1;
                v_tok := v_tok - v_cost;
                IF v_flight IS NOT NULL THEN
                    v_flight := v_flight + 1;
                END IF;
                CONTINUE;
            END IF;
            v_waits := v_waits + 1;
            UPDATE runs r
               SET status = 'pending', lock_owner = NULL,
                   lock_expires_at = NULL, next_attempt_at = v_due,
                   error_class = 'rate_limit',
                   last_error = v_why || '; due again at '
                                || to_char(v_due AT TIME ZONE 'UTC',
                                           'YYYY-MM-DD"T"HH24:MI:SS.MS"+00:00"'),
                   updated_at = now()
             WHERE r.run_id = v_run.run_id;
            RETURN QUERY SELECT v_run.run_id, v_run.ord, v_due,
                                v_why;
        END LOOP;
        UPDATE model_limits m
           SET requests_left = CASE WHEN m.rpm IS NULL THEN NULL
                                    ELSE v_req END,
               tokens_left = CASE WHEN m.tpm IS NULL THEN NULL ELSE v_tok END,
               refilled_at = v_now,
               concurrency_cap = v_m.concurrency_cap,
               cap_successes = v_m.cap_successes,
               waits = m.waits + v_waits
         WHERE m.model = v_m.model;
    END LOOP;
END
$fn$;

-- Dispatches of an adaptively capped model are counted while in flight
-- (model_calls): rl_dispatch_runs inserts them after the attempts.
CREATE FUNCTION rl_count_model_calls(p_models text[], p_run_ids text[])
RETURNS void
LANGUAGE sql
AS $fn$
    INSERT INTO model_calls (run_id, attempt_no, model)
    SELECT a.run_id, a.attempt_no, m.model
      FROM runs r
      JOIN model_limits m ON m.model = r.request->'request'->>'model'
      JOIN attempts a ON a.run_id = r.run_id AND a.attempt_no = r.attempts
     WHERE r.run_id = ANY (p_run_ids) AND m.model = ANY (p_models)
       AND m.concurrency_cap IS NOT NULL
       AND a.outcome IS NULL
        ON CONFLICT DO NOTHING
$fn$;

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
