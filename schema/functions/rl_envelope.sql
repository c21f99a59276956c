CREATE OR REPLACE FUNCTION rl_envelope(p_run_id text, p_job text, p_tenant text,
                            p_scheduled_at timestamptz, p_version text,
                            p_channel text, p_output jsonb)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_build_object(
               'run_id', p_run_id,
               'job', p_job,
               'tenant', p_tenant,
               'scheduled_at',
               to_char(p_scheduled_at AT TIME ZONE 'UTC',
                       'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
               'version', p_version,
               'channel', p_channel,
               'output', p_output)
$$;
