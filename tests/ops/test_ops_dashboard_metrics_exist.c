/* Every metric the chart's Grafana dashboard and PrometheusRule name is one
 * that /metrics of a running consumer lists. A panel or an alert on a
 * misspelt or removed metric shows "No data" or never fires, silently; this
 * test names it instead.
 *
 * Names come from the PromQL of the dashboard (every "expr", and the
 * label_values() queries of its variables) and of the rule template (every
 * `expr:`, Go template actions removed). A name counts as exported when
 * /metrics has a "# TYPE" line for it (a family without samples yet still
 * has one), or it ends in _bucket, _sum or _count and its base is a
 * histogram family. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ops.h"
#include "rltest.h"

#define MAX_NAMES 256
#define NAME_SIZE 128

struct names {
    char name[MAX_NAMES][NAME_SIZE];
    int n;
};

static char metrics[1 << 20];

static void
names_add(struct names *ns, const char *s, size_t len)
{
    if (len >= NAME_SIZE)
        len = NAME_SIZE - 1;
    for (int i = 0; i < ns->n; i++)
        if (strlen(ns->name[i]) == len && strncmp(ns->name[i], s, len) == 0)
            return;
    RL_REQUIRE(ns->n < MAX_NAMES);
    memcpy(ns->name[ns->n], s, len);
    ns->name[ns->n][len] = '\0';
    ns->n++;
}

static int
ident_start(char c)
{
    return isalpha((unsigned char)c) || c == '_' || c == ':';
}

static int
ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == ':';
}

/* Index just past the bracket that closes the one at p[i]. */
static size_t
skip_group(const char *p, size_t i, char open, char close)
{
    int depth = 0;

    for (; p[i]; i++) {
        if (p[i] == '"' || p[i] == '\'' || p[i] == '`') {
            char q = p[i];

            for (i++; p[i] && p[i] != q; i++)
                if (p[i] == '\\' && p[i + 1])
                    i++;
            if (!p[i])
                return i;
            continue;
        }
        if (p[i] == open)
            depth++;
        else if (p[i] == close && --depth == 0)
            return i + 1;
    }
    return i;
}

/* Adds the metric names of one PromQL expression: identifiers outside
 * strings, label matchers {...}, ranges [...] and the label lists of
 * by/without/on/ignoring/group_left/group_right, that are neither a
 * function (followed by '('), an aggregation operator (which may be
 * followed by `by (...)` first) nor a keyword. */
static void
promql_names(const char *expr, struct names *ns)
{
    static const char *const keywords[] = {
        "and",         "or",      "unless",       "bool",     "offset",
        "by",          "without", "on",           "ignoring", "group_left",
        "group_right", "inf",     "nan",          "atan2",    "sum",
        "min",         "max",     "avg",          "group",    "stddev",
        "stdvar",      "count",   "count_values", "bottomk",  "topk",
        "quantile",    "limitk",  "limit_ratio",  NULL};
    static const char *const label_lists[] = {
        "by", "without", "on", "ignoring", "group_left", "group_right", NULL};
    size_t i = 0;

    while (expr[i]) {
        char c = expr[i];

        if (c == '"' || c == '\'' || c == '`') {
            for (i++; expr[i] && expr[i] != c; i++)
                if (expr[i] == '\\' && expr[i + 1])
                    i++;
            if (expr[i])
                i++;
        } else if (c == '{') {
            i = skip_group(expr, i, '{', '}');
        } else if (c == '[') {
            i = skip_group(expr, i, '[', ']');
        } else if (c == '$') {
            /* A Grafana variable ($__rate_interval, ${pod}). */
            for (i++; expr[i] &&
                      (ident_char(expr[i]) || expr[i] == '{' || expr[i] == '}');
                 i++)
                ;
        } else if (isdigit((unsigned char)c) ||
                   (c == '.' && isdigit((unsigned char)expr[i + 1]))) {
            /* Numbers and durations (5m, 1e3, 0.99). */
            while (expr[i] &&
                   (isalnum((unsigned char)expr[i]) || expr[i] == '.'))
                i++;
        } else if (ident_start(c)) {
            size_t start = i, len, j;
            int keyword = 0, list = 0;

            while (ident_char(expr[i]))
                i++;
            len = i - start;
            for (int k = 0; keywords[k]; k++)
                if (strlen(keywords[k]) == len &&
                    strncmp(expr + start, keywords[k], len) == 0)
                    keyword = 1;
            for (int k = 0; label_lists[k]; k++)
                if (strlen(label_lists[k]) == len &&
                    strncmp(expr + start, label_lists[k], len) == 0)
                    list = 1;
            for (j = i; expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n';
                 j++)
                ;
            if (list) {
                if (expr[j] == '(')
                    i = skip_group(expr, j, '(', ')');
            } else if (!keyword && expr[j] != '(') {
                names_add(ns, expr + start, len);
            }
        } else {
            i++;
        }
    }
}

/* Grafana variable queries: label_values(<series>, <label>) names a
 * series; label_values(<label>) does not. */
static void
variable_names(const char *query, struct names *ns)
{
    const char *open = strstr(query, "label_values(");
    const char *comma;
    char series[512];

    if (!open)
        return;
    open += strlen("label_values(");
    comma = strrchr(open, ',');
    if (!comma || (size_t)(comma - open) >= sizeof(series))
        return;
    memcpy(series, open, (size_t)(comma - open));
    series[comma - open] = '\0';
    promql_names(series, ns);
}

static int
dashboard_names(const cJSON *node, struct names *ns, int *exprs)
{
    const cJSON *child;

    if (cJSON_IsObject(node)) {
        const cJSON *templating =
            cJSON_GetObjectItemCaseSensitive(node, "templating");
        const cJSON *list =
            cJSON_GetObjectItemCaseSensitive(templating, "list");
        const cJSON *var;

        cJSON_ArrayForEach(var, list)
        {
            const cJSON *def =
                cJSON_GetObjectItemCaseSensitive(var, "definition");
            const cJSON *query = cJSON_GetObjectItemCaseSensitive(var, "query");

            if (cJSON_IsObject(query))
                query = cJSON_GetObjectItemCaseSensitive(query, "query");
            if (cJSON_IsString(def))
                variable_names(def->valuestring, ns);
            if (cJSON_IsString(query))
                variable_names(query->valuestring, ns);
        }
    }
    cJSON_ArrayForEach(child, node)
    {
        if (child->string && strcmp(child->string, "expr") == 0 &&
            cJSON_IsString(child)) {
            promql_names(child->valuestring, ns);
            (*exprs)++;
        } else if (cJSON_IsObject(child) || cJSON_IsArray(child)) {
            dashboard_names(child, ns, exprs);
        }
    }
    return 0;
}

/* Removes Go template actions ({{ ... }}) in place. */
static void
strip_actions(char *s)
{
    char *r = s, *w = s;

    while (*r) {
        if (r[0] == '{' && r[1] == '{') {
            char *end = strstr(r, "}}");

            if (!end)
                break;
            *w++ = ' ';
            r = end + 2;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

static size_t
indent_of(const char *line)
{
    size_t n = 0;

    while (line[n] == ' ')
        n++;
    return n;
}

/* The `expr:` values of a rule template: inline, or a block scalar (>-, |)
 * whose lines are indented deeper than the key. */
static int
rule_names(char *text, struct names *ns)
{
    char expr[4096];
    int exprs = 0;
    char *line = text;

    while (line && *line) {
        char *next = strchr(line, '\n');
        size_t ind = indent_of(line);

        if (next)
            *next++ = '\0';
        if (strncmp(line + ind, "expr:", 5) == 0) {
            const char *v = line + ind + 5;

            while (*v == ' ')
                v++;
            expr[0] = '\0';
            if (*v == '>' || *v == '|') {
                while (
                    next && *next &&
                    (indent_of(next) > ind || next[indent_of(next)] == '\0')) {
                    char *after = strchr(next, '\n');

                    if (after)
                        *after++ = '\0';
                    strncat(expr, next, sizeof(expr) - strlen(expr) - 2);
                    strcat(expr, "\n");
                    next = after;
                }
            } else {
                snprintf(expr, sizeof(expr), "%s", v);
            }
            strip_actions(expr);
            promql_names(expr, ns);
            exprs++;
        }
        line = next;
    }
    return exprs;
}

/* 1 when the exposition text declares name (or name is a _bucket, _sum or
 * _count of a declared histogram). */
static int
exported(const char *text, const char *name)
{
    static const char *const suffixes[] = {"_bucket", "_sum", "_count", NULL};
    char want[NAME_SIZE + 32];
    size_t len = strlen(name);

    snprintf(want, sizeof(want), "\n# TYPE %s ", name);
    if (strstr(text, want) || strncmp(text, want + 1, strlen(want + 1)) == 0)
        return 1;
    for (int k = 0; suffixes[k]; k++) {
        size_t sl = strlen(suffixes[k]);

        if (len > sl && strcmp(name + len - sl, suffixes[k]) == 0) {
            snprintf(want, sizeof(want), "\n# TYPE %.*s histogram\n",
                     (int)(len - sl), name);
            if (strstr(text, want))
                return 1;
        }
    }
    return 0;
}

/* Prints and counts the names /metrics lacks. */
static int
missing(const char *text, const struct names *ns, const char *where)
{
    int bad = 0;

    for (int i = 0; i < ns->n; i++) {
        if (!exported(text, ns->name[i])) {
            fprintf(stderr, "%s names %s, which /metrics does not list\n",
                    where, ns->name[i]);
            bad++;
        }
    }
    return bad;
}

static char *
read_source(const char *rel)
{
    const char *root = getenv("RL_SOURCE_DIR");
    char path[1024];
    char *text;

    RL_REQUIRE(root);
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    text = ops_slurp(path);
    if (!text)
        fprintf(stderr, "could not read %s\n", path);
    RL_REQUIRE(text);
    return text;
}

int
main(void)
{
    struct e2e t;
    struct names dash = {0}, rules = {0}, probe = {0};
    char port_env[64];
    char *json_text, *rule_text;
    cJSON *root;
    int port = ops_free_port();
    int exprs = 0, rule_exprs, consumer, status;
    const char *consume_args[] = {"consume", NULL};

    /* The extraction itself, on known expressions: one name each, and
     * nothing taken from labels, functions, keywords or durations. */
    promql_names("sum by (outcome) (rate(runledger_runs_total{outcome="
                 "\"completed\",pod=~\"$pod\"}[$__rate_interval])) / on "
                 "(pod) group_left max(x:y_z offset 5m) > bool 0.5 and "
                 "max without (le) (x:y_z) or min by (pod) (1 - x:y_z)",
                 &probe);
    RL_CHECK(probe.n == 2);
    RL_CHECK(probe.n == 2 &&
             strcmp(probe.name[0], "runledger_runs_total") == 0 &&
             strcmp(probe.name[1], "x:y_z") == 0);

    json_text = read_source("helm/runledger/dashboards/runledger.json");
    root = cJSON_Parse(json_text);
    RL_REQUIRE(root);
    dashboard_names(root, &dash, &exprs);
    cJSON_Delete(root);
    rule_text = read_source("helm/runledger/templates/prometheusrule.yaml");
    rule_exprs = rule_names(rule_text, &rules);
    fprintf(stderr,
            "dashboard: %d expressions, %d metric names; rules: %d "
            "expressions, %d metric names\n",
            exprs, dash.n, rule_exprs, rules.n);
    /* A broken extraction must not pass by finding nothing. */
    RL_CHECK(exprs >= 20 && dash.n >= 20);
    RL_CHECK(rule_exprs >= 9 && rules.n >= 8);

    e2e_setup(&t, "opsdash", 2);
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    {
        const char *env[] = {port_env, NULL};

        consumer = ops_spawn(&t, consume_args, env);
    }
    RL_CHECK(ops_wait_http(port, "/readyz", 200, 60000));
    RL_CHECK(ops_http_get(port, "/metrics", metrics, sizeof(metrics)) == 200);
    RL_CHECK(ops_metrics_check(metrics) > 20);

    RL_CHECK(missing(metrics, &dash, "dashboards/runledger.json") == 0);
    RL_CHECK(missing(metrics, &rules, "templates/prometheusrule.yaml") == 0);
    {
        struct names all = dash;

        for (int i = 0; i < rules.n; i++)
            names_add(&all, rules.name[i], strlen(rules.name[i]));
        fprintf(stderr, "metric names checked: %d\n", all.n);
        for (int i = 0; i < all.n; i++)
            fprintf(stderr, "  %s\n", all.name[i]);
    }

    /* And the check can fail: a made-up name, a counter's _count, a
     * histogram's _bucket (exported). */
    {
        struct names fake = {0};

        promql_names("rate(runledger_made_up_total[5m]) + "
                     "runledger_events_total_count + "
                     "runledger_attempt_latency_seconds_bucket",
                     &fake);
        RL_CHECK(fake.n == 3);
        RL_CHECK(missing(metrics, &fake, "the self-check") == 2);
    }

    status = e2e_signal(&t, consumer, SIGTERM, 1);
    RL_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    free(json_text);
    free(rule_text);
    e2e_teardown(&t);
    RL_TEST_END();
}
