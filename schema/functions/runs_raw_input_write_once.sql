CREATE OR REPLACE TRIGGER runs_raw_input_write_once
    BEFORE UPDATE OF raw_input ON runs
    FOR EACH ROW
    WHEN (OLD.raw_input IS NOT NULL
          AND NEW.raw_input IS DISTINCT FROM OLD.raw_input)
    EXECUTE FUNCTION rl_refuse_update('raw_input is write-once');
