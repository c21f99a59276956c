-- Whether p_actor may decide the proposal of a run of p_tenant whose
-- destinations are p_proposal -> 'destination': an approver of the tenant
-- without a channel scope may decide every run; one scoped to channels
-- only a run with at least one destination, all of them among its
-- channels.
CREATE OR REPLACE FUNCTION rl_may_approve(p_tenant text, p_actor text,
                                          p_proposal jsonb)
RETURNS boolean
LANGUAGE sql STABLE
AS $fn$
    SELECT EXISTS (SELECT 1 FROM approvers a
                    WHERE a.tenant = p_tenant AND a.actor = p_actor
                      AND a.channel IS NULL)
        OR (jsonb_array_length(coalesce(p_proposal -> 'destination',
                                        '[]'::jsonb)) > 0
            AND NOT EXISTS (
                SELECT 1
                  FROM jsonb_array_elements(p_proposal -> 'destination') d
                 WHERE NOT EXISTS (
                       SELECT 1 FROM approvers a
                        WHERE a.tenant = p_tenant AND a.actor = p_actor
                          AND a.channel = d ->> 'channel')))
$fn$;
