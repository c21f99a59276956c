-- pgbench script: steps 1 and 2 of per_run_plain.sql (register + claim,
-- then the dispatch record) as ONE statement and so one transaction and
-- one commit: the run inserted running, its lease taken and its first
-- attempt counted, and the attempt row inserted from what that insert
-- returns. It is what a ledger that claims a run and records its dispatch
-- at once could reach at best, beside trickle_floor's two statements.
-- The same rows and values as per_run_plain.sql; when that file's steps 1
-- and 2 change, change this one with them. Run with -M prepared, one
-- client, at a fixed rate (bench.sh's trickle_floor_one line).

\set n random(1, 9000000000000000000)

WITH claimed AS (
  INSERT INTO runs (run_id, job, tenant, scheduled_at, version, fingerprint,
                    request, raw_input, status, lock_owner, lock_expires_at,
                    lease_epoch, attempts, source_topic, source_partition,
                    source_offset)
  VALUES (lpad(to_hex(hashint8extended(:n::int8, :client_id::int8)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(:client_id::int8), 16, '0'),
          'bench-ceiling', 'tenant-' || :client_id::text,
          '2026-08-07T09:00:00+00:00', 'v' || :n::text,
          '5f0e7c2ae1f6a1b9c6c7bd6d1f3f0a4d3b2e8f9a0c1d2e3f4a5b6c7d8e9f0a1b',
          '{"notify":["email","slack"],"request":{"messages":[{"content":"summarise {{input}}","role":"user"}],"model":"stub-1","temperature":0}}',
          '{"doc":1}', 'running', 'bench-ceiling-' || :client_id::text,
          now() + interval '30 seconds', 1, 1,
          'bench.ceiling.schedules', 0, :n::int8)
  ON CONFLICT DO NOTHING
  RETURNING run_id, lease_epoch, attempts
)
INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker, idempotency_key)
SELECT run_id, attempts, lease_epoch, 'bench-ceiling-' || :client_id::text, run_id
  FROM claimed
RETURNING attempt_no AS att \gset
