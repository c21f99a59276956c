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

-- The functions and triggers this migration defined now live in
-- schema/functions/, one file each, re-created by migrate after the
-- numbered migrations whenever a file changes.
