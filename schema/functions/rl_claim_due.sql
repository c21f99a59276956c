-- The sweeper's claim: up to p_limit runs, each claimed by exactly one
-- caller (SKIP LOCKED). First the running runs whose lease expired (they
-- already count against their tenant's limit). Then due pending runs in a
-- fair order: a tenant's k-th oldest due run is offered at place
-- (running + k) / weight, where running is what the tenant runs now
-- across all workers, and the lowest places win (ties: the older run).
-- So slots go round-robin across tenants (weighted), a tenant already
-- holding many slots waits behind one holding few, and a tenant alone
-- with a backlog takes every slot the others leave idle. A run of a
-- tenant (or job) with a concurrency limit is claimed only while the
-- runs running under the limit, counted after its run_limits row is
-- locked (so concurrent claimers of the tenant go one after the other and
-- each sees the other's claims), stay under it; an unlimited tenant
-- locks nothing.
--
-- It runs every second on every worker, so it reads indexes only, a few
-- entries per (tenant, job) with pending runs, never the backlog: the
-- (tenant, job) groups come from a skip scan of
-- runs_pending_by_tenant_idx (one probe per group), and each group
-- offers only the runs whose place is at most a water level, its oldest
-- first, through the same index. The level starts where p_limit slots
-- would be filled if every tenant had runs enough, and doubles while the
-- offers fall short and some tenant stopped at the level: every offer
-- below the level is then read, so the lowest p_limit of them are the
-- lowest of all. Read with a generic plan, the estimates of these
-- statements are far off and would turn on JIT, whose compilation alone
-- took most of a second: it is off here.
CREATE OR REPLACE FUNCTION rl_claim_due(
    p_worker     text,
    p_lease_secs double precision,
    p_limit      integer)
RETURNS TABLE (
    ord              bigint,
    run_id           text,
    claim            text,
    status           text,
    fingerprint      text,
    lease_epoch      bigint,
    attempts         integer,
    ambiguous_prior  boolean,
    ambiguous_count  integer,
    deadline_passed  boolean,
    job              text,
    tenant           text,
    scheduled_at     text,
    version          text,
    request          jsonb,
    raw_input        jsonb,
    output           jsonb,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    traceparent      text)
LANGUAGE plpgsql
SET jit = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_expired text[];
    v_pick    text[] := '{}';
    v_left    integer;
    -- the (tenant, job) groups with due runs, and the room their job's
    -- limit leaves (NULL: no job limit)
    g_tenant  text[];
    g_job     text[];
    g_room    integer[];
    -- per tenant of those groups: running now, weight, the room its limit
    -- leaves (NULL: no limit)
    t_tenant  text[];
    t_running bigint[];
    t_weight  integer[];
    t_room    integer[];
    v_level   numeric;
    v_offers  bigint;
    v_short   boolean;
BEGIN
    IF p_worker IS NULL OR p_lease_secs IS NULL OR p_lease_secs <= 0
       OR p_limit IS NULL OR p_limit <= 0 THEN
        RAISE EXCEPTION 'a claim needs a worker, a positive lease and a '
                        'positive limit'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT coalesce(array_agg(e.run_id), '{}') INTO v_expired
      FROM (SELECT r.run_id FROM runs r
             WHERE r.status = 'running' AND r.lock_expires_at < now()
             ORDER BY r.lock_expires_at LIMIT p_limit
               FOR NO KEY UPDATE SKIP LOCKED) e;
    v_left := p_limit - cardinality(v_expired);

    IF v_left > 0 THEN
        -- A group's first entry in the index is its oldest pending run:
        -- the group has a due run when that one is due.
        WITH RECURSIVE tj AS (
            (SELECT r.tenant, r.job, r.next_attempt_at FROM runs r
              WHERE r.status = 'pending'
              ORDER BY r.tenant, r.job, r.next_attempt_at LIMIT 1)
            UNION ALL
            SELECT n.tenant, n.job, n.next_attempt_at
              FROM tj, LATERAL (
                  SELECT r.tenant, r.job, r.next_attempt_at FROM runs r
                   WHERE r.status = 'pending'
                     AND (r.tenant, r.job) > (tj.tenant, tj.job)
                   ORDER BY r.tenant, r.job, r.next_attempt_at LIMIT 1) n
        )
        SELECT array_agg(tj.tenant ORDER BY tj.tenant, tj.job),
               array_agg(tj.job ORDER BY tj.tenant, tj.job)
          INTO g_tenant, g_job
          FROM tj
         WHERE tj.next_attempt_at <= now();
    END IF;

    IF g_tenant IS NOT NULL THEN
        -- The limits of the tenants with due runs, locked in key order
        -- before anything is counted: the statements below see every
        -- claim under them that committed before.
        PERFORM 1
           FROM run_limits l
          WHERE l.concurrency IS NOT NULL
            AND l.tenant = ANY (g_tenant)
            AND (l.job = ''
                 OR EXISTS (SELECT 1 FROM unnest(g_tenant, g_job) g(t, j)
                             WHERE g.t = l.tenant AND g.j = l.job))
          ORDER BY l.tenant, l.job
            FOR UPDATE OF l;

        SELECT array_agg(s.tenant ORDER BY s.tenant),
               array_agg(s.running ORDER BY s.tenant),
               array_agg(s.weight ORDER BY s.tenant),
               array_agg(CASE WHEN s.conc IS NOT NULL
                              THEN greatest(s.conc - s.running, 0) END
                         ORDER BY s.tenant)
          INTO t_tenant, t_running, t_weight, t_room
          FROM (SELECT t.tenant, coalesce(tl.weight, 1) AS weight,
                       tl.concurrency AS conc,
                       (SELECT count(*) FROM runs x
                         WHERE x.status = 'running'
                           AND x.tenant = t.tenant) AS running
                  FROM (SELECT DISTINCT u.tenant
                          FROM unnest(g_tenant) u(tenant)) t
                  LEFT JOIN run_limits tl
                    ON tl.tenant = t.tenant AND tl.job = '') s;

        SELECT array_agg(
                   CASE WHEN jl.concurrency IS NOT NULL THEN
                       greatest(jl.concurrency -
                                (SELECT count(*) FROM runs x
                                  WHERE x.status = 'running'
                                    AND x.tenant = g.tenant
                                    AND x.job = g.job), 0)::integer
                   END ORDER BY g.ord)
          INTO g_room
          FROM unnest(g_tenant, g_job) WITH ORDINALITY g(tenant, job, ord)
          LEFT JOIN run_limits jl
            ON jl.tenant = g.tenant AND jl.job = g.job AND g.job <> '';

        -- where v_left slots would be filled if every tenant had runs
        -- enough, and at least the place of the first offer
        SELECT greatest((v_left + sum(u.running))::numeric / sum(u.weight),
                        min((u.running + 1)::numeric / u.weight))
          INTO v_level
          FROM unnest(t_running, t_weight) u(running, weight);

        LOOP
            WITH t AS (
                SELECT u.tenant, u.running, u.weight,
                       -- offers at or below the level, within the room
                       least(greatest(floor(v_level * u.weight)
                                      - u.running, 0),
                             u.room, v_left)::integer AS k,
                       -- the level, not the room, stopped its offers
                       greatest(floor(v_level * u.weight) - u.running, 0)
                           < least(u.room, v_left) AS at_level
                  FROM unnest(t_tenant, t_running, t_weight, t_room)
                       u(tenant, running, weight, room)
            ), cand AS (
                SELECT t.tenant, d.run_id, d.next_attempt_at
                  FROM t
                  JOIN unnest(g_tenant, g_job, g_room) g(tenant, job, room)
                    ON g.tenant = t.tenant
                 CROSS JOIN LATERAL (
                       SELECT r.run_id, r.next_attempt_at FROM runs r
                        WHERE r.status = 'pending' AND r.tenant = g.tenant
                          AND r.job = g.job AND r.next_attempt_at <= now()
                        ORDER BY r.next_attempt_at
                        LIMIT least(t.k, g.room)) d
                 WHERE t.k > 0
            ), ranked AS (
                SELECT cand.run_id, cand.tenant, cand.next_attempt_at,
                       row_number() OVER (
                           PARTITION BY cand.tenant
                           ORDER BY cand.next_attempt_at, cand.run_id) AS k
                  FROM cand
            ), offer AS (
                SELECT ranked.run_id, ranked.tenant, ranked.next_attempt_at,
                       (t.running + ranked.k)::numeric / t.weight AS place
                  FROM ranked JOIN t ON t.tenant = ranked.tenant
                 WHERE ranked.k <= t.k
            ), per AS (
                SELECT offer.tenant, count(*) AS n
                  FROM offer GROUP BY offer.tenant
            )
            SELECT coalesce((array_agg(o.run_id ORDER BY o.place,
                                       o.next_attempt_at, o.run_id))
                                [1:v_left], '{}'),
                   count(*),
                   EXISTS (SELECT 1 FROM t LEFT JOIN per
                                ON per.tenant = t.tenant
                            WHERE t.at_level
                              AND coalesce(per.n, 0) >= t.k)
              INTO v_pick, v_offers, v_short
              FROM offer o;

            EXIT WHEN v_offers >= v_left OR NOT v_short;
            v_level := v_level * 2;
        END LOOP;

        -- Locked in that order, skipping what another claimer holds; the
        -- row is checked again once locked (it may have been claimed).
        SELECT coalesce(array_agg(k.run_id), '{}') INTO v_pick
          FROM (SELECT r.run_id FROM runs r
                 WHERE r.run_id = ANY (v_pick) AND r.status = 'pending'
                   AND r.next_attempt_at <= now()
                   FOR NO KEY UPDATE SKIP LOCKED) k;
    END IF;

    RETURN QUERY
    WITH c AS (
        UPDATE runs r
           SET status = 'running', lock_owner = p_worker,
               lock_expires_at = now() + make_interval(secs => p_lease_secs),
               lease_epoch = r.lease_epoch + 1, next_attempt_at = NULL,
               -- the deadline measures from the first claim (see
               -- rl_claim_runs): the wait for this slot was on purpose
               deadline_at = CASE WHEN r.lease_epoch = 0
                                  THEN now() + (r.deadline_at - r.created_at)
                                  ELSE r.deadline_at END,
               updated_at = now()
         WHERE r.run_id = ANY (v_expired) OR r.run_id = ANY (v_pick)
        RETURNING r.*
    )
    -- rl_ambiguous_prior and rl_ambiguous_attempts, read in one probe of
    -- attempts per run: called per row, the two functions cost more than
    -- the claim itself
    SELECT row_number() OVER (), c.run_id, 'won'::text, c.status,
           c.fingerprint, c.lease_epoch, c.attempts - c.attempt_allowance,
           coalesce(a.prior, false), a.n,
           coalesce(c.deadline_at <= now(), false), c.job, c.tenant,
           to_char(c.scheduled_at AT TIME ZONE 'UTC',
                   'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
           c.version, c.request, c.raw_input, NULL::jsonb, c.source_topic,
           c.source_partition, c.source_offset, c.traceparent
      FROM c
     CROSS JOIN LATERAL (
           SELECT (array_agg(x.outcome IS NULL
                             ORDER BY x.attempt_no DESC))[1] AS prior,
                  (count(*) FILTER (WHERE x.outcome IS NULL
                                       OR x.outcome = 'ambiguous'))::integer
                      AS n
             FROM attempts x WHERE x.run_id = c.run_id) a;
END
$fn$;
