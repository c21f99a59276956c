/* Consumer A's ledger session stalls on PostgreSQL for three leases: its
 * backend process is stopped (SIGSTOP) while idle, so the next claim,
 * dispatch or sweep of A's ledger thread waits for an answer that does
 * not come, while A's model calls (8 s each) are in flight and consumer B
 * works on. Asserts:
 *   - the leases of A's running runs are renewed during the stall (the
 *     renewer has a connection of its own): sampled twice more than a
 *     lease apart, each is still A's under the same epoch, expires later
 *     and has not expired, and some calls are still in flight at the
 *     second sample;
 *   - A's /healthz answers 503 "ledger loop stalled" during the stall
 *     (RUNLEDGER_LEDGER_LIVENESS_SECONDS=3) and 200 again after it;
 *   - no run is taken over: every run has one attempt and one generation
 *     at the stub, and no run has a generation its attempts do not show;
 *   - every run completed once with its notifications, and the outputs of
 *     the runs completed before the resume did not change;
 *   - A recovers by itself: it completes the runs it held and claims runs
 *     published after the resume.
 * The backend is resumed (SIGCONT) by a watchdog process too, so it never
 * stays stopped when the test fails or is killed. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"
#include "ops.h"
#include "rltest.h"

#define RUNS 40
#define LATE_RUNS 12
#define TENANTS 8
#define LEASE_SECONDS 3
#define CALL_MS 8000
#define SAMPLE1_MS 500
#define SAMPLE2_MS (SAMPLE1_MS + LEASE_SECONDS * 1000 + 500)
#define STALL_MS (3 * LEASE_SECONDS * 1000)
#define LIVENESS_SECONDS 3
#define STR_(x) #x
#define STR(x) STR_(x)

/* The stopped backend, for the exit handler (0: none stopped). */
static pid_t stopped_backend;

static void
resume_backend(void)
{
    if (stopped_backend > 0)
        kill(stopped_backend, SIGCONT);
    stopped_backend = 0;
}

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* Resumes pid when the test process dies (the pipe's write end closes) or
 * after timeout_ms, whichever comes first. Returns the watchdog's pid;
 * *fd is the write end, closed by the test once it resumed pid itself. */
static pid_t
watchdog(pid_t pid, long timeout_ms, int *fd)
{
    int p[2];
    pid_t child;

    RL_REQUIRE(pipe(p) == 0);
    child = fork();
    RL_REQUIRE(child >= 0);
    if (child == 0) {
        struct pollfd pfd = {p[0], POLLIN, 0};

        close(p[1]);
        while (poll(&pfd, 1, (int)timeout_ms) < 0 && errno == EINTR)
            ;
        kill(pid, SIGCONT);
        _exit(0);
    }
    close(p[0]);
    *fd = p[1];
    return child;
}

/* Local ports of the TCP sockets process pid holds, comma-separated, into
 * buf. Returns how many. */
static int
socket_ports(pid_t pid, char *buf, size_t size)
{
    unsigned long inodes[256];
    int ninodes = 0, nports = 0;
    char path[64], link[128], line[512];
    struct dirent *de;
    size_t o = 0;
    DIR *dir;
    FILE *f;

    buf[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    dir = opendir(path);
    if (!dir)
        return 0;
    while ((de = readdir(dir)) && ninodes < 256) {
        char fdpath[384];
        ssize_t len;

        snprintf(fdpath, sizeof(fdpath), "%s/%s", path, de->d_name);
        len = readlink(fdpath, link, sizeof(link) - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        if (sscanf(link, "socket:[%lu]", &inodes[ninodes]) == 1)
            ninodes++;
    }
    closedir(dir);
    f = fopen("/proc/net/tcp", "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned int port;
        unsigned long inode;

        if (sscanf(line,
                   " %*s %*[0-9A-Fa-f]:%x %*s %*s %*s %*s %*s %*s %*s %lu",
                   &port, &inode) != 2)
            continue;
        for (int i = 0; i < ninodes; i++) {
            if (inodes[i] == inode && o + 8 < size) {
                o += (size_t)snprintf(buf + o, size - o, "%s%u",
                                      nports ? "," : "", port);
                nports++;
            }
        }
    }
    fclose(f);
    return nports;
}

/* The PostgreSQL backend serving the ledger session of the process in
 * slot (matched by the client port), or 0 when not exactly one. */
static pid_t
ledger_backend(struct e2e *t, int slot)
{
    char ports[2048];

    if (socket_ports(t->procs[slot], ports, sizeof(ports)) == 0)
        return 0;
    if (e2e_intf(t,
                 "SELECT count(*) FROM pg_stat_activity WHERE "
                 "application_name='runledger-ledger' AND client_port = "
                 "ANY(string_to_array(%s, ',')::int[])",
                 ports) != 1)
        return 0;
    return (pid_t)e2e_intf(t,
                           "SELECT pid FROM pg_stat_activity WHERE "
                           "application_name='runledger-ledger' AND "
                           "client_port = ANY(string_to_array(%s, ',')::int[])",
                           ports);
}

struct held {
    const char *worker;
    int64_t want;
};

/* Runs the worker holds whose model call is in flight, at least want. */
static int
calls_in_flight(struct e2e *t, void *opaque)
{
    const struct held *h = opaque;

    return e2e_intf(t,
                    "SELECT count(*) FROM runs r JOIN attempts a USING "
                    "(run_id) WHERE r.status='running' AND r.lock_owner='%s' "
                    "AND a.lease_epoch=r.lease_epoch AND a.outcome IS NULL",
                    h->worker) >= h->want;
}

/* A's running runs as "run_id epoch expires_ms" entries, comma-separated
 * (static buffer of e2e_textf). */
static const char *
leases_of(struct e2e *t, const char *worker)
{
    return e2e_textf(t,
                     "SELECT coalesce(string_agg(run_id || ' ' || lease_epoch "
                     "|| ' ' || (extract(epoch FROM lock_expires_at) * "
                     "1000)::bigint, ',' ORDER BY run_id), '') FROM runs "
                     "WHERE status='running' AND lock_owner='%s'",
                     worker);
}

/* Of the sampled leases, those still held by worker under the same epoch,
 * now expiring later than sampled and not yet expired. */
static int64_t
leases_renewed(struct e2e *t, const char *worker, const char *sample)
{
    return e2e_intf(t,
                    "SELECT count(*) FROM runs r JOIN (SELECT "
                    "split_part(x, ' ', 1) AS id, split_part(x, ' ', "
                    "2)::bigint AS epoch, split_part(x, ' ', 3)::bigint AS "
                    "expires_ms FROM unnest(string_to_array(%s, ',')) x) s "
                    "ON r.run_id = s.id WHERE r.lock_owner='%s' AND "
                    "r.lease_epoch = s.epoch AND r.lock_expires_at > now() "
                    "AND (extract(epoch FROM r.lock_expires_at) * "
                    "1000)::bigint > s.expires_ms",
                    sample, worker);
}

static int
count_entries(const char *list)
{
    int n = *list ? 1 : 0;

    for (; *list; list++)
        n += *list == ',';
    return n;
}

static int
two_members(struct e2e *t, void *opaque)
{
    (void)opaque;
    return ops_group_members(t) == 2;
}

struct late {
    const char *ids;
    const char *worker;
};

static int
late_claimed_by(struct e2e *t, void *opaque)
{
    const struct late *l = opaque;

    return e2e_intf(t,
                    "SELECT count(*) FROM attempts WHERE worker='%s' AND "
                    "run_id = ANY(string_to_array(%s, ','))",
                    l->worker, l->ids) > 0;
}

int
main(void)
{
    struct e2e t;
    char runs[RUNS][RL_HEX_SIZE], late[LATE_RUNS][RL_HEX_SIZE];
    char done_before[RUNS][160];
    char job[160], worker_a[160], latency[64], port_env[64], body[512];
    char sample1[4096], sample2[4096], late_ids[LATE_RUNS * RL_HEX_SIZE];
    struct held held;
    struct late late_wait;
    int64_t stopped_at = 0, resumed_at = 0, first_503 = -1, healthy_at = -1;
    int64_t n_renewed = -1, gens_total = 0, attempts_total = 0;
    int64_t unrecorded_gens = 0, a_completed = -1, recover_ms = -1;
    int64_t calls_at_sample2 = -1;
    pid_t backend = 0, dog = -1;
    int a, b, port, dog_fd = -1, idle = 0, n1 = -1, n2 = -1, saw_503 = 0;
    size_t o = 0;

    e2e_setup(&t, "fstall", 4);
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(latency, sizeof(latency), "[[fault:latency ms=%d]]", CALL_MS);
    port = ops_free_port();
    snprintf(port_env, sizeof(port_env), "RUNLEDGER_HTTP_PORT=%d", port);
    a = fx_spawn(&t, "consume", port_env,
                 "RUNLEDGER_LEASE_SECONDS=" STR(LEASE_SECONDS),
                 "RUNLEDGER_LEDGER_LIVENESS_SECONDS=" STR(LIVENESS_SECONDS),
                 "MODEL_TIMEOUT_MS=30000", NULL);
    b = fx_spawn(&t, "consume", "RUNLEDGER_LEASE_SECONDS=" STR(LEASE_SECONDS),
                 "MODEL_TIMEOUT_MS=30000", NULL);
    snprintf(worker_a, sizeof(worker_a), "%s-w%d", t.name, a);
    RL_REQUIRE(ops_wait_http(port, "/readyz", 200, 60000));
    atexit(resume_backend);
    /* Both in the group before the runs come, so both hold partitions. */
    RL_CHECK(e2e_wait(two_members, &t, NULL, 60000));

    for (int i = 0; i < RUNS; i++) {
        char tenant[32];

        snprintf(tenant, sizeof(tenant), "tenant-%d", i % TENANTS);
        e2e_produce_event(&t, job, tenant, i, latency, runs[i]);
    }
    e2e_flush(&t);

    /* A's calls in flight, then its ledger session idle: stopped there it
     * holds no lock anyone else waits for. */
    held = (struct held){worker_a, 3};
    RL_REQUIRE(e2e_wait(calls_in_flight, &t, &held, 60000));
    for (int tries = 0; tries < 100 && !idle; tries++) {
        /* None while A's ledger session is between connections. */
        backend = ledger_backend(&t, a);
        if (backend <= 0) {
            sleep_ms(20);
            continue;
        }
        dog = watchdog(backend, 60000, &dog_fd);
        stopped_backend = backend;
        if (kill(backend, SIGSTOP) != 0) {
            /* PostgreSQL in a PID namespace this test cannot reach. */
            fprintf(stderr, "cannot stop backend %d: %s\n", (int)backend,
                    strerror(errno));
            RL_REQUIRE(0);
        }
        stopped_at = rltest_now_ms();
        /* The backend reports its state before it waits for a command. */
        idle = e2e_intf(&t,
                        "SELECT count(*) FROM pg_stat_activity WHERE pid=%d "
                        "AND state='idle'",
                        (int)backend) == 1;
        if (!idle) {
            resume_backend();
            close(dog_fd);
            waitpid(dog, NULL, 0);
            sleep_ms(20);
        }
    }
    RL_REQUIRE(idle);

    /* The stall: /healthz probed throughout, leases sampled twice more
     * than a lease apart. */
    while (rltest_now_ms() < stopped_at + STALL_MS) {
        int64_t now = rltest_now_ms();
        long status = ops_http_get(port, "/healthz", body, sizeof(body));

        if (status == 503 && strstr(body, "ledger loop stalled") &&
            first_503 < 0)
            first_503 = now - stopped_at;
        if (n1 < 0 && now >= stopped_at + SAMPLE1_MS) {
            snprintf(sample1, sizeof(sample1), "%s", leases_of(&t, worker_a));
            n1 = count_entries(sample1);
        }
        if (n1 >= 0 && n2 < 0 && now >= stopped_at + SAMPLE2_MS) {
            n_renewed = leases_renewed(&t, worker_a, sample1);
            snprintf(sample2, sizeof(sample2), "%s", leases_of(&t, worker_a));
            n2 = count_entries(sample2);
            calls_at_sample2 = e2e_intf(
                &t,
                "SELECT count(*) FROM runs r JOIN attempts a USING (run_id) "
                "WHERE r.status='running' AND r.lock_owner='%s' AND "
                "a.lease_epoch=r.lease_epoch AND a.dispatched_at > now() - "
                "make_interval(secs => %d)",
                worker_a, CALL_MS / 1000);
        }
        sleep_ms(100);
    }
    saw_503 = first_503 >= 0;
    /* What was completed before the resume, to compare afterwards. */
    for (int i = 0; i < RUNS; i++)
        snprintf(done_before[i], sizeof(done_before[i]), "%s",
                 e2e_textf(&t,
                           "SELECT coalesce(md5(output::text) || ' ' || "
                           "completed_at::text, '') FROM runs WHERE "
                           "run_id='%s' AND status='completed'",
                           runs[i]));
    resume_backend();
    resumed_at = rltest_now_ms();
    close(dog_fd);
    waitpid(dog, NULL, 0);

    /* Recovery: A's loop turns again and A finishes what it held. */
    if (ops_wait_http(port, "/healthz", 200, 30000))
        healthy_at = rltest_now_ms() - resumed_at;
    if (e2e_wait_intf(&t, 0, 60000,
                      "SELECT count(*) FROM runs WHERE lock_owner='%s'",
                      worker_a))
        recover_ms = rltest_now_ms() - resumed_at;
    for (int i = 0; i < LATE_RUNS; i++) {
        char tenant[32];

        snprintf(tenant, sizeof(tenant), "tenant-%d", i % TENANTS);
        e2e_produce_event(&t, job, tenant, RUNS + i, NULL, late[i]);
        o += (size_t)snprintf(late_ids + o, sizeof(late_ids) - o, "%s%s",
                              i ? "," : "", late[i]);
    }
    e2e_flush(&t);
    late_wait = (struct late){late_ids, worker_a};
    RL_CHECK(e2e_wait(late_claimed_by, &t, &late_wait, 60000));
    RL_CHECK(fx_settled(&t, 90000));

    a_completed = e2e_intf(&t,
                           "SELECT count(DISTINCT run_id) FROM attempts "
                           "WHERE worker='%s' AND outcome='ok'",
                           worker_a);
    for (int i = 0; i < RUNS + LATE_RUNS; i++) {
        const char *id = i < RUNS ? runs[i] : late[i - RUNS];
        int64_t attempts = fx_attempts(&t, id, "*");
        long gens = e2e_stub_generations(&t, id);

        fx_check_completed_once(&t, id);
        RL_CHECK_INTEQ(attempts, 1);
        RL_CHECK_INTEQ(gens, 1);
        RL_CHECK(gens <= attempts);
        if (gens > attempts)
            unrecorded_gens += gens - attempts;
        gens_total += gens;
        attempts_total += attempts;
        if (i < RUNS && done_before[i][0])
            RL_CHECK_STREQ(e2e_textf(&t,
                                     "SELECT md5(output::text) || ' ' || "
                                     "completed_at::text FROM runs WHERE "
                                     "run_id='%s'",
                                     id),
                           done_before[i]);
    }

    fprintf(stderr,
            "stall %d ms; A held %d running runs %d ms in; %d ms in, %d of "
            "them were renewed (still A's, same epoch, expiring later, "
            "unexpired), %d running, %lld with the call still in flight\n",
            STALL_MS, n1, SAMPLE1_MS, SAMPLE2_MS, (int)n_renewed, n2,
            (long long)calls_at_sample2);
    fprintf(stderr,
            "A's /healthz: first 503 \"ledger loop stalled\" %lld ms into "
            "the stall; 200 again %lld ms after the resume; A's runs all "
            "finished %lld ms after the resume; A's attempts ended ok on %lld "
            "runs\n",
            (long long)first_503, (long long)healthy_at, (long long)recover_ms,
            (long long)a_completed);
    fprintf(stderr,
            "%d runs: %lld generations at the stub, %lld attempts rows, "
            "%lld generations no attempt shows\n",
            RUNS + LATE_RUNS, (long long)gens_total, (long long)attempts_total,
            (long long)unrecorded_gens);

    RL_CHECK(n1 >= 3);
    RL_CHECK_INTEQ(n_renewed, n1);
    RL_CHECK(calls_at_sample2 >= 1);
    RL_CHECK(saw_503);
    RL_CHECK(first_503 >= LIVENESS_SECONDS * 1000 - 500);
    RL_CHECK(healthy_at >= 0);
    RL_CHECK(recover_ms >= 0);
    RL_CHECK(e2e_alive(&t, a));
    RL_CHECK(e2e_alive(&t, b));
    e2e_teardown(&t);
    RL_TEST_END();
}
