-- 041_console_run_indexes.sql: the console's runs page reads by index.
--
-- The runs page lists runs newest first, by keyset on (created_at,
-- run_id), optionally of one tenant. Without an index on that order a
-- page sorted the whole table: about a second with a million runs. With
-- these two, any page (the first or the ten-thousandth) reads its 51 rows
-- from an index. created_at and tenant never change after insert, so the
-- workers' updates of a run stay HOT; each new run costs two more index
-- entries.
--
-- On a large ledger this migration holds writes to runs while it builds.
-- To avoid that, build both beforehand with CREATE INDEX CONCURRENTLY
-- under the same names: IF NOT EXISTS then keeps them.
CREATE INDEX IF NOT EXISTS runs_created_idx ON runs (created_at, run_id);
CREATE INDEX IF NOT EXISTS runs_tenant_created_idx
    ON runs (tenant, created_at, run_id);
