CREATE OR REPLACE FUNCTION rl_outbox_wakeup() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    IF EXISTS (SELECT 1 FROM queued) THEN
        PERFORM pg_notify('runledger_outbox', TG_TABLE_SCHEMA);
    END IF;
    RETURN NULL;
END
$fn$;
