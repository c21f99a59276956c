-- pgbench script: the part of ONE run that `trickle`'s overhead holds,
-- with the plain statements of per_run_plain.sql (steps 1 and 2, the same
-- text): register + claim, then record the dispatch, each its own
-- transaction and commit. The overhead a run shows in `trickle` runs from
-- its claim's start to its completion's start less the model call: these
-- two statements and their commits, plus the hand-overs between the
-- service's threads, the HTTP call's setup and the completer. Run one
-- client at the trickle's rate (pgbench --rate) with a latency log; the
-- latencies, less their schedule lag, are the floor this machine puts
-- under that overhead. When per_run_plain.sql changes, change this file
-- with it.

\set n random(1, 9000000000000000000)

INSERT INTO runs (run_id, job, tenant, scheduled_at, version, fingerprint,
                  request, raw_input, status, lock_owner, lock_expires_at,
                  lease_epoch, source_topic, source_partition, source_offset)
VALUES (lpad(to_hex(:n::int8), 48, '0') || lpad(to_hex(:client_id::int8), 16, '0'),
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
