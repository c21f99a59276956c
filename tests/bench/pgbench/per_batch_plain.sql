-- pgbench script: a BATCH of :b runs (64, the size zero's statements carry)
-- through the ledger's tables with plain SQL, no functions: the writes of
-- per_run_plain.sql, statement for statement, each statement carrying the
-- batch, as the service's do. What PostgreSQL's CPU a run is for these
-- writes when commits and round trips are shared: the floor under zero's
-- cpu_s_postgres / runs. Run with -M prepared; one pgbench transaction =
-- :b runs.
--
--   1 register + claim   the batch's runs inserted running (lease set)
--   2 record dispatch    each run's attempt, runs.attempts + 1
--   3 outcome + complete the attempts' 'ok', the runs completed, two outbox
--                        rows a run
--   4 relay              BEGIN; lock 2 x :b pending outbox rows (SKIP
--                        LOCKED, oldest first); move them to
--                        outbox_delivered; COMMIT
--
-- With -D relay=0 step 4 only reads the rows (no lock, no move): the
-- writes of an outbox written once and read by a cursor.
-- The run ids of a batch: a hash of a random 63-bit number and the run's
-- number in the batch (16 hex digits), that number (32) and the run's
-- number (16), so every batch is distinct, and ids differ from their
-- first digits and fall at random places in the indexes, as the
-- service's sha256 ids do.

\set n random(1, 9000000000000000000)
\set b 64

INSERT INTO runs (run_id, job, tenant, scheduled_at, version, fingerprint,
                  request, raw_input, status, lock_owner, lock_expires_at,
                  lease_epoch, source_topic, source_partition, source_offset)
SELECT lpad(to_hex(hashint8extended(:n::int8, g)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(g), 16, '0'),
       'bench-floor', 'tenant-' || :client_id::text,
       '2026-08-07T09:00:00+00:00', 'v' || :n::text || '-' || g::text,
       '5f0e7c2ae1f6a1b9c6c7bd6d1f3f0a4d3b2e8f9a0c1d2e3f4a5b6c7d8e9f0a1b',
       '{"notify":["email","slack"],"request":{"messages":[{"content":"summarise {{input}}","role":"user"}],"model":"stub-1","temperature":0}}',
       '{"doc":1}', 'running', 'bench-floor-' || :client_id::text,
       now() + interval '30 seconds', 1,
       'bench.floor.schedules', 0, g
  FROM generate_series(1, :b) g
    ON CONFLICT DO NOTHING;

WITH bumped AS (
  UPDATE runs SET attempts = attempts + 1, updated_at = now()
   WHERE run_id = ANY (ARRAY(SELECT lpad(to_hex(hashint8extended(:n::int8, g)), 16, '0')
                                    || lpad(to_hex(:n::int8), 32, '0')
                                    || lpad(to_hex(g), 16, '0')
                               FROM generate_series(1, :b) g))
     AND lock_owner = 'bench-floor-' || :client_id::text AND lease_epoch = 1
  RETURNING run_id, attempts
)
INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker, idempotency_key)
SELECT run_id, attempts, 1, 'bench-floor-' || :client_id::text, run_id
  FROM bumped;

WITH ids AS (
  SELECT ARRAY(SELECT lpad(to_hex(hashint8extended(:n::int8, g)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(g), 16, '0')
                 FROM generate_series(1, :b) g) AS a
), outcome AS (
  UPDATE attempts
     SET outcome = 'ok', http_status = 200, upstream_request_id = 'req-' || run_id,
         prompt_tokens = 6, completion_tokens = 24, cached_tokens = 0,
         latency_ms = 0, finished_at = now()
   WHERE run_id = ANY ((SELECT a FROM ids)::text[]) AND attempt_no = 1 AND outcome IS NULL
), done AS (
  UPDATE runs
     SET status = 'completed',
         output = ('{"text":"stub summary of ' || run_id || '","model":"stub-1","upstream_request_id":"req-' || run_id || '","usage":{"prompt_tokens":6,"completion_tokens":24,"cached_tokens":0}}')::jsonb,
         lock_owner = NULL, lock_expires_at = NULL, completed_at = now(),
         updated_at = now()
   WHERE run_id = ANY ((SELECT a FROM ids)::text[])
     AND lock_owner = 'bench-floor-' || :client_id::text AND lease_epoch = 1
  RETURNING run_id
)
INSERT INTO outbox (run_id, channel)
SELECT d.run_id, ch.channel
  FROM done d CROSS JOIN (VALUES ('email'), ('slack')) AS ch(channel);

\if :relay
BEGIN;
SELECT coalesce(array_agg(run_id), '{}') AS orids,
       coalesce(array_agg(channel), '{}') AS ochs,
       coalesce(sum(octet_length(payload::text)), 0) AS obytes
  FROM (SELECT o.run_id, o.channel,
               coalesce(o.explicit_payload, rl_envelope(r.run_id, r.job, r.tenant, r.scheduled_at, r.version, o.channel, r.output)) AS payload
          FROM (SELECT run_id, channel, explicit_payload
                  FROM outbox
                 ORDER BY created_at
                 LIMIT 2 * :b
                   FOR UPDATE SKIP LOCKED) o
          JOIN runs r ON r.run_id = o.run_id) locked \gset
WITH moved AS (
  DELETE FROM outbox o
   USING unnest(:orids::text[], :ochs::text[]) AS m(run_id, channel)
   WHERE o.run_id = m.run_id AND o.channel = m.channel
  RETURNING o.run_id, o.channel, o.explicit_payload, o.created_at, o.delivery_count
)
INSERT INTO outbox_delivered (run_id, channel, explicit_payload, created_at,
                              delivered_at, delivery_count)
SELECT run_id, channel, explicit_payload, created_at, now(), delivery_count + 1
  FROM moved;
COMMIT;
\else
SELECT coalesce(sum(octet_length(coalesce(o.explicit_payload, rl_envelope(r.run_id, r.job, r.tenant, r.scheduled_at, r.version, o.channel, r.output))::text)), 0)
  FROM (SELECT ARRAY(SELECT lpad(to_hex(hashint8extended(:n::int8, g)), 16, '0')
                            || lpad(to_hex(:n::int8), 32, '0')
                            || lpad(to_hex(g), 16, '0')
                       FROM generate_series(1, :b) g) AS a) ids
  JOIN runs r ON r.run_id = ANY (ids.a)
  JOIN outbox o ON o.run_id = r.run_id AND o.run_id = ANY (ids.a);
\endif
