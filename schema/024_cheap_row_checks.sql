-- 024_cheap_row_checks.sql: the checks a row of runs passes at every
-- write cost a thirteenth of what they did, and the claim asks whether a
-- concurrency limit covers a (tenant, job) once per pair, not once per run.
--
-- PostgreSQL evaluates every CHECK constraint of a table on every insert
-- and on every update of a row, whatever columns the update changes, and a
-- run is written three times (claimed, dispatched, completed). A CPU
-- profile of `make bench` zero put a tenth of PostgreSQL's time in the
-- regular expressions of two of them (run_id and fingerprint, each
-- '^[0-9a-f]{64}$'): the bounded repetition {64} makes PostgreSQL's regex
-- engine cost about 5 us a value, where the same test written as a length
-- and an unbounded class costs 0.3 us (1,000,000 values: 4.8 s against
-- 0.37 s). octet_length(x) = 64 with every character in [0-9a-f] (one byte
-- each) is the same set of strings as '^[0-9a-f]{64}$'.
--
-- The constraints are replaced NOT VALID: adding a validated CHECK reads
-- the whole table under an ACCESS EXCLUSIVE lock, which on a large ledger
-- would stop every worker for minutes. New and updated rows are checked
-- all the same; the rows already there passed the constraint each
-- replaces, which accepts exactly the same strings.
ALTER TABLE runs
    DROP CONSTRAINT runs_run_id_is_sha256_hex,
    ADD CONSTRAINT runs_run_id_is_sha256_hex
        CHECK (octet_length(run_id) = 64 AND run_id ~ '^[0-9a-f]+$')
        NOT VALID,
    DROP CONSTRAINT runs_fingerprint_is_sha256_hex,
    ADD CONSTRAINT runs_fingerprint_is_sha256_hex
        CHECK (octet_length(fingerprint) = 64
               AND fingerprint ~ '^[0-9a-f]+$')
        NOT VALID,
    DROP CONSTRAINT runs_proposal_digest_is_sha256_hex,
    ADD CONSTRAINT runs_proposal_digest_is_sha256_hex
        CHECK (octet_length(proposal_digest) = 64
               AND proposal_digest ~ '^[0-9a-f]+$')
        NOT VALID;
ALTER TABLE approvals
    DROP CONSTRAINT approvals_digest_is_sha256_hex,
    ADD CONSTRAINT approvals_digest_is_sha256_hex
        CHECK (octet_length(digest) = 64 AND digest ~ '^[0-9a-f]+$')
        NOT VALID;

-- The functions and triggers this migration defined now live in
-- schema/functions/, one file each, re-created by migrate after the
-- numbered migrations whenever a file changes.
