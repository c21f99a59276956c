/* metrics.c: the Prometheus registry behind /metrics (rl/metrics.h). */
#include "rl/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/buf.h"
#include "rl/err.h"

struct series {
    struct series *next;
    char *labels;   /* rendered label set, "" for none */
    double value;   /* counter/gauge value; histogram sum */
    double count;   /* histogram observations */
    double *counts; /* histogram: per bucket (not cumulative) */
};

struct family {
    char *name;
    char *help;
    enum rl_metric_type type;
    double buckets[RL_METRICS_MAX_BUCKETS];
    size_t n_buckets;
    struct series *head, *tail;
};

struct rl_metrics {
    pthread_mutex_t lock;
    struct family families[RL_METRICS_MAX_FAMILIES];
    size_t n_families;
};

static int
valid_name(const char *name)
{
    if (!name || !*name)
        return 0;
    for (const char *p = name; *p; p++) {
        int alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    *p == '_' || *p == ':';

        if (!alpha && !(p != name && *p >= '0' && *p <= '9'))
            return 0;
    }
    return 1;
}

struct rl_metrics *
rl_metrics_new(void)
{
    struct rl_metrics *m = calloc(1, sizeof(*m));

    if (!m)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

static void
series_free_all(struct family *f)
{
    struct series *s = f->head;

    while (s) {
        struct series *next = s->next;

        free(s->labels);
        free(s->counts);
        free(s);
        s = next;
    }
    f->head = f->tail = NULL;
}

void
rl_metrics_destroy(struct rl_metrics *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_families; i++) {
        series_free_all(&m->families[i]);
        free(m->families[i].name);
        free(m->families[i].help);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* @locks m->lock held */
static struct family *
find_family(struct rl_metrics *m, const char *name)
{
    for (size_t i = 0; i < m->n_families; i++) {
        if (strcmp(m->families[i].name, name) == 0)
            return &m->families[i];
    }
    return NULL;
}

int
rl_metrics_define(struct rl_metrics *m, const char *name,
                  enum rl_metric_type type, const char *help,
                  const double *buckets, size_t n_buckets)
{
    struct family *f;
    int err = 0;

    if (!m || !valid_name(name) || n_buckets > RL_METRICS_MAX_BUCKETS ||
        (type == RL_METRIC_HISTOGRAM && (!buckets || n_buckets == 0)))
        return RL_ERR_INVALID;
    for (size_t i = 1; i < n_buckets; i++) {
        if (!(buckets[i] > buckets[i - 1]))
            return RL_ERR_INVALID;
    }
    pthread_mutex_lock(&m->lock);
    f = find_family(m, name);
    if (f) {
        err = f->type == type ? 0 : RL_ERR_INVALID;
        goto done;
    }
    if (m->n_families == RL_METRICS_MAX_FAMILIES) {
        err = RL_ERR_INVALID;
        goto done;
    }
    f = &m->families[m->n_families];
    memset(f, 0, sizeof(*f));
    f->name = strdup(name);
    f->help = strdup(help ? help : "");
    if (!f->name || !f->help) {
        free(f->name);
        free(f->help);
        err = RL_ERR_NOMEM;
        goto done;
    }
    f->type = type;
    if (type == RL_METRIC_HISTOGRAM) {
        memcpy(f->buckets, buckets, n_buckets * sizeof(double));
        f->n_buckets = n_buckets;
    }
    m->n_families++;

done:
    pthread_mutex_unlock(&m->lock);
    return err;
}

int
rl_metrics_labels(char *buf, size_t size, ...)
{
    va_list ap;
    size_t len = 0;
    const char *name;
    int first = 1;

    if (!buf || size == 0)
        return RL_ERR_INVALID;
    buf[0] = '\0';
    va_start(ap, size);
    while ((name = va_arg(ap, const char *)) != NULL) {
        const char *value = va_arg(ap, const char *);
        size_t need = strlen(name) + 4;

        if (!value)
            value = "";
        if (len + need >= size)
            goto overflow;
        len += (size_t)snprintf(buf + len, size - len, "%s%s=\"",
                                first ? "" : ",", name);
        first = 0;
        for (const char *p = value; *p; p++) {
            const char *esc = *p == '\\'   ? "\\\\"
                              : *p == '"'  ? "\\\""
                              : *p == '\n' ? "\\n"
                                           : NULL;
            size_t n = esc ? strlen(esc) : 1;

            if (len + n + 2 >= size)
                goto overflow;
            if (esc)
                memcpy(buf + len, esc, n);
            else
                buf[len] = *p;
            len += n;
        }
        buf[len++] = '"';
        buf[len] = '\0';
    }
    va_end(ap);
    return 0;

overflow:
    va_end(ap);
    buf[0] = '\0';
    return RL_ERR_INVALID;
}

/* @locks m->lock held */
static struct series *
get_series(struct family *f, const char *labels)
{
    struct series *s;

    if (!labels)
        labels = "";
    for (s = f->head; s; s = s->next) {
        if (strcmp(s->labels, labels) == 0)
            return s;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->labels = strdup(labels);
    if (f->type == RL_METRIC_HISTOGRAM)
        s->counts = calloc(f->n_buckets, sizeof(double));
    if (!s->labels || (f->type == RL_METRIC_HISTOGRAM && !s->counts)) {
        free(s->labels);
        free(s->counts);
        free(s);
        return NULL;
    }
    /* Appended, so a scrape lists series in the order they appeared. */
    if (f->tail)
        f->tail->next = s;
    else
        f->head = s;
    f->tail = s;
    return s;
}

void
rl_metrics_add(struct rl_metrics *m, const char *name, const char *labels,
               double delta)
{
    struct family *f;
    struct series *s;

    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    f = find_family(m, name);
    if (f && f->type != RL_METRIC_HISTOGRAM &&
        !(f->type == RL_METRIC_COUNTER && delta < 0)) {
        s = get_series(f, labels);
        if (s)
            s->value += delta;
    }
    pthread_mutex_unlock(&m->lock);
}

void
rl_metrics_set(struct rl_metrics *m, const char *name, const char *labels,
               double value)
{
    struct family *f;
    struct series *s;

    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    f = find_family(m, name);
    if (f && f->type != RL_METRIC_HISTOGRAM) {
        s = get_series(f, labels);
        if (s)
            s->value = value;
    }
    pthread_mutex_unlock(&m->lock);
}

void
rl_metrics_observe(struct rl_metrics *m, const char *name, const char *labels,
                   double value)
{
    struct family *f;
    struct series *s;

    if (!m || value != value) /* NaN */
        return;
    pthread_mutex_lock(&m->lock);
    f = find_family(m, name);
    if (f && f->type == RL_METRIC_HISTOGRAM) {
        s = get_series(f, labels);
        if (s) {
            size_t i = 0;

            while (i < f->n_buckets && value > f->buckets[i])
                i++;
            if (i < f->n_buckets)
                s->counts[i] += 1;
            s->count += 1;
            s->value += value;
        }
    }
    pthread_mutex_unlock(&m->lock);
}

void
rl_metrics_clear(struct rl_metrics *m, const char *name)
{
    struct family *f;

    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    f = find_family(m, name);
    if (f)
        series_free_all(f);
    pthread_mutex_unlock(&m->lock);
}

/* Prometheus floats: integers without a fraction (counters read best
 * that way), others with enough digits to round-trip, and the special
 * values spelled as the format wants them. */
static void
format_value(double v, char *out, size_t size)
{
    if (v != v)
        snprintf(out, size, "NaN");
    else if (v > 1.7976931348623157e308 || v < -1.7976931348623157e308)
        snprintf(out, size, v > 0 ? "+Inf" : "-Inf");
    else if (v < 9007199254740992.0 && v > -9007199254740992.0 &&
             v == (double)(long long)v)
        snprintf(out, size, "%lld", (long long)v);
    else {
        /* The shortest form that reads back the same (0.1, not
         * 0.10000000000000001): bucket bounds are matched as text. */
        snprintf(out, size, "%.15g", v);
        if (strtod(out, NULL) != v)
            snprintf(out, size, "%.17g", v);
    }
}

static void
put_help(struct rl_buf *b, const struct family *f)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};

    rl_buf_printf(b, "# HELP %s ", f->name);
    for (const char *p = f->help; *p; p++) {
        if (*p == '\\')
            rl_buf_printf(b, "\\\\");
        else if (*p == '\n')
            rl_buf_printf(b, "\\n");
        else
            rl_buf_printf(b, "%c", *p);
    }
    rl_buf_printf(b, "\n# TYPE %s %s\n", f->name, types[f->type]);
}

static void
put_histogram(struct rl_buf *b, const struct family *f, const struct series *s)
{
    const char *sep = s->labels[0] ? "," : "";
    double cum = 0;
    char v[64], le[64];

    for (size_t i = 0; i < f->n_buckets; i++) {
        cum += s->counts[i];
        format_value(f->buckets[i], le, sizeof(le));
        format_value(cum, v, sizeof(v));
        rl_buf_printf(b, "%s_bucket{%s%sle=\"%s\"} %s\n", f->name, s->labels,
                      sep, le, v);
    }
    format_value(s->count, v, sizeof(v));
    rl_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %s\n", f->name, s->labels, sep,
                  v);
    format_value(s->value, v, sizeof(v));
    if (s->labels[0])
        rl_buf_printf(b, "%s_sum{%s} %s\n", f->name, s->labels, v);
    else
        rl_buf_printf(b, "%s_sum %s\n", f->name, v);
    format_value(s->count, v, sizeof(v));
    if (s->labels[0])
        rl_buf_printf(b, "%s_count{%s} %s\n", f->name, s->labels, v);
    else
        rl_buf_printf(b, "%s_count %s\n", f->name, v);
}

char *
rl_metrics_render(struct rl_metrics *m, size_t *len)
{
    struct rl_buf b = {0};
    char v[64];

    if (!m)
        return NULL;
    rl_buf_printf(&b, "%s", "");
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->n_families; i++) {
        const struct family *f = &m->families[i];

        put_help(&b, f);
        for (const struct series *s = f->head; s; s = s->next) {
            if (f->type == RL_METRIC_HISTOGRAM) {
                put_histogram(&b, f, s);
                continue;
            }
            format_value(s->value, v, sizeof(v));
            if (s->labels[0])
                rl_buf_printf(&b, "%s{%s} %s\n", f->name, s->labels, v);
            else
                rl_buf_printf(&b, "%s %s\n", f->name, v);
        }
    }
    pthread_mutex_unlock(&m->lock);
    if (b.failed) {
        free(b.data);
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.data;
}
