-- Settles a reservation when its attempt gets an outcome, whichever
-- statement records it (a worker's result, a completion, an operator's
-- retry closing it): the real usage when the model reported it, else the
-- whole reservation for outcomes that may have generated (ambiguous,
-- cancelled or lost after sending), else nothing (never sent, refused).
-- An attempt that never gets an outcome (its worker died) keeps its
-- reservation: it may have generated, so it stays counted.
CREATE OR REPLACE FUNCTION rl_settle_budget() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_res    budget_reservations%ROWTYPE;
    v_actual bigint;
BEGIN
    DELETE FROM budget_reservations b
     WHERE b.run_id = NEW.run_id AND b.attempt_no = NEW.attempt_no
    RETURNING * INTO v_res;
    IF NOT FOUND THEN
        RETURN NEW;
    END IF;
    IF NEW.prompt_tokens IS NOT NULL OR NEW.completion_tokens IS NOT NULL THEN
        v_actual := coalesce(NEW.prompt_tokens, 0)
                    + coalesce(NEW.completion_tokens, 0);
    ELSIF NEW.outcome IN ('ambiguous', 'cancelled', 'lease_lost') THEN
        v_actual := v_res.tokens;
    ELSE
        v_actual := 0;
    END IF;
    UPDATE budget_usage u
       SET reserved = greatest(u.reserved - v_res.tokens, 0),
           spent = u.spent + v_actual,
           updated_at = now()
     WHERE u.tenant = v_res.tenant AND u.job = ANY (v_res.scopes)
       AND u.day = v_res.day;
    RETURN NEW;
END
$fn$;
