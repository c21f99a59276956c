-- 006_approval.sql: approval gates: a run whose answer waits for a person.
--
-- A run whose effective request carries "approval": {"required": true}
-- does not complete when the model answers. Its answer becomes an
-- immutable proposal stored on the run: {"content": <output>,
-- "destination": [{"channel": ...}, ...], "operation": "notify"}, whose
-- digest is the SHA-256 hex of its canonical serialisation (rl_json_canonical,
-- computed once in C by rl_approval_proposal and used by `runs show` and
-- `runs approve` alike). The run waits in 'awaiting_approval' with no
-- outbox row. An approval names the digest it covers; the transaction that
-- records it completes the run with the proposal's content and queues the
-- outbox rows, so what is published is the saved object that was approved.
--
-- Proposals are write-once: a different answer is never swapped in under an
-- existing approval. A new answer needs a new run (a new event version) and
-- a new approval.

ALTER TABLE runs DROP CONSTRAINT runs_status_known;
ALTER TABLE runs ADD CONSTRAINT runs_status_known
    CHECK (status IN ('pending', 'running', 'completed', 'failed', 'unknown',
                      'awaiting_approval'));

ALTER TABLE runs
    ADD COLUMN proposal        jsonb,
    ADD COLUMN proposal_digest text
        CONSTRAINT runs_proposal_digest_is_sha256_hex
        CHECK (proposal_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT runs_proposal_is_whole
        CHECK ((proposal IS NULL) = (proposal_digest IS NULL)),
    ADD CONSTRAINT runs_awaiting_approval_has_proposal
        CHECK (status <> 'awaiting_approval' OR proposal IS NOT NULL);

CREATE TRIGGER runs_proposal_write_once
    BEFORE UPDATE OF proposal, proposal_digest ON runs
    FOR EACH ROW
    WHEN ((OLD.proposal IS NOT NULL
           AND NEW.proposal IS DISTINCT FROM OLD.proposal)
          OR (OLD.proposal_digest IS NOT NULL
              AND NEW.proposal_digest IS DISTINCT FROM OLD.proposal_digest))
    EXECUTE FUNCTION rl_refuse_update('a proposal is write-once');

-- `runs list --status awaiting_approval` and the metric stay cheap.
CREATE INDEX runs_awaiting_approval_idx ON runs (updated_at)
    WHERE status = 'awaiting_approval';

-- Who may decide on the proposals of a tenant.
CREATE TABLE approvers (
    tenant   text        NOT NULL,
    actor    text        NOT NULL
             CONSTRAINT approvers_actor_named CHECK (actor <> ''),
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, actor)
);

-- The decision on a proposal, bound to the digest it covered. One per run:
-- of concurrent approvals exactly one commits.
CREATE TABLE approvals (
    run_id     text        NOT NULL REFERENCES runs (run_id)
               CONSTRAINT approvals_one_decision_per_run UNIQUE,
    digest     text        NOT NULL
               CONSTRAINT approvals_digest_is_sha256_hex
               CHECK (digest ~ '^[0-9a-f]{64}$'),
    actor      text        NOT NULL,
    decision   text        NOT NULL
               CONSTRAINT approvals_decision_known
               CHECK (decision IN ('approve', 'reject')),
    reason     text,
    decided_at timestamptz NOT NULL DEFAULT now()
);

-- Store the answer of an approval-required run as its proposal, in place of
-- rl_complete_run. Only the current owner (p_worker, p_epoch) of a running
-- run may do so. Returns one row, result:
--   proposed          the run now waits in awaiting_approval
--   already_proposed  it already did (a redo after a lost COMMIT): nothing
--                     changed
--   superseded        the run holds another proposal (a retried run that
--                     answered differently): the new answer is refused,
--                     the run fails with error_class 'proposal_immutable'
--   already_completed, stale, not_found  as rl_complete_run
CREATE FUNCTION rl_propose_run(
    p_run_id   text,
    p_worker   text,
    p_epoch    bigint,
    p_proposal jsonb,
    p_digest   text)
RETURNS TABLE (result text, digest text)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    v_status text;
    v_owner  text;
    v_epoch  bigint;
    v_digest text;
BEGIN
    IF p_proposal IS NULL OR p_digest IS NULL THEN
        RAISE EXCEPTION 'run % cannot wait for approval without a proposal',
            p_run_id USING ERRCODE = 'null_value_not_allowed';
    END IF;

    SELECT r.status, r.lock_owner, r.lease_epoch, r.proposal_digest
      INTO v_status, v_owner, v_epoch, v_digest
      FROM runs r
     WHERE r.run_id = p_run_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::text;
        RETURN;
    END IF;
    IF v_status = 'completed' THEN
        RETURN QUERY SELECT 'already_completed'::text, v_digest;
        RETURN;
    END IF;
    IF v_status = 'awaiting_approval' AND v_digest = p_digest THEN
        RETURN QUERY SELECT 'already_proposed'::text, v_digest;
        RETURN;
    END IF;
    IF v_status <> 'running' OR v_owner IS DISTINCT FROM p_worker
       OR v_epoch <> p_epoch THEN
        RETURN QUERY SELECT 'stale'::text, NULL::text;
        RETURN;
    END IF;

    IF v_digest IS NOT NULL THEN
        UPDATE runs r
           SET status = 'failed',
               lock_owner = NULL,
               lock_expires_at = NULL,
               next_attempt_at = NULL,
               error_class = 'proposal_immutable',
               last_error = 'the run already holds proposal ' || v_digest
                            || '; a new answer needs a new version',
               updated_at = now()
         WHERE r.run_id = p_run_id;
        RETURN QUERY SELECT 'superseded'::text, v_digest;
        RETURN;
    END IF;

    UPDATE runs r
       SET status = 'awaiting_approval',
           proposal = p_proposal,
           proposal_digest = p_digest,
           lock_owner = NULL,
           lock_expires_at = NULL,
           next_attempt_at = NULL,
           last_error = NULL,
           error_class = NULL,
           updated_at = now()
     WHERE r.run_id = p_run_id;
    RETURN QUERY SELECT 'proposed'::text, p_digest;
END
$fn$;

-- Decide on the proposal of a run waiting for approval, in one
-- transaction. p_decision is 'approve' or 'reject'. Refusals change
-- nothing. Returns one row, result:
--   approved         the approval is recorded, the run completed with the
--                    proposal's content and outbox_rows queued (one per
--                    destination channel, the envelope of rl_complete_run)
--   rejected         the rejection is recorded, the run failed with
--                    error_class 'rejected'; nothing is queued
--   not_found        no such run
--   not_waiting      the run is not awaiting_approval (status says what it
--                    is; a run already decided is refused here)
--   digest_mismatch  p_digest is not the stored proposal's digest
--   not_approver     p_actor is not an approver of the run's tenant
-- The row lock serialises concurrent decisions; approvals' UNIQUE (run_id)
-- is the guard under it.
CREATE FUNCTION rl_decide_run(
    p_run_id   text,
    p_digest   text,
    p_actor    text,
    p_decision text,
    p_reason   text)
RETURNS TABLE (result text, status text, digest text, outbox_rows integer)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    v_status text;
    v_tenant text;
    v_digest text;
    v_rows   integer := 0;
BEGIN
    IF p_decision IS NULL OR p_decision NOT IN ('approve', 'reject') THEN
        RAISE EXCEPTION 'unknown decision %', p_decision
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT r.status, r.tenant, r.proposal_digest
      INTO v_status, v_tenant, v_digest
      FROM runs r
     WHERE r.run_id = p_run_id
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::text, NULL::text, 0;
        RETURN;
    END IF;
    IF v_status <> 'awaiting_approval'
       OR EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = p_run_id) THEN
        RETURN QUERY SELECT 'not_waiting'::text, v_status, v_digest, 0;
        RETURN;
    END IF;
    IF p_digest IS DISTINCT FROM v_digest THEN
        RETURN QUERY SELECT 'digest_mismatch'::text, v_status, v_digest, 0;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM approvers p
                    WHERE p.tenant = v_tenant AND p.actor = p_actor) THEN
        RETURN QUERY SELECT 'not_approver'::text, v_status, v_digest, 0;
        RETURN;
    END IF;

    INSERT INTO approvals (run_id, digest, actor, decision, reason)
    VALUES (p_run_id, v_digest, p_actor, p_decision, nullif(p_reason, ''));

    IF p_decision = 'reject' THEN
        UPDATE runs r
           SET status = 'failed',
               error_class = 'rejected',
               last_error = 'proposal rejected by ' || p_actor
                            || coalesce(': ' || nullif(p_reason, ''), ''),
               updated_at = now()
         WHERE r.run_id = p_run_id;
        RETURN QUERY SELECT 'rejected'::text, 'failed'::text, v_digest, 0;
        RETURN;
    END IF;

    UPDATE runs r
       SET status = 'completed',
           output = r.proposal -> 'content',
           completed_at = now(),
           updated_at = now()
     WHERE r.run_id = p_run_id;

    -- The envelope of rl_complete_run, so relays and receivers see an
    -- approved notification exactly as any other (idempotency key
    -- <run_id>:<channel>).
    INSERT INTO outbox (run_id, channel, payload)
    SELECT r.run_id, d.channel,
           jsonb_build_object(
               'run_id', r.run_id,
               'job', r.job,
               'tenant', r.tenant,
               'scheduled_at',
               to_char(r.scheduled_at AT TIME ZONE 'UTC',
                       'YYYY-MM-DD"T"HH24:MI:SS"+00:00"'),
               'version', r.version,
               'channel', d.channel,
               'output', r.output)
      FROM runs r,
           LATERAL (SELECT e ->> 'channel' AS channel
                      FROM jsonb_array_elements(r.proposal -> 'destination')
                           AS e) d
     WHERE r.run_id = p_run_id AND d.channel IS NOT NULL
     ORDER BY d.channel
        ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_rows = ROW_COUNT;

    RETURN QUERY SELECT 'approved'::text, 'completed'::text, v_digest, v_rows;
END
$fn$;
