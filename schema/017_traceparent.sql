-- 017_traceparent.sql: a run keeps the W3C traceparent of the event that
-- registered it.
--
-- A schedule event may carry a `traceparent` Kafka header. Whichever
-- worker claims the run, first or after a retry, a lost lease or a
-- restart, sends the same trace on to the model and the notification, so
-- the value is stored with the run when it is inserted and returned by
-- every claim. It is validated by the service (version 00, non-zero ids);
-- NULL when the event had none (the run's trace id is then derived from
-- its run_id, docs/operations.md#tracing). Not indexed: no statement
-- looks runs up by it, and an unindexed column keeps later updates of the
-- row HOT-eligible.
ALTER TABLE runs ADD COLUMN traceparent text;

-- The functions and triggers this migration defined now live in
-- schema/functions/, one file each, re-created by migrate after the
-- numbered migrations whenever a file changes.
