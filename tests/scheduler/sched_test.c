/* Support for the scheduler's tests (sched_test.h). */
#include "sched_test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rl/db_schedules.h"
#include "rl/schedule.h"
#include "rl/schedule_audit.h"
#include "rltest.h"

static const char request[] =
    "{\"model\":\"stub-model\",\"messages\":[{\"role\":\"user\","
    "\"content\":\"report\"}]}";

void
sched_set(struct e2e *t, const char *name, const char *job, const char *cron,
          const char *window, const char *catchup, int audit_only)
{
    struct rl_schedule s;
    char errstr[512];

    memset(&s, 0, sizeof(s));
    s.name = (char *)name;
    s.job = (char *)job;
    s.tenant = (char *)"tenant-a";
    s.cron = (char *)cron;
    s.timezone = (char *)"UTC";
    s.version = (char *)"v1";
    s.window = (char *)window;
    s.request = (char *)request;
    s.catchup = rl_catchup_parse(catchup);
    s.catchup_window = 0;
    s.audit_only = audit_only;
    if (rl_db_schedule_set(t->db, &s, "test", errstr, sizeof(errstr)) != 0) {
        fprintf(stderr, "%s\n", errstr);
        RL_REQUIRE(0);
    }
}

/* db_var is "DATABASE_URL=<url>" from e2e_database_url, made before the
 * fork: it may create the role's login, which a child does not. */
static void
child_env(struct e2e *t, const char *db_var, const char *worker, int http_port)
{
    char port[16];

    snprintf(port, sizeof(port), "%d", http_port);
    setenv("DATABASE_URL", strchr(db_var, '=') + 1, 1);
    setenv("KAFKA_BOOTSTRAP_SERVERS", t->bootstrap, 1);
    setenv("RUNLEDGER_TOPIC", t->topic, 1);
    setenv("RUNLEDGER_NOTIFY_TOPIC", t->notify, 1);
    setenv("RUNLEDGER_DLQ_TOPIC", t->dlq, 1);
    setenv("RUNLEDGER_WORKER_ID", worker, 1);
    setenv("RUNLEDGER_HTTP_PORT", port, 1);
    setenv("RL_TEST_CRON_SECONDS", "1", 1);
}

pid_t
sched_spawn(struct e2e *t, const char *tag, int http_port,
            const char *const *args)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    char worker[160], logname[200], db_var[1100];
    pid_t pid;

    RL_REQUIRE(bin != NULL);
    /* the worker's login under RL_TEST_DB_ROLES=1, as e2e_spawn gives */
    e2e_database_url(t, "scheduler", NULL, db_var, sizeof(db_var));
    snprintf(worker, sizeof(worker), "%s-%s", t->name, tag);
    snprintf(logname, sizeof(logname), "%s.sched-%s.log", t->name, tag);
    pid = fork();
    RL_REQUIRE(pid >= 0);
    if (pid == 0) {
        char *argv[16];
        int n = 0, fd = open(logname, O_WRONLY | O_CREAT | O_APPEND, 0644);

        if (fd >= 0) {
            dup2(fd, 2);
            close(fd);
        }
        child_env(t, db_var, worker, http_port);
        argv[n++] = (char *)bin;
        argv[n++] = (char *)"scheduler";
        for (int i = 0; args && args[i] && n < 15; i++)
            argv[n++] = (char *)args[i];
        argv[n] = NULL;
        execv(bin, argv);
        _exit(127);
    }
    return pid;
}

int
sched_run(struct e2e *t, char *out, size_t out_size, const char *const *args)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    int fds[2], status = 0;
    char db_var[1100];
    pid_t pid;
    size_t len = 0;

    RL_REQUIRE(bin != NULL && pipe(fds) == 0);
    e2e_database_url(t, args[0], NULL, db_var, sizeof(db_var));
    pid = fork();
    RL_REQUIRE(pid >= 0);
    if (pid == 0) {
        char *argv[24];
        int n = 0;

        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        child_env(t, db_var, "cli", 0);
        argv[n++] = (char *)bin;
        for (int i = 0; args[i] && n < 23; i++)
            argv[n++] = (char *)args[i];
        argv[n] = NULL;
        execv(bin, argv);
        _exit(127);
    }
    close(fds[1]);
    for (;;) {
        char buf[4096];
        ssize_t r = read(fds[0], buf, sizeof(buf));

        if (r <= 0)
            break;
        if (out && len + 1 < out_size) {
            size_t k =
                (size_t)r < out_size - 1 - len ? (size_t)r : out_size - 1 - len;

            memcpy(out + len, buf, k);
            len += k;
        }
    }
    if (out && out_size)
        out[len] = '\0';
    close(fds[0]);
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int
sched_log_has(struct e2e *t, const char *tag, const char *text)
{
    char logname[200], line[4096];
    FILE *fp;
    int found = 0;

    snprintf(logname, sizeof(logname), "%s.sched-%s.log", t->name, tag);
    fp = fopen(logname, "r");
    if (!fp)
        return 0;
    while (!found && fgets(line, sizeof(line), fp))
        found = strstr(line, text) != NULL;
    fclose(fp);
    return found;
}

long
sched_gaps(struct e2e *t, const char *name, int64_t from, int64_t to,
           int64_t *starts, size_t max)
{
    struct rl_schedule *s = NULL;
    struct rl_schedule_gap *gaps = NULL;
    size_t n = 0, ngaps = 0;
    int64_t now;
    char errstr[512];
    long out = -1;

    if (rl_db_schedules_load(t->db, name, &s, &n, &now, errstr,
                             sizeof(errstr)) != 0 ||
        n != 1 ||
        rl_schedule_prepare(&s[0], RL_CRON_SECONDS, errstr, sizeof(errstr)) ||
        rl_schedule_gaps(t->db, &s[0], from, to, 100000, 1 << 20, &gaps, &ngaps,
                         errstr, sizeof(errstr)) != 0) {
        fprintf(stderr, "sched_gaps: %s\n", errstr);
        goto done;
    }
    for (size_t i = 0; i < ngaps && i < max; i++)
        starts[i] = gaps[i].start;
    out = (long)ngaps;
done:
    for (size_t i = 0; i < n; i++)
        rl_schedule_clear(&s[i]);
    free(s);
    free(gaps);
    return out;
}

int64_t
sched_through(struct e2e *t, const char *name)
{
    return e2e_intf(t,
                    "SELECT floor(extract(epoch FROM published_through))"
                    "::bigint FROM schedules WHERE name = '%s'",
                    name);
}

int64_t
sched_created(struct e2e *t, const char *name)
{
    return e2e_intf(t,
                    "SELECT floor(extract(epoch FROM created_at))::bigint"
                    "  FROM schedules WHERE name = '%s'",
                    name);
}

int64_t
sched_now(void)
{
    return (int64_t)time(NULL);
}

void
sched_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0)
        ;
}
