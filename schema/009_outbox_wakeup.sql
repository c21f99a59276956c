-- 009_outbox_wakeup.sql: queuing outbox rows wakes the relay.
--
-- A relay that finds the outbox empty sleeps RUNLEDGER_RELAY_INTERVAL_MS
-- (200 ms) before it looks again; completions committed meanwhile wait
-- for it, so the backlog a relay leaves behind grew with that interval
-- (bench soak: whole completion batches of 128 to 1,664 rows waiting).
-- Every statement that queues outbox rows now notifies the channel
-- runledger_outbox when its transaction commits, with the outbox's schema
-- as the payload (ledgers in other schemas of the same database share the
-- channel and ignore each other's); relays LISTEN on it and wake at once
-- (the interval stays as the fallback). PostgreSQL folds the identical
-- notifications of one transaction into one, and a statement that queued
-- nothing notifies nobody.
CREATE FUNCTION rl_outbox_wakeup() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF EXISTS (SELECT 1 FROM queued) THEN
        PERFORM pg_notify('runledger_outbox', TG_TABLE_SCHEMA);
    END IF;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER outbox_wakeup
    AFTER INSERT ON outbox
    REFERENCING NEW TABLE AS queued
    FOR EACH STATEMENT
    EXECUTE FUNCTION rl_outbox_wakeup();
