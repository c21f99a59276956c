-- Every operator decision on a run (run_decisions: retry, resolve, cancel,
-- wake), from `runledger runs|budgets` or the console, is also a row of
-- the append-only audit trail, written by the statement that records it.
-- The console says who it is and from where with the transaction-local
-- settings runledger.audit_via ('console') and runledger.audit_address;
-- without them the row says via 'cli' and no address.
CREATE OR REPLACE FUNCTION rl_audit_run_decision() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    INSERT INTO audit (actor, action, run_id, address, via, detail)
    VALUES (NEW.actor, NEW.decision, NEW.run_id,
            nullif(current_setting('runledger.audit_address', true), ''),
            coalesce(nullif(current_setting('runledger.audit_via', true), ''),
                     'cli'),
            NEW.reason);
    RETURN NULL;
END
$fn$;
