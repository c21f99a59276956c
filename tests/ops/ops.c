#include "ops.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rltest.h"

extern char **environ;

/* The e2e defaults, then the caller's extras, then the inherited
 * environment; the first entry of a name wins (getenv's rule), so extras
 * are placed first. DATABASE_URL is the one e2e_spawn would give `cmd`
 * (a login of the component's role under RL_TEST_DB_ROLES=1). Returns the
 * number of entries. */
static int
build_env(struct e2e *t, const char *cmd, const char *const *extra, char *vars,
          size_t var_size, char **envp, int max)
{
    int n = 0, nvars = 0;
    const char *defaults[9][2] = {
        {"DATABASE_URL", t->database_url},
        {"KAFKA_BOOTSTRAP_SERVERS", t->bootstrap},
        {"MODEL_BASE_URL", t->model_base_url},
        {"RUNLEDGER_TOPIC", t->topic},
        {"RUNLEDGER_NOTIFY_TOPIC", t->notify},
        {"RUNLEDGER_DLQ_TOPIC", t->dlq},
        {"RUNLEDGER_GROUP_ID", t->name},
        {"RUNLEDGER_WORKER_ID", NULL},
        {"RUNLEDGER_HTTP_PORT", "0"},
    };

    for (int i = 0; extra && extra[i] && n < max - 1; i++)
        envp[n++] = (char *)extra[i];
    for (int i = 0; i < 9; i++) {
        char *v = vars + (size_t)nvars * var_size;

        if (i == 0)
            e2e_database_url(t, cmd, extra, v, var_size);
        else if (i == 7)
            snprintf(v, var_size, "RUNLEDGER_WORKER_ID=%s-w%d", t->name,
                     t->nprocs);
        else
            snprintf(v, var_size, "%s=%s", defaults[i][0], defaults[i][1]);
        nvars++;
        envp[n++] = v;
    }
    for (char **e = environ; *e && n < max - 1; e++) {
        int dup = 0;

        for (int i = 0; i < n && !dup; i++) {
            size_t len = (size_t)(strchr(envp[i], '=') - envp[i]) + 1;

            dup = strncmp(*e, envp[i], len) == 0;
        }
        if (!dup)
            envp[n++] = *e;
    }
    envp[n] = NULL;
    return n;
}

const char *
ops_log_path(struct e2e *t, int slot)
{
    static char path[200];

    snprintf(path, sizeof(path), "%s.ops%d.log", t->name, slot);
    return path;
}

int
ops_spawn(struct e2e *t, const char *const *args, const char *const *extra)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    static char vars[9][1100];
    char *envp[300];
    char *argv[16];
    int slot = t->nprocs, n = 0;
    posix_spawn_file_actions_t fa;
    pid_t pid;

    RL_REQUIRE(bin && slot < E2E_MAX_PROCS);
    build_env(t, args[0], extra, &vars[0][0], sizeof(vars[0]), envp, 300);
    argv[n++] = (char *)bin;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, ops_log_path(t, slot),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    RL_REQUIRE(posix_spawn(&pid, bin, &fa, NULL, argv, envp) == 0);
    posix_spawn_file_actions_destroy(&fa);
    t->procs[slot] = pid;
    t->nprocs++;
    return slot;
}

char *
ops_slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (!fp)
        return NULL;
    do {
        if (cap - len < 4096) {
            char *grown = realloc(buf, cap + 65536);

            RL_REQUIRE(grown);
            buf = grown;
            cap += 65536;
        }
        n = fread(buf + len, 1, cap - len - 1, fp);
        len += n;
    } while (n > 0);
    fclose(fp);
    buf[len] = '\0';
    return buf;
}

static void
copy_out(const char *path, char *buf, size_t size)
{
    char *text;

    if (!buf || size == 0)
        return;
    text = ops_slurp(path);
    snprintf(buf, size, "%s", text ? text : "");
    free(text);
}

int
ops_run(struct e2e *t, const char *const *args, const char *const *extra,
        const char *stdin_text, char *out, size_t out_size, char *err,
        size_t err_size)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    static char vars[9][1100];
    char *envp[300];
    char *argv[32];
    char in_path[256], out_path[256], err_path[256];
    posix_spawn_file_actions_t fa;
    int64_t deadline = rltest_now_ms() + 60000;
    int n = 0, status;
    FILE *fp;
    pid_t pid;

    RL_REQUIRE(bin);
    snprintf(in_path, sizeof(in_path), "%s.run.in", t->name);
    snprintf(out_path, sizeof(out_path), "%s.run.out", t->name);
    snprintf(err_path, sizeof(err_path), "%s.run.err", t->name);
    fp = fopen(in_path, "wb");
    RL_REQUIRE(fp);
    if (stdin_text)
        fputs(stdin_text, fp);
    fclose(fp);
    build_env(t, args[0], extra, &vars[0][0], sizeof(vars[0]), envp, 300);
    argv[n++] = (char *)bin;
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, in_path, O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    RL_REQUIRE(posix_spawn(&pid, bin, &fa, NULL, argv, envp) == 0);
    posix_spawn_file_actions_destroy(&fa);
    for (;;) {
        struct timespec ts = {0, 20000000L};

        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        if (rltest_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nanosleep(&ts, NULL);
    }
    copy_out(out_path, out, out_size);
    copy_out(err_path, err, err_size);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int
ops_free_port(void)
{
    return rltest_free_port();
}

struct body {
    char *buf;
    size_t size, len;
};

static size_t
body_write(char *ptr, size_t size, size_t nmemb, void *opaque)
{
    struct body *b = opaque;
    size_t n = size * nmemb;
    size_t room = b->size - 1 - b->len;
    size_t take = n < room ? n : room;

    memcpy(b->buf + b->len, ptr, take);
    b->len += take;
    b->buf[b->len] = '\0';
    return n;
}

long
ops_http_get(int port, const char *path, char *buf, size_t size)
{
    char url[256];
    char dummy[64];
    struct body b = {buf ? buf : dummy, buf ? size : sizeof(dummy), 0};
    CURL *curl = curl_easy_init();
    long status = 0;

    RL_REQUIRE(curl);
    b.buf[0] = '\0';
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    return status;
}

int
ops_wait_http(int port, const char *path, long want, long timeout_ms)
{
    int64_t deadline = rltest_now_ms() + timeout_ms;
    long got = 0;

    while (rltest_now_ms() < deadline) {
        struct timespec ts = {0, 100000000L};

        got = ops_http_get(port, path, NULL, 0);
        if (got == want)
            return 1;
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "GET %s on %d: %ld, wanted %ld\n", path, port, got, want);
    return 0;
}

double
ops_metric(const char *text, const char *series)
{
    size_t len = strlen(series);
    const char *p = text;

    while (p && *p) {
        if (strncmp(p, series, len) == 0 && p[len] == ' ')
            return strtod(p + len + 1, NULL);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

double
ops_scrape(int port, const char *series)
{
    static char text[1 << 20];

    if (ops_http_get(port, "/metrics", text, sizeof(text)) != 200)
        return -2;
    return ops_metric(text, series);
}

static int
name_char(char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == ':' || (!first && c >= '0' && c <= '9');
}

long
ops_metrics_check(const char *text)
{
    char types[128][96];
    char kinds[128][32];
    int ntypes = 0;
    long samples = 0;
    const char *line = text;
    double last_bucket = -1;

    while (*line) {
        const char *eol = strchr(line, '\n');
        char buf[1024], name[96], base[96];
        size_t len;
        const char *p;
        int known = -1;
        char *end;

        if (!eol) {
            fprintf(stderr, "metrics: last line has no newline\n");
            return -1;
        }
        len = (size_t)(eol - line);
        if (len >= sizeof(buf))
            len = sizeof(buf) - 1;
        memcpy(buf, line, len);
        buf[len] = '\0';
        line = eol + 1;
        if (strncmp(buf, "# HELP ", 7) == 0)
            continue;
        if (strncmp(buf, "# TYPE ", 7) == 0) {
            char kind[32];

            if (sscanf(buf + 7, "%95s %31s", name, kind) != 2 ||
                (strcmp(kind, "counter") && strcmp(kind, "gauge") &&
                 strcmp(kind, "histogram")) ||
                ntypes == 128) {
                fprintf(stderr, "metrics: bad TYPE line: %s\n", buf);
                return -1;
            }
            snprintf(types[ntypes], sizeof(types[0]), "%s", name);
            snprintf(kinds[ntypes], sizeof(kinds[0]), "%s", kind);
            ntypes++;
            continue;
        }
        p = buf;
        if (!name_char(*p, 1)) {
            fprintf(stderr, "metrics: bad line: %s\n", buf);
            return -1;
        }
        while (name_char(*p, 0))
            p++;
        snprintf(name, sizeof(name), "%.*s", (int)(p - buf), buf);
        if (*p == '{') {
            /* label="value" pairs, values with \\ \" \n escapes */
            p++;
            while (*p != '}') {
                if (!name_char(*p, 1))
                    goto bad;
                while (name_char(*p, 0))
                    p++;
                if (p[0] != '=' || p[1] != '"')
                    goto bad;
                p += 2;
                while (*p && *p != '"')
                    p += *p == '\\' && p[1] ? 2 : 1;
                if (*p != '"')
                    goto bad;
                p++;
                if (*p == ',')
                    p++;
                else if (*p != '}')
                    goto bad;
            }
            p++;
        }
        if (*p != ' ')
            goto bad;
        p++;
        if (strcmp(p, "+Inf") != 0 && strcmp(p, "-Inf") != 0 &&
            strcmp(p, "NaN") != 0) {
            strtod(p, &end);
            if (end == p || *end)
                goto bad;
        }
        snprintf(base, sizeof(base), "%s", name);
        for (int i = 0; i < ntypes && known < 0; i++) {
            size_t tl = strlen(types[i]);

            if (strcmp(name, types[i]) == 0)
                known = i;
            else if (strcmp(kinds[i], "histogram") == 0 &&
                     strncmp(name, types[i], tl) == 0 &&
                     (strcmp(name + tl, "_bucket") == 0 ||
                      strcmp(name + tl, "_sum") == 0 ||
                      strcmp(name + tl, "_count") == 0))
                known = i;
        }
        if (known < 0) {
            fprintf(stderr, "metrics: sample without TYPE: %s\n", buf);
            return -1;
        }
        if (strstr(name, "_bucket")) {
            double v = strtod(strrchr(buf, ' ') + 1, NULL);

            /* last_bucket is reset after each series' _count */
            if (last_bucket >= 0 && v < last_bucket) {
                fprintf(stderr, "metrics: buckets not cumulative: %s\n", buf);
                return -1;
            }
            last_bucket = v;
        } else if (strstr(name, "_count") && last_bucket >= 0) {
            double v = strtod(strrchr(buf, ' ') + 1, NULL);

            if (v != last_bucket) {
                fprintf(stderr, "metrics: _count %g != +Inf bucket %g\n", v,
                        last_bucket);
                return -1;
            }
            last_bucket = -1;
        }
        samples++;
        continue;
    bad:
        fprintf(stderr, "metrics: bad sample: %s\n", buf);
        return -1;
    }
    return samples;
}

static rd_kafka_t *
group_client(struct e2e *t)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[256];
    rd_kafka_t *rk;

    rd_kafka_conf_set(conf, "bootstrap.servers", t->bootstrap, errstr,
                      sizeof(errstr));
    rd_kafka_conf_set(conf, "group.id", t->name, errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr,
                      sizeof(errstr));
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    RL_REQUIRE(rk);
    return rk;
}

int64_t
ops_committed(struct e2e *t, int32_t partition)
{
    rd_kafka_t *rk = group_client(t);
    rd_kafka_topic_partition_list_t *parts =
        rd_kafka_topic_partition_list_new(1);
    int64_t off = -1;

    rd_kafka_topic_partition_list_add(parts, t->topic, partition);
    if (rd_kafka_committed(rk, parts, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR)
        off = parts->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_destroy(rk);
    return off;
}

int
ops_group_members(struct e2e *t)
{
    rd_kafka_t *rk = group_client(t);
    const struct rd_kafka_group_list *list = NULL;
    int members = -1;

    if (rd_kafka_list_groups(rk, t->name, &list, 10000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR &&
        list->group_cnt == 1)
        members = list->groups[0].member_cnt;
    if (list)
        rd_kafka_group_list_destroy(list);
    rd_kafka_destroy(rk);
    return members;
}
