-- The audit trail is append-only: whatever statement tries to change or
-- remove a row of audit (UPDATE, DELETE, TRUNCATE) fails, so a decision
-- once recorded cannot be rewritten by anyone short of the table's owner
-- dropping the trigger, which is itself visible.
CREATE OR REPLACE FUNCTION rl_refuse_audit_change() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    RAISE EXCEPTION 'refused % of audit: the audit trail is append-only',
        TG_OP USING ERRCODE = 'integrity_constraint_violation';
END
$fn$;
