-- The ledger's four per-run tables with the columns per_batch_plain.sql
-- writes and nothing else: no CHECK constraints, no triggers, no foreign
-- keys, no partial indexes, no unique index on the logical run (the run id
-- alone), one index on the outbox for the relay's oldest-first read; the
-- ledger's fillfactors (schema/025). The floor_batched line runs the same
-- script on these tables and on the ledger's own: the difference is what
-- the ledger's guards cost a run. The standard envelope is built from the
-- run when read, as the ledger builds it (schema/026): rl_envelope is the
-- ledger's function.
CREATE TABLE runs (
    run_id text PRIMARY KEY, job text NOT NULL, tenant text NOT NULL,
    scheduled_at timestamptz NOT NULL, version text NOT NULL,
    fingerprint text NOT NULL, request jsonb NOT NULL, raw_input jsonb,
    output jsonb, status text NOT NULL DEFAULT 'pending', lock_owner text,
    lock_expires_at timestamptz, lease_epoch bigint NOT NULL DEFAULT 0,
    attempts integer NOT NULL DEFAULT 0, next_attempt_at timestamptz,
    deadline_at timestamptz, last_error text, error_class text,
    source_topic text, source_partition integer, source_offset bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(), completed_at timestamptz
) WITH (fillfactor = 50);
CREATE TABLE attempts (
    run_id text NOT NULL, attempt_no integer NOT NULL,
    lease_epoch bigint NOT NULL, worker text NOT NULL,
    idempotency_key text NOT NULL,
    dispatched_at timestamptz NOT NULL DEFAULT now(), outcome text,
    http_status integer, upstream_request_id text, prompt_tokens bigint,
    completion_tokens bigint, cached_tokens bigint, latency_ms bigint,
    error text, finished_at timestamptz,
    PRIMARY KEY (run_id, attempt_no)
) WITH (fillfactor = 40);
CREATE TABLE outbox (
    run_id text NOT NULL, channel text NOT NULL, explicit_payload jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    delivery_count integer NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, channel)
);
CREATE INDEX outbox_created_at_idx ON outbox (created_at);
CREATE TABLE outbox_delivered (
    run_id text NOT NULL, channel text NOT NULL, explicit_payload jsonb,
    created_at timestamptz NOT NULL, delivered_at timestamptz NOT NULL,
    delivery_count integer NOT NULL,
    PRIMARY KEY (run_id, channel)
);

CREATE FUNCTION rl_envelope(p_run_id text, p_job text, p_tenant text,
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
