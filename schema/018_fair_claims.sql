-- 018_fair_claims.sql: admission that never waits for a model slot,
-- group-wide concurrency limits per tenant and per job, and fair claiming
-- across tenants.
--
-- Kafka is admission, the ledger schedules. A worker registers every valid
-- event it reads (its offset is then done) and claims only as many as it has
-- model slots for; the rest are pending rows, due now, that the sweepers of
-- all workers hand out through rl_claim_due. So a burst of one tenant never
-- holds a partition's offsets, and the events behind it, another tenant's,
-- are read and registered at once. What changes here:
--   - run_limits: an operator's concurrency limit and weight for a tenant
--     (job '') or for one job of a tenant (`runledger limits`);
--   - runs_running_by_tenant_idx counts a tenant's running runs, and
--     runs_pending_by_tenant_idx finds each (tenant, job)'s oldest due runs;
--   - rl_claim_runs (017's, with the traceparents) gains p_claim_max: NULL
--     claims every due run of the batch as before; a number registers
--     every new run as pending (due now) and claims at most that many,
--     never one of a tenant (or job) with a concurrency limit; the others
--     answer 'queued'. The earlier forms are dropped: every worker of this
--     release calls this one;
--   - rl_claim_due replaces the sweeper's statement: expired leases first,
--     then due pending runs in a fair order, within the limits; like
--     rl_claim_runs it returns each run's traceparent.

CREATE TABLE run_limits (
    tenant      text NOT NULL,
    job         text NOT NULL DEFAULT '',
    concurrency integer,
    weight      integer NOT NULL DEFAULT 1,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, job),
    CONSTRAINT run_limits_concurrency_not_negative
        CHECK (concurrency IS NULL OR concurrency >= 0),
    CONSTRAINT run_limits_weight_positive CHECK (weight >= 1),
    CONSTRAINT run_limits_weight_is_per_tenant CHECK (job = '' OR weight = 1)
);

CREATE INDEX runs_running_by_tenant_idx ON runs (tenant, job)
    WHERE status = 'running';
CREATE INDEX runs_pending_by_tenant_idx ON runs (tenant, job, next_attempt_at)
    WHERE status = 'pending';

-- 1 when a concurrency limit covers runs of (tenant, job): such runs are
-- claimed only by rl_claim_due, which counts and serialises them.
CREATE FUNCTION rl_run_limited(p_tenant text, p_job text)
RETURNS boolean
LANGUAGE sql STABLE
AS $fn$
    SELECT EXISTS (SELECT 1 FROM run_limits l
                    WHERE l.tenant = p_tenant AND l.job IN ('', p_job)
                      AND l.concurrency IS NOT NULL)
$fn$;

DROP FUNCTION rl_claim_runs(text[], text[], text[], timestamptz[], text[],
                            text[], jsonb[], jsonb[], double precision[],
                            text[], integer[], bigint[], text,
                            double precision);
DROP FUNCTION rl_claim_runs(text[], text[], text[], timestamptz[], text[],
                            text[], jsonb[], jsonb[], double precision[],
                            text[], integer[], bigint[], text[], text,
                            double precision);

CREATE FUNCTION rl_claim_runs(
    p_run_ids        text[],
    p_jobs           text[],
    p_tenants        text[],
    p_scheduled_ats  timestamptz[],
    p_versions       text[],
    p_fingerprints   text[],
    p_requests       jsonb[],
    p_inputs         jsonb[],
    p_deadline_secs  double precision[],
    p_topics         text[],
    p_partitions     integer[],
    p_offsets        bigint[],
    p_traceparents   text[],
    p_worker         text,
    p_lease_secs     double precision,
    p_claim_max      integer)
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
SET plan_cache_mode = force_custom_plan
AS $fn$
#variable_conflict use_column
DECLARE
    v_new  text[];
    v_pick text[];
    v_all  boolean := p_claim_max IS NULL;
BEGIN
    IF p_worker IS NULL OR p_lease_secs IS NULL OR p_lease_secs <= 0 THEN
        RAISE EXCEPTION 'a claim needs a worker and a positive lease'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    WITH ins AS (
        INSERT INTO runs AS r (run_id, job, tenant, scheduled_at, version,
                               fingerprint, request, raw_input, status,
                               lock_owner, lock_expires_at, lease_epoch,
                               next_attempt_at, deadline_at, source_topic,
                               source_partition, source_offset,
                               traceparent)
        SELECT u.run_id, u.job, u.tenant, u.scheduled_at, u.version,
               u.fingerprint, u.request, nullif(u.input, 'null'::jsonb),
               CASE WHEN v_all THEN 'running' ELSE 'pending' END,
               CASE WHEN v_all THEN p_worker END,
               CASE WHEN v_all
                    THEN now() + make_interval(secs => p_lease_secs) END,
               CASE WHEN v_all THEN 1 ELSE 0 END,
               CASE WHEN v_all THEN NULL ELSE now() END,
               CASE WHEN u.deadline_secs > 0
                    THEN now() + make_interval(secs => u.deadline_secs) END,
               u.topic, u.part, u.off, u.tp
          FROM unnest(p_run_ids, p_jobs, p_tenants, p_scheduled_ats,
                      p_versions, p_fingerprints, p_requests, p_inputs,
                      p_deadline_secs, p_topics, p_partitions, p_offsets,
                      p_traceparents)
               WITH ORDINALITY
               AS u(run_id, job, tenant, scheduled_at, version, fingerprint,
                    request, input, deadline_secs, topic, part, off, tp,
                    ord)
         ORDER BY u.run_id, u.ord
            ON CONFLICT DO NOTHING
        RETURNING r.run_id
    )
    SELECT coalesce(array_agg(ins.run_id), '{}') INTO v_new FROM ins;

    -- The rows this function inserted are its own until it commits: only
    -- the others are locked, in run_id order.
    PERFORM 1
       FROM runs r
      WHERE r.run_id = ANY (p_run_ids) AND NOT r.run_id = ANY (v_new)
      ORDER BY r.run_id
        FOR NO KEY UPDATE;

    -- Which runs of the batch this worker has model slots for: the first
    -- p_claim_max claimable ones in the batch's order, none of a limited
    -- tenant or job (rl_claim_due counts those under the limit's lock).
    IF NOT v_all THEN
        SELECT coalesce(array_agg(s.run_id), '{}') INTO v_pick
          FROM (SELECT r.run_id
                  FROM (SELECT DISTINCT ON (u.run_id) u.run_id,
                               u.fingerprint, u.ord
                          FROM unnest(p_run_ids, p_fingerprints)
                               WITH ORDINALITY AS u(run_id, fingerprint, ord)
                         ORDER BY u.run_id, u.ord) i
                  JOIN runs r ON r.run_id = i.run_id
                 WHERE r.fingerprint = i.fingerprint
                   AND r.status IN ('pending', 'running')
                   AND (r.lock_owner IS NULL OR r.lock_expires_at < now())
                   AND (r.next_attempt_at IS NULL
                        OR r.next_attempt_at <= now())
                   AND NOT rl_run_limited(r.tenant, r.job)
                 ORDER BY i.ord
                 LIMIT greatest(p_claim_max, 0)) s;
    END IF;

    RETURN QUERY
    WITH i AS (
        SELECT u.run_id, u.fingerprint, u.input, u.ord,
               u.ord = min(u.ord) OVER (PARTITION BY u.run_id) AS first,
               u.run_id = ANY (v_new) AS new
          FROM unnest(p_run_ids, p_fingerprints, p_inputs)
               WITH ORDINALITY AS u(run_id, fingerprint, input, ord)
    ), won AS (
        UPDATE runs r
           SET status = 'running',
               lock_owner = p_worker,
               lock_expires_at = now() + make_interval(secs => p_lease_secs),
               lease_epoch = r.lease_epoch + 1,
               next_attempt_at = NULL,
               raw_input = coalesce(r.raw_input,
                                    nullif(i.input, 'null'::jsonb)),
               updated_at = now()
          FROM i
         WHERE i.first AND (v_all AND NOT i.new OR i.run_id = ANY (v_pick))
           AND r.run_id = i.run_id
           AND r.fingerprint = i.fingerprint
           AND r.status IN ('pending', 'running')
           AND (r.lock_owner IS NULL OR r.lock_expires_at < now())
           AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= now())
        RETURNING r.run_id, r.lease_epoch, r.raw_input
    ), c AS (
        SELECT i.ord, i.run_id, i.new, cur.status AS cur_status,
               CASE
               WHEN cur.run_id IS NULL OR cur.fingerprint <> i.fingerprint
                   THEN 'conflict'
               WHEN i.first AND (w.run_id IS NOT NULL OR (i.new AND v_all))
                   THEN 'won'
               WHEN cur.status = 'completed' THEN 'completed'
               WHEN cur.status IN ('failed', 'unknown', 'cancelled')
                   THEN 'parked'
               WHEN cur.status = 'pending' AND cur.next_attempt_at > now()
                   THEN 'not_due'
               WHEN i.first AND NOT v_all AND cur.status = 'pending'
                   THEN 'queued'
               ELSE 'leased'
               END AS claim,
               cur.fingerprint, cur.lease_epoch, cur.attempts,
               cur.deadline_at, cur.job, cur.tenant, cur.scheduled_at,
               cur.version, cur.request, cur.raw_input, cur.output,
               cur.source_topic, cur.source_partition, cur.source_offset,
               cur.traceparent,
               -- a new run claimed at its insert: the row this function
               -- inserted, which the statement's snapshot (cur) shows
               CASE WHEN i.new AND v_all THEN cur.lease_epoch
                    ELSE w.lease_epoch END AS won_epoch,
               CASE WHEN i.new AND v_all THEN cur.raw_input
                    ELSE w.raw_input END AS won_raw_input
          FROM i
          LEFT JOIN runs cur ON cur.run_id = i.run_id
          LEFT JOIN won w ON w.run_id = i.run_id
    )
    SELECT c.ord, c.run_id, c.claim,
           CASE WHEN c.claim = 'won' THEN 'running' ELSE c.cur_status END,
           c.fingerprint,
           CASE WHEN c.claim = 'won' THEN c.won_epoch ELSE c.lease_epoch END,
           c.attempts,
           c.claim <> 'conflict' AND NOT c.new
               AND rl_ambiguous_prior(c.run_id),
           CASE WHEN c.claim <> 'conflict' AND NOT c.new
                THEN rl_ambiguous_attempts(c.run_id) ELSE 0 END,
           coalesce(c.deadline_at <= now(), false),
           c.job, c.tenant,
           to_char(c.scheduled_at AT TIME ZONE 'UTC',
                   'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
           c.version,
           CASE WHEN c.claim <> 'conflict' THEN c.request END,
           CASE WHEN c.claim = 'won' THEN c.won_raw_input
                WHEN c.claim <> 'conflict' THEN c.raw_input END,
           CASE WHEN c.claim = 'completed' THEN c.output END,
           c.source_topic, c.source_partition, c.source_offset,
           c.traceparent
      FROM c
     ORDER BY c.ord;
END
$fn$;

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
CREATE FUNCTION rl_claim_due(
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
               updated_at = now()
         WHERE r.run_id = ANY (v_expired) OR r.run_id = ANY (v_pick)
        RETURNING r.*
    )
    -- rl_ambiguous_prior and rl_ambiguous_attempts, read in one probe of
    -- attempts per run: called per row, the two functions cost more than
    -- the claim itself
    SELECT row_number() OVER (), c.run_id, 'won'::text, c.status,
           c.fingerprint, c.lease_epoch, c.attempts,
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
