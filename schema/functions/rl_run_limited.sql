-- 1 when a concurrency limit covers runs of (tenant, job): such runs are
-- claimed only by rl_claim_due, which counts and serialises them.
CREATE OR REPLACE FUNCTION rl_run_limited(p_tenant text, p_job text)
RETURNS boolean
LANGUAGE sql STABLE
AS $fn$
    SELECT EXISTS (SELECT 1 FROM run_limits l
                    WHERE l.tenant = p_tenant AND l.job IN ('', p_job)
                      AND l.concurrency IS NOT NULL)
$fn$;
