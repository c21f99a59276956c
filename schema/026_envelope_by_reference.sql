-- 026_envelope_by_reference.sql: a notification's standard envelope is
-- built from its run when the relay reads it, not stored with it.
--
-- The envelope (run_id, job, tenant, scheduled_at, version, channel and
-- the run's whole output) was built by the completion and stored in the
-- outbox row of each channel, then copied into outbox_delivered when the
-- relay delivered it: with the run's own output column, five copies of
-- every answer for two channels. For the bench's 250-byte answers that
-- was about 1.8 kB of the 6.5 kB of WAL a run; for a 50 kB report it is
-- 200 kB more a run, compressed four times on the way. Every field of
-- the envelope is on the run and never changes once the run is completed
-- (identity columns are immutable, the output write-once), so the relay
-- builds it from the run it already joins for job and tenant: the bytes
-- on the topic are those the stored envelope had.
--
-- The column is renamed with its meaning: explicit_payload is NULL for a
-- standard envelope, and holds a payload given explicitly
-- (rl_complete_run's p_payloads) as before. Rows queued before this
-- migration keep their stored envelopes there, which the relay sends as
-- they are. The rename is also the fence for a rolling upgrade: a relay
-- of an older version, still running while this one rolls out, would
-- read NULL as its payload and send an empty notification; its read now
-- fails on the missing column (an error it logs and retries until it is
-- replaced), so it sends nothing. rl_payload_as_sent() gives any outbox or
-- outbox_delivered row's payload as the topic carries it; outbox_dead
-- keeps the full payload it was refused with (the relay builds it when it
-- sets a row aside). A later change to rl_envelope changes what the
-- audit shows for envelopes sent before it: such a migration first
-- writes the old envelope into explicit_payload of the rows delivered so
-- far.

ALTER TABLE outbox RENAME COLUMN payload TO explicit_payload;
ALTER TABLE outbox ALTER COLUMN explicit_payload DROP NOT NULL;
ALTER TABLE outbox_delivered RENAME COLUMN payload TO explicit_payload;
ALTER TABLE outbox_delivered ALTER COLUMN explicit_payload DROP NOT NULL;

-- The functions and triggers this migration defined now live in
-- schema/functions/, one file each, re-created by migrate after the
-- numbered migrations whenever a file changes.
