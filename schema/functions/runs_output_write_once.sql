CREATE OR REPLACE TRIGGER runs_output_write_once
    BEFORE UPDATE OF output, status ON runs
    FOR EACH ROW
    WHEN ((OLD.output IS NOT NULL
           AND NEW.output IS DISTINCT FROM OLD.output)
          OR (OLD.status = 'completed' AND NEW.status <> 'completed'))
    EXECUTE FUNCTION rl_refuse_update(
        'output is write-once and a completed run stays completed');
