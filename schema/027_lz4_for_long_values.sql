-- 027_lz4_for_long_values.sql: the ledger's long values (prompts, inputs,
-- answers, proposals, notification payloads) are compressed with lz4
-- instead of pglz, where the server has lz4.
--
-- PostgreSQL compresses a value of more than about 2 kB before it stores
-- it out of line, and decompresses it whenever it is read whole. With the
-- default method, pglz, storing a run with a 20 kB prompt cost more than
-- everything else its claim does: tests/bench/pgbench/per_batch.sql with
-- 20 kB requests (one client, four interleaved pairs) spent 0.69-0.84 ms
-- of PostgreSQL's CPU a run with pglz and 0.41-0.47 ms with lz4 (1,240-
-- 1,390 runs/s against 2,080-2,300); `make bench` zero with 20 kB inputs
-- (BENCH_INPUT_BYTES), two interleaved pairs: 0.98 and 1.20 ms a run with
-- pglz, 0.75 and 0.79 with lz4. lz4 compresses and decompresses several
-- times faster, for a larger result: a 20 kB English text stores in 11.3
-- kB against pglz's 9.4 kB, so a run with long values writes more WAL.
-- That is the trade a ledger wants whose values are written once and read
-- whole at the completion and the relay. Values of the bench's default
-- size (a few hundred bytes) are not compressed at all, either way.
--
-- The setting applies to values written from now on; values already
-- stored keep pglz, and PostgreSQL reads both. It changes only the
-- catalog (no value is rewritten), holding each table's lock for a
-- moment. A server built without lz4 (it is an optional build option;
-- Debian's and the official images' servers have it) keeps pglz: the
-- migration then changes nothing, and it says so in a NOTICE.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_settings
                    WHERE name = 'default_toast_compression'
                      AND 'lz4' = ANY (enumvals)) THEN
        RAISE NOTICE 'this server has no lz4: long values keep pglz';
        RETURN;
    END IF;
    ALTER TABLE runs
        ALTER COLUMN request SET COMPRESSION lz4,
        ALTER COLUMN raw_input SET COMPRESSION lz4,
        ALTER COLUMN output SET COMPRESSION lz4,
        ALTER COLUMN proposal SET COMPRESSION lz4;
    ALTER TABLE outbox
        ALTER COLUMN explicit_payload SET COMPRESSION lz4;
    ALTER TABLE outbox_delivered
        ALTER COLUMN explicit_payload SET COMPRESSION lz4;
    ALTER TABLE outbox_dead
        ALTER COLUMN payload SET COMPRESSION lz4;
    ALTER TABLE received_notifications
        ALTER COLUMN payload SET COMPRESSION lz4;
    ALTER TABLE receiver_conflicts
        ALTER COLUMN payload SET COMPRESSION lz4;
END
$$;
