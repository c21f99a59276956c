-- Batch mode's hand-off: the runs whose dispatch a worker just recorded
-- pass, in this one statement, from the worker's lease to the batcher's
-- (lock_owner 'runledger-batch', never expiring, lease_epoch unchanged)
-- and wait in batch_runs with their request line (bytes: the whole line as
-- uploaded, envelope included) and their job's settings
-- (schema/061_batches.sql). Only runs whose job (or job and tenant) is in
-- batch mode now, and not sent live by an expired batch's policy, are
-- parked; for the others the worker makes the live call. Returns per run
-- 'parked', 'live' (no batch mode: call it live) or 'lost' (the worker's
-- lease is gone: nothing may be sent).
CREATE OR REPLACE FUNCTION rl_batch_park(p_worker text, p_run_ids text[],
                                         p_epochs bigint[],
                                         p_attempts integer[],
                                         p_endpoints text[],
                                         p_models text[], p_bodies text[])
RETURNS TABLE (o_run_id text, o_status text)
LANGUAGE sql
AS $fn$
    WITH p AS (
        SELECT *
          FROM unnest(p_run_ids, p_epochs, p_attempts, p_endpoints,
                      p_models, p_bodies)
               AS p(run_id, epoch, attempt_no, endpoint, model, body)
    ), setting AS (
        SELECT p.run_id, s.*
          FROM p
          JOIN runs r ON r.run_id = p.run_id
          CROSS JOIN LATERAL (
                SELECT s.window_ms, s.max_runs, s.max_bytes,
                       s.completion_window, s.on_expiry
                  FROM batch_settings s
                 WHERE s.job = r.job AND s.tenant IN (r.tenant, '')
                 ORDER BY s.tenant DESC
                 LIMIT 1) s
         WHERE NOT EXISTS (SELECT 1 FROM batch_runs b
                            WHERE b.run_id = p.run_id
                              AND b.state = 'go_live')
    ), moved AS (
        UPDATE runs r
           SET lock_owner = 'runledger-batch', lock_expires_at = 'infinity'
          FROM p JOIN setting s ON s.run_id = p.run_id
         WHERE r.run_id = p.run_id AND r.status = 'running'
           AND r.lock_owner = p_worker AND r.lease_epoch = p.epoch
        RETURNING r.run_id
    ), parked AS (
        INSERT INTO batch_runs (run_id, attempt_no, lease_epoch, endpoint,
                                model, body, bytes, window_ms, max_runs,
                                max_bytes, completion_window, on_expiry)
        SELECT p.run_id, p.attempt_no, p.epoch, p.endpoint, p.model, p.body,
               -- the whole line rl_db_batch_write_requests writes, so
               -- max_bytes bounds the file the provider receives
               octet_length('{"custom_id":"' || p.run_id || ':'
                            || p.attempt_no || '","method":"POST","url":"'
                            || p.endpoint || '","body":' || p.body || '}'
                            || E'\n'),
               s.window_ms, s.max_runs, s.max_bytes,
               s.completion_window, s.on_expiry
          FROM moved m
          JOIN p ON p.run_id = m.run_id
          JOIN setting s ON s.run_id = m.run_id
        RETURNING run_id
    )
    SELECT p.run_id,
           CASE WHEN EXISTS (SELECT 1 FROM parked k WHERE k.run_id = p.run_id)
                THEN 'parked'
                WHEN EXISTS (SELECT 1 FROM runs r
                              WHERE r.run_id = p.run_id
                                AND r.status = 'running'
                                AND r.lock_owner = p_worker
                                AND r.lease_epoch = p.epoch)
                THEN 'live'
                ELSE 'lost' END
      FROM p
$fn$;
