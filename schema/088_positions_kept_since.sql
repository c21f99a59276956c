-- 088_positions_kept_since.sql: since when this ledger keeps consumed
-- positions (033), so that a partition with no row tells something.
--
-- A consumer that restarted after a failover to an asynchronous standby
-- knows only the group's committed offsets. A partition whose every
-- registration the failover lost has no consumed position either, like
-- one last read before the ledger kept positions. Events Kafka stamped
-- after this time and committed by the group were read while the ledger
-- kept positions: they would have written the row, so the ledger lost
-- them and the consumer reads the partition again from the first of them
-- (consumer/ledger/positions.c). One row; a ledger upgraded from before
-- this migration counts from the upgrade, later than the truth, which
-- can only miss a loss, never invent one.
CREATE TABLE positions_kept (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    since timestamptz NOT NULL DEFAULT now()
);
INSERT INTO positions_kept DEFAULT VALUES;

GRANT SELECT ON positions_kept TO runledger_worker, runledger_readonly;
