/* http_metrics.c: what /metrics can report: every metric family with its
 * help text and buckets, and the series of the ledger's concurrency
 * limits, with tenant and job labels as RUNLEDGER_METRICS_TENANT_LABELS
 * says. consumer/http.c fills the values. */
#include "http_metrics.h"

#include <string.h>

#include "rl/db_batch.h"
#include "rl/runid.h"

static const double latency_buckets[] = {0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                         5,    10,  20,   30,  60, 120};
static const double delivery_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                          0.5,   1,    2.5,   5,    10};

/* ---- metric families ---------------------------------------------------- */

struct family_def {
    const char *name;
    enum rl_metric_type type;
    const char *help;
};

static const struct family_def families[] = {
    {"runledger_build_info", RL_METRIC_GAUGE,
     "build of this process (value 1) by version and role"},
    {"runledger_process_start_time_seconds", RL_METRIC_GAUGE,
     "start time of the process since the Unix epoch"},
    {"runledger_ready", RL_METRIC_GAUGE, "1 when /readyz answers 200"},
    {"runledger_schedule_windows_missed", RL_METRIC_GAUGE,
     "windows of a schedule in the audited period (7 days, up to the "
     "scheduler's --audit-grace ago) with no registered run, by schedule"},
    {"runledger_scheduler_active", RL_METRIC_GAUGE,
     "1 while this scheduler holds the scheduler lease"},
    {"runledger_scheduler_events_total", RL_METRIC_COUNTER,
     "window events this scheduler published and the broker acknowledged"},
    {"runledger_postgres_up", RL_METRIC_GAUGE,
     "1 when the last PostgreSQL check succeeded"},
    {"runledger_kafka_group_joined", RL_METRIC_GAUGE,
     "1 while the consumer holds an assignment of the group"},
    {"runledger_assigned_partitions", RL_METRIC_GAUGE,
     "partitions of the schedule topic assigned to this consumer"},
    {"runledger_rebalances_total", RL_METRIC_COUNTER,
     "consumer group rebalances seen, by type (assign, revoke)"},
    {"runledger_consumer_lag", RL_METRIC_GAUGE,
     "messages between the high watermark and the committed offset, per "
     "assigned partition (librdkafka statistics)"},
    {"runledger_events_total", RL_METRIC_COUNTER, "schedule events consumed"},
    {"runledger_events_invalid_total", RL_METRIC_COUNTER,
     "schedule events rejected by validation (dead-lettered)"},
    {"runledger_runs_total", RL_METRIC_COUNTER,
     "runs this process brought to an outcome: completed, failed, unknown "
     "(parked for an operator) or retried (released for a later attempt)"},
    {"runledger_runs_in_flight", RL_METRIC_GAUGE,
     "runs between intake and a durable state in this process"},
    {"runledger_held_bytes", RL_METRIC_GAUGE,
     "bytes charged to the runs this process holds (events, requests, "
     "inputs, bodies, answers), against RUNLEDGER_MAX_HELD_BYTES"},
    {"runledger_claims_total", RL_METRIC_COUNTER,
     "lease claims by result (won, lost)"},
    {"runledger_duplicates_total", RL_METRIC_COUNTER,
     "events whose run the ledger already held (completed, leased, parked "
     "or not due): acknowledged without a model call"},
    {"runledger_fingerprint_conflicts_total", RL_METRIC_COUNTER,
     "events with a known run id and another request fingerprint"},
    {"runledger_purged_runs_redelivered_total", RL_METRIC_COUNTER,
     "events of runs purged since, with their fingerprint: acknowledged "
     "without a model call (the run's tombstone)"},
    {"runledger_partitions_read_again_total", RL_METRIC_COUNTER,
     "seeks back to the ledger's consumed position of a partition: "
     "registrations were lost, as in a failover to an asynchronous standby"},
    {"runledger_lease_lost_total", RL_METRIC_COUNTER,
     "attempts abandoned because another worker took the lease"},
    {"runledger_queued_total", RL_METRIC_COUNTER,
     "runs registered pending at intake, for a sweeper to claim: no model "
     "slot free, runs already waiting, or over a concurrency limit"},
    {"runledger_swept_total", RL_METRIC_COUNTER,
     "runs claimed by the sweeper (queued runs, due retries, expired "
     "leases)"},
    {"runledger_dispatches_total", RL_METRIC_COUNTER,
     "model requests dispatched (recorded before sending)"},
    {"runledger_attempts_total", RL_METRIC_COUNTER,
     "finished model calls by outcome"},
    {"runledger_generations_total", RL_METRIC_COUNTER,
     "model calls that returned a usable generation (outcome ok)"},
    {"runledger_ambiguous_attempts_total", RL_METRIC_COUNTER,
     "model calls whose result is unknowable (timeout or reset after "
     "sending, or cancelled after sending): each may be an extra "
     "billable generation"},
    {"runledger_reconciled_attempts_total", RL_METRIC_COUNTER,
     "ambiguous attempts looked up in the endpoint's record of stored "
     "completions, by result: found (the stored answer adopted as the "
     "attempt's, no new generation) or not_found (within "
     "RUNLEDGER_RECONCILE_SETTLE_MS: the ambiguity policy applied)"},
    {"runledger_reconcile_lookups_total", RL_METRIC_COUNTER,
     "lookups in the endpoint's record made for ambiguous attempts (each "
     "a GET, never a generation)"},
    {"runledger_reconciled_generations_total", RL_METRIC_COUNTER,
     "generations found in the endpoint's record for the ambiguous "
     "attempts whose answer was adopted: one per stored completion, so an "
     "attempt the endpoint generated twice counts two"},
    {"runledger_reconcile_foreign_records_total", RL_METRIC_COUNTER,
     "stored completions naming a run looked up but another installation, "
     "request fingerprint or model (another ledger's: run IDs are "
     "deterministic): never adopted"},
    {"runledger_batch_orphans_cancelled_total", RL_METRIC_COUNTER,
     "provider batches naming this installation and database cluster "
     "whose intent the ledger does not hold (lost by a failover to an "
     "asynchronous standby) or ended with another batch: cancelled at the "
     "provider, never read"},
    {"runledger_tokens_total", RL_METRIC_COUNTER,
     "tokens reported by the model, by kind (prompt, completion, cached)"},
    {"runledger_attempt_latency_seconds", RL_METRIC_HISTOGRAM,
     "model call latency, transfer start to end"},
    {"runledger_dead_letters_total", RL_METRIC_COUNTER,
     "dead letters acknowledged by the broker, by reason"},
    {"runledger_dead_letters_undelivered", RL_METRIC_GAUGE,
     "dead letters produced and not yet acknowledged by the broker (being "
     "retried); their events' offsets are not committed past them"},
    {"runledger_outbox_dead_lettered_total", RL_METRIC_COUNTER,
     "outbox rows refused for good by the broker or the producer, "
     "dead-lettered and moved to outbox_dead, by reason"},
    {"runledger_spans_exported_total", RL_METRIC_COUNTER,
     "spans the OTLP collector accepted"},
    {"runledger_spans_dropped_total", RL_METRIC_COUNTER,
     "spans not exported: queue full, collector away, slow or refusing"},
    {"runledger_outbox_relayed_total", RL_METRIC_COUNTER,
     "outbox rows this process delivered to the notification topic"},
    {"runledger_outbox_delivery_latency_seconds", RL_METRIC_HISTOGRAM,
     "relay batch latency: rows locked to every row acknowledged"},
    {"runledger_outbox_vacuum_seconds", RL_METRIC_HISTOGRAM,
     "VACUUM of the outbox by this process's relay (every "
     "RUNLEDGER_RELAY_VACUUM_ROWS delivered rows, at least once a second "
     "while it delivers)"},
    {"runledger_outbox_backlog", RL_METRIC_GAUGE,
     "undelivered outbox rows in the ledger (ledger-wide: aggregate with "
     "max; exact up to 100000, then pg_class.reltuples)"},
    {"runledger_outbox_oldest_pending_seconds", RL_METRIC_GAUGE,
     "age of the oldest undelivered outbox row (ledger-wide)"},
    {"runledger_unknown_runs", RL_METRIC_GAUGE,
     "runs in status unknown waiting for an operator (ledger-wide)"},
    {"runledger_runs_awaiting_approval", RL_METRIC_GAUGE,
     "runs whose proposal waits for an approve or reject (ledger-wide)"},
    {"runledger_batches", RL_METRIC_GAUGE,
     "batches of batch-mode runs in the ledger by state: intent (not yet "
     "created at the provider), submitted, completed, failed, expired, "
     "cancelled"},
    {"runledger_batch_runs_waiting", RL_METRIC_GAUGE,
     "runs waiting for a batch or in a batch not yet answered"},
    {"runledger_batch_oldest_open_seconds", RL_METRIC_GAUGE,
     "age of the oldest batch not yet finished (0: none)"},
    {"runledger_cancelled_runs", RL_METRIC_GAUGE,
     "runs an operator cancelled, still in the ledger (ledger-wide)"},
    {"runledger_runs_waiting", RL_METRIC_GAUGE,
     "runs pending and due now, waiting for a model slot (ledger-wide: "
     "aggregate with max; counted up to 100,000)"},
    {"runledger_limit_running", RL_METRIC_GAUGE,
     "runs running under a concurrency limit, by tenant and job (job \"\" "
     "for a tenant-wide limit; only limits set with `runledger limits`; "
     "ledger-wide: aggregate with max)"},
    {"runledger_limit_concurrency", RL_METRIC_GAUGE,
     "a concurrency limit set with `runledger limits`, by tenant and job"},
    {"runledger_ledger_rows", RL_METRIC_GAUGE,
     "estimated rows of a ledger table, by table: runs, attempts, "
     "outbox_delivered (ledger-wide: aggregate with max; the statistics "
     "collector's live-row estimate, what `runledger purge` shrinks)"},
    {"runledger_budget_deferrals_total", RL_METRIC_COUNTER,
     "dispatches refused by a token budget, without spending an attempt, "
     "by until: next_window (spent for the UTC day: the run waits for "
     "00:00 UTC) or settled (held by reservations of calls in flight: the "
     "run is retried shortly)"},
    {"runledger_rate_limit_waits_total", RL_METRIC_COUNTER,
     "dispatches this process put back to pending, without spending an "
     "attempt, because their model's rate limit had no room or the "
     "provider paused the model (runledger limits show --model has them "
     "per model, ledger-wide)"},
    {"runledger_model_throttles_total", RL_METRIC_COUNTER,
     "429 answers this process received; each paused its model for every "
     "worker until the provider's reset"},
};

int
rl_http_define_families(struct rl_metrics *m)
{
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        const struct family_def *f = &families[i];
        const double *b = NULL;
        size_t nb = 0;

        if (strcmp(f->name, "runledger_attempt_latency_seconds") == 0) {
            b = latency_buckets;
            nb = sizeof(latency_buckets) / sizeof(latency_buckets[0]);
        } else if (strcmp(f->name,
                          "runledger_outbox_delivery_latency_seconds") == 0 ||
                   strcmp(f->name, "runledger_outbox_vacuum_seconds") == 0) {
            b = delivery_buckets;
            nb = sizeof(delivery_buckets) / sizeof(delivery_buckets[0]);
        }
        if (rl_metrics_define(m, f->name, f->type, f->help, b, nb) != 0)
            return -1;
    }
    return 0;
}

void
rl_http_set_labelled(struct rl_metrics *m, const char *name, const char *label,
                     const char *value, double v)
{
    char labels[128];

    rl_metrics_labels(labels, sizeof(labels), label, value, NULL);
    rl_metrics_set(m, name, labels, v);
}

/* A tenant or job as a label value under RUNLEDGER_METRICS_TENANT_LABELS:
 * as it is, or (hashed) the first 12 hex digits of its SHA-256, so a
 * multi-tenant cluster's metrics name no customer; "" stays "". */
static const char *
label_value(const char *mode, const char *raw, char buf[RL_HEX_SIZE])
{
    if (!raw || !*raw || strcmp(mode, "hashed") != 0)
        return raw ? raw : "";
    if (rl_sha256_hex(raw, strlen(raw), buf) != 0)
        return "";
    buf[12] = '\0';
    return buf;
}

void
rl_http_set_limits(struct rl_metrics *m, const struct rl_db_gauges *g,
                   const char *mode)
{
    char labels[512];
    double running = 0, concurrency = 0;

    rl_metrics_clear(m, "runledger_limit_running");
    rl_metrics_clear(m, "runledger_limit_concurrency");

    for (size_t i = 0; i < g->nlimits; i++) {
        const struct rl_db_limit_use *u = &g->limits[i];
        char tenant[RL_HEX_SIZE], job[RL_HEX_SIZE];

        if (strcmp(mode, "off") == 0) {
            running += (double)u->running;
            concurrency += (double)u->concurrency;
            continue;
        }
        if (rl_metrics_labels(labels, sizeof(labels), "tenant",
                              label_value(mode, u->tenant, tenant), "job",
                              label_value(mode, u->job, job), NULL) != 0)
            continue;
        rl_metrics_set(m, "runledger_limit_running", labels,
                       (double)u->running);
        rl_metrics_set(m, "runledger_limit_concurrency", labels,
                       (double)u->concurrency);
    }
    if (strcmp(mode, "off") == 0 && g->nlimits > 0) {
        rl_metrics_set(m, "runledger_limit_running", NULL, running);
        rl_metrics_set(m, "runledger_limit_concurrency", NULL, concurrency);
    }
}

void
rl_http_set_batches(struct rl_metrics *m, struct rl_db *db)
{
    struct rl_db_batch_gauges g;
    char errstr[512];

    if (rl_db_batch_gauges(db, &g, errstr, sizeof(errstr)) != 0)
        return;
    for (int i = 0; i < RL_BATCH_STATE_COUNT; i++)
        rl_http_set_labelled(m, "runledger_batches", "state",
                             rl_batch_state_name((enum rl_batch_state)i),
                             (double)g.by_state[i]);
    rl_metrics_set(m, "runledger_batch_runs_waiting", NULL,
                   (double)g.runs_waiting);
    rl_metrics_set(m, "runledger_batch_oldest_open_seconds", NULL,
                   g.oldest_open_seconds);
}
