-- 072_component_roles.sql: each component gets only the privileges it
-- needs, through a group role of its own.
--
-- Until now every process connected as the owner of every table, so the
-- console's credentials could disable the audit trigger, rewrite the
-- audit or mark runs completed. `runledger migrate` now creates (or
-- expects) five NOLOGIN roles, makes runledger_owner the owner of every
-- object and applies the migrations as it (common/src/db/roles.c); this
-- file grants the others what their statements touch. A login user gets
-- a component's rights by membership: GRANT runledger_worker TO my_user.
-- A login that is a member of runledger_owner (the single-URL setup)
-- keeps doing everything, as before.
--
-- The audit table: INSERT for every role that writes it, SELECT for the
-- ones that show it, and never UPDATE, DELETE, TRUNCATE or ALTER (its
-- append-only trigger can only be disabled by its owner). What a role
-- must do beyond its grants (the console's decisions and operator
-- actions) is a SECURITY DEFINER function in schema/functions/, whose
-- EXECUTE is granted there.
--
-- A later migration that adds a table grants it to the roles that need
-- it; nothing is granted by default.

-- runledger_worker: `runledger consume` (intake, ledger, renewer,
-- completer, batcher, health) and `runledger receive`.
-- DELETE on runs: a claim takes back the run it registered when a purge
-- tombstoned it meanwhile (rl_claim_runs).
GRANT SELECT, INSERT, UPDATE ON attempts, consumed_positions, budget_usage,
    model_limits, received_notifications TO runledger_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON runs, run_tombstones,
    budget_reservations, model_calls, batches, batch_runs, batch_poll_slots
    TO runledger_worker;
GRANT SELECT, INSERT ON outbox, receiver_conflicts, run_decisions
    TO runledger_worker;
GRANT SELECT ON run_limits, budgets, batch_settings, model_prices
    TO runledger_worker;
-- The sweeper counts a limit's running runs under the limit row's lock
-- (rl_claim_due: FOR UPDATE), which needs UPDATE on a column: updated_at
-- only, so a worker cannot change a limit.
GRANT UPDATE (updated_at) ON run_limits TO runledger_worker;
GRANT INSERT ON audit TO runledger_worker;

-- runledger_relay: the outbox relay (`runledger relay`, or the relay
-- thread of `runledger consume`, whose login is then a member of both).
-- It reads runs for the envelope, and what its /readyz and /metrics
-- gauges count.
GRANT SELECT, UPDATE, DELETE ON outbox TO runledger_relay;
GRANT SELECT, INSERT ON outbox_delivered, outbox_dead TO runledger_relay;
GRANT SELECT ON runs, attempts, run_limits, batches, batch_runs
    TO runledger_relay;
GRANT INSERT ON audit TO runledger_relay;

-- runledger_console: `runledger console` reads what its pages show and
-- keeps its sessions; it changes runs only through the SECURITY DEFINER
-- functions rl_decide_proposal and rl_operator_*.
GRANT SELECT ON runs, attempts, approvals, approvers, batches, batch_runs,
    batch_settings, budgets, budget_usage, budget_reservations, model_limits,
    model_prices, model_calls, outbox, outbox_delivered, outbox_dead,
    run_decisions, run_limits, console_users, consumed_positions
    TO runledger_console;
GRANT SELECT, INSERT, DELETE ON console_sessions TO runledger_console;
GRANT SELECT, INSERT ON audit TO runledger_console;

-- runledger_readonly: reports, exports and the read-only CLI commands.
-- Never the console's users or sessions.
GRANT SELECT ON runs, attempts, approvals, approvers, batches, batch_runs,
    batch_settings, budgets, budget_usage, budget_reservations, model_limits,
    model_prices, model_calls, outbox, outbox_delivered, outbox_dead,
    run_decisions, run_limits, run_tombstones, consumed_positions,
    received_notifications, receiver_conflicts, audit, schema_migrations
    TO runledger_readonly;
