CREATE OR REPLACE TRIGGER runs_cancelled_stays_cancelled
    BEFORE UPDATE OF status ON runs
    FOR EACH ROW
    WHEN (OLD.status = 'cancelled' AND NEW.status <> 'cancelled')
    EXECUTE FUNCTION rl_refuse_update('a cancelled run stays cancelled');
