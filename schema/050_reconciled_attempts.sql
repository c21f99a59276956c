-- 050_reconciled_attempts.sql: an attempt whose answer was read back from
-- the endpoint's record says so.
--
-- With RUNLEDGER_MODEL_STORED_COMPLETIONS an ambiguous attempt (sent, then
-- a timeout, a reset or a cut body, or a worker that died after recording
-- the dispatch) is looked up in the endpoint's stored completions before
-- the ambiguity policy applies. When its answer is found there it is
-- adopted as that attempt's result: no new generation, and the outcome
-- 'ok' with the usage the record names. reconciled_at is when it was
-- found, reconciled_from the stored answer's id, so an operator can tell
-- such an attempt from one whose reply arrived. Both are NULL for every
-- other attempt; adding nullable columns without a default rewrites
-- nothing.
ALTER TABLE attempts
    ADD COLUMN reconciled_at timestamp with time zone,
    ADD COLUMN reconciled_from text;
