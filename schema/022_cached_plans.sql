-- 022_cached_plans.sql: the batch functions keep their plans for the
-- session instead of planning every statement on every call.
--
-- Since 007 every statement inside the claim, dispatch, complete and lock
-- functions was planned for the arrays of each call (force_custom_plan),
-- because a generic plan cached while the tables were small kept its
-- sequential scans as they grew (a 50-run batch went from 24 to 54 ms
-- within 40 s). Planning was then the largest single part of the
-- ledger's PostgreSQL CPU: in `make bench` zero (64 runs a statement) a
-- CPU profile put a quarter of PostgreSQL's time in GetCachedPlan /
-- standard_planner, and at light load (one or two runs a statement) it is
-- most of each statement's 1-2 ms.
--
-- These statements look runs, attempts and outbox rows up by key, a batch
-- of at most 512 keys at a time: an index probe per key is the right plan
-- for every batch size and every table size. So the plan is built once per
-- session and kept (force_generic_plan), with sequential scans disabled
-- inside the functions (enable_seqscan off: a table with an index is read
-- through it, however small it was when the plan was made) and JIT off (a
-- disabled scan is costed at 10^10, which would otherwise compile every
-- plan that still holds one, e.g. a probe of an empty table without a
-- usable index). A plan is rebuilt when PostgreSQL invalidates it (DDL,
-- new statistics from ANALYZE).
--
-- rl_claim_due is left as it is (its plans depend on the water level it
-- passes; it runs at most a few times a second).

ALTER FUNCTION rl_claim_runs(text[], text[], text[], timestamptz[], text[],
                             text[], jsonb[], jsonb[], double precision[],
                             text[], integer[], bigint[], text[], text,
                             double precision, integer)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION rl_claim_runs(text[], text[], text[], timestamptz[], text[],
                             text[], jsonb[], jsonb[], double precision[],
                             text[], integer[], bigint[], text[], text,
                             double precision, integer)
    SET enable_seqscan = off;
ALTER FUNCTION rl_claim_runs(text[], text[], text[], timestamptz[], text[],
                             text[], jsonb[], jsonb[], double precision[],
                             text[], integer[], bigint[], text[], text,
                             double precision, integer)
    SET jit = off;

ALTER FUNCTION rl_dispatch_runs(text[], bigint[], text[], bigint[], text,
                                bigint)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION rl_dispatch_runs(text[], bigint[], text[], bigint[], text,
                                bigint)
    SET enable_seqscan = off;
ALTER FUNCTION rl_dispatch_runs(text[], bigint[], text[], bigint[], text,
                                bigint)
    SET jit = off;

ALTER FUNCTION rl_complete_runs(text[], bigint[], text, jsonb[], text[],
                                text[], integer[], integer[], text[],
                                bigint[], bigint[], bigint[], bigint[])
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION rl_complete_runs(text[], bigint[], text, jsonb[], text[],
                                text[], integer[], integer[], text[],
                                bigint[], bigint[], bigint[], bigint[])
    SET enable_seqscan = off;
ALTER FUNCTION rl_complete_runs(text[], bigint[], text, jsonb[], text[],
                                text[], integer[], integer[], text[],
                                bigint[], bigint[], bigint[], bigint[])
    SET jit = off;

ALTER FUNCTION rl_lock_runs(text[])
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION rl_lock_runs(text[])
    SET enable_seqscan = off;
ALTER FUNCTION rl_lock_runs(text[])
    SET jit = off;

ALTER FUNCTION rl_take_model_limits(text[], text[], bigint[], bigint[], text,
                                    bigint)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION rl_take_model_limits(text[], text[], bigint[], bigint[], text,
                                    bigint)
    SET enable_seqscan = off;
ALTER FUNCTION rl_take_model_limits(text[], text[], bigint[], bigint[], text,
                                    bigint)
    SET jit = off;
