-- Whether the worker that dispatched an attempt still holds the run's
-- lease under which it did. Only then can the call still be in flight: a
-- worker killed during a call leaves its attempt without an outcome, and
-- counted as in flight it would hold a slot of the cap until it ages out.
CREATE OR REPLACE FUNCTION rl_model_call_leased(p_run_id text, p_epoch bigint,
                                     p_worker text)
RETURNS boolean
LANGUAGE sql STABLE
AS $fn$
    SELECT EXISTS (SELECT 1 FROM runs r
                    WHERE r.run_id = p_run_id AND r.lease_epoch = p_epoch
                      AND r.lock_owner = p_worker
                      AND r.lock_expires_at > now())
$fn$;
