-- 021_rate_limit_queue.sql: runs a model's bucket defers come back one
-- refill apart across every statement and worker, not only within one
-- statement; and the first adaptive cap starts from the calls the worker
-- that got the 429 has in flight.
--
-- The queue. In 019 a deferred run is due when the bucket will have room
-- for it, counting only the runs deferred before it in the same statement.
-- Runs deferred by other statements (the next batch, another worker) are
-- not counted, so they all get about the same due time, come back
-- together, are claimed again and all but a few are deferred again.
-- model_limits.queued_until is the group's queue horizon for the model:
-- the due time of the last run the bucket deferred. A run the bucket
-- defers is due at the later of its own bucket time and the horizon plus
-- the refill time of what it takes (one request, and its tokens: both
-- refill at once, so the longer of the two), and the horizon moves to that
-- due time. A horizon in the past counts as now. While the horizon is
-- ahead, a run not deferred before queues behind it even when the bucket
-- has room, which is kept for the runs due; a run deferred before, back
-- at its step and finding the bucket just short, waits for its own
-- request only (no second step at the back). The bucket still decides
-- whether a run goes, so in any window the group still takes at most the
-- limit; the horizon only decides when deferred runs come back.
--
-- Calls in flight. A call of a capped model stays counted (model_calls)
-- until its attempt has an outcome; a worker killed during the call
-- leaves none, so the call held a slot of the cap for ten minutes, and a
-- few kills held the model at its cap with nothing in flight. A call now
-- also ends when its lease does (rl_model_call_leased).
--
-- The adaptive cap. In 019 the first 429 without published limits halves
-- the calls in flight counted in model_calls, which has rows only once a
-- cap exists, so the first cap was 1 for the whole group. The worker now
-- passes the calls of the model it has in flight (p_in_flight), and the
-- first cap is half the larger of that and model_calls' count (at least
-- 1). The service and its CLI are one binary, so the old signature is
-- dropped rather than kept beside the new one.

ALTER TABLE model_limits ADD COLUMN queued_until timestamptz;

DROP FUNCTION rl_model_throttled(text, bigint, boolean, text);

-- Whether the worker that dispatched an attempt still holds the run's
-- lease under which it did. Only then can the call still be in flight: a
-- worker killed during a call leaves its attempt without an outcome, and
-- counted as in flight it would hold a slot of the cap until it ages out.
CREATE FUNCTION rl_model_call_leased(p_run_id text, p_epoch bigint,
                                     p_worker text)
RETURNS boolean
LANGUAGE sql STABLE
AS $fn$
    SELECT EXISTS (SELECT 1 FROM runs r
                    WHERE r.run_id = p_run_id AND r.lease_epoch = p_epoch
                      AND r.lock_owner = p_worker
                      AND r.lock_expires_at > now())
$fn$;

-- The provider refused a call of p_model with 429 (or said nothing is
-- left): every worker defers the model's runs until now + p_pause_ms
-- (never earlier than a pause already recorded). p_adaptive: the provider
-- published no limits, so the concurrency cap is halved as well (when the
-- operator set none either); the first one is half of p_in_flight (the
-- calling worker's calls of the model in flight, the refused one
-- included) or of the calls model_calls counts, whichever is larger.
-- Creates the model's row when missing.
CREATE FUNCTION rl_model_throttled(
    p_model     text,
    p_pause_ms  bigint,
    p_adaptive  boolean,
    p_in_flight integer,
    p_reason    text)
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
       AND rl_model_call_leased(a.run_id, a.lease_epoch, a.worker)
       AND c.created_at > now() - interval '10 minutes';
    v_flight := greatest(v_flight, coalesce(p_in_flight, 0));
    RETURN QUERY
    UPDATE model_limits m
       SET paused_until = greatest(m.paused_until, clock_timestamp()
                          + make_interval(secs => greatest(p_pause_ms, 0)
                                                  / 1000.0)),
           pause_reason = p_reason,
           throttles = m.throttles + 1,
           concurrency_cap =
               CASE WHEN p_adaptive AND m.rpm IS NULL AND m.tpm IS NULL
                    THEN greatest(1, coalesce(m.concurrency_cap, v_flight)
                                     / 2)
                    ELSE m.concurrency_cap END,
           cap_successes = 0,
           updated_at = now()
     WHERE m.model = p_model
    RETURNING to_char(m.paused_until AT TIME ZONE 'UTC',
                      'YYYY-MM-DD"T"HH24:MI:SS.MS"+00:00"'),
              m.concurrency_cap;
END
$fn$;

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
               queued_until = CASE WHEN v_queue > v_now THEN v_queue
                                   ELSE m.queued_until END,
               concurrency_cap = v_m.concurrency_cap,
               cap_successes = v_m.cap_successes,
               waits = m.waits + v_waits
         WHERE m.model = v_m.model;
    END LOOP;
END
$fn$;
