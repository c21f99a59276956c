-- The batcher's intents: for every (endpoint, model) whose waiting runs
-- reached their max_runs or max_bytes, or whose oldest waited its window,
-- one batch row in state 'intent' holding up to max_runs of them (and at
-- most max_bytes of request lines, one run at least), oldest first. Runs
-- another worker is forming a batch of are skipped (SKIP LOCKED), so a run
-- goes into one batch. The intent is committed with this statement,
-- before anything is uploaded; the batcher then leases it
-- (docs/batch.md). A waiting run cancelled meanwhile is set 'ignored'
-- when a batch would take it, never uploaded: its line would be generated
-- and paid for nothing. Returns the batches formed.
CREATE OR REPLACE FUNCTION rl_batch_form(p_max_batches integer)
RETURNS TABLE (o_batch_id text, o_runs integer)
LANGUAGE plpgsql
AS $fn$
DECLARE
    g record;
    r record;
    v_id text;
    v_runs integer;
    v_bytes bigint;
    v_formed integer := 0;
BEGIN
    FOR g IN
        SELECT b.endpoint, b.model, min(b.window_ms) AS window_ms,
               min(b.max_runs) AS max_runs, min(b.max_bytes) AS max_bytes,
               min(b.completion_window) AS completion_window,
               count(*) AS n, sum(b.bytes) AS bytes,
               min(b.parked_at) AS oldest
          FROM batch_runs b
         WHERE b.state = 'waiting'
         GROUP BY b.endpoint, b.model
    LOOP
        EXIT WHEN v_formed >= p_max_batches;
        CONTINUE WHEN g.n < g.max_runs AND g.bytes < g.max_bytes
                  AND g.oldest > clock_timestamp()
                                 - g.window_ms * interval '1 millisecond';
        v_id := 'rlb_' || replace(gen_random_uuid()::text, '-', '');
        INSERT INTO batches (batch_id, endpoint, model, completion_window)
        VALUES (v_id, g.endpoint, g.model, g.completion_window);
        v_runs := 0;
        v_bytes := 0;
        FOR r IN
            SELECT b.run_id, b.attempt_no, b.bytes,
                   x.status = 'cancelled' AS cancelled
              FROM batch_runs b
              JOIN runs x ON x.run_id = b.run_id
             WHERE b.state = 'waiting' AND b.endpoint = g.endpoint
               AND b.model = g.model
             ORDER BY b.parked_at, b.run_id
             LIMIT g.max_runs
               FOR UPDATE OF b SKIP LOCKED
        LOOP
            -- checked here, once per run a batch takes, rather than over
            -- every waiting run at each turn
            IF r.cancelled THEN
                UPDATE batch_runs SET state = 'ignored'
                 WHERE run_id = r.run_id AND attempt_no = r.attempt_no;
                CONTINUE;
            END IF;
            EXIT WHEN v_runs > 0 AND v_bytes + r.bytes > g.max_bytes;
            UPDATE batch_runs
               SET batch_id = v_id, state = 'in_batch'
             WHERE run_id = r.run_id AND attempt_no = r.attempt_no;
            v_runs := v_runs + 1;
            v_bytes := v_bytes + r.bytes;
        END LOOP;
        IF v_runs = 0 THEN
            DELETE FROM batches WHERE batch_id = v_id;
            CONTINUE;
        END IF;
        UPDATE batches SET runs = v_runs, bytes = v_bytes
         WHERE batch_id = v_id;
        v_formed := v_formed + 1;
        o_batch_id := v_id;
        o_runs := v_runs;
        RETURN NEXT;
    END LOOP;
END
$fn$;
