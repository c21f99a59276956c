-- Completes each run (p_run_ids[k] under p_epochs[k]) with p_outputs[k]
-- and queues one outbox row per channel named for it in the pairs
-- (p_channel_runs[j], p_channel_names[j]), with rl_complete_run's default
-- envelope, and in the same
-- statement records outcome 'ok' for attempt p_attempt_nos[k] with what
-- the call returned (the p_http .. p_latency arrays; NULL elements stored
-- as NULL), once: an attempt that already has an outcome keeps it, and the
-- outcome is recorded even when the lease is stale (it is a fact about
-- what was sent). A run its owner released (pending, no owner) that nobody
-- claimed since (the lease epoch is still the one named) completes too: a
-- second signal or the end of a shutdown's grace gives back leases whose
-- answers may still be on their way, and an answer refused there would be
-- a paid generation lost and made again by the next claimer, which sees an
-- attempt with outcome 'ok' and nothing ambiguous. No other worker can
-- have dispatched since: a dispatch needs a claim, and a claim moves the
-- epoch. Returns one row per input element, in input order (ord):
-- result 'completed' (outbox_rows queued), 'already_completed', 'stale' or
-- 'not_found', and whether the outcome was recorded by this call.
CREATE OR REPLACE FUNCTION rl_complete_runs(p_run_ids text[], p_epochs bigint[], p_worker text, p_outputs jsonb[], p_channel_runs text[], p_channel_names text[], p_attempt_nos integer[], p_http integer[], p_upstream text[], p_prompt bigint[], p_completion bigint[], p_cached bigint[], p_latency bigint[])
 RETURNS TABLE(ord bigint, result text, outbox_rows integer, outcome_recorded boolean)
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET jit TO 'off'
AS $$
#variable_conflict use_column
DECLARE
    v_n integer := cardinality(p_run_ids);
BEGIN
    IF p_worker IS NULL
       OR v_n IS DISTINCT FROM cardinality(p_epochs)
       OR v_n IS DISTINCT FROM cardinality(p_outputs)
       OR cardinality(p_channel_runs)
          IS DISTINCT FROM cardinality(p_channel_names)
       OR v_n IS DISTINCT FROM cardinality(p_attempt_nos)
       OR v_n IS DISTINCT FROM cardinality(p_http)
       OR v_n IS DISTINCT FROM cardinality(p_upstream)
       OR v_n IS DISTINCT FROM cardinality(p_prompt)
       OR v_n IS DISTINCT FROM cardinality(p_completion)
       OR v_n IS DISTINCT FROM cardinality(p_cached)
       OR v_n IS DISTINCT FROM cardinality(p_latency)
       OR v_n <> (SELECT count(DISTINCT x) FROM unnest(p_run_ids) AS x)
    THEN
        RAISE EXCEPTION 'a completion batch needs a worker, distinct runs '
                        'and every array with one element per run'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_outputs) AS o(output)
                WHERE o.output IS NULL OR o.output = 'null'::jsonb) THEN
        RAISE EXCEPTION 'a run cannot complete without output'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;

    PERFORM rl_lock_runs(p_run_ids);

    RETURN QUERY
    WITH u AS (
        SELECT u.*
          FROM unnest(p_run_ids, p_epochs, p_outputs, p_attempt_nos, p_http,
                      p_upstream, p_prompt, p_completion, p_cached,
                      p_latency) WITH ORDINALITY
               AS u(run_id, epoch, output, attempt_no, http, upstream,
                    prompt, completion, cached, latency, ord)
    ), cur AS (
        -- before this statement's own updates (one snapshot)
        SELECT r.run_id, r.status FROM runs r
         WHERE r.run_id = ANY (p_run_ids)
    ), o AS (
        UPDATE attempts a
           SET outcome = 'ok', http_status = u.http,
               upstream_request_id = nullif(u.upstream, ''),
               prompt_tokens = u.prompt, completion_tokens = u.completion,
               cached_tokens = u.cached, latency_ms = u.latency,
               error = NULL, finished_at = now()
          FROM u
         WHERE a.run_id = u.run_id AND a.attempt_no = u.attempt_no
           AND a.outcome IS NULL
        RETURNING a.run_id, a.attempt_no
    ), c AS (
        UPDATE runs r
           SET status = 'completed',
               output = u.output,
               lock_owner = NULL,
               lock_expires_at = NULL,
               next_attempt_at = NULL,
               last_error = NULL,
               error_class = NULL,
               completed_at = now(),
               updated_at = now()
          FROM u
         WHERE r.run_id = u.run_id AND r.lease_epoch = u.epoch
           AND (r.lock_owner = p_worker
                OR (r.lock_owner IS NULL AND r.status = 'pending'))
        RETURNING r.run_id
    ), ob AS (
        INSERT INTO outbox (run_id, channel)
        SELECT c.run_id, ch.channel
          FROM c
          JOIN (SELECT DISTINCT p.run_id, p.channel
                  FROM unnest(p_channel_runs, p_channel_names)
                       AS p(run_id, channel)
                 WHERE p.channel IS NOT NULL) ch ON ch.run_id = c.run_id
         ORDER BY c.run_id, ch.channel
            ON CONFLICT DO NOTHING
        RETURNING outbox.run_id
    ), queued AS (
        SELECT ob.run_id, count(*)::integer AS n FROM ob GROUP BY ob.run_id
    )
    SELECT u.ord,
           CASE WHEN c.run_id IS NOT NULL THEN 'completed'
                WHEN cur.run_id IS NULL THEN 'not_found'
                WHEN cur.status = 'completed' THEN 'already_completed'
                ELSE 'stale' END,
           CASE WHEN c.run_id IS NOT NULL THEN coalesce(q.n, 0) ELSE 0 END,
           o.run_id IS NOT NULL
      FROM u
      LEFT JOIN cur ON cur.run_id = u.run_id
      LEFT JOIN (SELECT DISTINCT c.run_id FROM c) c ON c.run_id = u.run_id
      LEFT JOIN queued q ON q.run_id = u.run_id
      LEFT JOIN o ON o.run_id = u.run_id AND o.attempt_no = u.attempt_no
     ORDER BY u.ord;
END
$$;
