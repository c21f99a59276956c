#ifndef RL_OTLP_H
#define RL_OTLP_H

/* Span export over OTLP/HTTP with JSON encoding (POST {endpoint}/v1/traces,
 * the OTLP JSON mapping). Spans are queued in memory, bounded by count and
 * bytes, and sent in batches by a thread of the exporter's own, so a run
 * never waits for the collector: a full queue, a collector that refuses a
 * batch or does not answer within the timeout drops spans and counts them
 * (rl_otlp_dropped_total). */

#include <stddef.h>
#include <stdint.h>

struct rl_otlp_config {
    const char *endpoint;        /* base, e.g. http://collector:4318: the
                                    spans go to {endpoint}/v1/traces */
    const char *traces_endpoint; /* the full URL; wins over endpoint */
    const char *service_name;    /* service.name; NULL: "runledger" */
    long timeout_ms;             /* one export request, connect included */
    long schedule_delay_ms;      /* longest wait before a batch is sent */
    size_t max_batch;            /* spans per request */
    size_t max_queue;            /* spans waiting */
    size_t max_queue_bytes;      /* their encoded bytes */
};

/* One finished span. Strings are borrowed for the call only. */
struct rl_otlp_span {
    const char *name;
    const char *trace_id;       /* 32 hex */
    const char *span_id;        /* 16 hex */
    const char *parent_span_id; /* 16 hex; NULL or "": a root span */
    int kind;                   /* OTLP SpanKind: 1 internal, 3 client */
    int64_t start_ns, end_ns;   /* wall clock, ns since the epoch */
    int error;                  /* status ERROR, else UNSET */
    const char *run_id, *tenant, *job, *outcome; /* NULL: left out */
    int attempt;                                 /* < 0: left out */
    int64_t lease_epoch;                         /* < 0: left out */
    long http_status;                            /* <= 0: left out */
};

struct rl_otlp;

/* Starts an exporter and its thread. Returns NULL with errstr "" when
 * neither endpoint is set (tracing export off), or NULL with the reason.
 * Free with rl_otlp_destroy. */
struct rl_otlp *rl_otlp_new(const struct rl_otlp_config *cfg, char *errstr,
                            size_t errstr_size);

/* Queues a copy of span, or drops it when the queue is full. Never
 * blocks on the network. otlp may be NULL (nothing happens).
 * @locality any thread */
void rl_otlp_export(struct rl_otlp *otlp, const struct rl_otlp_span *span);

/* Sends what is queued (one last try, bounded by the timeout), stops the
 * thread and frees. NULL is accepted. */
void rl_otlp_destroy(struct rl_otlp *otlp);

/* Process totals, for /metrics. @locality any thread */
long long rl_otlp_exported_total(void);
long long rl_otlp_dropped_total(void);

#endif /* RL_OTLP_H */
