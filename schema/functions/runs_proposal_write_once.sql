CREATE OR REPLACE TRIGGER runs_proposal_write_once
    BEFORE UPDATE OF proposal, proposal_digest ON runs
    FOR EACH ROW
    WHEN ((OLD.proposal IS NOT NULL
           AND NEW.proposal IS DISTINCT FROM OLD.proposal)
          OR (OLD.proposal_digest IS NOT NULL
              AND NEW.proposal_digest IS DISTINCT FROM OLD.proposal_digest))
    EXECUTE FUNCTION rl_refuse_update('a proposal is write-once');
