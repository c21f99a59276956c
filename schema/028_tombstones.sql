-- 028_tombstones.sql: a purged run leaves a tombstone, so its event,
-- delivered again months later, is not run again.
--
-- `runledger purge` deleted every row of a finished run. An event of that
-- run read again afterwards (a `dlq replay`, a producer's backfill, a
-- consumer group reset, offsets expired on a quiet topic) found no run and
-- started a new one: a second generation billed, a second notification,
-- a cancelled run executed. A tombstone keeps what answering that event
-- needs, about 250 bytes a run: the run ID and fingerprint (the same
-- fingerprint is acknowledged without a call, another one is a conflict
-- as for a live run), its identity for `runs show`, the status it ended
-- in and when. rl_claim_runs reads it only for run IDs that have no run,
-- and purge writes it in the statement that deletes the run. Tombstones
-- go only with `purge --tombstones-older-than`, never below the retention
-- of the topics an event can come back from (docs/operations.md).
CREATE TABLE run_tombstones (
    run_id text PRIMARY KEY,
    fingerprint text NOT NULL,
    job text NOT NULL,
    tenant text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    version text NOT NULL,
    final_status text NOT NULL,
    finished_at timestamptz NOT NULL,
    purged_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX run_tombstones_finished_idx ON run_tombstones (finished_at);
