-- pgbench script: one single-row INSERT per transaction, i.e. one commit
-- (one WAL flush, shared by concurrent clients through group commit). The
-- machine line's commits_per_s: what this disk and CPU give any ledger.
INSERT INTO probe (client, at) VALUES (:client_id, now());
