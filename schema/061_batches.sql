-- 061_batches.sql: the batcher's ledger: runs waiting for or in a
-- provider batch, and the batches themselves (docs/batch.md).
--
-- batch_runs: one row per attempt a batch-mode run spends in a batch. The
-- run's dispatch is recorded as a live one's is (attempt row, budgets and
-- rate limits taken); then, in one statement, the run's lease passes from
-- the worker to the batcher (lock_owner 'runledger-batch', lock_expires_at
-- 'infinity', lease_epoch unchanged) and this row is written with the
-- request line's body and the job's settings of the moment. The sweeper
-- never claims such a run (its lease does not expire), so it is never sent
-- live behind the batch's back; every later write to it names the
-- batcher's owner and the epoch kept here, so a cancel (which bumps the
-- epoch) wins over a late answer. Deleted with the run (purge).
--
-- batches: one row per batch, written as an intent (state 'intent', the
-- local batch_id, its runs in batch_runs) and committed BEFORE anything is
-- uploaded; the provider's ids are recorded as they come. upload_tries and
-- create_tries count the uploads and creates begun: a batch without a
-- provider id whose create_tries is not 0 may exist at the provider, and is
-- looked up there (its metadata names batch_id) before another create, for
-- a settle period from lookup_since. The row is leased like a run (owner,
-- epoch, expiry): each step writes under (lock_owner, lock_epoch), so of
-- two workers only the one holding the lease moves it on.

CREATE TABLE batches (
    batch_id          text        PRIMARY KEY,
    endpoint          text        NOT NULL,
    model             text        NOT NULL,
    completion_window text        NOT NULL DEFAULT '24h',
    state             text        NOT NULL DEFAULT 'intent'
                                  CONSTRAINT batches_state
                                  CHECK (state IN ('intent', 'submitted',
                                                   'completed', 'failed',
                                                   'expired', 'cancelled')),
    runs              integer     NOT NULL DEFAULT 0,
    bytes             bigint      NOT NULL DEFAULT 0,
    upload_tries      integer     NOT NULL DEFAULT 0,
    input_file_id     text,
    create_tries      integer     NOT NULL DEFAULT 0,
    lookup_since      timestamptz,
    provider_batch_id text,
    provider_status   text,
    output_file_id    text,
    error_file_id     text,
    lock_owner        text,
    lock_epoch        bigint      NOT NULL DEFAULT 0,
    lock_expires_at   timestamptz,
    next_poll_at      timestamptz NOT NULL DEFAULT now(),
    polls             integer     NOT NULL DEFAULT 0,
    lines_ok          integer     NOT NULL DEFAULT 0,
    lines_failed      integer     NOT NULL DEFAULT 0,
    lines_ignored     integer     NOT NULL DEFAULT 0,
    detail            text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    submitted_at      timestamptz,
    finished_at       timestamptz
);

CREATE INDEX batches_open_idx ON batches (next_poll_at)
    WHERE state IN ('intent', 'submitted');

CREATE TABLE batch_runs (
    run_id            text        NOT NULL
                                  REFERENCES runs (run_id) ON DELETE CASCADE,
    attempt_no        integer     NOT NULL,
    lease_epoch       bigint      NOT NULL,
    batch_id          text        REFERENCES batches (batch_id),
    endpoint          text        NOT NULL,
    model             text        NOT NULL,
    body              text        NOT NULL,
    bytes             integer     NOT NULL,
    window_ms         integer     NOT NULL,
    max_runs          integer     NOT NULL,
    max_bytes         bigint      NOT NULL,
    completion_window text        NOT NULL,
    on_expiry         text        NOT NULL,
    -- waiting (no batch yet), in_batch, completed (its line's answer
    -- stored), ignored (a line for a run cancelled or completed before),
    -- failed (the run failed), retried (pending again for the next batch),
    -- go_live (pending again, its next attempts live)
    state             text        NOT NULL DEFAULT 'waiting'
                                  CONSTRAINT batch_runs_state
                                  CHECK (state IN ('waiting', 'in_batch',
                                                   'completed', 'ignored',
                                                   'failed', 'retried',
                                                   'go_live')),
    parked_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, attempt_no)
);

CREATE INDEX batch_runs_waiting_idx ON batch_runs (endpoint, model, parked_at)
    WHERE state = 'waiting';
CREATE INDEX batch_runs_batch_idx ON batch_runs (batch_id)
    WHERE batch_id IS NOT NULL;
