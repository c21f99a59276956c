/* Proposals: the answer of an approval-required run becomes its immutable
 * proposal, and the run waits for a human. */
#include <stdlib.h>

#include "ledger_int.h"
#include "rl/approval.h"
#include "rl/db_approval.h"
#include "rl/db_complete.h"
#include "rl/db_dispatch.h"
#include "rl/err.h"
#include "rl/failpoint.h"
#include "rl/log.h"

/* An approval-required run's answer becomes its immutable proposal and the
 * run waits for a human (schema/006_approval.sql): nothing is queued for
 * the relay until `runs approve` records an approval bound to the
 * proposal's digest. The attempt's outcome is recorded by the same
 * statement, as for a completion. */
void
ledger_propose(struct ledger *lg, struct rl_item *item,
               const struct rl_log_ctx *ctx)
{
    const struct rl_lease lease = ledger_lease_of(lg, item);
    struct rl_model_call *call = &item->call;
    char *output = rl_model_output_json(call);
    char *proposal = NULL;
    char digest[RL_HEX_SIZE];
    char errstr[512];
    enum rl_propose_status status = RL_PROPOSE_WAITING;
    struct rl_attempt_ok oc = rl_item_attempt_ok(item);
    int err;

    rl_failpoint("after_model_response");
    if (!output) {
        ledger_defer(lg, item, REDO_RESULT, "store the proposal",
                     "out of memory");
        return;
    }
    if (rl_approval_required(item->request_json) < 0) {
        free(output);
        rl_db_record_outcome(
            lg->db, item->run_id,
            &(struct rl_attempt_outcome){.outcome = RL_OUTCOME_PERMANENT,
                                         .call = rl_item_attempt_ok(item),
                                         .error = "approval gate unreadable"},
            errstr, sizeof(errstr));
        ledger_give_up(lg, item, RL_RUN_FAILED, "invalid_approval",
                       "the approval of the effective request cannot be read: "
                       "output not published");
        return;
    }
    err = rl_approval_proposal(item->request_json, output, &proposal, digest,
                               errstr, sizeof(errstr));
    free(output);
    if (err == RL_OK)
        err = rl_db_propose_attempt(lg->db, &lease, &oc, proposal, digest,
                                    lg->cfg->console_base_url, &status, errstr,
                                    sizeof(errstr));
    free(proposal);
    if (err == RL_ERR_DB || err == RL_ERR_NOMEM) {
        ledger_defer(lg, item, REDO_RESULT, "store the proposal", errstr);
        return;
    }
    if (err == RL_ERR_STALE) {
        atomic_fetch_add(&lg->pl->counters.lease_lost, 1);
        rl_log_warn(ctx, "lease lost: proposal discarded");
    } else if (err != RL_OK) {
        ledger_give_up(lg, item, RL_RUN_FAILED, "invalid_output", errstr);
        return;
    } else if (status == RL_PROPOSE_SUPERSEDED) {
        atomic_fetch_add(&lg->pl->counters.failed, 1);
        rl_log_warn(ctx, "%s", errstr);
    } else if (status == RL_PROPOSE_WAITING) {
        rl_log_info(ctx, "awaiting approval");
    }
    rl_failpoint("after_complete_commit");
    ledger_finish(lg, item);
}
