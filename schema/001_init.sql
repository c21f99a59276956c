-- 001_init.sql: the run ledger (docs/design.md, State of a run).
--
-- Forward-only. `runledger migrate` applies this file in one transaction and
-- records its SHA-256 in schema_migrations (created by the migrate code, not
-- here); changing this file after it was applied anywhere is refused, so a
-- change is a new file (002_<what>.sql).
--
-- Tables and functions are created unqualified, in the first schema of the
-- session's search_path, and the functions resolve tables the same way:
-- one database can hold several ledgers (the integration tests do).

-- One row per logical run. The row is the lease, the fencing token and the
-- accepted result at once, so every guard below is a single-row check.
CREATE TABLE runs (
    run_id           text        PRIMARY KEY
                     CONSTRAINT runs_run_id_is_sha256_hex
                     CHECK (run_id ~ '^[0-9a-f]{64}$'),
    job              text        NOT NULL,
    tenant           text        NOT NULL,
    scheduled_at     timestamptz NOT NULL,
    version          text        NOT NULL,
    -- sha256 of the canonical effective request; same run_id with another
    -- fingerprint is a conflict and never touches the row
    fingerprint      text        NOT NULL
                     CONSTRAINT runs_fingerprint_is_sha256_hex
                     CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    -- the effective request: {"notify":[...],"request":{...}}
    request          jsonb       NOT NULL,
    raw_input        jsonb,      -- write-once (trigger below)
    output           jsonb,      -- write-once (trigger below)
    status           text        NOT NULL DEFAULT 'pending'
                     CONSTRAINT runs_status_known
                     CHECK (status IN ('pending', 'running', 'completed',
                                       'failed', 'unknown')),
    lock_owner       text,
    lock_expires_at  timestamptz, -- set from the database clock only
    -- fencing token: +1 on every claim; every write after a claim names it
    lease_epoch      bigint      NOT NULL DEFAULT 0
                     CONSTRAINT runs_lease_epoch_not_negative
                     CHECK (lease_epoch >= 0),
    attempts         integer     NOT NULL DEFAULT 0
                     CONSTRAINT runs_attempts_not_negative
                     CHECK (attempts >= 0),
    next_attempt_at  timestamptz,
    deadline_at      timestamptz,
    last_error       text,
    error_class      text,
    source_topic     text,
    source_partition integer,
    source_offset    bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    CONSTRAINT runs_one_row_per_logical_run
        UNIQUE (job, tenant, scheduled_at, version),
    CONSTRAINT runs_completed_has_output
        CHECK (status <> 'completed'
               OR (output IS NOT NULL AND completed_at IS NOT NULL)),
    -- a lease is an owner and an expiry together, held only while running
    CONSTRAINT runs_lease_is_whole
        CHECK ((lock_owner IS NULL) = (lock_expires_at IS NULL)),
    CONSTRAINT runs_only_running_is_leased
        CHECK ((status = 'running') = (lock_owner IS NOT NULL)),
    -- every pending run has a due time, so the sweeper can never lose one
    CONSTRAINT runs_pending_is_due
        CHECK (status <> 'pending' OR next_attempt_at IS NOT NULL)
);

-- Sweeper: retries that are due, and leases that expired.
CREATE INDEX runs_due_retries_idx ON runs (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX runs_expiring_leases_idx ON runs (lock_expires_at)
    WHERE status = 'running';

-- One row per model dispatch, inserted BEFORE the request is sent. A row
-- without an outcome is the evidence that an earlier worker may have
-- generated: the input to the `unknown` decision.
CREATE TABLE attempts (
    run_id              text        NOT NULL REFERENCES runs (run_id),
    attempt_no          integer     NOT NULL
                        CONSTRAINT attempts_attempt_no_positive
                        CHECK (attempt_no > 0),
    lease_epoch         bigint      NOT NULL,
    worker              text        NOT NULL,
    idempotency_key     text        NOT NULL,
    dispatched_at       timestamptz NOT NULL DEFAULT now(),
    outcome             text
                        CONSTRAINT attempts_outcome_known
                        CHECK (outcome IN ('ok', 'transient', 'permanent',
                                           'ambiguous', 'invalid_output',
                                           'not_sent', 'connect_failed',
                                           'cancelled', 'lease_lost')),
    http_status         integer,
    upstream_request_id text,
    prompt_tokens       bigint,
    completion_tokens   bigint,
    cached_tokens       bigint,
    latency_ms          bigint,
    error               text,
    finished_at         timestamptz,
    PRIMARY KEY (run_id, attempt_no),
    CONSTRAINT attempts_outcome_has_finish_time
        CHECK ((outcome IS NULL) = (finished_at IS NULL))
);

-- Notifications not yet delivered: only the pending set, so the relay's
-- scans stay small. Rows are written in the transaction that completes the
-- run and moved to outbox_delivered once the producer has them.
CREATE TABLE outbox (
    run_id         text        NOT NULL REFERENCES runs (run_id),
    channel        text        NOT NULL,
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    delivered_at   timestamptz,
    delivery_count integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, channel)
);

-- Relay: oldest pending first (never page by a sequence: they commit out
-- of order).
CREATE INDEX outbox_pending_by_age_idx ON outbox (created_at);

-- Insert-only audit of delivered notifications. Deleting from outbox and
-- inserting here keeps the pending set small; updating delivered_at in
-- place under a partial index degrades badly under load.
CREATE TABLE outbox_delivered (
    run_id         text        NOT NULL,
    channel        text        NOT NULL,
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL,
    delivered_at   timestamptz NOT NULL DEFAULT now(),
    delivery_count integer     NOT NULL,
    PRIMARY KEY (run_id, channel)
);

-- Belt and braces under the guarded writes: an UPDATE that would break a
-- write-once rule raises, whatever statement issued it. The WHEN clauses do
-- the checking, so the function runs only for a violation, and the column
-- lists keep the triggers off lease renewals.
CREATE FUNCTION rl_refuse_update() RETURNS trigger
LANGUAGE plpgsql
AS $fn$
BEGIN
    RAISE EXCEPTION 'refused update of run %: %', OLD.run_id, TG_ARGV[0]
        USING ERRCODE = 'integrity_constraint_violation';
END
$fn$;

CREATE TRIGGER runs_output_write_once
    BEFORE UPDATE OF output, status ON runs
    FOR EACH ROW
    WHEN ((OLD.output IS NOT NULL
           AND NEW.output IS DISTINCT FROM OLD.output)
          OR (OLD.status = 'completed' AND NEW.status <> 'completed'))
    EXECUTE FUNCTION rl_refuse_update(
        'output is write-once and a completed run stays completed');

CREATE TRIGGER runs_raw_input_write_once
    BEFORE UPDATE OF raw_input ON runs
    FOR EACH ROW
    WHEN (OLD.raw_input IS NOT NULL
          AND NEW.raw_input IS DISTINCT FROM OLD.raw_input)
    EXECUTE FUNCTION rl_refuse_update('raw_input is write-once');

CREATE TRIGGER runs_identity_immutable
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

-- The latest attempt was dispatched and never got an outcome: a previous
-- owner may have generated and died before it could say so.
CREATE FUNCTION rl_ambiguous_prior(p_run_id text) RETURNS boolean
LANGUAGE sql STABLE
AS $fn$
    SELECT coalesce((SELECT a.outcome IS NULL
                       FROM attempts a
                      WHERE a.run_id = p_run_id
                      ORDER BY a.attempt_no DESC
                      LIMIT 1), false)
$fn$;

-- Attempts that may have generated without anyone knowing the result:
-- dispatched with no outcome, or ended ambiguous. Input to the ambiguity
-- policy ("one retry, then unknown").
CREATE FUNCTION rl_ambiguous_attempts(p_run_id text) RETURNS integer
LANGUAGE sql STABLE
AS $fn$
    SELECT count(*)::integer
      FROM attempts a
     WHERE a.run_id = p_run_id
       AND (a.outcome IS NULL OR a.outcome = 'ambiguous')
$fn$;

-- Register and claim a batch of runs in one round trip.
--
-- Arrays are parallel (element k of each describes run k). Each run is
-- inserted if missing, then claimed when its fingerprint matches, its status
-- is pending or running, nobody holds a live lease (the database clock
-- decides) and it is due. A claim sets status running, lock_owner, the
-- expiry now() + p_lease_secs and lease_epoch + 1. One row comes back per
-- input element, in input order (ord), with claim one of
--   won        this worker now holds the lease (new lease_epoch)
--   completed  the stored output is returned
--   leased     another live owner holds it (or an earlier duplicate in this
--              batch won it)
--   conflict   same run_id with another fingerprint, or the logical run
--              exists under another run_id: the row is untouched and
--              nothing stored is returned
--   parked     failed or unknown
--   not_due    pending with next_attempt_at in the future (sweeper's)
-- and ambiguous_prior / ambiguous_attempts as defined above.
--
-- This is plpgsql, not one statement, because the claim must see rows the
-- register step inserted, which a single INSERT .. ON CONFLICT + UPDATE CTE
-- cannot. Rows are inserted and locked in run_id order so batches that
-- share runs queue behind each other instead of deadlocking.
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
    p_worker         text,
    p_lease_secs     double precision)
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
    source_offset    bigint)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
BEGIN
    IF p_worker IS NULL OR p_lease_secs IS NULL OR p_lease_secs <= 0 THEN
        RAISE EXCEPTION 'a claim needs a worker and a positive lease'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    INSERT INTO runs AS r (run_id, job, tenant, scheduled_at, version,
                           fingerprint, request, raw_input, status,
                           next_attempt_at, deadline_at, source_topic,
                           source_partition, source_offset)
    SELECT u.run_id, u.job, u.tenant, u.scheduled_at, u.version,
           u.fingerprint, u.request, nullif(u.input, 'null'::jsonb),
           'pending', now(),
           CASE WHEN u.deadline_secs > 0
                THEN now() + make_interval(secs => u.deadline_secs) END,
           u.topic, u.part, u.off
      FROM unnest(p_run_ids, p_jobs, p_tenants, p_scheduled_ats, p_versions,
                  p_fingerprints, p_requests, p_inputs, p_deadline_secs,
                  p_topics, p_partitions, p_offsets)
           AS u(run_id, job, tenant, scheduled_at, version, fingerprint,
                request, input, deadline_secs, topic, part, off)
     ORDER BY u.run_id
        ON CONFLICT DO NOTHING;

    PERFORM 1
       FROM runs r
      WHERE r.run_id = ANY (p_run_ids)
      ORDER BY r.run_id
        FOR NO KEY UPDATE;

    RETURN QUERY
    WITH i AS (
        SELECT u.run_id, u.fingerprint, u.input, u.ord,
               u.ord = min(u.ord) OVER (PARTITION BY u.run_id) AS first
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
         WHERE i.first
           AND r.run_id = i.run_id
           AND r.fingerprint = i.fingerprint
           AND r.status IN ('pending', 'running')
           AND (r.lock_owner IS NULL OR r.lock_expires_at < now())
           AND (r.next_attempt_at IS NULL OR r.next_attempt_at <= now())
        RETURNING r.run_id, r.lease_epoch, r.raw_input
    ), c AS (
        SELECT i.ord, i.run_id, cur.status AS cur_status,
               CASE
               WHEN cur.run_id IS NULL OR cur.fingerprint <> i.fingerprint
                   THEN 'conflict'
               WHEN i.first AND w.run_id IS NOT NULL THEN 'won'
               WHEN cur.status = 'completed' THEN 'completed'
               WHEN cur.status IN ('failed', 'unknown') THEN 'parked'
               WHEN cur.status = 'pending' AND cur.next_attempt_at > now()
                   THEN 'not_due'
               ELSE 'leased'
               END AS claim,
               cur.fingerprint, cur.lease_epoch, cur.attempts,
               cur.deadline_at, cur.job, cur.tenant, cur.scheduled_at,
               cur.version, cur.request, cur.raw_input, cur.output,
               cur.source_topic, cur.source_partition, cur.source_offset,
               w.lease_epoch AS won_epoch, w.raw_input AS won_raw_input
          FROM i
          LEFT JOIN runs cur ON cur.run_id = i.run_id
          LEFT JOIN won w ON w.run_id = i.run_id
    )
    SELECT c.ord, c.run_id, c.claim,
           CASE WHEN c.claim = 'won' THEN 'running' ELSE c.cur_status END,
           c.fingerprint,
           CASE WHEN c.claim = 'won' THEN c.won_epoch ELSE c.lease_epoch END,
           c.attempts,
           c.claim <> 'conflict' AND rl_ambiguous_prior(c.run_id),
           CASE WHEN c.claim <> 'conflict'
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
           c.source_topic, c.source_partition, c.source_offset
      FROM c
     ORDER BY c.ord;
END
$fn$;

-- Complete a run and queue its notifications in one transaction.
--
-- Only the current owner (p_worker, p_epoch) of a running run may complete
-- it. Outbox rows are inserted only by the call that makes the transition,
-- so a run has at most one row per channel across outbox and
-- outbox_delivered, even after the relay moved the first one. A NULL
-- payload (or p_payloads NULL) queues the default envelope: run identity,
-- channel and output. Returns one
-- row: result 'completed' (outbox_rows inserted), 'already_completed' (the
-- stored output; nothing changed), 'stale' or 'not_found'.
CREATE FUNCTION rl_complete_run(
    p_run_id   text,
    p_worker   text,
    p_epoch    bigint,
    p_output   jsonb,
    p_channels text[],
    p_payloads jsonb[])
RETURNS TABLE (result text, output jsonb, outbox_rows integer)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    v_status text;
    v_output jsonb;
    v_owner  text;
    v_epoch  bigint;
    v_rows   integer := 0;
BEGIN
    IF p_output IS NULL OR p_output = 'null'::jsonb THEN
        RAISE EXCEPTION 'run % cannot complete without output', p_run_id
            USING ERRCODE = 'null_value_not_allowed';
    END IF;

    SELECT r.status, r.output, r.lock_owner, r.lease_epoch
      INTO v_status, v_output, v_owner, v_epoch
      FROM runs r
     WHERE r.run_id = p_run_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::jsonb, 0;
        RETURN;
    END IF;
    IF v_status = 'completed' THEN
        RETURN QUERY SELECT 'already_completed'::text, v_output, 0;
        RETURN;
    END IF;
    IF v_status <> 'running' OR v_owner IS DISTINCT FROM p_worker
       OR v_epoch <> p_epoch THEN
        RETURN QUERY SELECT 'stale'::text, NULL::jsonb, 0;
        RETURN;
    END IF;

    UPDATE runs r
       SET status = 'completed',
           output = p_output,
           lock_owner = NULL,
           lock_expires_at = NULL,
           next_attempt_at = NULL,
           last_error = NULL,
           error_class = NULL,
           completed_at = now(),
           updated_at = now()
     WHERE r.run_id = p_run_id;

    INSERT INTO outbox (run_id, channel, payload)
    SELECT r.run_id, m.channel,
           coalesce(m.payload,
                    jsonb_build_object(
                        'run_id', r.run_id,
                        'job', r.job,
                        'tenant', r.tenant,
                        'scheduled_at',
                        to_char(r.scheduled_at AT TIME ZONE 'UTC',
                                'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
                        'version', r.version,
                        'channel', m.channel,
                        'output', r.output))
      FROM unnest(p_channels, p_payloads) AS m(channel, payload)
      JOIN runs r ON r.run_id = p_run_id
     WHERE m.channel IS NOT NULL
     ORDER BY m.channel
        ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_rows = ROW_COUNT;

    RETURN QUERY SELECT 'completed'::text, p_output, v_rows;
END
$fn$;
