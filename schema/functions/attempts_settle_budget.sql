CREATE OR REPLACE TRIGGER attempts_settle_budget
    AFTER UPDATE OF outcome ON attempts
    FOR EACH ROW
    WHEN (OLD.outcome IS NULL AND NEW.outcome IS NOT NULL)
    EXECUTE FUNCTION rl_settle_budget();
