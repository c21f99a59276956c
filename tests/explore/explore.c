/* The seeded fault explorer: from one seed, a workload and a fault
 * schedule, run on the real services (a PostgreSQL, a Kafka broker and a
 * stub model of its own), then one check of the whole history.
 *
 *   runledger_explore --seed S [--window SECONDS]
 *
 * What is drawn, what is checked and how to repeat a seed:
 * tests/explore/README.md. The schedule (which event when, which fault
 * when and where) depends on the seed alone; timing is real, so two runs
 * of a seed meet the same schedule, not the same interleaving. A failing
 * run prints "explore: VIOLATION seed=S rule=...: <history excerpt>" per
 * broken rule and exits 1; the last line on stdout is the figure line. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
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

#include "batch_test.h"
#include "cluster.h"
#include "e2e.h"
#include "ops.h"
#include "rl/runid.h"
#include "rl/timefmt.h"
#include "rltest.h"

extern char **environ;

#define MAX_RUNS 400
#define MAX_EVENTS 800
#define MAX_FAULTS 200
#define NCONSUMERS 2
#define NRELAYS 2
#define NPROCS (NCONSUMERS + NRELAYS)
#define GRACE_S 3
#define TERM_MARGIN_MS 12000
#define SETTLE_MS 120000
#define MAX_ATTEMPTS 8
#define MAX_NOTES 8192

/* The kinds of logical run the workload draws. */
enum kind {
    K_LIVE,    /* plain run, maybe a transient fault or a slow answer */
    K_APPROVE, /* approval required, approved once it waits */
    K_REJECT,  /* approval required, rejected once it waits */
    K_CANCEL,  /* slow answer, cancelled at a drawn time */
    K_PURGE,   /* completed, purged, then its event published again */
    K_DLQ,     /* a 400: failed and dead-lettered, then dlq replay */
    K_AMBIG,   /* reset, hang or cut body once: an ambiguous call */
    K_RESP,    /* the Responses API */
    K_BATCH,   /* a job in batch mode: the provider's Batch API */
    NKINDS
};

static const char *const kind_names[NKINDS] = {
    "live", "approve",   "reject",    "cancel", "purge",
    "dlq",  "ambiguous", "responses", "batch"};

/* The kinds of fault the schedule draws. */
enum fkind {
    F_KILL9,       /* kill -9 of a consumer or relay, restarted */
    F_TERM,        /* SIGTERM of a consumer or relay: exit 0 within grace */
    F_PG_RESTART,  /* pg_ctl stop -m immediate, then start */
    F_PG_CUT,      /* every other backend terminated */
    F_MODEL_429,   /* the next K calls without a directive get 429 */
    F_MODEL_5XX,   /* ... 500 or 503 */
    F_MODEL_HANG,  /* ... never answered (client timeout: ambiguous) */
    F_MODEL_RESET, /* ... a TCP reset after the request */
    F_MODEL_SLOW,  /* ... answered after 1 to 3 s */
    F_BROKER_KILL, /* the broker killed -9 and restarted */
    F_FAILOVER,    /* the primary killed, its standby promoted */
    F_FREEZE,      /* SIGSTOP of a consumer or relay past its lease, SIGCONT */
    F_KILL_AT,     /* kill -9, restarted to crash at a failpoint, restarted */
    F_DETACH,      /* the async standby stopped: the lost window opens */
    F_NODE_KILL,   /* a node of the 3-broker cluster killed -9, restarted */
    /* Batch faults (the stub's /admin/batch_fault), drawn only while
     * batch runs are about: */
    F_BATCH_CREATE_LATE,    /* the next creates made and answered 12-15 s
                             * late, past the 10 s batch lease */
    F_BATCH_DROP_REPLY,     /* the next create made, its reply lost */
    F_BATCH_LIST_LAG,       /* new batches missing from the list a while */
    F_BATCH_POLL_404,       /* the next 2-8 polls answered 404 */
    F_BATCH_EXPIRE_PARTIAL, /* the next batches expire half answered */
    NFKINDS
};

static const char *const fault_names[NFKINDS] = {"kill9",
                                                 "sigterm",
                                                 "pg_restart",
                                                 "pg_cut",
                                                 "model_429",
                                                 "model_5xx",
                                                 "model_hang",
                                                 "model_reset",
                                                 "model_slow",
                                                 "broker_kill",
                                                 "failover",
                                                 "freeze",
                                                 "kill_at",
                                                 "detach",
                                                 "node_kill",
                                                 "batch_create_late",
                                                 "batch_drop_reply",
                                                 "batch_list_lag",
                                                 "batch_poll_404",
                                                 "batch_expire_partial"};

/* Action states of a run's operator step. */
enum { ACT_NONE, ACT_PENDING, ACT_DONE, ACT_MOOT };

struct run {
    int kind;
    int idx;
    char id[RL_HEX_SIZE];
    char tenant[32];
    char model[16];
    char directive[96];
    char value[1024];
    int approval;
    int64_t act_at; /* cancel: ms after the start it is issued */
    int act;
    int act_tries;
    int cancel_rc; /* exit status of `runs cancel` (-2: not issued) */
    int decided;   /* approve/reject committed */
    long gens_at_purge;
    int purged;
    int replayed;     /* purge: event sent again after the purge */
    int64_t next_try; /* the action is looked at again from then on */
    /* After an asynchronous failover: the run as the old primary held it
     * when it was killed (read from its data after the seed). */
    int o_present;
    char o_status[24];
    char o_upstream[128];
    char o_created[32];    /* created_at in microseconds since the epoch */
    char o_attempts[1024]; /* ",no@dispatched_us:may_generate,..." */
    char p_upstream[128];  /* the output the ledger held when purged */
    long o_steps;          /* approvals, decisions and tombstones */
};

struct event {
    int64_t at_ms;
    int run;
    int dup; /* a duplicate of an earlier event of the run */
};

struct fault {
    int64_t at_ms;
    int kind;
    int target; /* process slot index for kill9/sigterm */
    int param;
    int ms; /* batch faults: the delay or lag */
};

struct note {
    char key[RL_HEX_SIZE + 16];
    char *payload;
};

static struct run runs[MAX_RUNS];
static struct event events[MAX_EVENTS];
static struct fault faults[MAX_FAULTS];
static int nruns, nevents, nfaults;
static long fault_count[NFKINDS];
static long violations;
static unsigned long long seed;
static struct note notes[MAX_NOTES];
static long nnotes;
static long term_checked;
/* A quarter of the seeds run the ledger as a primary with a synchronous
 * standby (tests/harness/pg_replica.sh) and fail over once. Drawn from
 * the seed by a generator of its own, so the rest of a seed's schedule is
 * the same with or without it. */
static int failover;
static char pair[PATH_MAX - 64];
/* Among the failover seeds, half have an asynchronous standby whose WAL
 * receipt stops (F_DETACH) 2 to 8 s before the primary is killed: what
 * the primary commits in between is lost (the lost window). A third of
 * those are quiet (no event published after the promotion, and the
 * operator steps that publish wait until the ledger holds every run
 * again), a third kill the consumers with the primary and start them
 * after the promotion. Each drawn by a generator of its own. */
static int async_standby, quiet, restart_consumers;
static int hold_ops;   /* operator steps wait: the lost window is open */
static int quiet_hold; /* quiet: publishing operator steps wait */
static int64_t detach_ms, killed_ms, quiet_recovered_ms = -1;
static long long lost_wal_bytes = -1;
/* The old primary's batch intents (",id,id,"), read with its runs: an
 * intent the failover lost is the promoted ledger's to forget. */
static char *old_intents;
/* A fifth of the seeds run on a three-broker KRaft cluster
 * (harness/kafka_cluster.sh: replication factor 3, min.insync.replicas
 * 2) instead of one broker; F_NODE_KILL kills one node (a partition's
 * leader, the group coordinator or any) and restarts it. */
static int cluster;
static char cluster_dir[PATH_MAX - 64];
static int node_down;           /* the node killed, 0: all up */
static int64_t node_up_at;      /* when its restart begins */
static pid_t node_restart_pid;  /* kafka_cluster.sh restart under way */
static long node_kills_by[3];   /* leader, coordinator, any */
static long node_kills_skipped; /* a node still down or out of sync */

static unsigned long long
mix(unsigned long long z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int64_t pg_up_at;  /* PostgreSQL is down until then (0: it is up) */
static long planted_seen; /* violations of the planted kind */
static int plant;         /* --plant: one extra generation per completed,
                           * purged and cancelled run, behind the ledger */

/* How ambiguous calls are settled, drawn per seed: looked up in the
 * stub's record of stored completions (then retry_once), retry_once
 * alone, or dedupe against a deduplicating stub. */
enum { M_STORED, M_RETRY_ONCE, M_DEDUPE };
static const char *const mode_names[] = {"stored", "retry_once", "dedupe"};
static int mode;
static char stored_env[64] = "RUNLEDGER_MODEL_STORED_COMPLETIONS=true";
static char policy_env[64] = "RUNLEDGER_AMBIGUOUS_POLICY=retry_once";

static const char *const consumer_env[] = {
    stored_env,
    policy_env,
    "RUNLEDGER_RELAY=false",
    "RUNLEDGER_LEASE_SECONDS=3",
    "RUNLEDGER_SWEEP_INTERVAL_MS=200",
    "RUNLEDGER_BACKOFF_BASE_MS=100",
    "RUNLEDGER_BACKOFF_MAX_MS=1000",
    "RUNLEDGER_MAX_ATTEMPTS=8",
    "RUNLEDGER_MAX_IN_FLIGHT=64",
    "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3",
    "RUNLEDGER_KAFKA_SESSION_TIMEOUT_MS=6000",
    "RUNLEDGER_KAFKA_HEARTBEAT_INTERVAL_MS=500",
    "RUNLEDGER_KAFKA_AUTO_COMMIT_INTERVAL_MS=200",
    "RUNLEDGER_RECONCILE_SETTLE_MS=3000",
    /* batch mode at the pace of a test: polls a second apart, a lost
     * create looked up for 3 s, a batch lease that a kill lets expire */
    "RUNLEDGER_BATCH_POLL_MS=1000",
    "RUNLEDGER_BATCH_SETTLE_MS=3000",
    "RUNLEDGER_BATCH_LEASE_SECONDS=10",
    "RUNLEDGER_BATCH_MAX_POLLS_PER_MINUTE=600",
    "RUNLEDGER_MODEL_API_BY_MODEL=stub-resp=responses",
    "MODEL_TIMEOUT_MS=4000",
    "RUNLEDGER_LOG_LEVEL=warn",
    NULL,
};

static const char *const relay_env[] = {
    "RUNLEDGER_RELAY_BATCH=100",
    "RUNLEDGER_RELAY_INTERVAL_MS=50",
    "RUNLEDGER_SHUTDOWN_GRACE_SECONDS=3",
    "RUNLEDGER_LOG_LEVEL=warn",
    NULL,
};

/* splitmix64: the whole schedule comes from it, so a seed is a schedule
 * on any libc. */
static unsigned long long rng_state;

static unsigned long long
rng(void)
{
    unsigned long long z = (rng_state += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int
pick(int n)
{
    return (int)(rng() % (unsigned long long)n);
}

static void
nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static void violation(const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
violation(const char *rule, const char *fmt, ...)
{
    va_list ap;

    violations++;
    if (strcmp(rule, "generations_visible") == 0 ||
        strcmp(rule, "purged_never_again") == 0 ||
        strcmp(rule, "cancelled_no_new_call") == 0 ||
        strcmp(rule, "calls_visible") == 0)
        planted_seen++;
    fprintf(stderr, "explore: VIOLATION seed=%llu rule=%s: ", seed, rule);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ---- the draw ---------------------------------------------------------- */

static void
build_event(struct run *r, const char *job)
{
    char utc[RL_TIME_UTC_SIZE];
    struct rl_run_identity id = {0};
    const char *reason;
    char errstr[128];

    rl_time_format_utc(1786093200 + (int64_t)r->idx * 3600, utc);
    snprintf(r->value, sizeof(r->value),
             "{%s\"job\":\"%s\",\"tenant\":\"%s\",\"scheduled_at\":\"%s\","
             "\"version\":\"v1\",\"input\":{\"doc\":%d},"
             "\"request\":{\"model\":\"%s\",\"temperature\":0,"
             "\"messages\":[{\"role\":\"user\",\"content\":\"summarise "
             "{{input}}%s%s\"}]},\"notify\":[\"email\",\"slack\"]}",
             r->approval ? "\"approval\":{\"required\":true}," : "", job,
             r->tenant, utc, r->idx, r->model, r->directive[0] ? " " : "",
             r->directive);
    id.job = job;
    id.tenant = r->tenant;
    id.scheduled_at = utc;
    id.version = "v1";
    RL_REQUIRE(rl_runid_compute(&id, r->id, NULL, &reason, errstr,
                                sizeof(errstr)) == 0);
}

static void
draw_run(struct run *r, int idx, const char *job, const char *batch_job)
{
    /* weights: live 30, approve 8, reject 6, cancel 10, purge 8, dlq 6,
     * ambiguous 14, responses 10, batch 8 */
    static const int weight[NKINDS] = {30, 8, 6, 10, 8, 6, 14, 10, 8};
    int total = 0, w;

    for (int k = 0; k < NKINDS; k++)
        total += weight[k];
    w = pick(total);
    memset(r, 0, sizeof(*r));
    for (r->kind = 0; w >= weight[r->kind]; r->kind++)
        w -= weight[r->kind];
    r->idx = idx;
    r->cancel_rc = -2;
    snprintf(r->tenant, sizeof(r->tenant), "tenant-%d", pick(5));
    snprintf(r->model, sizeof(r->model), "stub-1");
    switch (r->kind) {
    case K_LIVE: {
        int d = pick(10);

        if (d < 2)
            snprintf(r->directive, sizeof(r->directive),
                     "[[fault:500 times=%d]]", 1 + pick(2));
        else if (d < 3)
            snprintf(r->directive, sizeof(r->directive),
                     "[[fault:503 times=1]]");
        else if (d < 4)
            snprintf(r->directive, sizeof(r->directive),
                     "[[fault:429 retry_after=1 times=1]]");
        else if (d < 7)
            snprintf(r->directive, sizeof(r->directive),
                     "[[fault:latency ms=%d]]", 20 + pick(1500));
        break;
    }
    case K_APPROVE:
    case K_REJECT:
        r->approval = 1;
        r->act = ACT_PENDING;
        break;
    case K_CANCEL:
        snprintf(r->directive, sizeof(r->directive), "[[fault:latency ms=%d]]",
                 1500 + pick(2000));
        r->act = ACT_PENDING;
        r->act_at = 200 + pick(3500); /* after the event's publication */
        break;
    case K_PURGE:
        r->act = ACT_PENDING;
        break;
    case K_DLQ:
        snprintf(r->directive, sizeof(r->directive), "[[fault:400]]");
        r->act = ACT_PENDING;
        break;
    case K_AMBIG: {
        static const char *const amb[] = {"reset", "hang", "close_mid_body",
                                          "close"};

        snprintf(r->directive, sizeof(r->directive), "[[fault:%s times=1]]",
                 amb[pick(4)]);
        break;
    }
    case K_RESP:
        snprintf(r->model, sizeof(r->model), "stub-resp");
        break;
    case K_BATCH:
        job = batch_job;
        break;
    }
    build_event(r, job);
}

static int
cmp_event(const void *a, const void *b)
{
    const struct event *x = a, *y = b;

    return x->at_ms < y->at_ms ? -1 : x->at_ms > y->at_ms;
}

static int
cmp_fault(const void *a, const void *b)
{
    const struct fault *x = a, *y = b;

    return x->at_ms < y->at_ms ? -1 : x->at_ms > y->at_ms;
}

/* Batch faults take the place of some of the faults drawn at times when
 * batch runs are about (from 2.5 s after the first batch run's event to
 * 10 s after the last one's: waiting, submitted or being read), about one
 * in six there. They are drawn by a generator of their own, so the rest
 * of a seed's schedule is the one it had before they were drawn. */
static void
draw_batch_faults(int64_t window)
{
    unsigned long long b = mix(seed ^ 0x6261746368ULL);
    int64_t first = -1, last = -1;

    for (int i = 0; i < nevents; i++) {
        if (runs[events[i].run].kind != K_BATCH)
            continue;
        if (first < 0 || events[i].at_ms < first)
            first = events[i].at_ms;
        if (events[i].at_ms > last)
            last = events[i].at_ms;
    }
    if (first < 0)
        return;
    for (int i = 0; i < nfaults; i++) {
        struct fault *f = &faults[i];
        int w;

        b = mix(b);
        if (f->at_ms < first + 2500 || f->at_ms > last + 10000 ||
            f->at_ms >= window || f->kind == F_BROKER_KILL || b % 100 >= 17)
            continue;
        b = mix(b);
        w = (int)(b % 100);
        b = mix(b);
        if (w < 25) {
            f->kind = F_BATCH_CREATE_LATE;
            f->param = 1; /* creates */
            f->ms = 12000 + (int)(b % 3001);
        } else if (w < 45) {
            f->kind = F_BATCH_DROP_REPLY;
            f->param = 1;
        } else if (w < 65) {
            f->kind = F_BATCH_LIST_LAG;
            f->param = 1 + (int)(b % 3); /* batches */
            f->ms = 1000 + (int)(b / 3 % 3001);
        } else if (w < 85) {
            /* fewer or more than the worker's 5 failed polls in a row
             * before it gives a batch up (consumer/batch/poll.c) */
            f->kind = F_BATCH_POLL_404;
            f->param = 2 + (int)(b % 7);
        } else {
            f->kind = F_BATCH_EXPIRE_PARTIAL;
            f->param = 1 + (int)(b % 2);
        }
    }
}

static void
draw(const char *job, const char *batch_job, int window_s)
{
    int64_t window = (int64_t)window_s * 1000;
    int broker_killed = 0;

    rng_state = seed;
    mode = pick(4);
    mode = mode < 2 ? M_STORED : mode == 2 ? M_RETRY_ONCE : M_DEDUPE;
    if (mode != M_STORED)
        snprintf(stored_env, sizeof(stored_env),
                 "RUNLEDGER_MODEL_STORED_COMPLETIONS=false");
    if (mode == M_DEDUPE)
        snprintf(policy_env, sizeof(policy_env),
                 "RUNLEDGER_AMBIGUOUS_POLICY=dedupe");
    nruns = 40 + window_s * 2 + pick(window_s * 2);
    if (nruns > MAX_RUNS)
        nruns = MAX_RUNS;
    for (int i = 0; i < nruns; i++) {
        draw_run(&runs[i], i, job, batch_job);
        events[nevents++] = (struct event){pick((int)(window * 8 / 10)), i, 0};
    }
    /* Duplicates: an earlier run's event again, later. */
    for (int n = nruns / 4 + pick(nruns / 4 + 1); n > 0; n--) {
        struct event *orig = &events[pick(nruns)];
        int64_t at = orig->at_ms + pick(5000);

        events[nevents++] = (struct event){at, orig->run, 1};
    }
    qsort(events, (size_t)nevents, sizeof(events[0]), cmp_event);

    /* Faults: one every 1 to 4 s of the window, from its third second. */
    for (int64_t at = 3000 + pick(2000); at < window && nfaults < MAX_FAULTS;
         at += 1000 + pick(3000)) {
        struct fault *f = &faults[nfaults++];
        int w = pick(100);

        f->at_ms = at;
        f->target = pick(NPROCS);
        /* A third of the kills (by a generator of their own, so the rest
         * of the schedule stays the seed's) start the process again set
         * to crash at a failpoint. */
        if (w < 24)
            f->kind =
                mix(seed ^ 0x6b696c6c6174ULL ^ (unsigned long long)at) % 3 == 0
                    ? F_KILL_AT
                    : F_KILL9;
        else if (w < 30)
            f->kind = F_FREEZE;
        else if (w < 45)
            f->kind = F_TERM;
        else if (w < 52)
            f->kind = F_PG_RESTART;
        else if (w < 60)
            f->kind = F_PG_CUT;
        else if (w < 68)
            f->kind = F_MODEL_429;
        else if (w < 76)
            f->kind = F_MODEL_5XX;
        else if (w < 83)
            f->kind = F_MODEL_HANG;
        else if (w < 90)
            f->kind = F_MODEL_RESET;
        else if (w < 97 || broker_killed)
            f->kind = F_MODEL_SLOW;
        else {
            /* on the cluster: one node of three, restarted later */
            f->kind = cluster ? F_NODE_KILL : F_BROKER_KILL;
            broker_killed = 1;
        }
        f->param = 1 + pick(4);
    }
    draw_batch_faults(window);
    /* The topologies' own faults come from generators of their own: the
     * draws above are the same with or without them. */
    if (failover && nfaults + 2 < MAX_FAULTS) {
        int64_t fo =
            window * (3 + (int64_t)(mix(seed ^ 0x70726f6d6f7465ULL) % 5)) / 10;

        /* Quiet: after the last event (duplicates included), so no
         * partition has anything new to deliver once promoted. */
        if (quiet)
            fo = events[nevents - 1].at_ms + 1000 +
                 (int64_t)(mix(seed ^ 0x7175696574ULL) % 2000);
        faults[nfaults++] = (struct fault){fo, F_FAILOVER, 0, 0, 0};
        if (async_standby) {
            int64_t lead =
                2000 + (int64_t)(mix(seed ^ 0x646574616368ULL) % 6000);

            faults[nfaults++] = (struct fault){
                fo - lead < 2500 ? 2500 : fo - lead, F_DETACH, 0, 0, 0};
        }
    }
    if (cluster) {
        unsigned long long z = mix(seed ^ 0x6e6f6465ULL);
        int kills = 2 + (int)(z % 2);

        for (int k = 0; k < kills && nfaults < MAX_FAULTS; k++) {
            z = mix(z);
            faults[nfaults++] = (struct fault){
                window * (15 + 70 * k / kills + (int64_t)(z % 10)) / 100,
                F_NODE_KILL, (int)((z >> 8) % 3), 1 + (int)((z >> 16) % 4), 0};
        }
    }
    qsort(faults, (size_t)nfaults, sizeof(faults[0]), cmp_fault);
}

/* ---- processes and faults ---------------------------------------------- */

static int slot[NPROCS];

/* The failpoints a kill_at fault sets a process to crash at
 * (tests/faults/CMakeLists.txt's crash cases and the batcher's), per
 * role. */
static const char *const consume_points[] = {
    "after_claim",           "after_collect",
    "after_dispatch_record", "after_model_response",
    "after_complete_commit", "before_complete_statement",
    "batch_after_upload",    "batch_after_create",
};
static const char *const relay_points[] = {"relay_after_produce"};

/* Per slot, the RL_FAILPOINTS entry its process was started with by a
 * kill_at fault ("" when none): it crashes there, and is started again
 * without it. */
static char armed[NPROCS][96];
static long kill_at_fired; /* of them, the processes that crashed there */

/* Starts role with its settings and extra (NULL: none) after them. */
static int
spawn_role_with(struct e2e *t, int role, const char *extra)
{
    const char *const *base = role < NCONSUMERS ? consumer_env : relay_env;
    const char *env[48];
    size_t n = 0;

    while (base[n] && n < sizeof(env) / sizeof(env[0]) - 2) {
        env[n] = base[n];
        n++;
    }
    if (extra)
        env[n++] = extra;
    env[n] = NULL;
    return e2e_spawn(t, role < NCONSUMERS ? "consume" : "relay", env);
}

static int
spawn_role(struct e2e *t, int role)
{
    return spawn_role_with(t, role, NULL);
}

static const char *
role_name(int role)
{
    return role < NCONSUMERS ? "consume" : "relay";
}

static size_t
discard(char *ptr, size_t size, size_t nmemb, void *opaque)
{
    (void)ptr;
    (void)opaque;
    return size * nmemb;
}

/* POST (body) or DELETE (body NULL) on the stub's admin path
 * (/admin/fault, /admin/batch_fault). */
static void
stub_admin(struct e2e *t, const char *path, const char *body)
{
    CURL *c = curl_easy_init();
    char url[300];
    struct curl_slist *h = NULL;

    if (!c)
        return;
    snprintf(url, sizeof(url), "%s", t->stub_url);
    /* stub_url ends in /v1: the admin path is beside it */
    if (strlen(url) > 3 && strcmp(url + strlen(url) - 3, "/v1") == 0)
        url[strlen(url) - 3] = '\0';
    strncat(url, path, sizeof(url) - strlen(url) - 1);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    if (body) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    if (curl_easy_perform(c) != CURLE_OK)
        fprintf(stderr, "explore: stub %s failed\n", path);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static void
stub_fault(struct e2e *t, const char *body)
{
    stub_admin(t, "/admin/fault", body);
}

static void
stub_batch_fault(struct e2e *t, const char *fault, int times, int ms)
{
    char body[160];

    snprintf(body, sizeof(body), "{\"mode\":\"%s\",\"times\":%d,\"ms\":%d}",
             fault, times, ms);
    stub_admin(t, "/admin/batch_fault", body);
}

/* One chat completion for key, as a worker would send it, behind the
 * ledger's back: the checker must see the generation no attempt
 * explains. */
static void
stub_generate(struct e2e *t, const char *key)
{
    CURL *c = curl_easy_init();
    char url[300], hdr[200];
    struct curl_slist *h = NULL;

    if (!c)
        return;
    snprintf(url, sizeof(url), "%s/chat/completions", t->stub_url);
    snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", key);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, hdr);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS,
                     "{\"model\":\"stub-1\",\"messages\":[{\"role\":"
                     "\"user\",\"content\":\"planted\"}]}");
    if (curl_easy_perform(c) != CURLE_OK)
        fprintf(stderr, "explore: planted call failed\n");
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static void
sigterm_checked(struct e2e *t, int role)
{
    int64_t t0 = rltest_now_ms();
    int status;

    e2e_signal(t, slot[role], SIGTERM, 0);
    status = e2e_wait_exit(t, slot[role], GRACE_S * 1000 + TERM_MARGIN_MS);
    term_checked++;
    if (status == -1) {
        violation("sigterm_exit",
                  "%s (slot %d, log %s.%d.log) still runs %d ms "
                  "after SIGTERM (grace %d s)",
                  role_name(role), slot[role], t->name, slot[role],
                  GRACE_S * 1000 + TERM_MARGIN_MS, GRACE_S);
        e2e_signal(t, slot[role], SIGKILL, 1);
    } else if (armed[role][0] && WIFSIGNALED(status) &&
               WTERMSIG(status) == SIGKILL) {
        /* It reached its failpoint while it stopped: the crash asked for. */
        kill_at_fired++;
        fprintf(stderr, "explore: %s#%d crashed at %s while stopping\n",
                role_name(role), role, armed[role] + strlen("RL_FAILPOINTS="));
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        violation("sigterm_exit",
                  "%s (slot %d, log %s.%d.log) ended with "
                  "status %d (signal %d) %lld ms after SIGTERM",
                  role_name(role), slot[role], t->name, slot[role],
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0,
                  (long long)(rltest_now_ms() - t0));
    }
}

static int down[NPROCS]; /* stopped, to be started once the ledger is up */
static int64_t frozen_until[NPROCS]; /* SIGSTOPped until then (0: not) */

/* SIGCONT of role when frozen (before a signal that must reach it). */
static void
thaw(struct e2e *t, int role)
{
    if (frozen_until[role]) {
        e2e_signal(t, slot[role], SIGCONT, 0);
        frozen_until[role] = 0;
    }
}

/* Starts role again, or once PostgreSQL is back: with a login per role
 * (RL_TEST_DB_ROLES=1) a start needs the ledger to create it. */
static void
respawn(struct e2e *t, int role)
{
    armed[role][0] = '\0';
    if (pg_up_at) {
        down[role] = 1;
        return;
    }
    slot[role] = spawn_role(t, role);
    down[role] = 0;
}

/* A process a kill_at fault armed that has crashed at its failpoint:
 * started again without it. */
static void
restart_crashed(struct e2e *t)
{
    for (int i = 0; i < NPROCS; i++) {
        if (!armed[i][0] || down[i] || e2e_alive(t, slot[i]))
            continue;
        kill_at_fired++;
        fprintf(stderr, "explore: %s#%d crashed at %s; restarted without it\n",
                role_name(i), i, armed[i] + strlen("RL_FAILPOINTS="));
        respawn(t, i);
    }
}

/* Starts `kafka_cluster.sh restart DIR node` without waiting for it (it
 * waits until the node sees all three brokers, seconds of a JVM's start
 * the schedule goes on through); node_restarted reaps it. */
static void
node_restart_begin(int node)
{
    const char *src = getenv("RL_SOURCE_DIR");
    char line[2 * PATH_MAX];
    char *argv[] = {"sh", "-c", line, NULL};

    snprintf(line, sizeof(line),
             "'%s/tests/harness/kafka_cluster.sh' restart '%s' %d >>'%s.log' "
             "2>&1",
             src ? src : ".", cluster_dir, node, cluster_dir);
    RL_REQUIRE(posix_spawn(&node_restart_pid, "/bin/sh", NULL, NULL, argv,
                           environ) == 0);
}

/* 1 once the node killed is up again (and reaped), waiting up to
 * wait_ms for it. */
static int
node_restarted(int64_t wait_ms)
{
    int64_t deadline = rltest_now_ms() + wait_ms;
    int status;
    pid_t pid;

    if (!node_down)
        return 1;
    if (!node_restart_pid)
        node_restart_begin(node_down);
    for (;;) {
        pid = waitpid(node_restart_pid, &status, WNOHANG);
        if (pid == node_restart_pid)
            break;
        if (rltest_now_ms() >= deadline)
            return 0;
        nap_ms(100);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "explore: restart of node %d failed (log %s.log)\n",
                node_down, cluster_dir);
        RL_REQUIRE(0);
    }
    fprintf(stderr, "explore: node %d up again\n", node_down);
    node_down = 0;
    node_restart_pid = 0;
    return 1;
}

/* The node a F_NODE_KILL takes: the leader of one of the schedule
 * topic's partitions, the group's coordinator, or any node; 0 when the
 * cluster does not say. */
static int
node_victim(struct e2e *t, const struct fault *f, int *how)
{
    int leader[CLUSTER_MAX_PARTITIONS], isr[CLUSTER_MAX_PARTITIONS];
    int n, node = 0;

    *how = f->target % 3;
    if (*how == 0) {
        n = cluster_leaders(t->producer, t->topic, leader, isr,
                            CLUSTER_MAX_PARTITIONS);
        if (n > 0)
            node = leader[f->param % n];
    } else if (*how == 1) {
        node = cluster_coordinator(t, t->name, 3000);
    } else {
        node = 1 + f->param % CLUSTER_NODES;
    }
    return node >= 1 && node <= CLUSTER_NODES ? node : 0;
}

/* The standby has replayed everything the primary had written when
 * asked (operator steps hold from then on, so none of them falls in the
 * lost window the detach opens). */
static void
standby_catch_up(struct e2e *t)
{
    char lsn[64];
    int64_t deadline = rltest_now_ms() + 10000;

    snprintf(lsn, sizeof(lsn), "%s",
             e2e_text(t, "SELECT pg_current_wal_lsn()"));
    while (lsn[0] && rltest_now_ms() < deadline &&
           e2e_intf(t,
                    "SELECT count(*) FROM pg_stat_replication WHERE "
                    "replay_lsn >= '%s'::pg_lsn",
                    lsn) != 1)
        nap_ms(50);
}

static void
inject(struct e2e *t, const struct fault *f, char *pg_dir,
       const char *kafka_dir)
{
    char body[256];
    int victim = 0, how = 0;

    restart_crashed(t);
    if ((f->kind == F_KILL9 || f->kind == F_TERM || f->kind == F_FREEZE ||
         f->kind == F_KILL_AT) &&
        down[f->target])
        return; /* already stopped, waiting for the ledger */
    if (f->kind == F_NODE_KILL) {
        /* One node down at a time, and only with every replica in sync:
         * two down would leave partitions below min.insync.replicas. */
        if (node_down || !cluster_wait_in_sync(t, 0) ||
            !(victim = node_victim(t, f, &how))) {
            node_kills_skipped++;
            fprintf(stderr, "explore: t+%lld ms node_kill skipped\n",
                    (long long)f->at_ms);
            return;
        }
    }
    fault_count[f->kind]++;
    fprintf(stderr, "explore: t+%lld ms fault %s", (long long)f->at_ms,
            fault_names[f->kind]);
    if (f->kind == F_KILL9 || f->kind == F_TERM || f->kind == F_KILL_AT)
        fprintf(stderr, " %s#%d", role_name(f->target), f->target);
    if (f->kind == F_NODE_KILL)
        fprintf(stderr, " node %d (%s)", victim,
                how == 0   ? "a partition leader"
                : how == 1 ? "the group coordinator"
                           : "any");
    if (f->kind >= F_BATCH_CREATE_LATE)
        fprintf(stderr, " times=%d ms=%d", f->param, f->ms);
    fputc('\n', stderr);
    switch (f->kind) {
    case F_KILL9:
        frozen_until[f->target] = 0; /* SIGKILL ends a stopped process */
        e2e_signal(t, slot[f->target], SIGKILL, 1);
        nap_ms(pick(1000));
        respawn(t, f->target);
        break;
    case F_TERM:
        thaw(t, f->target);
        sigterm_checked(t, f->target);
        respawn(t, f->target);
        break;
    case F_PG_RESTART:
        /* Down for 0.5 to 4.5 s, while the schedule goes on: kills,
         * SIGTERMs and model faults meet a ledger that is away. */
        if (!pg_up_at) {
            RL_REQUIRE(e2e_harness("pg.sh", "kill", pg_dir) == 0);
            pg_up_at = rltest_now_ms() + f->param * 1000 - 500;
        }
        break;
    case F_PG_CUT:
        e2e_int(t, "SELECT count(pg_terminate_backend(pid)) FROM "
                   "pg_stat_activity WHERE pid <> pg_backend_pid() AND "
                   "datname = current_database() AND backend_type = "
                   "'client backend'");
        break;
    case F_MODEL_429:
        snprintf(body, sizeof(body),
                 "{\"mode\":\"429\",\"retry_after\":1,\"times\":%d}",
                 f->param * 3);
        stub_fault(t, body);
        break;
    case F_MODEL_5XX:
        snprintf(body, sizeof(body), "{\"mode\":\"%s\",\"times\":%d}",
                 f->param % 2 ? "500" : "503", f->param * 3);
        stub_fault(t, body);
        break;
    case F_MODEL_HANG:
        snprintf(body, sizeof(body), "{\"mode\":\"hang\",\"times\":%d}",
                 f->param);
        stub_fault(t, body);
        break;
    case F_MODEL_RESET:
        snprintf(body, sizeof(body), "{\"mode\":\"reset\",\"times\":%d}",
                 f->param);
        stub_fault(t, body);
        break;
    case F_MODEL_SLOW:
        snprintf(body, sizeof(body),
                 "{\"mode\":\"latency\",\"ms\":%d,\"times\":%d}",
                 1000 + f->param * 500, f->param * 4);
        stub_fault(t, body);
        break;
    case F_BROKER_KILL:
        RL_REQUIRE(e2e_harness("kafka.sh", "kill", kafka_dir) == 0);
        nap_ms(500 + pick(1000));
        RL_REQUIRE(e2e_harness("kafka.sh", "restart", kafka_dir) == 0);
        break;
    case F_FREEZE:
        /* A worker paused past its 3 s lease (a long GC, a stalled VM)
         * wakes up to find its runs taken over: every write it still
         * tries must be refused as stale. */
        if (!frozen_until[f->target]) {
            e2e_signal(t, slot[f->target], SIGSTOP, 0);
            frozen_until[f->target] = rltest_now_ms() + 2000 + f->param * 1500;
        }
        break;
    case F_KILL_AT: {
        /* Killed, then started set to crash at a failpoint on its
         * param-th hit there; restart_crashed starts it again without. */
        const char *const *points =
            f->target < NCONSUMERS ? consume_points : relay_points;
        size_t npoints = f->target < NCONSUMERS
                             ? sizeof(consume_points) / sizeof(*points)
                             : sizeof(relay_points) / sizeof(*points);
        const char *fp =
            points[mix(seed ^ 0x706f696e74ULL ^ (unsigned long long)f->at_ms) %
                   npoints];

        frozen_until[f->target] = 0;
        e2e_signal(t, slot[f->target], SIGKILL, 1);
        nap_ms(pick(1000));
        if (pg_up_at) {
            /* The ledger is away: started plain once it is back. */
            respawn(t, f->target);
            break;
        }
        snprintf(armed[f->target], sizeof(armed[f->target]),
                 "RL_FAILPOINTS=%s=crash@%d", fp, f->param);
        slot[f->target] = spawn_role_with(t, f->target, armed[f->target]);
        down[f->target] = 0;
        fprintf(stderr, "explore: %s#%d started to crash at %s=crash@%d\n",
                role_name(f->target), f->target, fp, f->param);
        break;
    }
    case F_BATCH_CREATE_LATE:
        stub_batch_fault(t, "create_late", f->param, f->ms);
        break;
    case F_BATCH_DROP_REPLY:
        stub_batch_fault(t, "create_drop_reply", f->param, 0);
        break;
    case F_BATCH_LIST_LAG:
        stub_batch_fault(t, "list_lag", f->param, f->ms);
        break;
    case F_BATCH_POLL_404:
        stub_batch_fault(t, "poll_404", f->param, 0);
        break;
    case F_BATCH_EXPIRE_PARTIAL:
        stub_batch_fault(t, "expire_partial", f->param, 0);
        break;
    case F_FAILOVER:
        /* A primary that is down for a pg_restart fault comes back
         * first: failover kills a running primary. */
        if (pg_up_at) {
            RL_REQUIRE(e2e_harness("pg.sh", "restart", pg_dir) == 0);
            pg_up_at = 0;
        }
        /* The consumers die with the primary: the new ones start from
         * the group's committed offsets, past what the new primary
         * holds. */
        for (int i = 0; restart_consumers && i < NCONSUMERS; i++) {
            frozen_until[i] = 0;
            if (!down[i])
                e2e_signal(t, slot[i], SIGKILL, 1);
            down[i] = 1;
        }
        killed_ms = rltest_now_ms();
        RL_REQUIRE(e2e_harness("pg_replica.sh", "failover", pair) == 0);
        /* later pg_restart faults stop the new primary */
        snprintf(pg_dir, PATH_MAX, "%s/standby", pair);
        for (int i = 0; i < NPROCS; i++) {
            if (down[i])
                respawn(t, i);
        }
        hold_ops = 0;
        quiet_hold = quiet;
        break;
    case F_DETACH:
        if (pg_up_at) {
            RL_REQUIRE(e2e_harness("pg.sh", "restart", pg_dir) == 0);
            pg_up_at = 0;
            for (int i = 0; i < NPROCS; i++) {
                if (down[i])
                    respawn(t, i);
            }
        }
        hold_ops = 1;
        standby_catch_up(t);
        RL_REQUIRE(e2e_harness("pg_replica.sh", "detach", pair) == 0);
        detach_ms = rltest_now_ms();
        break;
    case F_NODE_KILL:
        node_kills_by[how]++;
        RL_REQUIRE(cluster_node("kill", victim) == 0);
        node_down = victim;
        node_up_at = rltest_now_ms() + 1000 + f->param * 1000;
        break;
    }
}

/* The stub's generations for run r: its live calls (Idempotency-Key =
 * run ID) and its batch lines (custom_id = <run ID>:<attempt>). */
static long
run_generations(struct e2e *t, const struct run *r)
{
    long gens = e2e_stub_generations(t, r->id);

    if (r->kind == K_BATCH && gens >= 0) {
        for (int a = 1; a <= MAX_ATTEMPTS + 2; a++) {
            char key[RL_HEX_SIZE + 16];
            long g;

            snprintf(key, sizeof(key), "%s:%d", r->id, a);
            g = e2e_stub_generations(t, key);
            if (g > 0)
                gens += g;
        }
    }
    return gens;
}

/* ---- operator actions -------------------------------------------------- */

static int
cli(struct e2e *t, const char *const *args, char *out, size_t size)
{
    static char err[8192];
    int rc = ops_run(t, args, NULL, NULL, out, size, err, sizeof(err));

    if (rc != 0 && rc != 3)
        fprintf(stderr, "explore: runledger %s %s: exit %d: %.300s\n", args[0],
                args[1] ? args[1] : "", rc, err);
    return rc;
}

/* One step of run r's operator action, when its time has come. */
static void
act(struct e2e *t, struct run *r, int64_t published_at, int64_t now)
{
    static char out[1 << 14];
    const char *st;

    if (r->act != ACT_PENDING || published_at < 0 || now < r->next_try ||
        pg_up_at || hold_ops)
        return;
    /* Quiet: a purge's replay or a dead letter's would prompt its
     * partition; the consumers must find the lost runs on their own. */
    if (quiet_hold && (r->kind == K_PURGE || r->kind == K_DLQ))
        return;
    /* Each pending action looks at its run at most twice a second (the
     * dead-letter replay once a second: it reads the whole topic). */
    r->next_try = now + (r->kind == K_DLQ ? 1000 : 500);
    st = e2e_textf(t,
                   "SELECT coalesce((SELECT status FROM runs WHERE "
                   "run_id = '%s'), 'missing')",
                   r->id);
    if (!st[0])
        return; /* PostgreSQL away */
    switch (r->kind) {
    case K_APPROVE:
    case K_REJECT: {
        char digest[RL_HEX_SIZE];
        int rc;

        if (strcmp(st, "awaiting_approval") != 0) {
            /* a decision whose exit status a cut connection lost */
            if (e2e_intf(t,
                         "SELECT count(*) FROM approvals WHERE run_id = '%s' "
                         "AND decision = '%s'",
                         r->id,
                         r->kind == K_APPROVE ? "approve" : "reject") == 1) {
                r->decided = 1;
                r->act = ACT_DONE;
            } else if (strcmp(st, "unknown") == 0 ||
                       strcmp(st, "failed") == 0) {
                r->act = ACT_MOOT;
            }
            return;
        }
        snprintf(digest, sizeof(digest), "%s",
                 e2e_textf(t,
                           "SELECT proposal_digest FROM runs WHERE run_id = "
                           "'%s'",
                           r->id));
        {
            const char *args[] = {
                "runs",     r->kind == K_APPROVE ? "approve" : "reject",
                r->id,      "--digest",
                digest,     "--actor",
                "explorer", "--reason",
                "explore",  NULL};

            rc = cli(t, args, out, sizeof(out));
        }
        if (rc == 0) {
            r->decided = 1;
            r->act = ACT_DONE;
        }
        break;
    }
    case K_CANCEL: {
        const char *args[] = {"runs",     "cancel",   r->id,     "--actor",
                              "explorer", "--reason", "explore", NULL};
        int rc;

        if (now < published_at + r->act_at)
            return;
        if (strcmp(st, "missing") == 0)
            return; /* not registered yet */
        rc = cli(t, args, out, sizeof(out));
        /* refused as cancelled already: an earlier try committed and a
         * cut connection lost its exit status */
        if (rc == 3 && e2e_intf(t,
                                "SELECT count(*) FROM run_decisions WHERE "
                                "run_id = '%s' AND decision = 'cancel'",
                                r->id) > 0)
            rc = 0;
        if (rc == 0 || rc == 3) {
            r->cancel_rc = rc;
            r->act = ACT_DONE;
        }
        break;
    }
    case K_PURGE: {
        const char *args[] = {"purge", "--older-than", "30d", NULL};
        /* Gone already: another run's purge took it too (it was aged),
         * or a purge whose exit status a cut connection lost. */
        int gone = strcmp(st, "missing") == 0 &&
                   e2e_intf(t,
                            "SELECT count(*) FROM run_tombstones WHERE "
                            "run_id = '%s'",
                            r->id) == 1;

        if (!gone) {
            if (strcmp(st, "completed") != 0) {
                if (strcmp(st, "unknown") == 0 || strcmp(st, "failed") == 0)
                    r->act = ACT_MOOT;
                return;
            }
            if (e2e_intf(t, "SELECT count(*) FROM outbox WHERE run_id = '%s'",
                         r->id) != 0)
                return;
            snprintf(r->p_upstream, sizeof(r->p_upstream), "%s",
                     e2e_textf(t,
                               "SELECT coalesce(output->>"
                               "'upstream_request_id', '') FROM runs WHERE "
                               "run_id = '%s'",
                               r->id));
            if (e2e_intf(t,
                         "WITH u AS (UPDATE runs SET updated_at = now() - "
                         "interval '40 days' WHERE run_id = '%s' RETURNING "
                         "1) SELECT count(*) FROM u",
                         r->id) != 1)
                return;
            if (cli(t, args, out, sizeof(out)) != 0 ||
                e2e_intf(t,
                         "SELECT count(*) FROM run_tombstones WHERE run_id = "
                         "'%s'",
                         r->id) != 1)
                return;
        }
        /* Gens read after the purge committed: a call that was still
         * counted in flight before it would show here. */
        r->gens_at_purge = run_generations(t, r);
        r->purged = 1;
        r->act = ACT_DONE;
        e2e_produce(t, r->tenant, r->value);
        r->replayed = 1;
        break;
    }
    case K_DLQ: {
        const char *args[] = {"dlq", "replay", "--run-id", r->id, NULL};

        if (strcmp(st, "failed") != 0) {
            if (strcmp(st, "unknown") == 0 || strcmp(st, "completed") == 0)
                r->act = ACT_MOOT;
            return;
        }
        if (r->act_tries++ > 60) {
            r->act = ACT_MOOT;
            return;
        }
        if (cli(t, args, out, sizeof(out)) == 0 && strstr(out, "sent")) {
            r->replayed = 1;
            r->act = ACT_DONE;
        }
        break;
    }
    }
}

/* ---- the checker ------------------------------------------------------- */

static void
on_note(const rd_kafka_message_t *rkm, void *opaque)
{
    (void)opaque;
    if (nnotes >= MAX_NOTES)
        return;
    e2e_header(rkm, "idempotency-key", notes[nnotes].key,
               sizeof(notes[nnotes].key));
    notes[nnotes].payload = calloc(1, rkm->len + 1);
    RL_REQUIRE(notes[nnotes].payload);
    if (rkm->payload)
        memcpy(notes[nnotes].payload, rkm->payload, rkm->len);
    nnotes++;
}

/* The attempts of run_id, one line (a buffer of its own: violation()
 * calls print it beside other e2e_textf answers). */
static const char *
attempts_of(struct e2e *t, const char *run_id)
{
    static char buf[4096];

    snprintf(buf, sizeof(buf), "%s",
             e2e_textf(t,
                       "SELECT coalesce(string_agg(attempt_no || ':' || "
                       "coalesce(outcome, 'none') || coalesce('/' || "
                       "http_status, '') || ' at ' || to_char(dispatched_at, "
                       "'HH24:MI:SS.MS') || ' by ' || worker || coalesce(' "
                       "reconciled_from=' || reconciled_from, ''), '; ' "
                       "ORDER BY attempt_no), 'none') FROM attempts WHERE "
                       "run_id = '%s'",
                       run_id));
    return buf;
}

/* The notifications on the topic of run_id's channel: copies, and
 * distinct payloads among them. */
static void
notes_of(const char *run_id, const char *channel, long *copies, long *distinct,
         const char **first)
{
    char key[RL_HEX_SIZE + 16];

    snprintf(key, sizeof(key), "%s:%s", run_id, channel);
    *copies = *distinct = 0;
    *first = NULL;
    for (long i = 0; i < nnotes; i++) {
        if (strcmp(notes[i].key, key) != 0)
            continue;
        (*copies)++;
        if (!*first) {
            *first = notes[i].payload;
            *distinct = 1;
        } else if (strcmp(*first, notes[i].payload) != 0) {
            (*distinct)++;
        }
    }
}

/* ---- the lost window --------------------------------------------------- */

/* Quiet: the publishing operator steps wait until the ledger holds a run
 * for every event published (the lost ones found again). */
static void
quiet_release(struct e2e *t)
{
    static int64_t next;
    int64_t expected = 0;

    if (!quiet_hold || rltest_now_ms() < next)
        return;
    next = rltest_now_ms() + 500;
    for (int i = 0; i < nruns; i++)
        expected += !runs[i].purged;
    if (e2e_int(t, "SELECT count(*) FROM runs") == expected) {
        quiet_hold = 0;
        quiet_recovered_ms = rltest_now_ms() - killed_ms;
        fprintf(stderr,
                "explore: quiet: every run in the promoted ledger %lld ms "
                "after the kill\n",
                (long long)quiet_recovered_ms);
    }
}

/* A run's history as one line: its status, accepted output, creation
 * and attempts (number @ dispatch in microseconds : may have generated;
 * a batch line put in a batch also as b<number> @ parked / the
 * provider's batch: a create the failover lost is made again, a second
 * generation under an attempt it kept), and its operator steps. The same query
 * on the old primary and on the promoted ledger: an attempt or a creation whose
 * time differs is one the failover lost. */
static const char *
history_of(struct e2e *t, const char *run_id)
{
    return e2e_textf(
        t,
        "SELECT coalesce((SELECT status || '|' || coalesce(output->>"
        "'upstream_request_id', '') || '|' || (extract(epoch FROM "
        "created_at) * 1000000)::bigint FROM runs WHERE run_id = '%s'), "
        "'missing||0') || '|,' || coalesce((SELECT string_agg(attempt_no || "
        "'@' || (extract(epoch FROM dispatched_at) * 1000000)::bigint || ':' "
        "|| (outcome IS NULL OR outcome IN ('ok', 'ambiguous', 'cancelled', "
        "'lease_lost', 'invalid_output'))::int, ',' ORDER BY attempt_no) || "
        "',' FROM attempts WHERE run_id = '%s'), '') || coalesce((SELECT "
        "string_agg('b' || attempt_no || '@' || (extract(epoch FROM "
        "parked_at) * 1000000)::bigint || '/' || coalesce((SELECT "
        "provider_batch_id FROM batches x WHERE x.batch_id = b.batch_id), "
        "'') || ':1', ',' ORDER BY attempt_no) || "
        "',' FROM batch_runs b WHERE b.run_id = '%s' AND b.batch_id IS NOT "
        "NULL), '') || '|' || ((SELECT "
        "count(*) FROM approvals WHERE run_id = '%s') + (SELECT count(*) "
        "FROM run_decisions WHERE run_id = '%s') + (SELECT count(*) FROM "
        "run_tombstones WHERE run_id = '%s'))",
        run_id, run_id, run_id, run_id, run_id, run_id);
}

/* Splits a history_of line into its parts; 0 when it is not one. */
static int
parse_history(const char *line, char *status, size_t ssize, char *upstream,
              size_t usize, char *created, size_t csize, char *atts,
              size_t asize, long *steps)
{
    const char *p[5];

    p[0] = line;
    for (int i = 1; i < 5; i++) {
        p[i] = strchr(p[i - 1], '|');
        if (!p[i])
            return 0;
        p[i]++;
    }
    snprintf(status, ssize, "%.*s", (int)(p[1] - p[0] - 1), p[0]);
    snprintf(upstream, usize, "%.*s", (int)(p[2] - p[1] - 1), p[1]);
    snprintf(created, csize, "%.*s", (int)(p[3] - p[2] - 1), p[2]);
    snprintf(atts, asize, "%.*s", (int)(p[4] - p[3] - 1), p[3]);
    *steps = strtol(p[4], NULL, 10);
    return 1;
}

/* After an asynchronous failover, once every process has stopped: the
 * old primary started again on its own data (nothing writes to it any
 * more) and every run read as it held it at the kill; then stopped
 * again. lost_wal_bytes: its WAL past the promoted timeline's switch
 * point (from the newest history file: the checkpoint after a promotion
 * may not have named the new timeline yet). */
static void
read_old_primary(struct e2e *t)
{
    char dir[PATH_MAX], file[PATH_MAX + 8], url[256], errstr[256];
    char sw[64], port[16] = "";
    struct rl_db *promoted = t->db, *old;
    FILE *f;

    snprintf(sw, sizeof(sw), "%s",
             e2e_text(t, "SELECT split_part(split_part(pg_read_file("
                         "'pg_wal/' || max(name)), E'\\n', 1), E'\\t', 2) "
                         "FROM pg_ls_waldir() WHERE name LIKE '%.history'"));
    snprintf(dir, sizeof(dir), "%s/primary", pair);
    RL_REQUIRE(e2e_harness("pg.sh", "restart", dir) == 0);
    snprintf(file, sizeof(file), "%s/port", dir);
    f = fopen(file, "r");
    RL_REQUIRE(f);
    RL_REQUIRE(fgets(port, sizeof(port), f));
    fclose(f);
    port[strcspn(port, "\r\n")] = '\0';
    snprintf(url, sizeof(url), "postgresql://postgres@127.0.0.1:%s/postgres",
             port);
    old = rl_db_connect_schema(url, t->schema, errstr, sizeof(errstr));
    if (!old)
        fprintf(stderr, "explore: the old primary: %s\n", errstr);
    RL_REQUIRE(old);
    t->db = old;
    for (int i = 0; i < nruns; i++) {
        struct run *r = &runs[i];

        r->o_present = parse_history(history_of(t, r->id), r->o_status,
                                     sizeof(r->o_status), r->o_upstream,
                                     sizeof(r->o_upstream), r->o_created,
                                     sizeof(r->o_created), r->o_attempts,
                                     sizeof(r->o_attempts), &r->o_steps);
        RL_REQUIRE(r->o_present);
        r->o_present = strcmp(r->o_status, "missing") != 0;
    }
    old_intents = strdup(e2e_text(
        t, "SELECT ',' || coalesce(string_agg(batch_id, ','), '') || ',' "
           "FROM batches"));
    RL_REQUIRE(old_intents);
    if (sw[0])
        lost_wal_bytes = e2e_intf(t,
                                  "SELECT pg_wal_lsn_diff(redo_lsn, "
                                  "'%s'::pg_lsn)::bigint FROM "
                                  "pg_control_checkpoint()",
                                  sw);
    t->db = promoted;
    rl_db_destroy(old);
    RL_REQUIRE(e2e_harness("pg.sh", "kill", dir) == 0);
}

struct figures {
    long completed, unknown, failed, cancelled, purged, rejected, approved;
    long gens, beyond, batch;
    /* the lost window of an asynchronous failover */
    long lost_runs, lost_attempts, lost_completions, regenerated;
    long notified_twice, notified_lost_only;
    /* provider batches */
    long provider_batches, strays, strays_cancelled, lost_batches;
    long lost_batches_cancelled;
};

/* 1 when the old primary's attempt no (in its history o_atts) is not in
 * the promoted ledger's (atts). */
static int
attempt_lost(const char *o_atts, const char *atts, int no)
{
    char pre[32], tok[160];
    const char *a, *colon;

    snprintf(pre, sizeof(pre), ",%d@", no);
    a = strstr(o_atts, pre);
    colon = a ? strchr(a + 1, ':') : NULL;
    if (!colon)
        return 0;
    snprintf(tok, sizeof(tok), "%.*s", (int)(colon - a + 1), a);
    return strstr(atts, tok) == NULL;
}

/* What the failover lost of run r: the old primary's attempts the
 * promoted ledger lacks (*lost_att; *lost_gen of them may have
 * generated), whether its registration was lost (created again) and
 * whether its completion was (the old primary completed it with another
 * answer than the ledger's, or the ledger has not completed it). */
static void
lost_window(struct e2e *t, const struct run *r, const char *upstream,
            long *lost_att, long *lost_gen, int *lost_completion,
            struct figures *fg)
{
    char st[24], up[128], created[32], atts[1024];
    long steps;
    const char *p = r->o_attempts;

    *lost_att = *lost_gen = 0;
    *lost_completion = 0;
    if (!async_standby || !r->o_present)
        return;
    if (!parse_history(history_of(t, r->id), st, sizeof(st), up, sizeof(up),
                       created, sizeof(created), atts, sizeof(atts), &steps))
        return;
    if (strcmp(created, r->o_created) != 0)
        fg->lost_runs++;
    /* ",no@us:g,no@us:g," */
    while ((p = strchr(p, ',')) && p[1]) {
        const char *colon = strchr(p, ':');
        char tok[160];

        if (!colon)
            break;
        snprintf(tok, sizeof(tok), "%.*s", (int)(colon - p + 1), p);
        if (!strstr(atts, tok)) {
            if (tok[1] != 'b') {
                (*lost_att)++;
                *lost_gen += colon[1] == '1';
            } else if (!attempt_lost(r->o_attempts, atts, atoi(tok + 2))) {
                /* the batch's create was lost, its attempt kept (a lost
                 * attempt counts once, above) */
                (*lost_gen)++;
            }
        }
        p = colon;
    }
    fg->lost_attempts += *lost_att;
    *lost_completion = strcmp(r->o_status, "completed") == 0 &&
                       strcmp(r->o_upstream, upstream) != 0;
    fg->lost_completions += *lost_completion;
    /* Operator steps hold while the window is open: none is lost. */
    if (r->o_steps > steps)
        violation("operator_steps_kept",
                  "run %s (%s): the old primary had %ld approvals, decisions "
                  "and tombstones, the promoted ledger %ld",
                  r->id, kind_names[r->kind], r->o_steps, steps);
}

/* The notifications of a run whose completion the failover lost, on one
 * channel: copies of the old primary's answer (sent before the kill;
 * the receiver keeps the first) and of the ledger's, nothing else; at
 * most one payload each, the old one first; the ledger's there when the
 * run completed. Returns 1 when both were sent. */
static int
check_lost_notes(struct e2e *t, const struct run *r, const char *st,
                 const char *channel)
{
    char key[RL_HEX_SIZE + 16], quoted[140], pquoted[140];
    const char *old = NULL, *cur = NULL;
    int first_is_old = -1;

    snprintf(key, sizeof(key), "%s:%s", r->id, channel);
    snprintf(quoted, sizeof(quoted), "\"%s\"", r->o_upstream);
    /* a purged run: the ledger's answer as it held it at the purge */
    snprintf(pquoted, sizeof(pquoted), "\"%s\"", r->p_upstream);
    for (long i = 0; i < nnotes; i++) {
        const char *pl = notes[i].payload;
        int is_old;

        if (strcmp(notes[i].key, key) != 0)
            continue;
        is_old = r->o_upstream[0] && strstr(pl, quoted) != NULL;
        if (first_is_old < 0)
            first_is_old = is_old;
        if (is_old) {
            if (old && strcmp(old, pl) != 0)
                violation("one_notification_per_channel",
                          "run %s channel %s: two payloads with the old "
                          "primary's answer %s",
                          r->id, channel, r->o_upstream);
            old = pl;
        } else if (
            r->purged
                ? r->p_upstream[0] && strstr(pl, pquoted)
                : strcmp(st, "completed") == 0 &&
                      e2e_intf(t,
                               "SELECT count(*) FROM outbox_delivered d WHERE "
                               "d.run_id = '%s' AND d.channel = '%s' AND "
                               "rl_payload_as_sent(d.run_id, d.channel, "
                               "d.explicit_payload) = '%s'::jsonb",
                               r->id, channel, pl) == 1) {
            if (cur && strcmp(cur, pl) != 0)
                violation("one_notification_per_channel",
                          "run %s channel %s: two payloads with the ledger's "
                          "answer",
                          r->id, channel);
            cur = pl;
        } else {
            violation("notification_carries_output",
                      "run %s (%s) ended %s, its completion lost by the "
                      "failover (old answer %s): a payload on channel %s "
                      "is neither the old primary's nor the ledger's: %.400s",
                      r->id, kind_names[r->kind], st, r->o_upstream, channel,
                      pl);
        }
    }
    if (strcmp(st, "completed") == 0 && !cur)
        violation("one_notification_per_channel",
                  "completed run %s channel %s: no notification with the "
                  "ledger's output (the old primary's answer %s: %s)",
                  r->id, channel, r->o_upstream, old ? "sent" : "not sent");
    if (old && cur && first_is_old != 1)
        violation("one_notification_per_channel",
                  "run %s channel %s: the ledger's answer was sent before the "
                  "old primary's %s",
                  r->id, channel, r->o_upstream);
    return old && cur;
}

static const char *
json_str(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    return cJSON_IsString(v) ? v->valuestring : "";
}

static int
json_true(const cJSON *o, const char *name)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, name));
}

static const char *
local_of(const cJSON *b)
{
    return json_str(cJSON_GetObjectItemCaseSensitive(b, "metadata"),
                    "runledger_batch");
}

/* One provider batch, for a violation: id, status, cancelled, read, the
 * stub's faults on it, its lines. */
static void
describe_batch(const cJSON *b, char *out, size_t size)
{
    const cJSON *f, *ids = cJSON_GetObjectItemCaseSensitive(b, "custom_ids");
    size_t n;

    n = (size_t)snprintf(out, size, "%s %s%s%s faults=", json_str(b, "id"),
                         json_str(b, "status"),
                         json_true(b, "cancelled") ? " cancelled" : "",
                         json_true(b, "read") ? " read" : " unread");
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(b, "faults"))
    {
        if (n < size && cJSON_IsString(f))
            n += (size_t)snprintf(out + n, size - n, "%s,", f->valuestring);
    }
    if (n < size)
        snprintf(out + n, size - n, " lines=%d", cJSON_GetArraySize(ids));
}

/* Whether intent local is one only the old primary of an asynchronous
 * failover held. */
static int
lost_intent(const char *local)
{
    char key[160];

    if (!old_intents || !local[0])
        return 0;
    snprintf(key, sizeof(key), ",%s,", local);
    return strstr(old_intents, key) != NULL;
}

/* Rule one_provider_batch_per_intent, over the stub's batches grouped by
 * the local id their metadata carries (the ledger's batches row): the
 * batch the ledger adopted is the only one read; every other one (a
 * stray: made by a create whose worker lost the lease or never heard the
 * reply) is cancelled and never read; and no line (custom_id
 * <run>:<attempt>) is in two batches read. */
static void
check_batches(struct e2e *t, struct figures *fg)
{
    cJSON *doc = bt_stub_get(t, "/admin/batches"), *all, *b, *o;
    char adopted[128], state[32], desc[512];

    if (!doc) {
        violation("one_provider_batch_per_intent",
                  "the stub's /admin/batches could not be read");
        return;
    }
    all = cJSON_GetObjectItemCaseSensitive(doc, "batches");
    cJSON_ArrayForEach(b, all)
    {
        const char *local = local_of(b), *row;
        int is_read = json_true(b, "read"), read_in_group = 0, group = 0;

        fg->provider_batches++;
        if (!local[0] || strspn(local, "abcdefghijklmnopqrstuvwxyz0123456789"
                                       "_-") != strlen(local)) {
            describe_batch(b, desc, sizeof(desc));
            violation("one_provider_batch_per_intent",
                      "provider batch %s names no intent of the ledger", desc);
            continue;
        }
        row = e2e_textf(t,
                        "SELECT coalesce((SELECT coalesce(provider_batch_id, "
                        "'') || '|' || state FROM batches WHERE batch_id = "
                        "'%s'), 'missing')",
                        local);
        adopted[0] = state[0] = '\0';
        if (strchr(row, '|'))
            sscanf(row, "%127[^|]|%31s", adopted, state);
        if (row[0] == '|')
            sscanf(row, "|%31s", state);
        cJSON_ArrayForEach(o, all)
        {
            if (strcmp(local_of(o), local) != 0)
                continue;
            group++;
            read_in_group += json_true(o, "read");
        }
        if (strcmp(json_str(b, "id"), adopted) == 0) {
            if (read_in_group > 1) {
                describe_batch(b, desc, sizeof(desc));
                violation("one_provider_batch_per_intent",
                          "intent %s (%s): %d of its %d provider batches "
                          "read; adopted %s",
                          local, state, read_in_group, group, desc);
            }
            continue;
        }
        /* An intent the asynchronous failover lost: its provider
         * batches are the old primary's, which the promoted ledger never
         * heard of; the batcher's orphan sweep cancels those still
         * running when it lists them, but one may have ended first (the
         * stub's take seconds), so being cancelled is counted, not
         * required. Their lines are attempts of the lost window
         * (generations_visible counts them there). */
        if (!strcmp(state, "") && !strcmp(row, "missing") &&
            lost_intent(local)) {
            fg->lost_batches++;
            fg->lost_batches_cancelled += json_true(b, "cancelled");
            continue;
        }
        /* A stray: the ledger holds another provider batch for this
         * intent (or none). */
        fg->strays++;
        fg->strays_cancelled += json_true(b, "cancelled");
        if (is_read || !json_true(b, "cancelled")) {
            describe_batch(b, desc, sizeof(desc));
            violation("one_provider_batch_per_intent",
                      "intent %s (%s, adopted %s): stray provider batch %s "
                      "(%d in the group) is %s%s",
                      local, state[0] ? state : row,
                      adopted[0] ? adopted : "none", desc, group,
                      json_true(b, "cancelled") ? "" : "not cancelled",
                      is_read ? " read" : "");
        }
    }
    /* No line answered through two batches read. */
    cJSON_ArrayForEach(b, all)
    {
        const cJSON *id;

        if (!json_true(b, "read") || lost_intent(local_of(b)))
            continue;
        cJSON_ArrayForEach(id,
                           cJSON_GetObjectItemCaseSensitive(b, "custom_ids"))
        {
            int in = 0;

            if (!cJSON_IsString(id))
                continue;
            cJSON_ArrayForEach(o, all)
            {
                const cJSON *x;

                if (o == b || !json_true(o, "read") || lost_intent(local_of(o)))
                    continue;
                cJSON_ArrayForEach(x,
                                   cJSON_GetObjectItemCaseSensitive(o, "custom_"
                                                                       "ids"))
                {
                    in += cJSON_IsString(x) &&
                          strcmp(x->valuestring, id->valuestring) == 0;
                }
            }
            if (in > 0) {
                describe_batch(b, desc, sizeof(desc));
                violation("one_provider_batch_per_intent",
                          "line %s is in %d other provider batches read "
                          "besides %s",
                          id->valuestring, in, desc);
            }
        }
    }
    cJSON_Delete(doc);
}

static void
check_run(struct e2e *t, struct run *r, struct figures *fg)
{
    static const char *const channels[] = {"email", "slack"};
    char st[32], err_class[64], upstream[128];
    const char *row;
    long gens = run_generations(t, r);
    int64_t may_generate, ok, ok_accepted, n;
    long lost_att = 0, lost_gen = 0;
    int lost_completion = 0, twice = 0;

    if (gens > 0)
        fg->gens += gens;
    if (gens > 1)
        fg->beyond += gens - 1;

    if (r->purged) {
        fg->purged++;
        n = e2e_intf(t, "SELECT count(*) FROM runs WHERE run_id = '%s'", r->id);
        if (n != 0)
            violation("purged_never_again",
                      "run %s (%s) purged, its event replayed, and it is in "
                      "runs again: status %s, attempts %s",
                      r->id, kind_names[r->kind],
                      e2e_textf(t,
                                "SELECT status FROM runs WHERE run_id = "
                                "'%s'",
                                r->id),
                      attempts_of(t, r->id));
        if (gens != r->gens_at_purge)
            violation("purged_never_again",
                      "run %s purged with %ld generations at the stub, %ld "
                      "now (event replayed after the purge)",
                      r->id, r->gens_at_purge, gens);
        /* Completed again after the failover lost its completion, then
         * purged: the old answer and the one purged, as for a run kept. */
        if (async_standby && r->o_present &&
            strcmp(r->o_status, "completed") == 0 &&
            strcmp(r->o_upstream, r->p_upstream) != 0) {
            fg->lost_completions++;
            for (int c = 0; c < 2; c++)
                twice |= check_lost_notes(t, r, "completed", channels[c]);
            fg->notified_twice += twice;
            return;
        }
        for (int c = 0; c < 2; c++) {
            long copies, distinct;
            const char *first;

            notes_of(r->id, channels[c], &copies, &distinct, &first);
            if (copies == 0 || distinct != 1)
                violation("one_notification_per_channel",
                          "purged run %s channel %s: %ld copies, %ld distinct "
                          "payloads on the topic",
                          r->id, channels[c], copies, distinct);
        }
        return;
    }

    row = e2e_textf(t,
                    "SELECT coalesce((SELECT status || '|' || "
                    "coalesce(error_class, '') || '|' || "
                    "coalesce(output->>'upstream_request_id', '') FROM runs "
                    "WHERE run_id = '%s'), 'missing||')",
                    r->id);
    if (sscanf(row, "%31[^|]|%63[^|]|%127s", st, err_class, upstream) < 1) {
        violation("exactly_once_final", "run %s: no ledger answer", r->id);
        return;
    }
    if (!strchr(row, '|'))
        return;
    {
        /* sscanf skips empty fields: read them again by hand */
        const char *a = strchr(row, '|'), *b = strchr(a + 1, '|');

        snprintf(err_class, sizeof(err_class), "%.*s", (int)(b - a - 1), a + 1);
        snprintf(upstream, sizeof(upstream), "%s", b + 1);
    }
    lost_window(t, r, upstream, &lost_att, &lost_gen, &lost_completion, fg);
    if (strcmp(st, "completed") == 0)
        fg->completed++;
    if (strcmp(st, "completed") == 0 && r->kind == K_BATCH)
        fg->batch++;
    else if (strcmp(st, "unknown") == 0)
        fg->unknown++;
    else if (strcmp(st, "failed") == 0)
        fg->failed++;
    else if (strcmp(st, "cancelled") == 0)
        fg->cancelled++;

    /* Rule: exactly once, in a final state. */
    if (strcmp(st, "completed") != 0 && strcmp(st, "failed") != 0 &&
        strcmp(st, "unknown") != 0 && strcmp(st, "cancelled") != 0) {
        violation("exactly_once_final",
                  "run %s (%s, %s%s) is %s after the settle bound; attempts: "
                  "%s",
                  r->id, kind_names[r->kind], r->directive,
                  r->approval ? " approval" : "", st, attempts_of(t, r->id));
        return;
    }

    /* Rule: the run's end is one its kind allows. */
    switch (r->kind) {
    case K_LIVE:
    case K_AMBIG:
    case K_RESP:
    case K_BATCH:
    case K_PURGE:
        if (strcmp(st, "cancelled") == 0 ||
            (strcmp(st, "failed") == 0 &&
             strcmp(err_class, "attempts_exhausted") != 0))
            violation("expected_end",
                      "run %s (%s, %s) ended %s (%s); attempts: %s", r->id,
                      kind_names[r->kind], r->directive, st, err_class,
                      attempts_of(t, r->id));
        break;
    case K_APPROVE:
        if (strcmp(st, "completed") == 0)
            fg->approved++;
        if ((r->decided && strcmp(st, "completed") != 0) ||
            (!r->decided && strcmp(st, "completed") == 0) ||
            strcmp(st, "cancelled") == 0)
            violation("approval",
                      "run %s approval-required, approved=%d, ended %s (%s); "
                      "attempts: %s",
                      r->id, r->decided, st, err_class, attempts_of(t, r->id));
        break;
    case K_REJECT:
        if (r->decided)
            fg->rejected++;
        if (strcmp(st, "completed") == 0 ||
            (r->decided &&
             (strcmp(st, "failed") != 0 || strcmp(err_class, "rejected") != 0)))
            violation("rejected_never_publishes",
                      "run %s rejected=%d ended %s (%s); attempts: %s", r->id,
                      r->decided, st, err_class, attempts_of(t, r->id));
        break;
    case K_CANCEL:
        if ((r->cancel_rc == 0) != (strcmp(st, "cancelled") == 0))
            violation("cancel",
                      "run %s: runs cancel exit %d, run ended %s (%s); "
                      "attempts: %s",
                      r->id, r->cancel_rc, st, err_class,
                      attempts_of(t, r->id));
        if (r->cancel_rc == 0) {
            /* Both times are their transactions' starts: a cancel
             * begun first that waited for a dispatch's lock decides after
             * that dispatch committed, and counts it (seed 6: an attempt
             * 1 ms after decided_at, counted in its attempts), so an
             * attempt the decision counted is one before it. */
            n = e2e_intf(t,
                         "SELECT count(*) FROM attempts a JOIN (SELECT "
                         "min(decided_at) at, min(attempts) n FROM "
                         "run_decisions WHERE run_id = '%s' AND decision = "
                         "'cancel') d ON a.dispatched_at > d.at AND "
                         "a.attempt_no > d.n WHERE a.run_id = '%s'",
                         r->id, r->id);
            /* The cancel decision records the attempts made so far: a
             * dispatch whose transaction began before the cancel but
             * committed after it would escape the time comparison, not
             * this count. */
            n += e2e_intf(t,
                          "SELECT greatest(0, (SELECT count(*) FROM attempts "
                          "WHERE run_id = '%s') - (SELECT min(attempts) FROM "
                          "run_decisions WHERE run_id = '%s' AND decision = "
                          "'cancel'))",
                          r->id, r->id);
            if (n != 0)
                violation("cancelled_no_new_call",
                          "run %s: %lld attempts dispatched after its cancel "
                          "committed at %s; attempts: %s",
                          r->id, (long long)n,
                          e2e_textf(t,
                                    "SELECT min(decided_at)::text || ' "
                                    "with ' || min(attempts) || ' attempts' "
                                    "FROM run_decisions WHERE run_id = '%s'",
                                    r->id),
                          attempts_of(t, r->id));
        }
        break;
    case K_DLQ:
        if (strcmp(st, "completed") == 0 || strcmp(st, "cancelled") == 0 ||
            (strcmp(st, "failed") == 0 &&
             strcmp(err_class, "model_rejected") != 0))
            violation("expected_end",
                      "run %s given a 400 (dlq replayed=%d) ended %s (%s); "
                      "attempts: %s",
                      r->id, r->replayed, st, err_class, attempts_of(t, r->id));
        break;
    }

    /* Rule: every generation is visible in the attempts; one accepted
     * output per completed run. */
    may_generate = e2e_intf(t,
                            "SELECT count(*) FROM attempts WHERE run_id = "
                            "'%s' AND (outcome IS NULL OR outcome IN ('ok', "
                            "'ambiguous', 'cancelled', 'lease_lost', "
                            "'invalid_output'))",
                            r->id);
    ok = e2e_intf(t,
                  "SELECT count(*) FROM attempts WHERE run_id = '%s' AND "
                  "outcome = 'ok'",
                  r->id);
    /* An attempt the failover lost was visible in the old primary's
     * ledger: it counts, and only it. */
    if (gens > may_generate + lost_gen)
        violation("generations_visible",
                  "run %s (%s, %s): the stub counted %ld generations, the "
                  "ledger has %lld attempts that may have generated (%ld "
                  "more lost by the failover): %s",
                  r->id, kind_names[r->kind], r->directive, gens,
                  (long long)may_generate, lost_gen, attempts_of(t, r->id));
    else if (gens > may_generate)
        fg->regenerated++;
    /* Every request that reached the endpoint with the run's key is a
     * dispatch the ledger recorded first (batch lines carry no key). */
    if (r->kind != K_BATCH) {
        long calls = e2e_stub_key_stat(t, r->id, "requests");
        int64_t attempts = e2e_intf(
            t, "SELECT count(*) FROM attempts WHERE run_id = '%s'", r->id);

        if (calls > attempts + lost_att)
            violation("calls_visible",
                      "run %s (%s, %s): the stub had %ld requests with its "
                      "key, the ledger %lld attempts (%ld more lost by the "
                      "failover): %s",
                      r->id, kind_names[r->kind], r->directive, calls,
                      (long long)attempts, lost_att, attempts_of(t, r->id));
    }
    /* With dedupe the endpoint answers every retry of a key from its
     * store: one generation per run whatever died or timed out. The
     * stub deduplicates chat completions only (its /v1/responses counts
     * every call, as the provider's Responses API takes no
     * Idempotency-Key), and batch lines have keys of their own. */
    if (mode == M_DEDUPE && r->kind != K_BATCH && r->kind != K_RESP && gens > 1)
        violation("generations_policy",
                  "run %s (%s, %s): %ld generations under the dedupe policy "
                  "against a deduplicating endpoint; attempts: %s",
                  r->id, kind_names[r->kind], r->directive, gens,
                  attempts_of(t, r->id));
    if (strcmp(st, "completed") == 0) {
        ok_accepted = e2e_intf(t,
                               "SELECT count(*) FROM attempts WHERE run_id = "
                               "'%s' AND outcome = 'ok' AND "
                               "(upstream_request_id = '%s' OR "
                               "reconciled_from = '%s')",
                               r->id, upstream, upstream);
        /* Other attempts may have ended ok too: an answer whose
         * completion was refused because the lease had passed to
         * another worker keeps its outcome (the call did generate) and
         * is an extra generation, counted above. */
        /* Under dedupe the endpoint answers a repeated key from its
         * store: an attempt after one refused as stale gets the same
         * answer (the same id, one generation: generations_policy). */
        if ((mode == M_DEDUPE ? ok_accepted < 1 : ok_accepted != 1) ||
            !upstream[0])
            violation("one_accepted_output",
                      "completed run %s (%s): %lld ok attempts, %lld carry the "
                      "accepted output %s; attempts: %s",
                      r->id, kind_names[r->kind], (long long)ok,
                      (long long)ok_accepted, upstream, attempts_of(t, r->id));
    }

    /* Rule: a completed run has one notification key per channel, every
     * copy carrying the output as the ledger sent it; any other run has
     * none. */
    for (int c = 0; c < 2; c++) {
        long copies, distinct;
        const char *first;

        if (lost_completion) {
            twice |= check_lost_notes(t, r, st, channels[c]);
            notes_of(r->id, channels[c], &copies, &distinct, &first);
            /* the receiver holds an answer for a run the ledger did not
             * complete again (a later attempt ended otherwise) */
            if (strcmp(st, "completed") != 0 && copies > 0 && c == 0)
                fg->notified_lost_only++;
            continue;
        }
        notes_of(r->id, channels[c], &copies, &distinct, &first);
        if (strcmp(st, "completed") != 0) {
            if (copies != 0)
                violation(r->kind == K_REJECT ? "rejected_never_publishes"
                                              : "published_only_completed",
                          "run %s (%s) ended %s and has %ld notifications on "
                          "channel %s: %.300s",
                          r->id, kind_names[r->kind], st, copies, channels[c],
                          first);
            continue;
        }
        if (copies == 0 || distinct != 1) {
            violation("one_notification_per_channel",
                      "completed run %s channel %s: %ld copies, %ld distinct "
                      "payloads on the topic; outbox %lld, delivered %lld",
                      r->id, channels[c], copies, distinct,
                      (long long)e2e_intf(t,
                                          "SELECT count(*) FROM outbox WHERE "
                                          "run_id = '%s' AND channel = '%s'",
                                          r->id, channels[c]),
                      (long long)e2e_intf(t,
                                          "SELECT count(*) FROM "
                                          "outbox_delivered WHERE run_id = "
                                          "'%s' AND channel = '%s'",
                                          r->id, channels[c]));
            continue;
        }
        n = e2e_intf(t,
                     "SELECT count(*) FROM outbox_delivered d WHERE "
                     "d.run_id = '%s' AND d.channel = '%s' AND "
                     "rl_payload_as_sent(d.run_id, d.channel, "
                     "d.explicit_payload) = '%s'::jsonb",
                     r->id, channels[c], first);
        if (n != 1)
            violation("notification_carries_output",
                      "completed run %s channel %s: the topic's payload is "
                      "not the ledger's (output %s): %.400s",
                      r->id, channels[c], upstream, first);
    }
    fg->notified_twice += twice;
}

static void
check(struct e2e *t, struct figures *fg, int settled)
{
    int64_t expected = 0, n;

    if (!settled)
        violation("settle_bound",
                  "not settled %d s after the faults stopped: runs by "
                  "status %s; outbox %lld; group lag %lld",
                  SETTLE_MS / 1000,
                  e2e_text(t, "SELECT string_agg(status || '=' || n, ' ') "
                              "FROM (SELECT status, count(*) n FROM runs "
                              "GROUP BY status) s"),
                  (long long)e2e_int(t, "SELECT count(*) FROM outbox"),
                  (long long)e2e_group_lag(t));
    e2e_read_topic(t, t->notify, on_note, NULL);
    check_batches(t, fg);
    for (int i = 0; i < nruns; i++) {
        check_run(t, &runs[i], fg);
        expected += !runs[i].purged;
    }
    /* Every event's logical run exists once: no run the workload did not
     * make, none twice (the primary key), none lost. */
    n = e2e_int(t, "SELECT count(*) FROM runs");
    if (n != expected)
        violation("exactly_once_final",
                  "the ledger holds %lld runs, the workload made %lld "
                  "(purged ones left out)",
                  (long long)n, (long long)expected);
    /* Every notification on the topic names a run of the workload. */
    for (long i = 0; i < nnotes; i++) {
        int known = 0;

        for (int k = 0; k < nruns && !known; k++)
            known = strncmp(notes[i].key, runs[k].id, RL_HEX_SIZE - 1) == 0;
        if (!known)
            violation("published_only_completed",
                      "notification with key %s names no run of the "
                      "workload",
                      notes[i].key);
    }
    n = e2e_int(t, "SELECT count(*) FROM outbox_dead");
    if (n != 0)
        violation("one_notification_per_channel",
                  "%lld notifications dead-lettered in outbox_dead",
                  (long long)n);
}

/* ---- main -------------------------------------------------------------- */

static int
settled_now(struct e2e *t, int64_t expected)
{
    for (int i = 0; i < nruns; i++) {
        if (runs[i].act == ACT_PENDING)
            return 0;
    }
    return e2e_int(t, "SELECT count(*) FROM runs WHERE status IN "
                      "('pending','running','awaiting_approval')") == 0 &&
           e2e_int(t, "SELECT count(*) FROM outbox") == 0 &&
           e2e_int(t, "SELECT count(*) FROM runs") == expected &&
           e2e_group_lag(t) == 0;
}

static struct e2e *running; /* for on_signal */

/* Ctrl-C or SIGTERM of the explorer: its processes are killed and exit()
 * runs the atexit hooks that stop the private PostgreSQL (or the pair),
 * broker and stub, so nothing of a seed outlives it. */
static void
on_signal(int sig)
{
    if (running) {
        for (int i = 0; i < running->nprocs; i++) {
            if (running->procs[i] > 0)
                kill(running->procs[i], SIGKILL);
        }
        if (running->stub_pid > 0)
            kill(running->stub_pid, SIGKILL);
    }
    exit(128 + sig);
}

int
main(int argc, char **argv)
{
    struct e2e t;
    char cwd[PATH_MAX - 128], pg_dir[PATH_MAX], kafka_dir[PATH_MAX];
    char pg_url[512], servers[256], job[160], batch_job[176], stub_seed[64];
    char stub_dedupe[32];
    /* A provider batch takes 6 s: long enough for the worker's polls
     * (1 and 3 s after its create) to find a stray still running, as a
     * provider's batches of hours are, short enough to settle a seed. */
    const char *stub_env[] = {"STUB_STORE_LAG_MS=300", "STUB_BATCH_SECONDS=6",
                              stub_seed, stub_dedupe, NULL};
    int window_s = 40;
    int64_t started, faults_off, settle_ms = -1, last_note = 0;
    int64_t published_at[MAX_RUNS];
    struct figures fg = {0};
    long total_faults = 0;
    int ev = 0, fi = 0, settled = 0;

    seed = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--window") == 0 && i + 1 < argc)
            window_s = atoi(argv[++i]);
        else if (strcmp(argv[i], "--plant") == 0)
            plant = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--seed S] [--window SECONDS] [--plant]\n",
                    argv[0]);
            return 2;
        }
    }
    if (window_s < 10)
        window_s = 10;
    fprintf(stderr,
            "explore: seed %llu, window %d s (repeat: runledger_explore "
            "--seed %llu --window %d)\n",
            seed, window_s, seed, window_s);
    snprintf(stub_seed, sizeof(stub_seed), "STUB_SEED=%llu", seed);

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    RL_REQUIRE(getcwd(cwd, sizeof(cwd)));
    snprintf(pg_dir, sizeof(pg_dir), "%s/explore-pg-%d", cwd, (int)getpid());
    snprintf(kafka_dir, sizeof(kafka_dir), "%s/explore-kafka-%d", cwd,
             (int)getpid());
    failover = mix(seed ^ 0x6661696c6f766572ULL) % 4 == 0;
    async_standby = failover && mix(seed ^ 0x6173796e63ULL) % 2 == 0;
    quiet = async_standby && mix(seed ^ 0x7175696574ULL) % 3 == 0;
    restart_consumers = async_standby && mix(seed ^ 0x72657374ULL) % 3 == 0;
    cluster = mix(seed ^ 0x636c7573746572ULL) % 5 == 0;
    if (failover) {
        snprintf(pair, sizeof(pair), "%s/explore-pair-%d", cwd, (int)getpid());
        e2e_replica_pair(pair, async_standby ? "async" : "sync", pg_url,
                         sizeof(pg_url));
        snprintf(pg_dir, sizeof(pg_dir), "%s/primary", pair);
    } else {
        e2e_private_pg(pg_dir, pg_url, sizeof(pg_url));
    }
    if (cluster) {
        /* Three JVMs beside everything else on two cores: smaller heaps
         * than the cluster tests' (the explorer's load is light). */
        setenv("KAFKA_HEAP_OPTS", "-Xmx256m -Xms128m", 0);
        snprintf(cluster_dir, sizeof(cluster_dir), "%s/explore-cluster-%d", cwd,
                 (int)getpid());
        cluster_start(cluster_dir, servers, sizeof(servers));
    } else {
        e2e_private_kafka(kafka_dir, servers, sizeof(servers));
    }
    e2e_setup_at(&t, "explore", 4, pg_url, servers);
    /* An idempotent producer can turn a leader change into a fatal
     * sequence error (cluster.h): the cluster's events go through a
     * plain acks=all one. */
    if (cluster)
        cluster_plain_publisher(&t);
    running = &t;
    snprintf(job, sizeof(job), "job-%s", t.name);
    snprintf(batch_job, sizeof(batch_job), "%s-batch", job);
    draw(job, batch_job, window_s);
    snprintf(stub_dedupe, sizeof(stub_dedupe), "STUB_DEDUPE=%d",
             mode == M_DEDUPE);
    e2e_stub_start(&t, stub_env);
    fprintf(stderr,
            "explore: %d runs, %d events, %d faults drawn; mode %s%s%s%s%s\n",
            nruns, nevents, nfaults, mode_names[mode],
            !failover       ? ""
            : async_standby ? "; ledger with an async standby"
                            : "; ledger with a sync standby",
            quiet ? ", quiet after the promotion" : "",
            restart_consumers ? ", consumers killed with the primary" : "",
            cluster ? "; a three-broker cluster" : "");

    for (int k = 0; k < 5; k++) {
        char tenant[32];
        const char *args[] = {"approvers", "add",      "--tenant", tenant,
                              "--actor",   "explorer", NULL};

        snprintf(tenant, sizeof(tenant), "tenant-%d", k);
        RL_REQUIRE(cli(&t, args, NULL, 0) == 0);
    }
    {
        const char *args[] = {"batch",   "set",      "--job",
                              batch_job, "--window", "2s",
                              "--actor", "explorer", NULL};

        RL_REQUIRE(cli(&t, args, NULL, 0) == 0);
    }
    for (int i = 0; i < NPROCS; i++)
        slot[i] = spawn_role(&t, i);
    for (int i = 0; i < nruns; i++)
        published_at[i] = -1;

    /* The window: events and faults at their drawn times, operator
     * actions as their runs allow. */
    started = rltest_now_ms();
    for (;;) {
        int64_t now = rltest_now_ms(), at = now - started;

        while (ev < nevents && events[ev].at_ms <= at) {
            struct run *r = &runs[events[ev].run];

            e2e_produce(&t, r->tenant, r->value);
            if (published_at[events[ev].run] < 0)
                published_at[events[ev].run] = rltest_now_ms();
            ev++;
        }
        if (fi < nfaults && faults[fi].at_ms <= at)
            inject(&t, &faults[fi++], pg_dir, kafka_dir);
        restart_crashed(&t);
        for (int i = 0; i < NPROCS; i++) {
            if (frozen_until[i] && rltest_now_ms() >= frozen_until[i])
                thaw(&t, i);
        }
        if (pg_up_at && rltest_now_ms() >= pg_up_at) {
            RL_REQUIRE(e2e_harness("pg.sh", "restart", pg_dir) == 0);
            pg_up_at = 0;
            for (int i = 0; i < NPROCS; i++) {
                if (down[i])
                    respawn(&t, i);
            }
        }
        if (node_down && rltest_now_ms() >= node_up_at)
            node_restarted(0);
        quiet_release(&t);
        for (int i = 0; i < nruns; i++)
            act(&t, &runs[i], published_at[i], rltest_now_ms());
        if (ev >= nevents && fi >= nfaults && at >= (int64_t)window_s * 1000)
            break;
        nap_ms(50);
    }
    for (int i = 0; i < NFKINDS; i++)
        total_faults += fault_count[i];

    /* The faults stop: no model fault left, every process running. */
    faults_off = rltest_now_ms();
    stub_fault(&t, NULL);
    stub_admin(&t, "/admin/batch_fault", NULL);
    if (pg_up_at) {
        RL_REQUIRE(e2e_harness("pg.sh", "restart", pg_dir) == 0);
        pg_up_at = 0;
    }
    restart_crashed(&t);
    for (int i = 0; i < NPROCS; i++) {
        thaw(&t, i);
        /* One still set to crash at its failpoint is killed and started
         * plain: nothing crashes while the history settles. */
        if (armed[i][0] && !down[i])
            e2e_signal(&t, slot[i], SIGKILL, 1);
        if (down[i] || !e2e_alive(&t, slot[i]))
            respawn(&t, i);
    }
    if (node_down)
        RL_REQUIRE(node_restarted(120000));
    fprintf(stderr, "explore: %ld faults in %lld ms; settling\n", total_faults,
            (long long)(faults_off - started));
    while (rltest_now_ms() - faults_off < SETTLE_MS) {
        int64_t expected = 0;

        quiet_release(&t);
        for (int i = 0; i < nruns; i++) {
            act(&t, &runs[i], published_at[i], rltest_now_ms());
            expected += !runs[i].purged;
        }
        if (rltest_now_ms() - last_note >= 10000) {
            int acts = 0;

            last_note = rltest_now_ms();
            for (int i = 0; i < nruns; i++)
                acts += runs[i].act == ACT_PENDING;
            fprintf(stderr,
                    "explore: settling %lld ms: %s; outbox %lld; lag %lld; "
                    "%d operator steps pending\n",
                    (long long)(last_note - faults_off),
                    e2e_text(&t,
                             "SELECT string_agg(status || CASE WHEN job LIKE "
                             "'%-batch' THEN '(batch)' ELSE '' END || "
                             "'=' || n, ' ') FROM (SELECT status, job, "
                             "count(*) n FROM runs GROUP BY 1, 2) s"),
                    (long long)e2e_int(&t, "SELECT count(*) FROM outbox"),
                    (long long)e2e_group_lag(&t), acts);
        }
        if (settled_now(&t, expected)) {
            settled = 1;
            settle_ms = rltest_now_ms() - faults_off;
            break;
        }
        nap_ms(200);
    }
    /* A replayed purge needs its event consumed before the check: the
     * group lag above is 0 only once the replay was read. A last look
     * after the relays had time to deliver anything a replay queued. */
    nap_ms(1000);

    /* Every process ends with SIGTERM and must exit 0 in its grace. */
    for (int i = 0; i < NPROCS; i++)
        sigterm_checked(&t, i);
    if (async_standby)
        read_old_primary(&t);

    if (plant) {
        for (int i = 0; i < nruns; i++) {
            const char *st = e2e_textf(&t,
                                       "SELECT coalesce((SELECT status FROM "
                                       "runs WHERE run_id = '%s'), 'gone')",
                                       runs[i].id);

            if (strcmp(st, "completed") == 0 || strcmp(st, "gone") == 0 ||
                strcmp(st, "cancelled") == 0)
                stub_generate(&t, runs[i].id);
        }
    }
    check(&t, &fg, settled);
    free(old_intents);
    old_intents = NULL;

    printf("explore: seed=%llu mode=%s events=%d runs=%d completed=%ld "
           "unknown=%ld "
           "failed=%ld cancelled=%ld purged=%ld approved=%ld rejected=%ld "
           "batch_completed=%ld reconciled=%lld "
           "faults=%ld",
           seed, mode_names[mode], nevents, nruns, fg.completed, fg.unknown,
           fg.failed, fg.cancelled, fg.purged, fg.approved, fg.rejected,
           fg.batch,
           (long long)e2e_int(&t, "SELECT count(*) FROM attempts WHERE "
                                  "reconciled_at IS NOT NULL"),
           total_faults);
    for (int i = 0; i < NFKINDS; i++)
        printf(" %s=%ld", fault_names[i], fault_count[i]);
    printf(" ledger=%s brokers=%d",
           !failover                    ? "single"
           : !async_standby             ? "sync"
           : quiet && restart_consumers ? "async_quiet_restart"
           : quiet                      ? "async_quiet"
           : restart_consumers          ? "async_restart"
                                        : "async",
           cluster ? 3 : 1);
    if (async_standby)
        printf(" lost_window_ms=%lld lost_wal_bytes=%lld lost_runs=%ld "
               "lost_attempts=%ld lost_completions=%ld regenerated=%ld "
               "notified_twice=%ld notified_lost_only=%ld "
               "quiet_recovered_ms=%lld",
               (long long)(killed_ms - detach_ms), lost_wal_bytes, fg.lost_runs,
               fg.lost_attempts, fg.lost_completions, fg.regenerated,
               fg.notified_twice, fg.notified_lost_only,
               (long long)quiet_recovered_ms);
    if (cluster)
        printf(" node_kills_leader=%ld node_kills_coordinator=%ld "
               "node_kills_any=%ld node_kills_skipped=%ld",
               node_kills_by[0], node_kills_by[1], node_kills_by[2],
               node_kills_skipped);
    printf(" provider_batches=%ld strays=%ld strays_cancelled=%ld "
           "lost_batches=%ld lost_batches_cancelled=%ld batch_fault_uses=",
           fg.provider_batches, fg.strays, fg.strays_cancelled, fg.lost_batches,
           fg.lost_batches_cancelled);
    {
        /* How many times the stub applied each batch fault (a fault set
         * may meet no create or poll before the window ends). */
        static const char *const modes[] = {"create_late", "create_drop_reply",
                                            "list_lag", "poll_404",
                                            "expire_partial"};
        cJSON *doc = bt_stub_get(&t, "/admin/batch_fault");
        const cJSON *uses = cJSON_GetObjectItemCaseSensitive(doc, "uses");

        for (int i = 0; i < 5; i++) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(uses, modes[i]);

            printf("%s%d", i ? "/" : "", cJSON_IsNumber(n) ? n->valueint : -1);
        }
        cJSON_Delete(doc);
    }
    printf(" kill_at_crashed=%ld sigterms_checked=%ld generations=%ld "
           "generations_beyond_one=%ld settle_ms=%lld violations=%ld "
           "elapsed_ms=%lld\n",
           kill_at_fired, term_checked, fg.gens, fg.beyond,
           (long long)settle_ms, violations,
           (long long)(rltest_now_ms() - started));
    fflush(stdout);
    if (plant) {
        /* The checker's own test: it must have seen the planted calls,
         * and nothing else. */
        fprintf(stderr,
                "explore: planted: %ld violations, %ld of the "
                "planted kinds\n",
                violations, planted_seen);
        e2e_teardown(&t);
        return planted_seen > 0 && planted_seen == violations ? 0 : 1;
    }
    if (violations) {
        fprintf(stderr,
                "explore: FAILED seed=%llu (repeat: runledger_explore "
                "--seed %llu --window %d); logs: %s.*.log\n",
                seed, seed, window_s, t.name);
        return 1;
    }
    e2e_teardown(&t);
    for (long i = 0; i < nnotes; i++)
        free(notes[i].payload);
    return 0;
}
