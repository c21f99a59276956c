#ifndef RL_RUN_STATUS_H
#define RL_RUN_STATUS_H

/* The status of a run in the ledger: runs.status, whose CHECK constraint
 * (schema/015_cancel.sql) allows exactly these. Code compares the enum;
 * the text exists only where it meets SQL, a log or an operator, through
 * the one table in common/src/run_status.c. */

enum rl_run_status {
    RL_RUN_PENDING,           /* waiting for a claim, due at next_attempt_at */
    RL_RUN_RUNNING,           /* leased by a worker */
    RL_RUN_COMPLETED,         /* output stored, notifications queued */
    RL_RUN_FAILED,            /* parked for good */
    RL_RUN_UNKNOWN,           /* a dispatch's outcome is unknowable */
    RL_RUN_AWAITING_APPROVAL, /* a proposal waits for a human */
    RL_RUN_CANCELLED          /* an operator cancelled it */
};

/* The status as the ledger spells it ("pending", "awaiting_approval",
 * ...); "invalid" for a value outside the enum. */
const char *rl_run_status_name(enum rl_run_status status);

/* Reads the ledger's spelling of a status into *status. Returns 0, or
 * RL_ERR_INVALID (text NULL or no status; *status untouched). */
int rl_run_status_parse(const char *text, enum rl_run_status *status);

#endif /* RL_RUN_STATUS_H */
