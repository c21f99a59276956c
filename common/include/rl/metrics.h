#ifndef RL_METRICS_H
#define RL_METRICS_H

#include <stddef.h>

/* A tiny Prometheus registry: counters, gauges and histograms with labels,
 * rendered in the text exposition format 0.0.4
 * (https://prometheus.io/docs/instrumenting/exposition_formats/).
 *
 * A family is defined once by name; its series are created on first use,
 * keyed by their rendered label set (rl_metrics_labels). Updates and
 * rendering take one mutex: fine for the rates here (a few thousand
 * updates per second), not meant for a hot inner loop.
 * @locality any thread */

enum rl_metric_type { RL_METRIC_COUNTER, RL_METRIC_GAUGE, RL_METRIC_HISTOGRAM };

/* Families per registry. */
#define RL_METRICS_MAX_FAMILIES 64
/* Upper bounds per histogram (the +Inf bucket is implicit). */
#define RL_METRICS_MAX_BUCKETS 24

struct rl_metrics;

/* A new, empty registry (free with rl_metrics_destroy), or NULL when out
 * of memory. */
struct rl_metrics *rl_metrics_new(void);

/* Frees m and every series; NULL is accepted. */
void rl_metrics_destroy(struct rl_metrics *m);

/* Defines a family. name must match [a-zA-Z_:][a-zA-Z0-9_:]*; help is one
 * line. Histograms take n_buckets ascending upper bounds (copied); others
 * pass NULL, 0. Returns 0, or RL_ERR_INVALID (bad name, redefinition with
 * another type, too many families or buckets). Defining the same family
 * twice with the same type is a no-op. */
int rl_metrics_define(struct rl_metrics *m, const char *name,
                      enum rl_metric_type type, const char *help,
                      const double *buckets, size_t n_buckets);

/* Renders label pairs as Prometheus expects them inside braces:
 * rl_metrics_labels(buf, size, "topic", "t", "partition", "3", NULL)
 * gives `topic="t",partition="3"`, with '\\', '"' and newlines escaped.
 * Arguments are name, value, ..., NULL. Returns 0, or RL_ERR_INVALID when
 * buf is too small (buf then holds ""). */
int rl_metrics_labels(char *buf, size_t size, ...);

/* Adds delta to the series of a counter or gauge (labels from
 * rl_metrics_labels; NULL or "" for none). Unknown families and negative
 * counter deltas are ignored. */
void rl_metrics_add(struct rl_metrics *m, const char *name, const char *labels,
                    double delta);

/* Sets the series of a gauge, or of a counter mirrored from a monotonic
 * source (the caller's value must never go down). */
void rl_metrics_set(struct rl_metrics *m, const char *name, const char *labels,
                    double value);

/* Records one observation in a histogram series. */
void rl_metrics_observe(struct rl_metrics *m, const char *name,
                        const char *labels, double value);

/* Drops every series of a family (e.g. consumer lag of partitions this
 * process no longer owns), keeping the definition. */
void rl_metrics_clear(struct rl_metrics *m, const char *name);

/* The whole registry in text format 0.0.4, families in definition order.
 * Returns a malloc'd NUL-terminated string (free with free()) and its
 * length in *len (may be NULL), or NULL when out of memory. */
char *rl_metrics_render(struct rl_metrics *m, size_t *len);

#endif /* RL_METRICS_H */
