-- tests/bench/grown_prefill.sql: the `grown` scenario's history, run by
-- bench.sh with psql -v n=RUNS on a freshly migrated ledger before the
-- consumer starts.
--
-- n finished runs as the service leaves them: runs.status 'completed'
-- with output and completed_at, one 'ok' attempt each, and the two
-- notifications (email, slack) already relayed to outbox_delivered (their
-- standard envelopes built from the run, no payload stored); the
-- outbox itself stays empty, as it is between bursts. created_at grows
-- with the run's number over the past 30 days (the heap in time order,
-- as appends leave it), run_id is a sha256 in hex like the real ones, so
-- the B-trees keyed by it are entered at random places, in insertion
-- order, as production fills them. Jobs grown-job-0..49 of tenants
-- tenant-0..63 (gen_events.py's tenants; the measured job is another one).
--
-- Constraints: run_id and fingerprint match ^[0-9a-f]{64}$, a completed
-- run has output and completed_at, no lease (lock_owner NULL) unless
-- running, (job, tenant, scheduled_at, version) is unique (scheduled_at
-- is distinct per run), an attempt's outcome has its finished_at and its
-- run exists. The triggers on runs and attempts fire on UPDATE only, the
-- outbox's on INSERT into outbox: none fires here.
\set ON_ERROR_STOP on

INSERT INTO runs (run_id, job, tenant, scheduled_at, version, fingerprint,
                  request, raw_input, output, status, lease_epoch, attempts,
                  source_topic, source_partition, source_offset,
                  created_at, updated_at, completed_at)
SELECT encode(sha256(convert_to('grown-run-' || g.i, 'UTF8')), 'hex'),
       'grown-job-' || g.i % 50,
       'tenant-' || g.i % 64,
       g.at - interval '2 seconds',
       'v1',
       encode(sha256(convert_to('grown-fingerprint-' || g.i, 'UTF8')), 'hex'),
       '{"model": "stub-1", "temperature": 0, "messages": [{"role": "user", "content": "summarise {{input}}"}]}'::jsonb,
       jsonb_build_object('doc', g.i),
       jsonb_build_object('text', 'stub answer to summarise {"doc":' || g.i || '}',
                          'model', 'stub-1',
                          'upstream_request_id', 'chatcmpl-' || g.i,
                          'usage', '{"prompt_tokens": 12, "completion_tokens": 9, "cached_tokens": 0}'::jsonb),
       'completed', 1, 1,
       'bench.grown.schedules', g.i % 4, g.i / 4,
       g.at, g.at + interval '40 ms', g.at + interval '40 ms'
  FROM (SELECT i, now() - interval '30 days'
                  + make_interval(secs => i * 2592000.0 / :n) AS at
          FROM generate_series(1, :n) i) g;

INSERT INTO attempts (run_id, attempt_no, lease_epoch, worker,
                      idempotency_key, dispatched_at, outcome, http_status,
                      upstream_request_id, prompt_tokens, completion_tokens,
                      cached_tokens, latency_ms, finished_at)
SELECT g.run_id, 1, 1, 'grown-w' || g.i % 4, g.run_id,
       g.at + interval '5 ms', 'ok', 200, 'chatcmpl-' || g.i, 12, 9, 0, 20,
       g.at + interval '25 ms'
  FROM (SELECT i, encode(sha256(convert_to('grown-run-' || i, 'UTF8')), 'hex') AS run_id,
               now() - interval '30 days'
               + make_interval(secs => i * 2592000.0 / :n) AS at
          FROM generate_series(1, :n) i) g;

INSERT INTO outbox_delivered (run_id, channel, explicit_payload, created_at,
                              delivered_at, delivery_count)
SELECT g.run_id, c.channel, NULL,
       g.at + interval '40 ms', g.at + interval '60 ms', 1
  FROM (SELECT i, encode(sha256(convert_to('grown-run-' || i, 'UTF8')), 'hex') AS run_id,
               now() - interval '30 days'
               + make_interval(secs => i * 2592000.0 / :n) AS at
          FROM generate_series(1, :n) i) g
 CROSS JOIN (VALUES ('email'), ('slack')) c(channel);

VACUUM ANALYZE runs, attempts, outbox_delivered;
-- the prefill's dirty pages are written now, not by a checkpoint inside
-- the measured window
CHECKPOINT;
