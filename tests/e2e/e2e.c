/* The end-to-end harness behind e2e.h, linked by every e2e, fault, chaos
 * and ops test: runledger processes, private services, Kafka and ledger
 * helpers. Past 1,000 lines on purpose: it is the one library those tests
 * share. */
#include "e2e.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rl/db_migrate.h"
#include "rl/err.h"
#include "rl/kafka.h"
#include "rl/runid.h"
#include "rl/testing.h"
#include "rl/timefmt.h"
#include "rltest.h"
#include "rltest_db.h"
#include "rltest_roles.h"

extern char **environ;

/* The test's state and private services, for the exit handler: a failed
 * RL_REQUIRE exits at once, and nothing the test started may outlive it. */
static struct e2e *current;
static char private_pg[512];
static char private_kafka[512];

/* Removes a private service's folder (data files, hundreds of MB for
 * Kafka); its log next to it (<dir>.log) stays for post-mortems. */
static void
remove_tree(const char *dir)
{
    char cmd[1200];

    if (getenv("RL_KEEP_PRIVATE_SERVICES"))
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static void
stop_private(struct e2e *t)
{
    for (int i = 0; t && i < t->nprocs; i++) {
        if (t->procs[i] > 0) {
            kill(t->procs[i], SIGKILL);
            waitpid(t->procs[i], NULL, 0);
            t->procs[i] = 0;
        }
    }
    if (t && t->stub_pid > 0) {
        kill(t->stub_pid, SIGTERM);
        waitpid(t->stub_pid, NULL, 0);
        t->stub_pid = 0;
    }
    if (private_pg[0]) {
        e2e_harness("pg.sh", "kill", private_pg);
        remove_tree(private_pg);
        private_pg[0] = '\0';
    }
    if (private_kafka[0]) {
        e2e_harness("kafka.sh", "kill", private_kafka);
        remove_tree(private_kafka);
        private_kafka[0] = '\0';
    }
}

static void
at_exit(void)
{
    stop_private(current);
}

static void
track(struct e2e *t)
{
    static int registered;

    if (t)
        current = t;
    if (!registered) {
        atexit(at_exit);
        registered = 1;
    }
}

static void
url_with_schema(struct e2e *t, const char *base)
{
    /* libpq URI: options=-csearch_path=<schema>, percent-encoded. */
    snprintf(t->database_url, sizeof(t->database_url),
             "%s%coptions=-csearch_path%%3D%s", base,
             strchr(base, '?') ? '&' : '?', t->schema);
}

void
e2e_setup(struct e2e *t, const char *prefix, int partitions)
{
    e2e_setup_at(t, prefix, partitions, NULL, NULL);
}

void
e2e_setup_at(struct e2e *t, const char *prefix, int partitions,
             const char *database_url, const char *bootstrap)
{
    const char *db_base =
        database_url ? database_url : rltest_service_env("DATABASE_URL");
    char errstr[512];
    rd_kafka_conf_t *conf;
    int applied = 0;
    static char bootstrap_copy[512];

    memset(t, 0, sizeof(*t));
    track(t);
    if (bootstrap) {
        snprintf(bootstrap_copy, sizeof(bootstrap_copy), "%s", bootstrap);
        t->bootstrap = bootstrap_copy;
    } else {
        t->bootstrap = rltest_service_env("KAFKA_BOOTSTRAP_SERVERS");
    }
    t->model_base_url = rltest_service_env("MODEL_BASE_URL");
    snprintf(t->name, sizeof(t->name), "%s", rltest_unique(prefix));
    snprintf(t->topic, sizeof(t->topic), "%s.schedules", t->name);
    snprintf(t->notify, sizeof(t->notify), "%s.notifications", t->name);
    snprintf(t->dlq, sizeof(t->dlq), "%s.dlq", t->name);
    snprintf(t->schema, sizeof(t->schema), "%s", t->name);
    url_with_schema(t, db_base);

    t->db = rl_db_connect_schema(db_base, t->schema, errstr, sizeof(errstr));
    if (!t->db)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(t->db);
    if (rl_db_migrate(t->db, &applied, errstr, sizeof(errstr)) != 0)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(applied > 0);

    conf = rd_kafka_conf_new();
    RL_REQUIRE(rd_kafka_conf_set(conf, "bootstrap.servers", t->bootstrap,
                                 errstr, sizeof(errstr)) == RD_KAFKA_CONF_OK);
    rd_kafka_conf_set(conf, "linger.ms", "5", errstr, sizeof(errstr));
    t->producer = rl_kafka_producer_new(conf, 1, errstr, sizeof(errstr));
    RL_REQUIRE(t->producer);
    RL_REQUIRE(rl_kafka_topic_ensure(t->producer, t->topic, partitions, 30000,
                                     errstr, sizeof(errstr)) == 0);
    RL_REQUIRE(rl_kafka_topic_ensure(t->producer, t->notify, 4, 30000, errstr,
                                     sizeof(errstr)) == 0);
    RL_REQUIRE(rl_kafka_topic_ensure(t->producer, t->dlq, 1, 30000, errstr,
                                     sizeof(errstr)) == 0);
}

/* A failed test shows what its processes said last: a component that
 * exits or goes quiet at start is otherwise seen only as a timeout. */
static void
print_log_tails(const struct e2e *t)
{
    for (int i = 0; i < t->nprocs; i++) {
        char path[sizeof(t->name) + 32], tail[2049];
        FILE *f;
        long size;
        size_t n;

        /* e2e_spawn's name, or ops_spawn's (tests/ops/ops.h). */
        snprintf(path, sizeof(path), "%s.%d.log", t->name, i);
        f = fopen(path, "r");
        if (!f) {
            snprintf(path, sizeof(path), "%s.ops%d.log", t->name, i);
            f = fopen(path, "r");
        }
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        fseek(f, size > 2048 ? size - 2048 : 0, SEEK_SET);
        n = fread(tail, 1, sizeof(tail) - 1, f);
        tail[n] = '\0';
        fclose(f);
        fprintf(stderr, "# the end of %s:\n%s\n", path, tail);
    }
}

void
e2e_teardown(struct e2e *t)
{
    char sql[160];
    char errstr[256];

    if (rltest_failures > 0)
        print_log_tails(t);
    for (int i = 0; i < t->nprocs; i++) {
        if (t->procs[i] > 0) {
            kill(t->procs[i], SIGKILL);
            waitpid(t->procs[i], NULL, 0);
            t->procs[i] = 0;
        }
    }
    if (t->producer) {
        rd_kafka_flush(t->producer, 10000);
        rd_kafka_destroy(t->producer);
    }
    if (t->db) {
        /* A schema name is an identifier, which cannot be a parameter:
         * the server quotes it (format %I) and the result is run. */
        const char *params[1] = {t->schema};

        if (rl_db_exec(t->db,
                       "SELECT format('DROP SCHEMA IF EXISTS %I CASCADE', "
                       "$1::text)",
                       1, params, sql, sizeof(sql), errstr,
                       sizeof(errstr)) == 1)
            rl_db_exec(t->db, sql, 0, NULL, NULL, 0, errstr, sizeof(errstr));
        rl_db_destroy(t->db);
        t->db = NULL;
    }
    stop_private(t);
    current = NULL;
}

void
e2e_produce(struct e2e *t, const char *key, const char *value)
{
    rd_kafka_resp_err_t err;

    do {
        err = rd_kafka_producev(t->producer, RD_KAFKA_V_TOPIC(t->topic),
                                RD_KAFKA_V_KEY(key, key ? strlen(key) : 0),
                                RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(t->producer, 50);
    } while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
    RL_REQUIRE(err == RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_poll(t->producer, 0);
}

void
e2e_flush(struct e2e *t)
{
    RL_REQUIRE(rd_kafka_flush(t->producer, 30000) ==
               RD_KAFKA_RESP_ERR_NO_ERROR);
}

/* With RL_TEST_DB_ROLES=1, a component connects as a login of its own
 * role (tests/support/rltest_roles.h): `consume` as the worker's (and the
 * relay's, unless its relay thread is off), `receive` and `scheduler` as
 * the worker's, `relay` and `console` as theirs; the CLI keeps the
 * migrating user. */
void
e2e_database_url(struct e2e *t, const char *cmd, const char *const *extra_env,
                 char *var, size_t size)
{
    const char *component = NULL;
    char url[RLTEST_ROLE_URL_SIZE] = "", errstr[512];

    snprintf(var, size, "DATABASE_URL=%s", t->database_url);
    if (!rltest_roles_enabled())
        return;
    if (strcmp(cmd, "consume") == 0) {
        component = "worker_relay";
        for (int k = 0; extra_env && extra_env[k]; k++) {
            if (strcmp(extra_env[k], "RUNLEDGER_RELAY=false") == 0)
                component = "worker";
        }
    } else if (strcmp(cmd, "relay") == 0 || strcmp(cmd, "console") == 0) {
        component = cmd;
    } else if (strcmp(cmd, "receive") == 0 || strcmp(cmd, "scheduler") == 0) {
        component = "worker";
    }
    if (!component)
        return;
    /* The test's own PostgreSQL (a private one, a pooler) holds the
     * login: the migrating user of t->database_url creates it there. */
    if (rltest_role_url(t->database_url, t->database_url, component, url,
                        sizeof(url), errstr, sizeof(errstr)) != 0)
        fprintf(stderr, "%s\n", errstr);
    RL_REQUIRE(strstr(url, "user=rl_test_") != NULL);
    snprintf(var, size, "DATABASE_URL=%s", url);
}

int
e2e_spawn(struct e2e *t, const char *cmd, const char *const *extra_env)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    char *argv[3];
    char *envp[256];
    char vars[16][1100];
    int n = 0, slot = t->nprocs;
    posix_spawn_file_actions_t fa;
    char logname[160];
    pid_t pid;

    RL_REQUIRE(bin && slot < E2E_MAX_PROCS);
    e2e_database_url(t, cmd, extra_env, vars[0], sizeof(vars[0]));
    snprintf(vars[1], sizeof(vars[1]), "KAFKA_BOOTSTRAP_SERVERS=%s",
             t->bootstrap);
    snprintf(vars[2], sizeof(vars[2]), "MODEL_BASE_URL=%s", t->model_base_url);
    snprintf(vars[3], sizeof(vars[3]), "RUNLEDGER_TOPIC=%s", t->topic);
    snprintf(vars[4], sizeof(vars[4]), "RUNLEDGER_NOTIFY_TOPIC=%s", t->notify);
    snprintf(vars[5], sizeof(vars[5]), "RUNLEDGER_DLQ_TOPIC=%s", t->dlq);
    snprintf(vars[6], sizeof(vars[6]), "RUNLEDGER_GROUP_ID=%s", t->name);
    snprintf(vars[7], sizeof(vars[7]), "RUNLEDGER_WORKER_ID=%s-w%d", t->name,
             slot);
    snprintf(vars[8], sizeof(vars[8]), "RUNLEDGER_HTTP_PORT=0");
    /* Extra settings override these too (e.g. another MODEL_BASE_URL). */
    for (int i = 0; i < 9; i++) {
        size_t len = (size_t)(strchr(vars[i], '=') - vars[i]) + 1;
        int shadowed = 0;

        for (int k = 0; extra_env && extra_env[k] && !shadowed; k++)
            shadowed = strncmp(extra_env[k], vars[i], len) == 0;
        if (!shadowed)
            envp[n++] = vars[i];
    }
    /* Extra settings override the environment the test runs in. */
    for (char **e = environ; *e && n < 200; e++) {
        int shadowed = 0;

        for (int i = 0; i < 9 && !shadowed; i++) {
            size_t len = (size_t)(strchr(vars[i], '=') - vars[i]) + 1;
            shadowed = strncmp(*e, vars[i], len) == 0;
        }
        for (int i = 0; extra_env && extra_env[i] && !shadowed; i++) {
            size_t len = (size_t)(strchr(extra_env[i], '=') - extra_env[i]) + 1;
            shadowed = strncmp(*e, extra_env[i], len) == 0;
        }
        if (!shadowed)
            envp[n++] = *e;
    }
    for (int i = 0; extra_env && extra_env[i] && n < 254; i++)
        envp[n++] = (char *)extra_env[i];
    envp[n] = NULL;

    argv[0] = (char *)bin;
    argv[1] = (char *)cmd;
    argv[2] = NULL;
    snprintf(logname, sizeof(logname), "%s.%d.log", t->name, slot);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, logname,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    RL_REQUIRE(posix_spawn(&pid, bin, &fa, NULL, argv, envp) == 0);
    posix_spawn_file_actions_destroy(&fa);
    t->procs[slot] = pid;
    t->nprocs++;
    return slot;
}

int
e2e_signal(struct e2e *t, int slot, int sig, int wait)
{
    int status = 0;

    if (t->procs[slot] <= 0)
        return -1;
    kill(t->procs[slot], sig);
    if (wait) {
        waitpid(t->procs[slot], &status, 0);
        t->procs[slot] = 0;
    }
    return status;
}

int
e2e_alive(struct e2e *t, int slot)
{
    int status;

    if (t->procs[slot] <= 0)
        return 0;
    if (waitpid(t->procs[slot], &status, WNOHANG) == t->procs[slot]) {
        t->procs[slot] = 0;
        return 0;
    }
    return 1;
}

/* rl_db_exec that survives a restart of PostgreSQL under the test: after
 * a connection error it reconnects once and tries again. */
static int
exec_retry_params(struct e2e *t, const char *sql, int n,
                  const char *const *params, char *value, size_t size,
                  char *errstr, size_t errstr_size)
{
    int rc =
        rl_db_exec(t->db, sql, n, params, value, size, errstr, errstr_size);

    if (rc == RL_ERR_DB && rl_db_ping(t->db, errstr, errstr_size) == 0)
        rc =
            rl_db_exec(t->db, sql, n, params, value, size, errstr, errstr_size);
    return rc;
}

static int
exec_retry(struct e2e *t, const char *sql, char *value, size_t size,
           char *errstr, size_t errstr_size)
{
    return exec_retry_params(t, sql, 0, NULL, value, size, errstr, errstr_size);
}

int64_t
e2e_int(struct e2e *t, const char *sql)
{
    char value[64];
    char errstr[512];

    if (exec_retry(t, sql, value, sizeof(value), errstr, sizeof(errstr)) < 0) {
        fprintf(stderr, "query failed: %s: %s\n", sql, errstr);
        return -1;
    }
    return strtoll(value, NULL, 10);
}

const char *
e2e_text(struct e2e *t, const char *sql)
{
    static char value[4096];
    char errstr[512];

    if (exec_retry(t, sql, value, sizeof(value), errstr, sizeof(errstr)) < 0) {
        fprintf(stderr, "query failed: %s: %s\n", sql, errstr);
        value[0] = '\0';
    }
    return value;
}

static rd_kafka_t *
consumer_for(struct e2e *t, const char *group)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[256];
    rd_kafka_t *rk;

    rd_kafka_conf_set(conf, "bootstrap.servers", t->bootstrap, errstr,
                      sizeof(errstr));
    rd_kafka_conf_set(conf, "group.id", group, errstr, sizeof(errstr));
    rd_kafka_conf_set(conf, "enable.auto.commit", "false", errstr,
                      sizeof(errstr));
    rd_kafka_conf_set(conf, "enable.partition.eof", "true", errstr,
                      sizeof(errstr));
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    RL_REQUIRE(rk);
    return rk;
}

static rd_kafka_topic_partition_list_t *
partitions_of(rd_kafka_t *rk, const char *topic)
{
    const struct rd_kafka_metadata *md;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_topic_partition_list_t *parts;

    RL_REQUIRE(rd_kafka_metadata(rk, 0, rkt, &md, 10000) ==
               RD_KAFKA_RESP_ERR_NO_ERROR);
    parts = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
    for (int i = 0; i < md->topics[0].partition_cnt; i++)
        rd_kafka_topic_partition_list_add(parts, topic,
                                          md->topics[0].partitions[i].id);
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return parts;
}

int64_t
e2e_group_lag(struct e2e *t)
{
    return e2e_group_lag_of(t, t->name);
}

int64_t
e2e_group_lag_of(struct e2e *t, const char *group)
{
    rd_kafka_t *rk = consumer_for(t, group);
    rd_kafka_topic_partition_list_t *parts = partitions_of(rk, t->topic);
    int64_t lag = 0;

    /* A topic whose metadata names no partition yet (a broker still
     * loading it answers so) has an unknown lag, never 0: a test waiting
     * for lag 0 would otherwise stop before anything was read. */
    if (parts->cnt == 0 ||
        rd_kafka_committed(rk, parts, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        lag = -1;
        goto done;
    }
    for (int i = 0; i < parts->cnt; i++) {
        int64_t lo, hi;
        int64_t committed = parts->elems[i].offset;

        if (rd_kafka_query_watermark_offsets(rk, t->topic,
                                             parts->elems[i].partition, &lo,
                                             &hi, 10000) != 0) {
            lag = -1;
            goto done;
        }
        if (committed < 0)
            committed = lo;
        lag += hi - committed;
    }
done:
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_destroy(rk);
    return lag;
}

long
e2e_read_topic(struct e2e *t, const char *topic, e2e_msg_fn *fn, void *opaque)
{
    rd_kafka_t *rk = consumer_for(t, rltest_unique("reader"));
    rd_kafka_topic_partition_list_t *parts = partitions_of(rk, topic);
    int64_t *high = calloc((size_t)parts->cnt, sizeof(*high));
    int *done = calloc((size_t)parts->cnt, sizeof(*done));
    int remaining = 0;
    long n = 0;
    int64_t deadline = rltest_now_ms() + 60000;

    RL_REQUIRE(high && done);
    for (int i = 0; i < parts->cnt; i++) {
        int64_t lo, hi;

        RL_REQUIRE(rd_kafka_query_watermark_offsets(rk, topic,
                                                    parts->elems[i].partition,
                                                    &lo, &hi, 10000) == 0);
        high[i] = hi;
        parts->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
        if (hi > lo) {
            remaining++;
        } else {
            /* Empty: its end-of-partition event must not count for a
             * partition that still has messages to deliver. */
            done[i] = 1;
            parts->elems[i].offset = RD_KAFKA_OFFSET_END;
        }
    }
    RL_REQUIRE(rd_kafka_assign(rk, parts) == RD_KAFKA_RESP_ERR_NO_ERROR);
    while (remaining > 0 && rltest_now_ms() < deadline) {
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(rk, 200);
        int idx = -1;

        if (!rkm)
            continue;
        for (int i = 0; i < parts->cnt; i++) {
            if (parts->elems[i].partition == rkm->partition)
                idx = i;
        }
        if (rkm->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (idx >= 0 && !done[idx] && rkm->offset >= high[idx]) {
                done[idx] = 1;
                remaining--;
            }
        } else if (!rkm->err) {
            n++;
            if (fn)
                fn(rkm, opaque);
            if (idx >= 0 && !done[idx] && rkm->offset >= high[idx] - 1) {
                done[idx] = 1;
                remaining--;
            }
        }
        rd_kafka_message_destroy(rkm);
    }
    RL_CHECK(remaining == 0);
    free(high);
    free(done);
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return n;
}

void
e2e_header(const rd_kafka_message_t *rkm, const char *name, char *buf,
           size_t size)
{
    rd_kafka_headers_t *hdrs;
    const void *val;
    size_t len;

    buf[0] = '\0';
    if (rd_kafka_message_headers(rkm, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    if (rd_kafka_header_get_last(hdrs, name, &val, &len) !=
        RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    if (len >= size)
        len = size - 1;
    memcpy(buf, val, len);
    buf[len] = '\0';
}

struct body {
    char buf[8192];
    size_t len;
};

static size_t
body_write(char *ptr, size_t size, size_t nmemb, void *opaque)
{
    struct body *b = opaque;
    size_t n = size * nmemb;
    size_t room = sizeof(b->buf) - 1 - b->len;

    memcpy(b->buf + b->len, ptr, n < room ? n : room);
    b->len += n < room ? n : room;
    b->buf[b->len] = '\0';
    return n;
}

/* The integer after "name": in the stub's /stats{query} (-1 on error).
 * The whole-stub figures come before by_key, which the buffer may cut. */
static long
stub_stats_number(struct e2e *t, const char *query, const char *name)
{
    char url[512], field[96];
    const char *v1 = strstr(t->model_base_url, "/v1");
    int base_len =
        v1 ? (int)(v1 - t->model_base_url) : (int)strlen(t->model_base_url);
    CURL *curl = curl_easy_init();
    struct body b = {{0}, 0};
    const char *g;
    long n = -1;

    snprintf(url, sizeof(url), "%.*s/stats%s", base_len, t->model_base_url,
             query);
    snprintf(field, sizeof(field), "\"%s\":", name);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    if (curl_easy_perform(curl) == CURLE_OK) {
        g = strstr(b.buf, field);
        if (g)
            n = strtol(g + strlen(field), NULL, 10);
    }
    curl_easy_cleanup(curl);
    return n;
}

long
e2e_stub_generations(struct e2e *t, const char *key)
{
    char query[256];

    snprintf(query, sizeof(query), "?key=%s", key);
    return stub_stats_number(t, query, "generations");
}

long
e2e_stub_key_stat(struct e2e *t, const char *key, const char *name)
{
    char query[256];

    snprintf(query, sizeof(query), "?key=%s", key);
    return stub_stats_number(t, query, name);
}

long
e2e_stub_max_concurrent(struct e2e *t, const char *key)
{
    char query[256];

    snprintf(query, sizeof(query), "?concurrency_key=%s", key);
    return stub_stats_number(t, query, "max_concurrent");
}

long
e2e_stub_stat(struct e2e *t, const char *name)
{
    return stub_stats_number(t, "", name);
}

int
e2e_wait(int (*cond)(struct e2e *t, void *opaque), struct e2e *t, void *opaque,
         long timeout_ms)
{
    int64_t deadline = rltest_now_ms() + timeout_ms;
    int v;

    while (!(v = cond(t, opaque)) && rltest_now_ms() < deadline) {
        struct timespec ts = {0, 100000000L};

        nanosleep(&ts, NULL);
    }
    return v;
}

int
e2e_harness(const char *script, const char *cmd, const char *dir)
{
    const char *src = getenv("RL_SOURCE_DIR");
    char line[2048];
    int status;

    snprintf(line, sizeof(line),
             "'%s/tests/harness/%s' %s '%s' >>'%s.log' 2>&1", src ? src : ".",
             script, cmd, dir, dir);
    status = system(line);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Reads NAME=value from file into out (value only). */
static int
read_env_file(const char *file, char *out, size_t size)
{
    FILE *f = fopen(file, "r");
    char line[1024];
    char *eq;

    if (!f)
        return -1;
    if (!fgets(line, sizeof(line), f)) {
        fclose(f);
        return -1;
    }
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    eq = strchr(line, '=');
    if (!eq)
        return -1;
    snprintf(out, size, "%s", eq + 1);
    return 0;
}

/* A private service restarted on the same port must find it free: below
 * the ephemeral range (32768 up on Linux: a client connection could take
 * it between the stop and the restart), away from the default bases
 * (which every other start scans from) and spread by pid, so a service
 * another test starts meanwhile does not take it. */
static void
private_port_base(const char *name, int base)
{
    char value[16];

    if (getenv(name))
        return;
    snprintf(value, sizeof(value), "%d", base + (int)(getpid() % 350) * 5);
    setenv(name, value, 1);
}

void
e2e_private_pg(const char *dir, char *url, size_t size)
{
    char file[600];

    rltest_service_env("DATABASE_URL"); /* skip when services are absent */
    snprintf(private_pg, sizeof(private_pg), "%s", dir);
    track(NULL);
    private_port_base("PG_PORT_BASE", 12000);
    RL_REQUIRE(e2e_harness("pg.sh", "start", dir) == 0);
    snprintf(file, sizeof(file), "%s/env", dir);
    RL_REQUIRE(read_env_file(file, url, size) == 0);
}

static char replica_pair[PATH_MAX];

static void
destroy_replica_pair(void)
{
    if (replica_pair[0])
        e2e_harness("pg_replica.sh", "destroy", replica_pair);
}

void
e2e_replica_pair(const char *dir, const char *mode, char *url, size_t size)
{
    char file[PATH_MAX + 8];

    rltest_service_env("DATABASE_URL"); /* skip when services are absent */
    setenv("PG_REPLICA_MODE", mode, 1);
    /* The standby restarts on its own port at the failover: below the
     * ephemeral range (no client connection takes it meanwhile). */
    private_port_base("PG_PORT_BASE", 16000);
    snprintf(replica_pair, sizeof(replica_pair), "%s", dir);
    atexit(destroy_replica_pair);
    RL_REQUIRE(e2e_harness("pg_replica.sh", "start", dir) == 0);
    snprintf(file, sizeof(file), "%s/env", dir);
    RL_REQUIRE(read_env_file(file, url, size) == 0);
}

void
e2e_private_kafka(const char *dir, char *servers, size_t size)
{
    char file[600];

    rltest_service_env("KAFKA_BOOTSTRAP_SERVERS");
    snprintf(private_kafka, sizeof(private_kafka), "%s", dir);
    track(NULL);
    private_port_base("KAFKA_PORT_BASE", 14000);
    RL_REQUIRE(e2e_harness("kafka.sh", "start", dir) == 0);
    snprintf(file, sizeof(file), "%s/env", dir);
    RL_REQUIRE(read_env_file(file, servers, size) == 0);
}

void
e2e_stub_start(struct e2e *t, const char *const *env)
{
    const char *src = getenv("RL_SOURCE_DIR");
    char script[1024], portfile[256], logname[256], port[32];
    char *argv[6];
    char *envp[256];
    int n = 0;
    posix_spawn_file_actions_t fa;
    int64_t deadline;
    FILE *f;

    snprintf(script, sizeof(script), "%s/tests/stub/stub_model.py",
             src ? src : ".");
    snprintf(portfile, sizeof(portfile), "%s.stub.port", t->name);
    snprintf(logname, sizeof(logname), "%s.stub.log", t->name);
    unlink(portfile);
    for (char **e = environ; *e && n < 200; e++)
        envp[n++] = *e;
    for (int i = 0; env && env[i] && n < 254; i++)
        envp[n++] = (char *)env[i];
    envp[n] = NULL;
    argv[0] = "python3";
    argv[1] = script;
    argv[2] = "--port-file";
    argv[3] = portfile;
    argv[4] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, logname,
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    RL_REQUIRE(posix_spawnp(&t->stub_pid, "python3", &fa, NULL, argv, envp) ==
               0);
    posix_spawn_file_actions_destroy(&fa);
    deadline = rltest_now_ms() + 20000;
    port[0] = '\0';
    while (rltest_now_ms() < deadline) {
        struct timespec ts = {0, 50000000L};

        f = fopen(portfile, "r");
        if (f) {
            if (fgets(port, sizeof(port), f))
                port[strcspn(port, "\r\n")] = '\0';
            fclose(f);
            if (port[0])
                break;
        }
        nanosleep(&ts, NULL);
    }
    RL_REQUIRE(port[0]);
    snprintf(t->stub_url, sizeof(t->stub_url), "http://127.0.0.1:%s/v1", port);
    t->model_base_url = t->stub_url;
}

void
e2e_event(char *buf, size_t size, const char *job, const char *tenant, int i,
          const char *directive, char *run_id)
{
    char utc[RL_TIME_UTC_SIZE];
    struct rl_run_identity id = {0};
    const char *reason;
    char errstr[128];

    rl_time_format_utc(1786093200 + (int64_t)i * 3600, utc);
    snprintf(buf, size,
             "{\"job\":\"%s\",\"tenant\":\"%s\",\"scheduled_at\":\"%s\","
             "\"version\":\"v1\",\"input\":{\"doc\":%d},"
             "\"request\":{\"model\":\"stub-1\",\"temperature\":0,"
             "\"messages\":[{\"role\":\"user\",\"content\":\"summarise "
             "{{input}}%s%s\"}]},\"notify\":[\"email\",\"slack\"]}",
             job, tenant, utc, i, directive ? " " : "",
             directive ? directive : "");
    if (run_id) {
        id.job = job;
        id.tenant = tenant;
        id.scheduled_at = utc;
        id.version = "v1";
        RL_REQUIRE(rl_runid_compute(&id, run_id, NULL, &reason, errstr,
                                    sizeof(errstr)) == 0);
    }
}

void
e2e_produce_event(struct e2e *t, const char *job, const char *tenant, int i,
                  const char *directive, char *run_id)
{
    char buf[2048];

    e2e_event(buf, sizeof(buf), job, tenant, i, directive, run_id);
    e2e_produce(t, tenant, buf);
}

/* The query helpers below take a printf-like format, but values are never
 * spliced into SQL: each '%s' (quoted or not), %d, %ld and %lld becomes a
 * bound parameter $n, and "%%" a literal '%'. */
struct bound {
    char sql[4096];
    char values[E2E_MAX_PARAMS][32768];
    const char *params[E2E_MAX_PARAMS];
    int n;
};

static void
bind_format(struct bound *b, const char *fmt, va_list ap)
{
    size_t o = 0;

    b->n = 0;
    for (const char *f = fmt; *f && o + 8 < sizeof(b->sql);) {
        int quoted = f[0] == '\'' && f[1] == '%' && f[2] == 's' && f[3] == '\'';
        const char *spec = quoted ? f + 1 : f;
        char *value;

        if (spec[0] != '%') {
            b->sql[o++] = *f++;
            continue;
        }
        if (spec[1] == '%') {
            b->sql[o++] = '%';
            f += 2;
            continue;
        }
        RL_REQUIRE(b->n < E2E_MAX_PARAMS);
        value = b->values[b->n];
        if (spec[1] == 's') {
            /* A truncated value would query something else: refuse. */
            RL_REQUIRE(snprintf(value, sizeof(b->values[0]), "%s",
                                va_arg(ap, char *)) <
                       (int)sizeof(b->values[0]));
            f = spec + 2 + quoted;
        } else if (spec[1] == 'd') {
            snprintf(value, sizeof(b->values[0]), "%d", va_arg(ap, int));
            f = spec + 2;
        } else if (spec[1] == 'l' && spec[2] == 'd') {
            snprintf(value, sizeof(b->values[0]), "%ld", va_arg(ap, long));
            f = spec + 3;
        } else if (spec[1] == 'l' && spec[2] == 'l' && spec[3] == 'd') {
            snprintf(value, sizeof(b->values[0]), "%lld",
                     va_arg(ap, long long));
            f = spec + 4;
        } else {
            fprintf(stderr, "unsupported query format: %s\n", fmt);
            RL_REQUIRE(0);
        }
        b->params[b->n] = value;
        b->n++;
        o += (size_t)snprintf(b->sql + o, sizeof(b->sql) - o, "$%d", b->n);
    }
    b->sql[o < sizeof(b->sql) ? o : sizeof(b->sql) - 1] = '\0';
}

static int64_t
bound_int(struct e2e *t, const struct bound *b)
{
    char value[64];
    char errstr[512];

    if (exec_retry_params(t, b->sql, b->n, b->params, value, sizeof(value),
                          errstr, sizeof(errstr)) < 0) {
        fprintf(stderr, "query failed: %s: %s\n", b->sql, errstr);
        return -1;
    }
    return strtoll(value, NULL, 10);
}

int64_t
e2e_intf(struct e2e *t, const char *fmt, ...)
{
    static struct bound b;
    va_list ap;

    va_start(ap, fmt);
    bind_format(&b, fmt, ap);
    va_end(ap);
    return bound_int(t, &b);
}

const char *
e2e_textf(struct e2e *t, const char *fmt, ...)
{
    static struct bound b;
    static char value[4096];
    char errstr[512];
    va_list ap;

    va_start(ap, fmt);
    bind_format(&b, fmt, ap);
    va_end(ap);
    if (exec_retry_params(t, b.sql, b.n, b.params, value, sizeof(value), errstr,
                          sizeof(errstr)) < 0) {
        fprintf(stderr, "query failed: %s: %s\n", b.sql, errstr);
        value[0] = '\0';
    }
    return value;
}

int
e2e_wait_intf(struct e2e *t, int64_t want, long timeout_ms, const char *fmt,
              ...)
{
    static struct bound b;
    va_list ap;
    int64_t deadline = rltest_now_ms() + timeout_ms;
    int64_t v;

    va_start(ap, fmt);
    bind_format(&b, fmt, ap);
    va_end(ap);
    for (;;) {
        struct timespec ts = {0, 100000000L};

        v = bound_int(t, &b);
        if (v == want)
            return 1;
        if (rltest_now_ms() >= deadline)
            break;
        nanosleep(&ts, NULL);
    }
    fprintf(stderr,
            "timed out after %ld ms waiting for %lld from %s (last "
            "%lld)\n",
            timeout_ms, (long long)want, b.sql, (long long)v);
    return 0;
}

int
e2e_wait_completed(struct e2e *t, const char *job, int n, long timeout_ms)
{
    return e2e_wait_intf(t, n, timeout_ms,
                         "SELECT count(*) FROM runs WHERE job = '%s' AND "
                         "status = 'completed'",
                         job);
}

int
e2e_wait_completed_and_delivered(struct e2e *t, const char *job, int n)
{
    return e2e_wait_completed(t, job, n, 60000) &&
           e2e_wait_intf(t, 2 * (int64_t)n, 30000,
                         "SELECT count(*) FROM outbox_delivered");
}

static char
proc_state(pid_t pid)
{
    char path[64], buf[512];
    FILE *f;
    char *paren;
    char state = '?';

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return '?';
    if (fgets(buf, sizeof(buf), f)) {
        paren = strrchr(buf, ')');
        if (paren && paren[1] == ' ')
            state = paren[2];
    }
    fclose(f);
    return state;
}

int
e2e_wait_stopped(struct e2e *t, int slot, long timeout_ms)
{
    int64_t deadline = rltest_now_ms() + timeout_ms;

    while (rltest_now_ms() < deadline) {
        struct timespec ts = {0, 20000000L};
        char st;

        if (t->procs[slot] <= 0)
            return 0;
        st = proc_state(t->procs[slot]);
        if (st == 'T' || st == 't')
            return 1;
        if (st == 'Z' || st == '?')
            return 0;
        nanosleep(&ts, NULL);
    }
    return 0;
}

int
e2e_wait_exit(struct e2e *t, int slot, long timeout_ms)
{
    int64_t deadline = rltest_now_ms() + timeout_ms;
    int status;

    if (t->procs[slot] <= 0)
        return -1;
    for (;;) {
        struct timespec ts = {0, 20000000L};

        if (waitpid(t->procs[slot], &status, WNOHANG) == t->procs[slot]) {
            t->procs[slot] = 0;
            return status;
        }
        if (rltest_now_ms() >= deadline)
            return -1;
        nanosleep(&ts, NULL);
    }
}

int
e2e_stop(struct e2e *t, int slot, long timeout_ms)
{
    int status;

    e2e_signal(t, slot, SIGTERM, 0);
    status = e2e_wait_exit(t, slot, timeout_ms);
    return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

struct header_count {
    const char *name;
    const char *value;
    long n;
};

static void
count_header(const rd_kafka_message_t *rkm, void *opaque)
{
    struct header_count *hc = opaque;
    char buf[512];

    if (!hc->value) {
        hc->n++;
        return;
    }
    e2e_header(rkm, hc->name, buf, sizeof(buf));
    if (strcmp(buf, hc->value) == 0)
        hc->n++;
}

long
e2e_count_with_header(struct e2e *t, const char *topic, const char *name,
                      const char *value)
{
    struct header_count hc = {name, value, 0};

    e2e_read_topic(t, topic, count_header, &hc);
    return hc.n;
}

long
e2e_status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t len = strlen(field);
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, field, len) == 0)
            kb = strtol(line + len, NULL, 10);
    }
    fclose(f);
    return kb;
}

int
e2e_file_has(const char *path, const char *text)
{
    char line[4096];
    FILE *f = fopen(path, "r");
    int found = 0;

    if (!f)
        return 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

int
e2e_log_has(const struct e2e *t, int slot, const char *text)
{
    char path[sizeof(t->name) + 32];

    snprintf(path, sizeof(path), "%s.%d.log", t->name, slot);
    return e2e_file_has(path, text);
}
