-- 063_batch_poll_slots.sql: a bound on the polls of the whole consumer
-- group, per provider (docs/batch.md).
--
-- Each batch's polls back off on their own, but a group with many open
-- batches would still poll the provider as often as all of them together.
-- One row per provider (its base URL, without credentials or query) holds
-- the earliest time the next poll may be sent: a worker's batcher takes a
-- poll slot and a due batch in one statement (rl_batch_take_poll), which
-- moves next_at on by 60 s / RUNLEDGER_BATCH_MAX_POLLS_PER_MINUTE, so the
-- polls of every worker together are spaced at least that far apart.
-- polls counts the slots taken (what operators read).

CREATE TABLE batch_poll_slots (
    provider   text        PRIMARY KEY,
    next_at    timestamptz NOT NULL,
    polls      bigint      NOT NULL DEFAULT 0
);
