-- 071_drop_console_run_indexes.sql: the workers stop maintaining indexes
-- only the console reads.
--
-- 041's two B-tree indexes on (created_at, run_id) and (tenant,
-- created_at, run_id) served the runs page alone, and cost two index
-- entries (and their WAL) on every run the workers register. The runs
-- page now reads by runs_created_brin (070). The release before this one
-- runs the same statements without them, only slower on its runs page, so
-- dropping them is safe while it still runs.
DROP INDEX IF EXISTS runs_tenant_created_idx;
DROP INDEX IF EXISTS runs_created_idx;
