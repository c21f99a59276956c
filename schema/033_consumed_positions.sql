-- 033_consumed_positions.sql: each partition's consumed position, written
-- in the transaction that registers the runs read from it.
--
-- After a failover to an asynchronous standby the new primary lacks the
-- last transactions the old one committed: registrations whose events'
-- offsets Kafka had already committed would otherwise be lost for good,
-- as no worker reads those events again. A consumer compares this
-- position with where it reads from (on assignment, and after every
-- reconnection of its ledger connection) and seeks back to it when the
-- ledger is behind; run IDs make reading an event again idempotent.
-- next_offset only grows: one past the highest offset of the partition
-- whose event the ledger has handled (registered, or dead-lettered by the
-- intake and noted here).
CREATE TABLE consumed_positions (
    topic text NOT NULL,
    partition integer NOT NULL,
    next_offset bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition)
);
