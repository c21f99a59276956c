-- 023_hot_dispatch_again.sql: the dispatch's update of a run is HOT again.
--
-- 011 made the dispatch's update of a run (attempts, updated_at) eligible
-- for a heap-only (HOT) update by keying no index on updated_at: an update
-- that changes an indexed column adds an entry to every index of runs,
-- among them the primary key, whose random run_id puts each entry on a
-- random page (written whole into the WAL after each checkpoint, and read
-- from disk once the index outgrows shared_buffers). 015 added
-- runs_cancelled_idx on updated_at, which made every update of a run that
-- sets updated_at non-HOT again: in `make bench` zero, 0 of 39,172 updates
-- of runs were HOT. The index serves counting and listing the cancelled
-- runs, which created_at (never updated) does as well.
DROP INDEX runs_cancelled_idx;
CREATE INDEX runs_cancelled_idx ON runs (created_at)
    WHERE status = 'cancelled';
