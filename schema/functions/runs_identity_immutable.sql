CREATE OR REPLACE TRIGGER runs_identity_immutable
    BEFORE UPDATE OF run_id, job, tenant, scheduled_at, version, fingerprint,
                     request ON runs
    FOR EACH ROW
    WHEN (OLD.run_id IS DISTINCT FROM NEW.run_id
          OR OLD.job IS DISTINCT FROM NEW.job
          OR OLD.tenant IS DISTINCT FROM NEW.tenant
          OR OLD.scheduled_at IS DISTINCT FROM NEW.scheduled_at
          OR OLD.version IS DISTINCT FROM NEW.version
          OR OLD.fingerprint IS DISTINCT FROM NEW.fingerprint
          OR OLD.request IS DISTINCT FROM NEW.request)
    EXECUTE FUNCTION rl_refuse_update(
        'identity and effective request never change');
