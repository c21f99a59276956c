-- 013_outbox_outcomes.sql: an outcome per outbox row.
--
-- The relay used to record a batch as a whole: one refused row (a
-- notification larger than the broker accepts) failed every row of its
-- batch, and the same oldest rows were locked again and again, so one
-- oversized answer stopped every notification behind it. Now each row
-- gets its own outcome: acknowledged rows move to outbox_delivered as
-- before; a row that fails transiently stays pending with a due time that
-- backs off (due_at, with the error in last_error); a row the broker or
-- the producer refuses for good is moved to outbox_dead with the reason.
--
-- due_at orders the relay's batches: a new row is due at once (the
-- default, now(), is its insert transaction's time, as created_at is; rows
-- pending at this migration are due at its time), a row that failed is
-- due later. The relay reads outbox_due_idx up to
-- now(), so rows backing off are never read, however many there are.
ALTER TABLE outbox
    ADD COLUMN due_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN last_error text;

CREATE INDEX outbox_due_idx ON outbox (due_at);

-- Notifications set aside because the broker or the producer refused
-- them for good (reason: the Kafka error, e.g. MSG_SIZE_TOO_LARGE). Its
-- own table rather than a column of outbox_delivered, so that a row there
-- still means "the broker has it". The payload is kept: an operator who
-- raised the limit can queue the row again (see docs/operations.md). A
-- run has at most one row per channel across outbox, outbox_delivered and
-- outbox_dead.
CREATE TABLE outbox_dead (
    run_id         text        NOT NULL,
    channel        text        NOT NULL,
    payload        jsonb       NOT NULL,
    payload_bytes  integer     NOT NULL,
    created_at     timestamptz NOT NULL,
    dead_at        timestamptz NOT NULL DEFAULT now(),
    delivery_count integer     NOT NULL,
    reason         text        NOT NULL,
    PRIMARY KEY (run_id, channel)
);
