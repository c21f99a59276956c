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

-- The functions and triggers this migration defined now live in
-- schema/functions/, one file each, re-created by migrate after the
-- numbered migrations whenever a file changes.
