-- 060_batch_mode.sql: which jobs go to the provider's batch API instead of
-- live calls, as the operator sets it (`runledger batch set`).
--
-- A row per job, for every tenant (tenant '') or for one tenant (the
-- tenant's row wins over the job's). It lives in the ledger, not in the
-- event: a run's ID and fingerprint stay as they were, and turning batch
-- mode on or off changes only how the runs not yet dispatched are sent.
--
--   window_ms          how long the batcher collects a group's runs before
--                      it submits them (a group: one endpoint and model)
--   max_runs           a group is submitted at once when it holds this many
--   max_bytes          ... or when its request lines reach this many bytes
--   completion_window  what the provider is asked for ('24h')
--   on_expiry          what a run gets when its batch expires, fails or is
--                      cancelled by the provider: 'rebatch' (the next
--                      batch, an attempt spent), 'live' (a live call),
--                      'fail' (failed, dead-lettered)

CREATE TABLE batch_settings (
    job               text        NOT NULL,
    tenant            text        NOT NULL DEFAULT '',
    window_ms         integer     NOT NULL
                                  CONSTRAINT batch_settings_window_min
                                  CHECK (window_ms >= 100),
    max_runs          integer     NOT NULL
                                  CONSTRAINT batch_settings_max_runs_range
                                  CHECK (max_runs BETWEEN 1 AND 50000),
    max_bytes         bigint      NOT NULL
                                  CONSTRAINT batch_settings_max_bytes_range
                                  CHECK (max_bytes BETWEEN 1024
                                                       AND 209715200),
    completion_window text        NOT NULL DEFAULT '24h',
    on_expiry         text        NOT NULL DEFAULT 'rebatch'
                                  CONSTRAINT batch_settings_on_expiry
                                  CHECK (on_expiry IN ('live', 'rebatch',
                                                       'fail')),
    updated_by        text        NOT NULL DEFAULT '',
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job, tenant)
);
