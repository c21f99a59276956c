-- 005_receiver.sql: the reference downstream consumer (`runledger receive`).
--
-- The contract every consumer of the notification topic must follow: a
-- notification is applied once per `idempotency-key` header, whatever the
-- number of deliveries, and the same key with a different payload is a
-- conflict that is refused and kept as evidence, never an overwrite. The
-- insert and the effect belong in one transaction; the Kafka offset is
-- committed only after it.

CREATE TABLE received_notifications (
    idempotency_key text        PRIMARY KEY,
    payload         jsonb       NOT NULL,
    topic           text,
    kafka_partition integer,
    kafka_offset    bigint,
    -- deliveries of this key seen after the first (same payload)
    duplicates      integer     NOT NULL DEFAULT 0,
    received_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE receiver_conflicts (
    conflict_id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    idempotency_key text        NOT NULL,
    payload         jsonb       NOT NULL,
    topic           text,
    kafka_partition integer,
    kafka_offset    bigint,
    seen_at         timestamptz NOT NULL DEFAULT now()
);
