-- 015_cancel.sql: cancelled, a terminal status an operator gives a run
-- that should not run (`runledger runs cancel`).
--
-- A pending (also budget-deferred), running or awaiting_approval run can
-- be cancelled; a completed or failed one cannot. A cancelled run holds no
-- lease (runs_only_running_is_leased) and is never due, so neither the
-- sweeper (which claims pending and running runs only) nor a claim from
-- Kafka (which wins pending and running runs only) takes it again, and
-- nothing completes it: every worker write names its lease, which the
-- cancel cleared. What changes here:
--   - runs_status_known admits 'cancelled';
--   - a cancelled run stays cancelled (runs_cancelled_stays_cancelled), as
--     a completed one stays completed: no statement, an operator's retry
--     included, brings it back;
--   - run_decisions records 'cancel' (with the prior status) and 'wake'
--     (`runledger budgets wake`: a budget-deferred run made due now);
--   - rl_claim_runs reports a cancelled run as 'parked', as it does a
--     failed or unknown one, so a later duplicate event for it is
--     acknowledged as a duplicate; the function is otherwise restated
--     unchanged from 008_claim_on_insert.sql;
--   - runs_cancelled_idx keeps the runledger_cancelled_runs gauge and
--     `runs list --status cancelled` from scanning every run.

ALTER TABLE runs DROP CONSTRAINT runs_status_known;
ALTER TABLE runs ADD CONSTRAINT runs_status_known
    CHECK (status IN ('pending', 'running', 'completed', 'failed', 'unknown',
                      'awaiting_approval', 'cancelled'));

ALTER TABLE run_decisions DROP CONSTRAINT run_decisions_decision_known;
ALTER TABLE run_decisions ADD CONSTRAINT run_decisions_decision_known
    CHECK (decision IN ('retry', 'resolve_failed', 'resolve_completed',
                        'cancel', 'wake'));

CREATE INDEX runs_cancelled_idx ON runs (updated_at)
    WHERE status = 'cancelled';

-- The functions and triggers this migration defined now live in
-- schema/functions/, one file each, re-created by migrate after the
-- numbered migrations whenever a file changes.
