-- pgbench script: one single-row INSERT per transaction, i.e. one commit
-- (one WAL flush, shared by concurrent clients through group commit). The
-- commit_probe line's commits/s: what this disk and CPU give any ledger;
-- at one client and a fixed rate, the trickle_floor_commit line's latency:
-- what one durable write costs a run at light load, its tail included.
INSERT INTO probe (client, at) VALUES (:client_id, now());
