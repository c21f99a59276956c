-- 086_installation.sql: the ledger's installation id, and what an attempt
-- read back from the endpoint's record found there.
--
-- With RUNLEDGER_MODEL_STORED_COMPLETIONS every call is stored by the
-- endpoint with metadata naming its run and attempt, and an ambiguous
-- attempt is looked up by it. Run IDs are deterministic, so a staging
-- ledger or a second installation sending the same runs to the same
-- provider project stores records with the same run ID and attempt: the
-- lookup must tell them from this ledger's own. installation_id is a
-- random id made once, here, and sent with every stored call; the worker
-- reads it at connect and adopts only records naming it (and the run's
-- request fingerprint, and its model). One row, and never more: the
-- primary key is a constant. A ledger restored from another's dump
-- shares its id; docs/failure-semantics.md says how to give it its own.
CREATE TABLE installation (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    installation_id text NOT NULL DEFAULT gen_random_uuid()::text
        CHECK (installation_id <> ''),
    created_at timestamp with time zone NOT NULL DEFAULT now()
);
INSERT INTO installation DEFAULT VALUES;

GRANT SELECT ON installation TO runledger_worker, runledger_readonly;

-- An attempt whose answer was adopted from the record: the attempt the
-- adopted record names (this one, or an earlier ambiguous attempt of the
-- run whose generation turned up later), and how many records the lookup
-- found for the run's ambiguous attempts: each is a generation the
-- endpoint billed (an attempt sent twice by a transport or a gateway
-- leaves two), and the attempt's usage is their sum. NULL for every other
-- attempt; nullable columns without a default rewrite nothing.
ALTER TABLE attempts
    ADD COLUMN reconciled_attempt integer,
    ADD COLUMN reconciled_generations integer;
