-- Moves the consumed positions (consumed_positions) of the partitions of
-- the ranges given ([p_firsts[i], p_nexts[i]) of p_partitions[i]: an
-- event and the offsets before it that Kafka never delivers, such as
-- transaction markers): each over the ranges contiguous with its stored
-- position, never past an offset in none of them (an event neither
-- registered nor noted, in this transaction or one before). A failover to
-- an asynchronous standby keeps a prefix of the committed transactions,
-- so a position written this way never stands past an event whose
-- registration the ledger lost, and the consumers' comparison with it
-- reads every such event again. A partition with no row starts at its
-- first range. Rows are written in (topic, partition) order, as two
-- workers sharing partitions during a rebalance must queue. NULL
-- elements are skipped.
CREATE OR REPLACE FUNCTION rl_advance_positions(
    p_topics text[], p_partitions integer[], p_firsts bigint[],
    p_nexts bigint[])
RETURNS void
    LANGUAGE sql
    AS $$
    WITH r AS (
        SELECT u.topic, u.part, u.first, u.next
          FROM unnest(p_topics, p_partitions, p_firsts, p_nexts)
               AS u(topic, part, first, next)
         WHERE u.topic IS NOT NULL AND u.part IS NOT NULL
           AND u.first IS NOT NULL AND u.next IS NOT NULL
           AND u.first < u.next
    ), o AS (
        -- a range starts an island unless an earlier one reaches it
        SELECT r.*,
               max(r.next) OVER (PARTITION BY r.topic, r.part
                                 ORDER BY r.first, r.next
                                 ROWS BETWEEN UNBOUNDED PRECEDING
                                          AND 1 PRECEDING) AS reach
          FROM r
    ), s AS (
        SELECT o.*,
               sum(CASE WHEN o.reach IS NULL OR o.first > o.reach
                        THEN 1 ELSE 0 END)
                   OVER (PARTITION BY o.topic, o.part
                         ORDER BY o.first, o.next) AS island
          FROM o
    ), islands AS (
        SELECT s.topic, s.part, min(s.first) AS first, max(s.next) AS next
          FROM s
         GROUP BY s.topic, s.part, s.island
    ), cur AS (
        SELECT g.topic, g.part,
               coalesce(p.next_offset,
                        (SELECT min(i.first) FROM islands i
                          WHERE i.topic = g.topic AND i.part = g.part))
                   AS at
          FROM (SELECT DISTINCT i.topic, i.part FROM islands i) g
          LEFT JOIN consumed_positions p
                 ON p.topic = g.topic AND p.partition = g.part
    )
    INSERT INTO consumed_positions AS p (topic, partition, next_offset)
    SELECT c.topic, c.part, i.next
      FROM cur c
      JOIN islands i ON i.topic = c.topic AND i.part = c.part
                    AND i.first <= c.at AND i.next > c.at
     ORDER BY c.topic, c.part
        ON CONFLICT (topic, partition) DO UPDATE
       SET next_offset = excluded.next_offset, updated_at = now()
     WHERE p.next_offset < excluded.next_offset;
$$;
