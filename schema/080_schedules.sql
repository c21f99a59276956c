-- 080_schedules.sql: schedules the ledger knows (`runledger schedules`),
-- the lease that makes one `runledger scheduler` the active publisher, and
-- the pauses the completeness audit leaves out.
--
-- published_through is the scheduler's cursor: every window start at or
-- before it was published (or deliberately skipped by the catch-up
-- policy); it only moves forward, and only under the current scheduler
-- lease (the holder and epoch of scheduler_lease), so a stale scheduler's
-- mark is refused. Publishing twice is harmless: the run ID is the same.

CREATE TABLE schedules (
    name              text        PRIMARY KEY
                                  CONSTRAINT schedules_name_form
                                  CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    job               text        NOT NULL CHECK (job <> ''),
    tenant            text        NOT NULL CHECK (tenant <> ''),
    cron              text        NOT NULL,
    timezone          text        NOT NULL DEFAULT 'UTC',
    version           text        NOT NULL CHECK (version <> ''),
    window_duration   text        NOT NULL,
    request           text        NOT NULL,
    input             text,
    notify            text,
    catchup           text        NOT NULL DEFAULT 'latest'
                                  CONSTRAINT schedules_catchup_known
                                  CHECK (catchup IN ('skip', 'latest', 'all')),
    catchup_window_s  bigint      NOT NULL DEFAULT 86400
                                  CHECK (catchup_window_s >= 0),
    audit_only        boolean     NOT NULL DEFAULT false,
    paused            boolean     NOT NULL DEFAULT false,
    published_through timestamptz NOT NULL DEFAULT now(),
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    updated_by        text        NOT NULL DEFAULT ''
);

CREATE TABLE schedule_pauses (
    schedule   text        NOT NULL REFERENCES schedules (name)
                           ON DELETE CASCADE,
    paused_at  timestamptz NOT NULL,
    resumed_at timestamptz,
    PRIMARY KEY (schedule, paused_at)
);

-- One row: who publishes. epoch grows with every change of holder, and a
-- scheduler's every mark names the epoch it holds.
CREATE TABLE scheduler_lease (
    id         integer     PRIMARY KEY CHECK (id = 1),
    holder     text        NOT NULL,
    epoch      bigint      NOT NULL,
    expires_at timestamptz NOT NULL
);
