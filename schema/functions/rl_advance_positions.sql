-- Moves the consumed positions (consumed_positions) of the partitions of
-- the offsets given: each over the offsets contiguous with its stored
-- position, never past one that is missing (an event neither registered
-- nor noted, in this transaction or one before). A failover to an
-- asynchronous standby keeps a prefix of the committed transactions, so a
-- position written this way never stands past an event whose
-- registration the ledger lost, and the consumers' comparison with it
-- reads every such event again. A partition with no row starts at its
-- first offset given. Rows are written in (topic, partition) order, as
-- two workers sharing partitions during a rebalance must queue.
-- Returns nothing; NULL elements are skipped.
CREATE OR REPLACE FUNCTION rl_advance_positions(
    p_topics text[], p_partitions integer[], p_offsets bigint[])
RETURNS void
    LANGUAGE sql
    AS $$
    WITH u AS (
        SELECT DISTINCT u.topic, u.part, u.off
          FROM unnest(p_topics, p_partitions, p_offsets)
               AS u(topic, part, off)
         WHERE u.topic IS NOT NULL AND u.part IS NOT NULL
           AND u.off IS NOT NULL
    ), runs_of AS (
        -- consecutive offsets share off - row_number()
        SELECT u.topic, u.part, min(u.off) AS first, max(u.off) + 1 AS next
          FROM (SELECT u.*, u.off - row_number() OVER (
                           PARTITION BY u.topic, u.part ORDER BY u.off) AS g
                  FROM u) u
         GROUP BY u.topic, u.part, u.g
    ), cur AS (
        SELECT g.topic, g.part,
               coalesce(p.next_offset,
                        (SELECT min(r.first) FROM runs_of r
                          WHERE r.topic = g.topic AND r.part = g.part))
                   AS at
          FROM (SELECT DISTINCT r.topic, r.part FROM runs_of r) g
          LEFT JOIN consumed_positions p
                 ON p.topic = g.topic AND p.partition = g.part
    )
    INSERT INTO consumed_positions AS p (topic, partition, next_offset)
    SELECT c.topic, c.part, r.next
      FROM cur c
      JOIN runs_of r ON r.topic = c.topic AND r.part = c.part
                    AND r.first <= c.at AND r.next > c.at
     ORDER BY c.topic, c.part
        ON CONFLICT (topic, partition) DO UPDATE
       SET next_offset = excluded.next_offset, updated_at = now()
     WHERE p.next_offset < excluded.next_offset;
$$;
