-- 004_budgets.sql: token budgets per tenant (optionally per job) and UTC
-- day, enforced before every model dispatch.
--
-- A dispatch first reserves its estimated tokens (prompt estimate +
-- max_tokens) against every budget that covers the run, with a guarded
-- UPDATE (reserved + spent + estimate <= limit) on one usage row per
-- (tenant, scope, day). The row lock serialises concurrent workers, so the
-- sum of reservations and settled spend never passes the limit; only the
-- difference between a reservation and the real usage can, which is the
-- "at most the in-flight reservations" bound. The attempt's outcome settles
-- the reservation (trigger below) in the transaction that records it.
--
-- With no budgets row for a tenant nothing here is consulted beyond one
-- primary-key probe, and dispatch behaves as before.

CREATE TABLE budgets (
    tenant        text        NOT NULL,
    -- '' is the whole tenant; a job name narrows the budget to that job
    -- (both apply when both exist)
    job           text        NOT NULL DEFAULT '',
    daily_tokens  bigint      NOT NULL
                  CONSTRAINT budgets_daily_tokens_not_negative
                  CHECK (daily_tokens >= 0),
    updated_by    text,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, job)
);

-- One row per budget scope and UTC day. reserved: tokens held by
-- dispatches whose outcome is not recorded yet; spent: settled usage.
CREATE TABLE budget_usage (
    tenant     text   NOT NULL,
    job        text   NOT NULL,
    day        date   NOT NULL,
    reserved   bigint NOT NULL DEFAULT 0
               CONSTRAINT budget_usage_reserved_not_negative
               CHECK (reserved >= 0),
    spent      bigint NOT NULL DEFAULT 0,
    -- dispatches refused for this scope and day (runs moved to the next day)
    deferrals  bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, job, day)
);

-- The reservation of one dispatch, until its attempt gets an outcome.
CREATE TABLE budget_reservations (
    run_id     text        NOT NULL,
    attempt_no integer     NOT NULL,
    tenant     text        NOT NULL,
    scopes     text[]      NOT NULL, -- budget_usage.job values reserved
    day        date        NOT NULL,
    tokens     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, attempt_no),
    FOREIGN KEY (run_id, attempt_no) REFERENCES attempts (run_id, attempt_no)
        DEFERRABLE INITIALLY DEFERRED
);

-- The functions and triggers this migration defined now live in
-- schema/functions/, one file each, re-created by migrate after the
-- numbered migrations whenever a file changes.
