-- 081_schedules_grants.sql: the schedules tables (080) granted to the
-- roles whose statements touch them (072: nothing is granted by default).
--
-- runledger_worker: `runledger scheduler` (the chart runs it with the
-- worker's login) reads the schedules and their pauses, moves each
-- schedule's published_through under its fenced lease, and holds that
-- lease; the completeness audit of /metrics reads them too. The operator's
-- `schedules set|pause|resume|remove|sync` run with the owner's login.
GRANT SELECT, UPDATE (published_through) ON schedules TO runledger_worker;
GRANT SELECT ON schedule_pauses TO runledger_worker;
GRANT SELECT, INSERT, UPDATE ON scheduler_lease TO runledger_worker;

-- runledger_console and runledger_readonly: what a page or a report of
-- the schedules shows.
GRANT SELECT ON schedules, schedule_pauses TO runledger_console;
GRANT SELECT ON schedules, schedule_pauses, scheduler_lease
    TO runledger_readonly;
