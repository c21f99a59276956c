-- 003_operator_decisions.sql: what operators decided about runs, and the
-- index that keeps "how many runs wait for an operator" cheap.
--
-- `runledger runs retry` and `runledger runs resolve` change a run that the
-- pipeline parked (failed or unknown). Each such change is recorded here in
-- the same transaction, with who decided and why, so the ledger keeps the
-- evidence of every outcome the pipeline did not reach on its own.

CREATE TABLE run_decisions (
    decision_id  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       text        NOT NULL REFERENCES runs (run_id),
    decision     text        NOT NULL
                 CONSTRAINT run_decisions_decision_known
                 CHECK (decision IN ('retry', 'resolve_failed',
                                     'resolve_completed')),
    actor        text        NOT NULL
                 CONSTRAINT run_decisions_actor_named CHECK (actor <> ''),
    reason       text        NOT NULL
                 CONSTRAINT run_decisions_reason_given CHECK (reason <> ''),
    prior_status text        NOT NULL,
    -- runs.attempts when the decision was taken: dispatches after a retry
    -- are the ones above this number
    attempts     integer     NOT NULL,
    decided_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX run_decisions_by_run_idx ON run_decisions (run_id, decided_at);

-- Runs parked as unknown wait for an operator: the metric
-- runledger_unknown_runs and `runs list --status unknown` count them
-- without scanning every run. Partial, so the hot path pays nothing.
CREATE INDEX runs_unknown_idx ON runs (updated_at) WHERE status = 'unknown';
