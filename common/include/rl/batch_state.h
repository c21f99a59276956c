#ifndef RL_BATCH_STATE_H
#define RL_BATCH_STATE_H

/* The state of a batch (batches.state) and of a run in one
 * (batch_runs.state), whose CHECK constraints (schema/061_batches.sql)
 * allow exactly these. Code compares the enums; the text exists only where
 * it meets SQL, a log, a metric or an operator, through the two tables in
 * common/src/batch_state.c. The provider's own status of a batch
 * (struct rl_model_batch_state) is the provider's word and stays text. */

enum rl_batch_state {
    RL_BATCH_INTENT,    /* formed, its runs chosen; nothing uploaded yet */
    RL_BATCH_SUBMITTED, /* created at the provider: polled until it ends */
    RL_BATCH_COMPLETED, /* the provider completed it; its lines are read */
    RL_BATCH_FAILED,    /* failed at the provider, or refused by it */
    RL_BATCH_EXPIRED,   /* its completion window passed */
    RL_BATCH_CANCELLED  /* cancelled at the provider */
};

/* How many states enum rl_batch_state has (the gauges' by_state). */
#define RL_BATCH_STATE_COUNT ((int)RL_BATCH_CANCELLED + 1)

enum rl_batch_run_state {
    RL_BATCH_RUN_WAITING,   /* parked, in no batch yet */
    RL_BATCH_RUN_IN_BATCH,  /* in a batch; no line read for it yet */
    RL_BATCH_RUN_COMPLETED, /* its line's answer stored */
    RL_BATCH_RUN_IGNORED,   /* its line came for a run cancelled or
                               completed before */
    RL_BATCH_RUN_FAILED,    /* the run failed */
    RL_BATCH_RUN_RETRIED,   /* pending again, for the next batch */
    RL_BATCH_RUN_GO_LIVE    /* pending again, its next attempts live */
};

/* The state as the ledger spells it ("intent", "submitted", ...);
 * "invalid" for a value outside the enum. A batch's state is only
 * written: the statements choose batches by it, code never reads it back,
 * so it has no parse. */
const char *rl_batch_state_name(enum rl_batch_state state);

/* The run's state in its batch as the ledger spells it ("waiting",
 * "in_batch", ...); "invalid" for a value outside the enum. */
const char *rl_batch_run_state_name(enum rl_batch_run_state state);

/* Reads the ledger's spelling of a run's state in its batch into *state.
 * Returns 0, or RL_ERR_INVALID (text NULL or no state; *state
 * untouched). */
int rl_batch_run_state_parse(const char *text, enum rl_batch_run_state *state);

#endif /* RL_BATCH_STATE_H */
