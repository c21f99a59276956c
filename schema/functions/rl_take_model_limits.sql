-- Takes the rate-limit allowances of a dispatch batch: for every model of
-- p_models (the batch's models that have a model_limits row; locked once,
-- in model order), first settles the model's finished calls (see above),
-- then its
-- runs that would be dispatched (live lease, deadline not passed, no
-- outcome-less attempt of this lease) take a request and their estimate in
-- tokens, or are moved back to pending until the bucket has room (or the
-- pause ends). Returns the runs it deferred: ord, due time, why. Called by
-- rl_dispatch_runs after the runs are locked.
--
-- rl_take_model_limits of 019, with the deferrals of the bucket queued
-- behind the model's horizon (queued_until) instead of behind the runs
-- deferred earlier in the same statement only; the rest is unchanged.
CREATE OR REPLACE FUNCTION rl_take_model_limits(
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
    v_queue   timestamptz;
    v_flight  integer;
    v_cost    double precision;
    v_wait    double precision;
    v_step    double precision; -- ms to refill what the run takes
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
        -- A row a 429 created for a model nobody limited holds its pause
        -- and adaptive cap only while they matter: ten minutes after the
        -- last pause ended, the model is unlimited again.
        IF v_m.implicit
           AND coalesce(v_m.paused_until, '-infinity') < v_now - interval '10 minutes'
        THEN
            DELETE FROM model_calls c WHERE c.model = v_m.model;
            DELETE FROM model_limits m WHERE m.model = v_m.model;
            CONTINUE;
        END IF;
        -- Settle the calls that got an outcome since the last dispatch:
        -- additive increase, one step per cap's worth of 'ok' calls. A
        -- call whose lease is gone is over too: its worker died or gave
        -- the run up, and its attempt may never get an outcome.
        IF v_m.concurrency_cap IS NOT NULL THEN
            WITH settled AS (
                DELETE FROM model_calls c
                 USING attempts a
                 WHERE c.model = v_m.model
                   AND a.run_id = c.run_id AND a.attempt_no = c.attempt_no
                   AND (a.outcome IS NOT NULL
                        OR NOT rl_model_call_leased(a.run_id, a.lease_epoch,
                                                    a.worker))
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
        -- a horizon in the past: nobody is queued, the queue starts now
        v_queue := greatest(v_m.queued_until, v_now);
        v_waits := 0;
        v_flight := NULL;
        IF v_m.concurrency_cap IS NOT NULL THEN
            SELECT count(*) INTO v_flight FROM model_calls c
             WHERE c.model = v_m.model
               AND c.created_at > now() - interval '10 minutes';
        END IF;
        FOR v_run IN
            SELECT u.run_id, u.estimate, u.ord, r.attempts,
                   r.error_class IS DISTINCT FROM 'rate_limit' AS fresh
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
            ELSIF (v_m.rpm IS NOT NULL AND v_req < 1)
                  OR (v_m.tpm IS NOT NULL
                      AND v_tok < least(v_cost, v_burst_t))
                  OR ((v_m.rpm IS NOT NULL OR v_m.tpm IS NOT NULL)
                      AND v_run.fresh AND v_queue > v_now) THEN
                -- its own bucket time, and the refill time of what it
                -- takes: it goes one step after the run queued last. A
                -- run not deferred before queues behind the runs that
                -- are, even when the bucket has room: that room is theirs,
                -- each due at its step; taken by a newcomer, the run due
                -- then would find the bucket empty and go to the back,
                -- taking a second step of the horizon, and the horizon
                -- would run ahead of the bucket (bench ratelimit: 3,115
                -- deferrals for 3,000 runs and 94 % of the limit used).
                v_wait := 0;
                v_step := 0;
                IF v_m.rpm IS NOT NULL THEN
                    v_wait := greatest(v_wait, (1 - v_req) / v_rate_r);
                    v_step := greatest(v_step, 1 / v_rate_r);
                END IF;
                IF v_m.tpm IS NOT NULL THEN
                    v_wait := greatest(v_wait,
                                       (least(v_cost, v_burst_t) - v_tok)
                                       / v_rate_t);
                    v_step := greatest(v_step,
                                       least(v_cost, v_burst_t) / v_rate_t);
                END IF;
                IF v_run.fresh THEN
                    v_due := greatest(
                        v_now + make_interval(secs => ceil(v_wait) / 1000.0),
                        v_queue + make_interval(secs => ceil(v_step) / 1000.0));
                    v_queue := v_due;
                ELSE
                    -- back at its step and the bucket a hair short (its
                    -- refill is continuous, the steps are whole ms): it
                    -- keeps its place and waits for its own request only,
                    -- rather than a second step at the back of the queue
                    v_due := v_now + make_interval(
                                 secs => greatest(ceil(v_wait), 1) / 1000.0);
                END IF;
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
            -- the wait is the provider's (a pause) or the operator's (a
            -- limit): the run's deadline moves by it
            UPDATE runs r
               SET status = 'pending', lock_owner = NULL,
                   lock_expires_at = NULL, next_attempt_at = v_due,
                   deadline_at = r.deadline_at + (v_due - v_now),
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
               queued_until = CASE WHEN v_queue > v_now THEN v_queue
                                   ELSE m.queued_until END,
               concurrency_cap = v_m.concurrency_cap,
               cap_successes = v_m.cap_successes,
               waits = m.waits + v_waits
         WHERE m.model = v_m.model;
    END LOOP;
END
$fn$;
ALTER FUNCTION rl_take_model_limits(text[], text[], bigint[], bigint[], text,
                                    bigint)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION rl_take_model_limits(text[], text[], bigint[], bigint[], text,
                                    bigint)
    SET enable_seqscan = off;
ALTER FUNCTION rl_take_model_limits(text[], text[], bigint[], bigint[], text,
                                    bigint)
    SET jit = off;
