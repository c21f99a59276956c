-- Statement level, so that an UPDATE or DELETE matching no row fails too:
-- a caller learns at once that it cannot change the trail.
CREATE OR REPLACE TRIGGER audit_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON audit
    FOR EACH STATEMENT
    EXECUTE FUNCTION rl_refuse_audit_change();
