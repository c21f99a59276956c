-- pgbench script: ONE run through the ledger, one statement at a time,
-- the statements consumer/ledger/ issues per run through common/src/db/
-- (same SQL as common/src/db/'s named statements; run with -M prepared as the service
-- uses PQexecPrepared), each carrying one run where the service carries a
-- whole batch. One pgbench transaction = one run, so tps = runs/s. As of
-- 2026-11-30 (schema/007_batches.sql; rl_claim_runs inserts a new run
-- claimed since 008, and queuing outbox rows notifies the relays since
-- 009, which these same calls pick up):
--
--   1 register + claim   claim_runs: rl_claim_runs, with one model slot
--                        (p_claim_max 1, as the service passes its free
--                        slots) and no traceparent
--   2 record dispatch    dispatch_runs: rl_dispatch_runs (estimate, wait
--                        ms; no budgets row: the set-based path)
--   3 outcome + complete complete_runs: rl_complete_runs, the attempt's
--                        'ok' outcome and the completion with 2 channels
--                        (email, slack)
--   4 relay              BEGIN; lock_pending_outbox (the 2 oldest pending
--                        rows, SKIP LOCKED, through the age index
--                        before the join: 2026-12-01); move_delivered_outbox
--                        (by ctid); COMMIT
--                        (the service does this per batch of up to 1000)
--
-- store_raw_input_once is not issued: rl_claim_runs stores the input when
-- the event carries one, and the service then skips that statement.
-- per_run_single.sql is the same run through the single-run forms the
-- service used before the batch functions (rl_dispatch_within_budget,
-- rl_complete_run): the cheapest way to write one run at a time, so the
-- ceiling line is the better of the two.
-- When common/src/db/ or consumer/ledger/ change what a run costs, change this file with them.
-- Each run is distinct: a random 63-bit number names its version and its
-- run_id, 64 hex digits: a hash of that number and the client id (16),
-- the number (32) and the client id (16). The hash first makes ids differ
-- from their first digits, as the service's sha256 ids do, so comparing
-- two costs what it costs in production whatever the database's collation
-- (zero-padded numbers shared 32 leading digits, which a non-C collation
-- compares digit by digit). The client id names the tenant.

\set n random(1, 9000000000000000000)

SELECT run_id AS rid, lease_epoch AS ep, claim AS cl
  FROM rl_claim_runs(
       ARRAY[lpad(to_hex(hashint8extended(:n::int8, :client_id::int8)), 16, '0') || lpad(to_hex(:n::int8), 32, '0') || lpad(to_hex(:client_id::int8), 16, '0')]::text[],
       ARRAY['bench-ceiling']::text[],
       ARRAY['tenant-' || :client_id::text]::text[],
       ARRAY['2026-08-07T09:00:00+00:00']::timestamptz[],
       ARRAY['v' || :n::text]::text[],
       ARRAY['5f0e7c2ae1f6a1b9c6c7bd6d1f3f0a4d3b2e8f9a0c1d2e3f4a5b6c7d8e9f0a1b']::text[],
       ARRAY['{"notify":["email","slack"],"request":{"messages":[{"content":"summarise {{input}}","role":"user"}],"model":"stub-1","temperature":0}}']::jsonb[],
       ARRAY['{"doc":1}']::jsonb[],
       ARRAY[3600]::float8[],
       ARRAY['bench.ceiling.schedules']::text[],
       ARRAY[0]::int4[],
       ARRAY[:n::int8]::int8[],
       ARRAY[NULL]::text[],
       'bench-ceiling-' || :client_id::text,
       30::float8,
       1) \gset

SELECT result AS dres, attempt_no AS att
  FROM rl_dispatch_runs(ARRAY[:rid]::text[], ARRAY[:ep]::int8[],
       ARRAY[:rid]::text[], ARRAY[1030]::int8[], 'bench-ceiling-' || :client_id::text,
       1000::int8) \gset

SELECT ord, result, outbox_rows, outcome_recorded
  FROM rl_complete_runs(ARRAY[:rid]::text[], ARRAY[:ep]::int8[],
       'bench-ceiling-' || :client_id::text,
       ARRAY[('{"text":"stub summary of ' || :n::text || ' (generation ' || :n::text || ')","model":"stub-1","upstream_request_id":"req-' || :n::text || '","usage":{"prompt_tokens":6,"completion_tokens":24,"cached_tokens":0}}')]::jsonb[],
       ARRAY[:rid, :rid]::text[], ARRAY['email', 'slack']::text[],
       ARRAY[:att]::int4[],
       ARRAY[200]::int4[], ARRAY['req-' || :n::text]::text[],
       ARRAY[6]::int8[], ARRAY[24]::int8[], ARRAY[0]::int8[],
       ARRAY[0]::int8[]);

BEGIN;
SELECT coalesce(array_agg(ctid), '{}') AS otids,
       coalesce(sum(octet_length(payload::text)), 0) AS obytes,
       coalesce(array_agg(run_id), '{}') AS orids
  FROM (SELECT o.run_id, o.channel, r.job, r.tenant,
               coalesce(o.explicit_payload, rl_envelope(r.run_id, r.job, r.tenant, r.scheduled_at, r.version, o.channel, r.output)) AS payload,
               o.delivery_count, o.ctid
          FROM (SELECT ob.ctid, ob.run_id, ob.channel, ob.explicit_payload,
                       ob.delivery_count, ob.created_at
                  FROM outbox ob
                 ORDER BY ob.created_at
                 LIMIT 2::int8
                   FOR UPDATE SKIP LOCKED) o
          JOIN runs r ON r.run_id = o.run_id
         ORDER BY o.created_at) locked \gset
WITH moved AS (
  DELETE FROM outbox o
   WHERE true AND o.ctid = ANY (:otids::tid[])
     AND o.run_id = ANY (:orids::text[])
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
), retry AS (
  UPDATE outbox o SET delivery_count = o.delivery_count + 1
   WHERE NOT true AND o.ctid = ANY (:otids::tid[])
     AND o.run_id = ANY (:orids::text[])
  RETURNING 1
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM retry);
COMMIT;
