-- 032_operator_actions.sql: `runs retry --attempts N` gives a run whose
-- attempts ran out N more.
--
-- A run fails with attempts_exhausted once it was dispatched
-- RUNLEDGER_MAX_ATTEMPTS times; `runs retry` re-opened it, and the next
-- claim failed it again at once, since its dispatches still counted.
-- attempt_allowance is how many of its dispatches no longer count
-- against the limit: the claims answer attempts - attempt_allowance, and
-- a retry raises it. Attempt numbers stay those of the dispatches, so
-- each attempt keeps its own row and idempotency key. The column has a
-- constant default: adding it rewrites nothing.
ALTER TABLE runs
    ADD COLUMN attempt_allowance integer NOT NULL DEFAULT 0
        CONSTRAINT runs_attempt_allowance_not_negative
        CHECK (attempt_allowance >= 0);

-- A 429 from a model no operator limited created its model_limits row to
-- hold the pause and the adaptive cap, and the row stayed for good: the
-- model stayed capped, and `model-limits show` listed a limit nobody set.
-- Such a row is implicit: rl_take_model_limits forgets it once its last
-- pause ended ten minutes ago, and `model-limits set` makes it explicit.
ALTER TABLE model_limits
    ADD COLUMN implicit boolean NOT NULL DEFAULT false;

-- The adaptive cap halves once per congestion event, not once per 429: a
-- burst of 64 concurrent calls answered 429 together cut the cap six
-- times, to 1. cap_cut_at is when the cap was last cut; a 429 of a call
-- dispatched before it belongs to the burst that cut it, and only one of
-- a call sent after it (a round trip later) cuts again.
ALTER TABLE model_limits
    ADD COLUMN cap_cut_at timestamptz;
