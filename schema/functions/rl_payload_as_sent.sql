-- The payload of an outbox or outbox_delivered row as the topic carries
-- it: the one given explicitly, or the standard envelope of its run.
CREATE OR REPLACE FUNCTION rl_payload_as_sent(p_run_id text, p_channel text,
                                   p_explicit_payload jsonb)
RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(p_explicit_payload,
                    (SELECT rl_envelope(r.run_id, r.job, r.tenant,
                                        r.scheduled_at, r.version, p_channel,
                                        r.output)
                       FROM runs r
                      WHERE r.run_id = p_run_id))
$$;
