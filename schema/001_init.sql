-- 001_init.sql: the run ledger (docs/design.md, State of a run).
--
-- Forward-only. `runledger migrate` applies this file in one transaction and
-- records its SHA-256 in schema_migrations (created by the migrate code, not
-- here); changing this file after it was applied anywhere is refused, so a
-- change is a new file (002_<what>.sql).
--
-- Tables and functions are created unqualified, in the first schema of the
-- session's search_path, and the functions resolve tables the same way:
-- one database can hold several ledgers (the integration tests do).

-- One row per logical run. The row is the lease, the fencing token and the
-- accepted result at once, so every guard below is a single-row check.
CREATE TABLE runs (
    run_id           text        PRIMARY KEY
                     CONSTRAINT runs_run_id_is_sha256_hex
                     CHECK (run_id ~ '^[0-9a-f]{64}$'),
    job              text        NOT NULL,
    tenant           text        NOT NULL,
    scheduled_at     timestamptz NOT NULL,
    version          text        NOT NULL,
    -- sha256 of the canonical effective request; same run_id with another
    -- fingerprint is a conflict and never touches the row
    fingerprint      text        NOT NULL
                     CONSTRAINT runs_fingerprint_is_sha256_hex
                     CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    -- the effective request: {"notify":[...],"request":{...}}
    request          jsonb       NOT NULL,
    raw_input        jsonb,      -- write-once (trigger below)
    output           jsonb,      -- write-once (trigger below)
    status           text        NOT NULL DEFAULT 'pending'
                     CONSTRAINT runs_status_known
                     CHECK (status IN ('pending', 'running', 'completed',
                                       'failed', 'unknown')),
    lock_owner       text,
    lock_expires_at  timestamptz, -- set from the database clock only
    -- fencing token: +1 on every claim; every write after a claim names it
    lease_epoch      bigint      NOT NULL DEFAULT 0
                     CONSTRAINT runs_lease_epoch_not_negative
                     CHECK (lease_epoch >= 0),
    attempts         integer     NOT NULL DEFAULT 0
                     CONSTRAINT runs_attempts_not_negative
                     CHECK (attempts >= 0),
    next_attempt_at  timestamptz,
    deadline_at      timestamptz,
    last_error       text,
    error_class      text,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    CONSTRAINT runs_one_row_per_logical_run
        UNIQUE (job, tenant, scheduled_at, version),
    CONSTRAINT runs_completed_has_output
        CHECK (status <> 'completed'
               OR (output IS NOT NULL AND completed_at IS NOT NULL)),
    -- a lease is an owner and an expiry together, held only while running
    CONSTRAINT runs_lease_is_whole
        CHECK ((lock_owner IS NULL) = (lock_expires_at IS NULL)),
    CONSTRAINT runs_only_running_is_leased
        CHECK ((status = 'running') = (lock_owner IS NOT NULL)),
    -- every pending run has a due time, so the sweeper can never lose one
    CONSTRAINT runs_pending_is_due
        CHECK (status <> 'pending' OR next_attempt_at IS NOT NULL)
);

-- Sweeper: retries that are due, and leases that expired.
CREATE INDEX runs_due_retries_idx ON runs (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX runs_expiring_leases_idx ON runs (lock_expires_at)
    WHERE status = 'running';

-- One row per model dispatch, inserted BEFORE the request is sent. A row
-- without an outcome is the evidence that an earlier worker may have
-- generated: the input to the `unknown` decision.
CREATE TABLE attempts (
    run_id              text        NOT NULL REFERENCES runs (run_id),
    attempt_no          integer     NOT NULL
                        CONSTRAINT attempts_attempt_no_positive
                        CHECK (attempt_no > 0),
    lease_epoch         bigint      NOT NULL,
    worker              text        NOT NULL,
    idempotency_key     text        NOT NULL,
    dispatched_at       timestamptz NOT NULL DEFAULT now(),
    outcome             text
                        CONSTRAINT attempts_outcome_known
                        CHECK (outcome IN ('ok', 'transient', 'permanent',
                                           'ambiguous', 'invalid_output',
                                           'not_sent', 'connect_failed',
                                           'cancelled', 'lease_lost')),
    http_status         integer,
    upstream_request_id text,
    prompt_tokens       bigint,
    completion_tokens   bigint,
    cached_tokens       bigint,
    latency_ms          bigint,
    error               text,
    finished_at         timestamptz,
    PRIMARY KEY (run_id, attempt_no),
    CONSTRAINT attempts_outcome_has_finish_time
        CHECK ((outcome IS NULL) = (finished_at IS NULL))
);

-- Notifications not yet delivered: only the pending set, so the relay's
-- scans stay small. Rows are written in the transaction that completes the
-- run and moved to outbox_delivered once the producer has them.
CREATE TABLE outbox (
    run_id         text        NOT NULL REFERENCES runs (run_id),
    channel        text        NOT NULL,
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    delivered_at   timestamptz,
    delivery_count integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, channel)
);

-- Relay: oldest pending first (never page by a sequence: they commit out
-- of order).
CREATE INDEX outbox_pending_by_age_idx ON outbox (created_at);

-- Insert-only audit of delivered notifications. Deleting from outbox and
-- inserting here keeps the pending set small; updating delivered_at in
-- place under a partial index degrades badly under load.
CREATE TABLE outbox_delivered (
    run_id         text        NOT NULL,
    channel        text        NOT NULL,
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL,
    delivered_at   timestamptz NOT NULL DEFAULT now(),
    delivery_count integer     NOT NULL,
    PRIMARY KEY (run_id, channel)
);

-- The functions and triggers this migration defined now live in
-- schema/functions/, one file each, re-created by migrate after the
-- numbered migrations whenever a file changes.
