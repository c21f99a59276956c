-- A run's timeline for the console's run page: every event the ledger
-- keeps of run p_run_id, one row each, from the run's own rows of each
-- table (each read by an index on run_id): its registration (the event's
-- topic, partition and offset), each lease epoch, each attempt's dispatch,
-- end and reconciliation, its batch (parked, uploaded, finished), the
-- approval requested and decided, its completion or failure, each
-- notification queued, delivered or dead-lettered, and the operators'
-- actions of the audit trail. The ledger keeps a lease epoch with each
-- attempt, not the time of each claim: an epoch is at its first attempt's
-- dispatch. A decision is read from approvals, with the via and address
-- of its audit row; the other audit rows are operators' actions. seq
-- orders events of one instant as they happen; tone is ok, error, wait or
-- info; events of one span (an attempt's dispatch and end, a
-- notification's queueing and delivery) are joined on the time axis. In
-- time order; at as the console prints times (UTC, microseconds), ms the
-- same instant in milliseconds since the epoch.
CREATE OR REPLACE FUNCTION rl_run_timeline(p_run_id text)
RETURNS TABLE (at text, ms float8, seq int, lane text, what text,
               detail text, tone text, span text)
LANGUAGE sql STABLE
AS $fn$
SELECT to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
       extract(epoch FROM e.at)::float8 * 1000, e.seq, e.lane, e.what,
       e.detail, e.tone, e.span
  FROM (
    SELECT r.created_at, 0, 'run', 'registered',
           concat_ws(', ', 'event read from ' || r.source_topic
                           || ' partition ' || r.source_partition
                           || ' offset ' || r.source_offset,
                     'job ' || r.job, 'tenant ' || r.tenant),
           'info', NULL
      FROM runs r WHERE r.run_id = p_run_id
    UNION ALL
    SELECT min(t.dispatched_at), 1, 'lease', 'lease epoch ' || t.lease_epoch,
           'held by ' || string_agg(DISTINCT t.worker, ', ')
           || ' (its first dispatch)', 'info', NULL
      FROM attempts t WHERE t.run_id = p_run_id GROUP BY t.lease_epoch
    UNION ALL
    SELECT r.updated_at, 1, 'lease', 'lease epoch ' || r.lease_epoch,
           concat_ws(', ', 'no attempt under it yet',
                     'held by ' || r.lock_owner,
                     'until ' || to_char(r.lock_expires_at AT TIME ZONE 'UTC',
                                         'YYYY-MM-DD HH24:MI:SS.US "UTC"')),
           'info', NULL
      FROM runs r
     WHERE r.run_id = p_run_id AND r.lease_epoch > 0
       AND NOT EXISTS (SELECT 1 FROM attempts t
                        WHERE t.run_id = r.run_id
                          AND t.lease_epoch = r.lease_epoch)
    UNION ALL
    SELECT t.dispatched_at, 2, 'attempt',
           'attempt ' || t.attempt_no || ' dispatched',
           'worker ' || t.worker || ', lease epoch ' || t.lease_epoch,
           'info', 'attempt ' || t.attempt_no
      FROM attempts t WHERE t.run_id = p_run_id
    UNION ALL
    SELECT t.finished_at, 3, 'attempt',
           'attempt ' || t.attempt_no || ' ended: ' || t.outcome,
           concat_ws(', ', 'HTTP ' || t.http_status,
                     'latency ' || t.latency_ms || ' ms',
                     t.prompt_tokens || ' + ' || t.completion_tokens
                     || ' tokens', 'error: ' || t.error),
           CASE WHEN t.outcome = 'ok' THEN 'ok' ELSE 'error' END,
           'attempt ' || t.attempt_no
      FROM attempts t WHERE t.run_id = p_run_id AND t.finished_at IS NOT NULL
    UNION ALL
    SELECT t.reconciled_at, 4, 'attempt',
           'attempt ' || t.attempt_no || ' reconciled',
           'from ' || t.reconciled_from, 'info', NULL
      FROM attempts t WHERE t.run_id = p_run_id AND t.reconciled_at IS NOT NULL
    UNION ALL
    SELECT b.parked_at, 2, 'batch',
           'attempt ' || b.attempt_no || ' parked for a batch',
           b.endpoint || ', model ' || b.model, 'wait',
           'batch ' || b.attempt_no
      FROM batch_runs b WHERE b.run_id = p_run_id
    UNION ALL
    SELECT x.submitted_at, 3, 'batch', 'batch uploaded',
           concat_ws(', ', 'batch ' || x.batch_id,
                     'provider batch ' || x.provider_batch_id,
                     x.runs || ' runs'),
           'info', 'batch ' || b.attempt_no
      FROM batch_runs b JOIN batches x ON x.batch_id = b.batch_id
     WHERE b.run_id = p_run_id AND x.submitted_at IS NOT NULL
    UNION ALL
    SELECT x.finished_at, 4, 'batch', 'batch ' || x.state,
           concat_ws(', ', 'batch ' || x.batch_id,
                     'this run''s line: ' || b.state),
           CASE WHEN x.state = 'completed' THEN 'ok' ELSE 'error' END,
           'batch ' || b.attempt_no
      FROM batch_runs b JOIN batches x ON x.batch_id = b.batch_id
     WHERE b.run_id = p_run_id AND x.finished_at IS NOT NULL
    UNION ALL
    SELECT (SELECT max(t.finished_at) FROM attempts t
             WHERE t.run_id = r.run_id AND t.outcome = 'ok'),
           5, 'approval', 'approval requested',
           'digest ' || r.proposal_digest, 'wait', 'approval'
      FROM runs r WHERE r.run_id = p_run_id AND r.proposal IS NOT NULL
    UNION ALL
    SELECT a.decided_at, 6, 'approval', 'approval decided: ' || a.decision,
           concat_ws(', ', 'by ' || a.actor, 'via ' || u.via,
                     'from ' || u.address, 'reason: ' || a.reason,
                     'digest ' || a.digest),
           CASE WHEN a.decision = 'approve' THEN 'ok' ELSE 'error' END,
           'approval'
      FROM approvals a
      LEFT JOIN LATERAL (SELECT x.via, x.address FROM audit x
                          WHERE x.run_id = a.run_id AND x.action = a.decision
                          ORDER BY x.id LIMIT 1) u ON true
     WHERE a.run_id = p_run_id
    UNION ALL
    SELECT r.completed_at, 7, 'run', 'completed', NULL, 'ok', NULL
      FROM runs r WHERE r.run_id = p_run_id AND r.status = 'completed'
    UNION ALL
    SELECT r.updated_at, 7, 'run', r.status,
           concat_ws(': ', r.error_class, r.last_error), 'error', NULL
      FROM runs r
     WHERE r.run_id = p_run_id AND r.status IN ('failed', 'cancelled', 'unknown')
    UNION ALL
    SELECT o.created_at, 8, 'notification', 'notification queued: ' || o.channel,
           CASE WHEN o.delivery_count > 0
                THEN 'not delivered yet after ' || o.delivery_count
                     || CASE WHEN o.delivery_count = 1 THEN ' try'
                             ELSE ' tries' END
                     || coalesce(', last error: ' || o.last_error, '')
                ELSE 'waiting for the relay' END,
           'wait', 'notification ' || o.channel
      FROM outbox o WHERE o.run_id = p_run_id
    UNION ALL
    SELECT d.created_at, 8, 'notification', 'notification queued: ' || d.channel,
           NULL, 'info', 'notification ' || d.channel
      FROM outbox_delivered d WHERE d.run_id = p_run_id
    UNION ALL
    SELECT d.delivered_at, 9, 'notification',
           'notification delivered: ' || d.channel,
           'after ' || d.delivery_count
           || CASE WHEN d.delivery_count = 1 THEN ' try' ELSE ' tries' END,
           'ok',
           'notification ' || d.channel
      FROM outbox_delivered d WHERE d.run_id = p_run_id
    UNION ALL
    SELECT d.created_at, 8, 'notification', 'notification queued: ' || d.channel,
           NULL, 'info', 'notification ' || d.channel
      FROM outbox_dead d WHERE d.run_id = p_run_id
    UNION ALL
    SELECT d.dead_at, 9, 'notification',
           'notification dead-lettered: ' || d.channel,
           'after ' || d.delivery_count
           || CASE WHEN d.delivery_count = 1 THEN ' try: ' ELSE ' tries: ' END
           || d.reason, 'error',
           'notification ' || d.channel
      FROM outbox_dead d WHERE d.run_id = p_run_id
    UNION ALL
    SELECT a.at, 10, 'operator', a.action || ' by ' || a.actor,
           concat_ws(', ', 'via ' || a.via, 'from ' || a.address,
                     'digest ' || a.digest, a.detail),
           'info', NULL
      FROM audit a
     WHERE a.run_id = p_run_id AND a.action NOT IN ('approve', 'reject')
  ) e (at, seq, lane, what, detail, tone, span)
 WHERE e.at IS NOT NULL
 ORDER BY e.at, e.seq, e.what
$fn$;
