-- pgbench script: a BATCH of :b runs (64, the size zero's statements carry)
-- through the service's own statements (common/src/db/'s named
-- statements, the text of per_run.sql), each carrying the batch: what
-- the ledger's functions cost a run when they carry a batch, beside
-- per_batch_plain.sql (the same writes as plain statements). Run with
-- -M prepared; one pgbench transaction = :b runs.
--
--   1 register + claim   claim_runs: rl_claim_runs, all :b runs new, with
--                        :b model slots (p_claim_max), no traceparent
--   2 record dispatch    dispatch_runs: rl_dispatch_runs
--   3 outcome + complete complete_runs: rl_complete_runs, 2 channels a run
--   4 relay              BEGIN; lock_pending_outbox (2 x :b rows due, SKIP
--                        LOCKED, at most 16 MiB: RUNLEDGER_RELAY_BATCH_BYTES'
--                        default); finish_outbox_rows, every row delivered;
--                        COMMIT (outbox.c's statements)
--
-- The service sends its arrays as text; here they are built in SQL
-- (ARRAY(SELECT ... FROM generate_series)), so the parsing of text arrays
-- is left out; the relay's session settings (relay_settings in outbox.c)
-- are not applied; bench.sh vacuums the outbox once a second meanwhile, as
-- the relay does. When common/src/db/ changes these statements, change
-- this file with them. Run ids as in per_batch_plain.sql: a hash first,
-- so they differ from their first digits as the service's sha256 ids do.

\set n random(1, 9000000000000000000)
\set b 64

SELECT count(*) AS won
  FROM rl_claim_runs(
       ARRAY(SELECT lpad(to_hex(hashint8extended(:n::int8, g)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(g), 16, '0') FROM generate_series(1, :b) g),
       array_fill('bench-batch'::text, ARRAY[:b::int]),
       ARRAY(SELECT 'tenant-' || (:client_id * 16 + g % 16)::text FROM generate_series(1, :b) g),
       array_fill('2026-08-07T09:00:00+00:00'::timestamptz, ARRAY[:b::int]),
       ARRAY(SELECT 'v' || :n::text || '-' || g::text FROM generate_series(1, :b) g),
       array_fill('5f0e7c2ae1f6a1b9c6c7bd6d1f3f0a4d3b2e8f9a0c1d2e3f4a5b6c7d8e9f0a1b'::text, ARRAY[:b::int]),
       array_fill('{"notify":["email","slack"],"request":{"messages":[{"content":"summarise {{input}}","role":"user"}],"model":"stub-1","temperature":0}}'::jsonb, ARRAY[:b::int]),
       array_fill('{"doc":1}'::jsonb, ARRAY[:b::int]),
       array_fill(3600::float8, ARRAY[:b::int]),
       array_fill('bench.batch.schedules'::text, ARRAY[:b::int]),
       array_fill(0, ARRAY[:b::int]),
       ARRAY(SELECT g::int8 FROM generate_series(1, :b) g),
       array_fill(NULL::text, ARRAY[:b::int]),
       'bench-batch-' || :client_id::text,
       30::float8,
       :b)
 WHERE claim = 'won' \gset

SELECT count(*) AS sent
  FROM rl_dispatch_runs(
       ARRAY(SELECT lpad(to_hex(hashint8extended(:n::int8, g)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(g), 16, '0') FROM generate_series(1, :b) g),
       array_fill(1::int8, ARRAY[:b::int]),
       ARRAY(SELECT lpad(to_hex(hashint8extended(:n::int8, g)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(g), 16, '0') FROM generate_series(1, :b) g),
       array_fill(1030::int8, ARRAY[:b::int]),
       'bench-batch-' || :client_id::text,
       1000::int8) \gset

SELECT count(*) AS done
  FROM rl_complete_runs(
       ARRAY(SELECT lpad(to_hex(hashint8extended(:n::int8, g)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(g), 16, '0') FROM generate_series(1, :b) g),
       array_fill(1::int8, ARRAY[:b::int]),
       'bench-batch-' || :client_id::text,
       ARRAY(SELECT ('{"text":"stub summary of ' || :n::text || '-' || g::text || '","model":"stub-1","upstream_request_id":"req-' || g::text || '","usage":{"prompt_tokens":6,"completion_tokens":24,"cached_tokens":0}}')::jsonb FROM generate_series(1, :b) g),
       ARRAY(SELECT lpad(to_hex(hashint8extended(:n::int8, g / 2)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(g / 2), 16, '0') FROM generate_series(2, 2 * :b + 1) g),
       ARRAY(SELECT CASE g % 2 WHEN 0 THEN 'email' ELSE 'slack' END FROM generate_series(2, 2 * :b + 1) g),
       array_fill(1, ARRAY[:b::int]),
       array_fill(200, ARRAY[:b::int]),
       ARRAY(SELECT 'req-' || g::text FROM generate_series(1, :b) g),
       array_fill(6::int8, ARRAY[:b::int]), array_fill(24::int8, ARRAY[:b::int]),
       array_fill(0::int8, ARRAY[:b::int]), array_fill(0::int8, ARRAY[:b::int]))
 WHERE result = 'completed' \gset

BEGIN;
SELECT coalesce(array_agg(ctid), '{}') AS otids,
       coalesce(sum(octet_length(payload::text)), 0) AS obytes,
       coalesce(array_agg(run_id), '{}') AS orids,
       count(*) AS nrows
  FROM (SELECT o.run_id, o.channel, o.job, o.tenant,
               coalesce(o.explicit_payload, rl_envelope(o.run_id, o.job, o.tenant, o.scheduled_at, o.version, o.channel, o.output)) AS payload,
               o.delivery_count, o.ctid, o.traceparent, o.lease_epoch, o.upto
          FROM (SELECT s.*,
                       sum(s.est) OVER (ORDER BY s.due_at ROWS UNBOUNDED PRECEDING) AS upto
                  FROM (SELECT l.ctid, l.run_id, l.channel, l.explicit_payload,
                               l.delivery_count, l.due_at, r.job, r.tenant,
                               r.scheduled_at, r.version, r.output,
                               r.traceparent, r.lease_epoch,
                               512 + coalesce(
                                 CASE WHEN pg_column_compression(p.v) IS NULL
                                      THEN 2 * pg_column_size(p.v)
                                      ELSE octet_length(p.v::text) END, 0) AS est
                          FROM (SELECT ob.ctid, ob.run_id, ob.channel,
                                       ob.explicit_payload, ob.delivery_count,
                                       ob.due_at
                                  FROM outbox ob
                                 WHERE ob.due_at <= now()
                                 ORDER BY ob.due_at
                                 LIMIT 2 * :b
                                   FOR UPDATE SKIP LOCKED) l
                          JOIN runs r ON r.run_id = l.run_id
                         CROSS JOIN LATERAL (SELECT coalesce(l.explicit_payload, r.output) AS v) p) s) o
         WHERE 16777216 <= 0 OR o.upto - o.est < 16777216
         ORDER BY o.due_at) locked \gset
WITH b AS (
  SELECT b.tid, b.run_id, b.fate, b.reason
    FROM unnest(:otids::tid[], :orids::text[],
                array_fill('delivered'::text, ARRAY[:nrows::int]),
                array_fill(NULL::text, ARRAY[:nrows::int]))
         AS b(tid, run_id, fate, reason)
), moved AS (
  DELETE FROM outbox o USING b
   WHERE o.ctid = b.tid AND o.run_id = b.run_id
     AND b.fate = 'delivered'
  RETURNING o.run_id, o.channel, o.explicit_payload, o.created_at,
            o.delivery_count
), audit AS (
  INSERT INTO outbox_delivered (run_id, channel, explicit_payload, created_at,
                                delivered_at, delivery_count)
  SELECT m.run_id, m.channel, m.explicit_payload, m.created_at, now(),
         m.delivery_count + 1
    FROM moved m
      ON CONFLICT DO NOTHING
  RETURNING 1
)
SELECT (SELECT count(*) FROM moved);
COMMIT;
