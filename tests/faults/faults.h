#ifndef RL_FAULTS_H
#define RL_FAULTS_H

/* Shared by the fault tests (tests/faults/): the settings that make every
 * failure path fast (2 s leases, 100 ms sweeps and backoff, a 6 s Kafka
 * session) and the checks every scenario ends with. */

#include "e2e.h"

/* Starts `runledger <cmd>` with the fast fault-test settings; the extra
 * NAME=value arguments (NULL-terminated) override them. Returns the slot. */
int fx_spawn(struct e2e *t, const char *cmd, ...);

/* Waits (timeout_ms) until every run is in a final state (completed,
 * failed or unknown), nothing is pending in the outbox and the group has
 * committed every offset. Returns 1 when it did. */
int fx_settled(struct e2e *t, long timeout_ms);

/* Starts a consumer that looks its ambiguous calls up in the endpoint's
 * record (stored completions on, RUNLEDGER_AMBIGUOUS_POLICY=retry_once,
 * a settle window of settle_ms, lookups bounded to 2 s) with /metrics on
 * a port of its own, and waits until every run is settled (required).
 * Returns that port. */
int fx_reconcile_settled(struct e2e *t, int settle_ms);

/* The invariants of docs/design.md for one run that completed: one row,
 * completed, outbox_delivered rows = channels (2) and none pending, every
 * notification on the topic carries the run's idempotency keys. */
void fx_check_completed_once(struct e2e *t, const char *run_id);

/* Count of attempts of run_id with outcome (NULL: outcome IS NULL). */
int64_t fx_attempts(struct e2e *t, const char *run_id, const char *outcome);

/* Dead letters on the test's DLQ with header reason and run_id (NULL:
 * any). A run's dead letter is produced after its failure is recorded, so
 * this waits up to 10 s for at least one to arrive. */
long fx_dead_letters(struct e2e *t, const char *reason, const char *run_id);

/* As fx_dead_letters without waiting (for "none"). */
long fx_dead_letters_now(struct e2e *t, const char *reason, const char *run_id);

#endif /* RL_FAULTS_H */
