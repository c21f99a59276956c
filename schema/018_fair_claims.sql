-- 018_fair_claims.sql: admission that never waits for a model slot,
-- group-wide concurrency limits per tenant and per job, and fair claiming
-- across tenants.
--
-- Kafka is admission, the ledger schedules. A worker registers every valid
-- event it reads (its offset is then done) and claims only as many as it has
-- model slots for; the rest are pending rows, due now, that the sweepers of
-- all workers hand out through rl_claim_due. So a burst of one tenant never
-- holds a partition's offsets, and the events behind it, another tenant's,
-- are read and registered at once. What changes here:
--   - run_limits: an operator's concurrency limit and weight for a tenant
--     (job '') or for one job of a tenant (`runledger limits`);
--   - runs_running_by_tenant_idx counts a tenant's running runs, and
--     runs_pending_by_tenant_idx finds each (tenant, job)'s oldest due runs;
--   - rl_claim_runs (017's, with the traceparents) gains p_claim_max: NULL
--     claims every due run of the batch as before; a number registers
--     every new run as pending (due now) and claims at most that many,
--     never one of a tenant (or job) with a concurrency limit; the others
--     answer 'queued'. The earlier forms are dropped: every worker of this
--     release calls this one;
--   - rl_claim_due replaces the sweeper's statement: expired leases first,
--     then due pending runs in a fair order, within the limits; like
--     rl_claim_runs it returns each run's traceparent.

CREATE TABLE run_limits (
    tenant      text NOT NULL,
    job         text NOT NULL DEFAULT '',
    concurrency integer,
    weight      integer NOT NULL DEFAULT 1,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, job),
    CONSTRAINT run_limits_concurrency_not_negative
        CHECK (concurrency IS NULL OR concurrency >= 0),
    CONSTRAINT run_limits_weight_positive CHECK (weight >= 1),
    CONSTRAINT run_limits_weight_is_per_tenant CHECK (job = '' OR weight = 1)
);

CREATE INDEX runs_running_by_tenant_idx ON runs (tenant, job)
    WHERE status = 'running';
CREATE INDEX runs_pending_by_tenant_idx ON runs (tenant, job, next_attempt_at)
    WHERE status = 'pending';

-- The functions and triggers this migration defined now live in
-- schema/functions/, one file each, re-created by migrate after the
-- numbered migrations whenever a file changes.
