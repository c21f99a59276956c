-- 011_hot_dispatch.sql: the dispatch's update of a run can be HOT.
--
-- Recording a dispatch updates the run's attempts and updated_at, nothing
-- else. updated_at was the key of two partial indexes (runs_unknown_idx of
-- 003, runs_awaiting_approval_idx of 006), and an update that changes any
-- indexed column is never a heap-only (HOT) update: it adds an entry to
-- every index of runs, the primary key among them, whose run_id (a
-- SHA-256) puts each entry on a random page; after every checkpoint such a
-- page is written whole into the WAL. Keyed by created_at, which never
-- changes, the two indexes still serve what they are for (counting and
-- listing the few runs in those states), and the dispatch update stays on
-- its heap page when the page has room: fillfactor 70 leaves it (new
-- pages only; a run row is mostly its request, so about two updated
-- versions fit on a page beside its rows).
--
-- Measured (make bench, soak at 2,000 runs/s for 600 s, same machine and
-- hour): 68 % of the dispatch updates HOT; WAL 23 -> 17 GB for 1.2 million
-- runs; outbox backlog p99 1,090 -> 608 (max 1,494 -> 894).
DROP INDEX runs_unknown_idx;
CREATE INDEX runs_unknown_idx ON runs (created_at) WHERE status = 'unknown';

DROP INDEX runs_awaiting_approval_idx;
CREATE INDEX runs_awaiting_approval_idx ON runs (created_at)
    WHERE status = 'awaiting_approval';

ALTER TABLE runs SET (fillfactor = 70);
