-- 082_console_run_tombstones.sql: the console's schedules page tells a
-- window whose run was purged from a window that never got a run, as the
-- completeness audit does (rl_schedule_windows_check reads the purged
-- runs' run IDs and fingerprints in run_tombstones). The console role
-- (072) could not read that table.
GRANT SELECT ON run_tombstones TO runledger_console;
