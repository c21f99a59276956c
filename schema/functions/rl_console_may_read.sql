-- Whether the console user named viewer may read a run of tenant: a user
-- scoped with `runledger users add --tenants` reads only those tenants;
-- an unscoped user, and a caller that names no user (NULL: the CLI),
-- read every tenant. Every console read of runs checks it, so a page
-- cannot show another tenant's run by forgetting a filter.
CREATE OR REPLACE FUNCTION rl_console_may_read(viewer text, tenant text)
RETURNS boolean
LANGUAGE sql
STABLE
AS $fn$
    SELECT NOT EXISTS (SELECT 1 FROM console_users u
                        WHERE u.name = viewer AND u.tenants IS NOT NULL
                          AND NOT (tenant = ANY (u.tenants)))
$fn$;
