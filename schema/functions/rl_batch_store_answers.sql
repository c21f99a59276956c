-- The answered lines of a batch's output file, many to a statement
-- (docs/batch.md, "Results"): for each line (p_run_ids[k], attempt
-- p_attempts[k]) whose run still waits in batch p_batch_id (its
-- batch_runs row 'in_batch', locked here in run order, so two readers of
-- one file never both store a line), the run is completed through
-- rl_complete_runs under the batcher's lease ('runledger-batch', the
-- epoch kept in batch_runs) with its output, the attempt's usage and one
-- outbox row per channel its request names, exactly as a live answer is;
-- and in the same transaction its batch_runs row becomes 'completed', or
-- 'ignored' when the guard refused it (cancelled, completed before, lease
-- gone). Returns one row per line, in input order (ord): 'completed',
-- 'ignored', 'handled' (its row was no longer 'in_batch': an earlier read
-- of the file stored it) or 'not_found' (no such run in the batch).
CREATE OR REPLACE FUNCTION rl_batch_store_answers(p_batch_id text,
                                                  p_run_ids text[],
                                                  p_attempts integer[],
                                                  p_outputs jsonb[],
                                                  p_upstream text[],
                                                  p_prompt bigint[],
                                                  p_completion bigint[],
                                                  p_cached bigint[])
RETURNS TABLE (ord bigint, result text)
LANGUAGE plpgsql
-- As rl_complete_runs: one plan a session, and through the indexes however
-- the ledger grows (batch_runs keeps the rows of every batch).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_n integer := coalesce(cardinality(p_run_ids), 0);
    v_ords bigint[];
    v_ids text[];
    v_epochs bigint[];
    v_attempts integer[];
    v_outputs jsonb[];
    v_upstream text[];
    v_prompt bigint[];
    v_completion bigint[];
    v_cached bigint[];
    v_ch_runs text[];
    v_ch_names text[];
    v_states text[];
    v_res text[] := array_fill(NULL::text, ARRAY[greatest(v_n, 1)]);
    v_m integer;
    c record;
BEGIN
    IF p_batch_id IS NULL
       OR v_n IS DISTINCT FROM coalesce(cardinality(p_attempts), 0)
       OR v_n IS DISTINCT FROM coalesce(cardinality(p_outputs), 0)
       OR v_n IS DISTINCT FROM coalesce(cardinality(p_upstream), 0)
       OR v_n IS DISTINCT FROM coalesce(cardinality(p_prompt), 0)
       OR v_n IS DISTINCT FROM coalesce(cardinality(p_completion), 0)
       OR v_n IS DISTINCT FROM coalesce(cardinality(p_cached), 0)
    THEN
        RAISE EXCEPTION 'storing a batch''s answers needs a batch and every '
                        'array with one element per line'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT array_agg(l.ord), array_agg(l.run_id), array_agg(l.epoch),
           array_agg(l.attempt_no), array_agg(l.output),
           array_agg(l.upstream), array_agg(l.prompt),
           array_agg(l.completion), array_agg(l.cached)
      INTO v_ords, v_ids, v_epochs, v_attempts, v_outputs, v_upstream,
           v_prompt, v_completion, v_cached
      FROM (SELECT u.ord, u.run_id, b.epoch, u.attempt_no, u.output,
                   u.upstream, u.prompt, u.completion, u.cached
              FROM (SELECT *
                      FROM unnest(p_run_ids, p_attempts, p_outputs,
                                  p_upstream, p_prompt, p_completion,
                                  p_cached) WITH ORDINALITY
                           AS u(run_id, attempt_no, output, upstream,
                                prompt, completion, cached, ord)
                     ORDER BY u.run_id, u.attempt_no) u
             -- One primary-key lookup a line (the batch's other rows are
             -- never read), locked in run order.
             CROSS JOIN LATERAL (
                   SELECT b.lease_epoch AS epoch
                     FROM batch_runs b
                    WHERE b.run_id = u.run_id
                      AND b.attempt_no = u.attempt_no
                      AND b.batch_id = p_batch_id
                      AND b.state = 'in_batch'
                      FOR UPDATE) b) l;
    v_m := coalesce(cardinality(v_ids), 0);

    IF v_m > 0 THEN
        -- The channels of each run's effective request, as a live
        -- answer's are: the strings of its "notify" array.
        SELECT coalesce(array_agg(r.run_id), '{}'),
               coalesce(array_agg(e #>> '{}'), '{}')
          INTO v_ch_runs, v_ch_names
          FROM runs r
          CROSS JOIN LATERAL jsonb_array_elements(
                CASE WHEN jsonb_typeof(r.request -> 'notify') = 'array'
                     THEN r.request -> 'notify' ELSE '[]'::jsonb END) e
         WHERE r.run_id = ANY (v_ids) AND jsonb_typeof(e) = 'string';

        v_states := array_fill(NULL::text, ARRAY[v_m]);
        FOR c IN
            SELECT x.ord, x.result
              FROM rl_complete_runs(v_ids, v_epochs, 'runledger-batch',
                                    v_outputs, v_ch_runs, v_ch_names,
                                    v_attempts,
                                    array_fill(200, ARRAY[v_m]),
                                    v_upstream, v_prompt, v_completion,
                                    v_cached,
                                    array_fill(NULL::bigint, ARRAY[v_m])) x
        LOOP
            v_states[c.ord] := CASE WHEN c.result = 'completed'
                                    THEN 'completed' ELSE 'ignored' END;
            v_res[v_ords[c.ord]] := v_states[c.ord];
        END LOOP;

        UPDATE batch_runs b
           SET state = s.state
          FROM unnest(v_ids, v_attempts, v_states)
               AS s(run_id, attempt_no, state)
         WHERE b.batch_id = p_batch_id AND b.run_id = s.run_id
           AND b.attempt_no = s.attempt_no;
    END IF;

    RETURN QUERY
    SELECT u.ord,
           coalesce(v_res[u.ord],
                    CASE WHEN EXISTS (SELECT 1 FROM batch_runs b
                                       WHERE b.batch_id = p_batch_id
                                         AND b.run_id = u.run_id
                                         AND b.attempt_no = u.attempt_no)
                         THEN 'handled' ELSE 'not_found' END)
      FROM unnest(p_run_ids, p_attempts) WITH ORDINALITY
           AS u(run_id, attempt_no, ord)
     ORDER BY u.ord;
END
$fn$;
