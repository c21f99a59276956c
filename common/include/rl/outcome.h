#ifndef RL_OUTCOME_H
#define RL_OUTCOME_H

/* What one attempt's call came to: attempts.outcome, whose CHECK
 * constraint (schema/current.sql) allows exactly these. Code compares the
 * enum; the text exists only where it meets SQL, a log or an operator,
 * through the one table in common/src/outcome.c. What each outcome does
 * to its run is the retry policy's (consumer/ledger/retry.c). */

enum rl_outcome {
    RL_OUTCOME_OK,             /* answered */
    RL_OUTCOME_TRANSIENT,      /* 408, 429 or 5xx: may be retried */
    RL_OUTCOME_PERMANENT,      /* refused for good, or never sendable */
    RL_OUTCOME_AMBIGUOUS,      /* sent, no answer: may have generated */
    RL_OUTCOME_INVALID_OUTPUT, /* answered with nothing the ledger stores */
    RL_OUTCOME_NOT_SENT,       /* nothing left: retrying is safe */
    RL_OUTCOME_CONNECT_FAILED, /* no connection to the endpoint */
    RL_OUTCOME_CANCELLED,      /* cut off before it was sent */
    RL_OUTCOME_LEASE_LOST      /* the lease went while the call ran */
};

/* The outcome as the ledger spells it ("ok", "not_sent", ...); NULL for
 * a value outside the enum. */
const char *rl_outcome_name(enum rl_outcome outcome);

#endif /* RL_OUTCOME_H */
