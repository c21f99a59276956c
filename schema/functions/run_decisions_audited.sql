-- The audit row of each operator decision (rl_audit_run_decision).
CREATE OR REPLACE TRIGGER run_decisions_audited
    AFTER INSERT ON run_decisions
    FOR EACH ROW
    EXECUTE FUNCTION rl_audit_run_decision();
