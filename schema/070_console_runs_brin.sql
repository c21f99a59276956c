-- 070_console_runs_brin.sql: the console's runs page reads runs by a
-- block-range (BRIN) index on created_at.
--
-- The runs page lists runs newest first in windows of creation time
-- (rl_db_console_runs_json widens the window until it holds a page). A
-- BRIN index keeps one summary (the created_at values seen) per range of
-- 32 heap pages, so a window reads only the ranges that can hold it. It
-- costs the workers next to nothing: a new run goes to a range at the end
-- of the table that is not summarised yet, where an insert writes nothing
-- to the index (autosummarize has autovacuum summarise a range once it is
-- full), and created_at never changes, so updates stay heap-only. The
-- minmax-multi class keeps several intervals per range, so a range where
-- new runs fill the space `runledger purge` freed among old ones still
-- answers windows between them.
--
-- On a large ledger this migration holds writes to runs while it builds
-- (a few seconds a million runs). To avoid that, build it beforehand with
-- CREATE INDEX CONCURRENTLY under the same name: IF NOT EXISTS then
-- keeps it.
CREATE INDEX IF NOT EXISTS runs_created_brin ON runs
    USING brin (created_at timestamptz_minmax_multi_ops)
    WITH (pages_per_range = 32, autosummarize = on);
