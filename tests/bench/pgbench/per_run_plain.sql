-- pgbench script: ONE run through the ledger's tables with plain SQL, no
-- functions: what a minimal exactly-once ledger has to write per run, in
-- the same steps, transactions and round trips as per_run.sql, so the two
-- lines compare like for like. Run with -M prepared; one pgbench
-- transaction = one run, so tps = runs/s.
--
--   1 register + claim   INSERT INTO runs ... ON CONFLICT DO NOTHING with
--                        the lease set (running, owner, expiry, epoch 1),
--                        RETURNING the epoch
--   2 record dispatch    the attempt row, guarded by the lease (owner and
--                        epoch), counted on the run (runs.attempts + 1)
--   3 outcome + complete one statement, so one transaction: the attempt's
--                        'ok' outcome, the run completed only while this
--                        worker holds that epoch, and one outbox row per
--                        channel (email, slack) for the run completed
--   4 relay              BEGIN; lock the 2 oldest pending outbox rows
--                        (SKIP LOCKED, through the age index); move them to
--                        outbox_delivered; COMMIT
--                        (the relay needs the lock held while it produces)
--
-- The tables' constraints, indexes and triggers all apply (they are the
-- ledger's). Left out on purpose, because a minimal ledger does not need
-- them for one run at a time: budgets, deadlines, the redo of a lost
-- dispatch COMMIT, the ambiguous-attempt bookkeeping, the checks on array
-- arguments. When the schema's tables change, change this file with them.
-- The bench's trickle_floor line runs steps 1 and 2 alone: the text up to
-- the line that opens step 3 ("WITH outcome AS ("); claim_dispatch_plain.sql
-- writes the same rows in one statement for trickle_floor_one, so change
-- it with them.
-- Each run is distinct: a random 63-bit number names its version and its
-- run_id, 64 hex digits: a hash of that number and the client id (16),
-- the number (32) and the client id (16). The hash first makes ids differ
-- from their first digits, as the service's sha256 ids do, so comparing
-- two costs what it costs in production whatever the database's collation
-- (zero-padded numbers shared 32 leading digits, which a non-C collation
-- compares digit by digit). The client id names the tenant.

\set n random(1, 9000000000000000000)

INSERT INTO runs (run_id, job, tenant, scheduled_at, version, fingerprint,
                  request, raw_input, status, lock_owner, lock_expires_at,
                  lease_epoch, source_topic, source_partition, source_offset)
VALUES (lpad(to_hex(hashint8extended(:n::int8, :client_id::int8)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(:client_id::int8), 16, '0'),
        'bench-ceiling', 'tenant-' || :client_id::text,
        '2026-08-07T09:00:00+00:00', 'v' || :n::text,
        '5f0e7c2ae1f6a1b9c6c7bd6d1f3f0a4d3b2e8f9a0c1d2e3f4a5b6c7d8e9f0a1b',
        '{"notify":["email","slack"],"request":{"messages":[{"content":"summarise {{input}}","role":"user"}],"model":"stub-1","temperature":0}}',
        '{"doc":1}', 'running', 'bench-ceiling-' || :client_id::text,
        now() + interval '30 seconds', 1,
        'bench.ceiling.schedules', 0, :n::int8)
ON CONFLICT DO NOTHING
RETURNING run_id AS rid, lease_epoch AS ep \gset

WITH bumped AS (
  UPDATE runs SET attempts = attempts + 1, updated_at = now()
   WHERE run_id = :rid AND lock_owner = 'bench-ceiling-' || :client_id::text
     AND lease_epoch = :ep::int8
  RETURNING run_id, attempts
)
INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker, idempotency_key)
SELECT run_id, attempts, :ep::int8, 'bench-ceiling-' || :client_id::text, run_id
  FROM bumped
RETURNING attempt_no AS att \gset

WITH outcome AS (
  UPDATE attempts
     SET outcome = 'ok', http_status = 200, upstream_request_id = 'req-' || :n::text,
         prompt_tokens = 6, completion_tokens = 24, cached_tokens = 0,
         latency_ms = 0, finished_at = now()
   WHERE run_id = :rid AND attempt_no = :att::int4 AND outcome IS NULL
), done AS (
  UPDATE runs
     SET status = 'completed',
         output = ('{"text":"stub summary of ' || :n::text || ' (generation ' || :n::text || ')","model":"stub-1","upstream_request_id":"req-' || :n::text || '","usage":{"prompt_tokens":6,"completion_tokens":24,"cached_tokens":0}}')::jsonb,
         lock_owner = NULL, lock_expires_at = NULL, completed_at = now(),
         updated_at = now()
   WHERE run_id = :rid AND lock_owner = 'bench-ceiling-' || :client_id::text
     AND lease_epoch = :ep::int8
  RETURNING run_id
)
INSERT INTO outbox (run_id, channel)
SELECT d.run_id, ch.channel
  FROM done d CROSS JOIN (VALUES ('email'), ('slack')) AS ch(channel);

BEGIN;
SELECT coalesce(array_agg(run_id), '{}') AS orids,
       coalesce(array_agg(channel), '{}') AS ochs,
       coalesce(sum(octet_length(payload::text)), 0) AS obytes
  FROM (SELECT o.run_id, o.channel,
               coalesce(o.explicit_payload, rl_envelope(r.run_id, r.job, r.tenant, r.scheduled_at, r.version, o.channel, r.output)) AS payload
          FROM (SELECT run_id, channel, explicit_payload
                  FROM outbox
                 ORDER BY created_at
                 LIMIT 2
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
