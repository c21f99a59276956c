-- Belt and braces under the guarded writes: an UPDATE that would break a
-- write-once rule raises, whatever statement issued it. The WHEN clauses do
-- the checking, so the function runs only for a violation, and the column
-- lists keep the triggers off lease renewals.
CREATE OR REPLACE FUNCTION rl_refuse_update() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    RAISE EXCEPTION 'refused update of run %: %', OLD.run_id, TG_ARGV[0]
        USING ERRCODE = 'integrity_constraint_violation';
END
$fn$;
