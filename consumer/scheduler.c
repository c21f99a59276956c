/* `runledger scheduler`: publishes the event of every schedule window to
 * the schedule topic when the window starts (docs/operations.md,
 * "Schedules").
 *
 * One scheduler is active at a time: each tick it takes or renews the
 * scheduler lease in PostgreSQL (rl_db_scheduler_lease); the others stand
 * by and take over once the lease expires. Each tick the active one reads
 * the schedules, publishes the due windows (rl_schedule_due: on time, and
 * missed ones per the schedule's catch-up policy) with the idempotent
 * producer, waits for the broker's acknowledgements, and only then moves
 * each schedule's cursor, under the lease's epoch (rl_db_schedules_mark, one
 * statement).
 *
 * - A crash between publish and mark publishes the windows again: the run
 *   ID is the same, the consumer registers one run.
 * - A scheduler that lost its lease (paused, partitioned) and still
 *   publishes produces the same run IDs; its mark is refused, and it
 *   stands by from then on.
 *
 * Every audit period it also counts each schedule's missing windows
 * (rl_schedule_gaps) for runledger_schedule_windows_missed. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/helpers.h"
#include "cli/publish.h"
#include "commands.h"
#include "http.h"
#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/db_schedules.h"
#include "rl/err.h"
#include "rl/event.h"
#include "rl/kafka.h"
#include "rl/log.h"
#include "rl/schedule.h"
#include "rl/schedule_audit.h"
#include "rl/timefmt.h"
#include "rl/tz.h"

/* Windows of one schedule published in one tick, at most: a long
 * catch-up goes on over the next ticks. */
#define SCHEDULER_MAX_DUE 1000

/* Set by SIGTERM/SIGINT; read by the main and the audit thread. */
static atomic_int scheduler_signal;

static void
on_signal(int sig)
{
    atomic_store(&scheduler_signal, sig);
}

static int64_t
wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
nap_ms(int64_t ms)
{
    /* In slices, so a signal ends the wait within 100 ms. */
    while (ms > 0 && !atomic_load(&scheduler_signal)) {
        int64_t step = ms < 100 ? ms : 100;
        struct timespec ts = {(time_t)(step / 1000),
                              (long)(step % 1000) * 1000000L};

        nanosleep(&ts, NULL);
        ms -= step;
    }
}

/* Zones loaded once per process: a tick must not read 10,000 files. */
struct zone_cache {
    struct rl_tz **tz;
    size_t n;
};

static struct rl_tz *
zone_get(struct zone_cache *zc, const char *name, char *errstr,
         size_t errstr_size)
{
    struct rl_tz **grown;
    struct rl_tz *tz;

    for (size_t i = 0; i < zc->n; i++)
        if (strcmp(rl_tz_name(zc->tz[i]), name) == 0)
            return zc->tz[i];
    tz = rl_tz_load(name, errstr, errstr_size);
    if (!tz)
        return NULL;
    grown = realloc(zc->tz, (zc->n + 1) * sizeof(*grown));
    if (!grown) {
        rl_tz_destroy(tz);
        rl_set_err(errstr, errstr_size, "out of memory");
        return NULL;
    }
    zc->tz = grown;
    zc->tz[zc->n++] = tz;
    return tz;
}

struct delivery {
    size_t acked, failed;
};

static void
dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *rkm, void *opaque)
{
    struct delivery *d = opaque;

    (void)rk;
    if (rkm->err)
        d->failed++;
    else
        d->acked++;
}

struct scheduler {
    const struct rl_config *cfg;
    const char *topic;
    const char *holder;
    struct rl_db *db;
    rd_kafka_t *rk;
    struct delivery d;
    struct zone_cache zones;
    struct rl_http *http;
    int cron_flags;
    int64_t tick_ms, lease_ms, audit_every_ms, audit_grace_s;
    int64_t epoch;     /* lease epoch while active, 0 standing by */
    int64_t last_tick; /* wall seconds of the previous active tick */
    int64_t published; /* events acknowledged since start */
};

/* Produces the event text of one window; 0 or -1 (logged). */
static int
produce_window(struct scheduler *sc, const struct rl_schedule *s, int64_t start)
{
    char errstr[512], reason[96];
    char *text = rl_schedule_event(s, start, errstr, sizeof(errstr));
    struct rl_event *ev = NULL;
    rd_kafka_resp_err_t err;

    if (text)
        ev = rl_cli_event_validate(text, strlen(text),
                                   (size_t)sc->cfg->max_event_bytes, reason,
                                   sizeof(reason), errstr, sizeof(errstr));
    if (!ev) {
        struct rl_log_ctx ctx = {0};

        ctx.job = s->job;
        ctx.tenant = s->tenant;
        rl_log_error(&ctx, "schedule %s: could not build its event: %s",
                     s->name, errstr);
        free(text);
        return -1;
    }
    do {
        err = rd_kafka_producev(sc->rk, RD_KAFKA_V_TOPIC(sc->topic),
                                RD_KAFKA_V_KEY(ev->tenant, strlen(ev->tenant)),
                                RD_KAFKA_V_VALUE(text, strlen(text)),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(sc->rk, 50);
    } while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
    if (err) {
        struct rl_log_ctx ctx = {0};

        ctx.run_id = ev->run_id;
        ctx.job = s->job;
        ctx.tenant = s->tenant;
        rl_log_error(&ctx, "schedule %s: could not produce: %s", s->name,
                     rd_kafka_err2str(err));
        sc->d.failed++;
    }
    rl_event_destroy(ev);
    free(text);
    return err ? -1 : 0;
}

/* One schedule's due windows and their cursor after them. */
struct due {
    size_t n;
    int64_t through;
    int ok;
};

/* The active scheduler's tick: publish, wait, mark. Returns 0, or
 * RL_ERR_STALE when fenced, or RL_ERR_DB. */
static int
active_tick(struct scheduler *sc, int64_t now, int64_t missed_before)
{
    struct rl_schedule *s = NULL;
    struct due *due = NULL;
    int64_t *starts = NULL;
    size_t n = 0;
    int64_t db_now = 0;
    char errstr[512];
    int err;

    err = rl_db_schedules_load(sc->db, NULL, &s, &n, &db_now, errstr,
                               sizeof(errstr));
    if (err) {
        rl_log_error(NULL, "%s", errstr);
        return err;
    }
    due = calloc(n ? n : 1, sizeof(*due));
    starts = malloc(SCHEDULER_MAX_DUE * sizeof(*starts));
    if (!due || !starts) {
        err = RL_ERR_NOMEM;
        goto done;
    }
    memset(&sc->d, 0, sizeof(sc->d));
    for (size_t i = 0; i < n; i++) {
        struct rl_tz *tz;
        size_t before = sc->d.failed;

        if (s[i].paused || s[i].audit_only)
            continue;
        tz = zone_get(&sc->zones, s[i].timezone, errstr, sizeof(errstr));
        if (!tz || rl_cron_parse(s[i].cron, sc->cron_flags, &s[i].parsed,
                                 errstr, sizeof(errstr)) != 0) {
            rl_log_error(NULL, "schedule %s: %s", s[i].name, errstr);
            continue;
        }
        s[i].tz = tz;
        due[i].n = rl_schedule_due(&s[i], now, missed_before, starts,
                                   SCHEDULER_MAX_DUE, &due[i].through);
        due[i].ok = 1;
        for (size_t k = 0; k < due[i].n; k++)
            if (produce_window(sc, &s[i], starts[k]) != 0)
                due[i].ok = 0;
        if (sc->d.failed != before)
            due[i].ok = 0;
    }
    /* Nothing is marked before the broker has every event of the tick: a
     * window is done only once it is on the topic. */
    rd_kafka_flush(sc->rk, (int)(sc->lease_ms / 2 + 1000));
    if (sc->d.failed || rd_kafka_outq_len(sc->rk) > 0) {
        rl_log_warn(NULL,
                    "%zu events of this tick not acknowledged; their "
                    "windows are published again at the next tick",
                    sc->d.failed + (size_t)rd_kafka_outq_len(sc->rk));
        err = 0;
        goto done;
    }
    sc->published += (int64_t)sc->d.acked;
    /* One statement for every cursor: 10,000 statements would outlast
     * the lease they are checked against. */
    {
        const char **names = malloc((n ? n : 1) * sizeof(*names));
        int64_t *throughs = malloc((n ? n : 1) * sizeof(*throughs));
        size_t k = 0;

        if (!names || !throughs) {
            free(names);
            free(throughs);
            err = RL_ERR_NOMEM;
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            if (!due[i].ok || due[i].through <= s[i].published_through)
                continue;
            names[k] = s[i].name;
            throughs[k++] = due[i].through;
        }
        err = rl_db_schedules_mark(sc->db, names, throughs, k, sc->holder,
                                   sc->epoch, errstr, sizeof(errstr));
        free(names);
        free(throughs);
        if (err) {
            rl_log_warn(NULL, "%s", errstr);
            goto done;
        }
    }
    err = 0;
done:
    for (size_t i = 0; i < n; i++) {
        s[i].tz = NULL; /* the zone cache's */
        rl_schedule_clear(&s[i]);
    }
    free(s);
    free(due);
    free(starts);
    return err;
}

/* The audit, on a thread and a connection of its own so that a long audit
 * never delays a window: every audit_every_ms it counts each schedule's
 * missing windows for runledger_schedule_windows_missed. It remembers,
 * per schedule, the window start up to which every window had its run
 * (runs are never removed without a tombstone), and looks again only from
 * there: an audit costs the windows since the first gap, not 7 days of
 * windows of every schedule each time. */
struct auditor {
    const struct rl_config *cfg;
    struct rl_http *http;
    int cron_flags;
    int64_t every_ms, grace_s;
    struct zone_cache zones;
    /* Sorted by name (strcmp, as the load orders them). */
    char **names;
    int64_t *clean; /* every window at or before it has its run */
    size_t n;
    pthread_t tid;
    int started;
};

static int64_t
clean_of(const struct auditor *au, const char *name)
{
    size_t lo = 0, hi = au->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(au->names[mid], name);

        if (c == 0)
            return au->clean[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return INT64_MIN;
}

/* One audit of every schedule; replaces the cursors by the new ones
 * (a removed schedule's goes with it). */
static void
audit_once(struct auditor *au, struct rl_db *db)
{
    struct rl_schedule *s = NULL;
    size_t n = 0;
    int64_t now = 0;
    char errstr[512];
    char **names;
    int64_t *clean;

    if (rl_db_schedules_load(db, NULL, &s, &n, &now, errstr, sizeof(errstr)) !=
        0) {
        rl_log_warn(NULL, "could not audit the schedules: %s", errstr);
        return;
    }
    names = calloc(n ? n : 1, sizeof(*names));
    clean = calloc(n ? n : 1, sizeof(*clean));
    if (!names || !clean) {
        free(names);
        free(clean);
        goto done;
    }
    rl_http_schedules_reset(au->http);
    for (size_t i = 0; i < n && !atomic_load(&scheduler_signal); i++) {
        struct rl_schedule_gap *gaps = NULL;
        size_t ngaps = 0, missed = 0;
        int64_t from = now - 7 * 86400, to = now - au->grace_s;
        int64_t c = clean_of(au, s[i].name);
        struct rl_tz *tz =
            zone_get(&au->zones, s[i].timezone, errstr, sizeof(errstr));

        names[i] = strdup(s[i].name);
        if (!names[i]) {
            /* Out of memory: keep the previous cursors, try again later. */
            for (size_t j = 0; j < i; j++)
                free(names[j]);
            free(names);
            free(clean);
            goto done;
        }
        clean[i] = c;
        if (from < s[i].created_at)
            from = s[i].created_at;
        if (from < c)
            from = c;
        if (!tz || rl_cron_parse(s[i].cron, au->cron_flags, &s[i].parsed,
                                 errstr, sizeof(errstr)) != 0)
            continue;
        s[i].tz = tz;
        if (rl_schedule_gaps(db, &s[i], from, to, 100000,
                             (size_t)au->cfg->max_event_bytes, &gaps, &ngaps,
                             errstr, sizeof(errstr)) != 0) {
            rl_log_warn(NULL, "could not audit schedule %s: %s", names[i],
                        errstr);
            s[i].tz = NULL;
            continue;
        }
        s[i].tz = NULL;
        for (size_t g = 0; g < ngaps; g++)
            missed += !gaps[g].conflict;
        clean[i] = ngaps ? gaps[0].start - 1 : to;
        rl_http_schedule_missed(au->http, names[i], (double)missed);
        free(gaps);
    }
    for (size_t i = 0; i < au->n; i++)
        free(au->names[i]);
    free(au->names);
    free(au->clean);
    au->names = names;
    au->clean = clean;
    au->n = n;
done:
    for (size_t i = 0; i < n; i++)
        rl_schedule_clear(&s[i]);
    free(s);
}

static void *
audit_main(void *arg)
{
    struct auditor *au = arg;
    struct rl_db *db = NULL;
    char errstr[512];

    rl_thread_name("rl-audit");
    while (!atomic_load(&scheduler_signal)) {
        int64_t t0 = wall_ms();

        if (!db)
            db = rl_db_connect(au->cfg->database_url, errstr, sizeof(errstr));
        if (db)
            audit_once(au, db);
        else
            rl_log_warn(NULL, "audit: %s", errstr);
        nap_ms(au->every_ms - (wall_ms() - t0));
    }
    rl_db_destroy(db);
    for (size_t i = 0; i < au->n; i++)
        free(au->names[i]);
    free(au->names);
    free(au->clean);
    for (size_t i = 0; i < au->zones.n; i++)
        rl_tz_destroy(au->zones.tz[i]);
    free(au->zones.tz);
    return NULL;
}

static int64_t
opt_ms(const char *text, int64_t min)
{
    char *end;
    long long v = strtoll(text, &end, 10);

    return *end || v < min ? -1 : (int64_t)v;
}

/* clang-format off */
static const char usage_text[] =
"usage: runledger scheduler [--tick-ms 1000] [--lease-ms 10000]\n"
"                           [--audit-every-ms 60000] [--audit-grace DUR]\n"
"                           [--topic TOPIC]\n"
"\n"
"Publishes the event of every schedule window (runledger schedules) to\n"
"RUNLEDGER_TOPIC when it starts. Run two or more: one is active, chosen by\n"
"a lease in PostgreSQL renewed every tick; another takes over when it\n"
"expires (--lease-ms). Every --audit-every-ms it counts each schedule's\n"
"windows older than --audit-grace (default PT5M) that have no run, for\n"
"runledger_schedule_windows_missed on /metrics.\n";
/* clang-format on */

int
rl_cmd_scheduler(int argc, char **argv)
{
    struct scheduler sc;
    struct auditor au;
    struct rl_config *cfg = NULL;
    rd_kafka_conf_t *conf;
    struct sigaction sa;
    char errstr[512];
    int rc = RL_EXIT_FAILURE;
    const char *test_seconds = getenv("RL_TEST_CRON_SECONDS");

    memset(&sc, 0, sizeof(sc));
    memset(&au, 0, sizeof(au));
    sc.tick_ms = 1000;
    sc.lease_ms = 10000;
    sc.audit_every_ms = 60000;
    sc.audit_grace_s = 300;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return RL_EXIT_OK;
        }
        if (!v) {
            fprintf(stderr, "runledger scheduler: bad option %s\n", a);
            return RL_EXIT_USAGE;
        }
        i++;
        if (strcmp(a, "--tick-ms") == 0)
            sc.tick_ms = opt_ms(v, 10);
        else if (strcmp(a, "--lease-ms") == 0)
            sc.lease_ms = opt_ms(v, 100);
        else if (strcmp(a, "--audit-every-ms") == 0)
            sc.audit_every_ms = opt_ms(v, 0);
        else if (strcmp(a, "--audit-grace") == 0) {
            struct rl_window win;

            sc.audit_grace_s = -1;
            if (strcmp(v, "PT0S") == 0)
                sc.audit_grace_s = 0;
            else if (rl_window_parse(v, &win, errstr, sizeof(errstr)) == 0 &&
                     !win.months)
                sc.audit_grace_s = win.seconds;
        } else if (strcmp(a, "--topic") == 0)
            sc.topic = v;
        else {
            fprintf(stderr, "runledger scheduler: unknown option %s\n", a);
            return RL_EXIT_USAGE;
        }
        if (sc.tick_ms < 0 || sc.lease_ms < 0 || sc.audit_every_ms < 0 ||
            sc.audit_grace_s < 0 || sc.lease_ms <= sc.tick_ms) {
            fprintf(stderr,
                    "runledger scheduler: %s: bad value %s (the lease must "
                    "outlast a tick)\n",
                    a, v);
            return RL_EXIT_USAGE;
        }
    }
    if (test_seconds && strcmp(test_seconds, "1") == 0)
        sc.cron_flags = RL_CRON_SECONDS;
    cfg = rl_config_load(errstr, sizeof(errstr));
    if (!cfg) {
        fprintf(stderr, "runledger scheduler: %s\n", errstr);
        return RL_EXIT_USAGE;
    }
    rl_cli_log_init(cfg);
    sc.cfg = cfg;
    sc.holder = cfg->worker_id;
    if (!sc.topic)
        sc.topic = cfg->topic;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (rl_http_start(cfg, "scheduler", NULL, NULL, &sc.http, errstr,
                      sizeof(errstr)) != 0) {
        rl_log_error(NULL, "%s", errstr);
        goto done;
    }
    conf = rl_kafka_conf_new(cfg, errstr, sizeof(errstr));
    if (!conf) {
        rl_log_error(NULL, "%s", errstr);
        rc = RL_EXIT_USAGE;
        goto done;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, &sc.d);
    /* A window not acknowledged within half a lease is tried again at the
     * next tick, while the lease still fences it; an operator's
     * RUNLEDGER_KAFKA_MESSAGE_TIMEOUT_MS wins. */
    {
        int set = 0;
        char ms[24];

        for (size_t i = 0; i + 1 < cfg->kafka_props_count; i += 2)
            set |= strcmp(cfg->kafka_props[i], "message.timeout.ms") == 0;
        snprintf(ms, sizeof(ms), "%lld", (long long)(sc.lease_ms / 2));
        if (!set)
            rl_kafka_conf_set(conf, "message.timeout.ms", ms, errstr,
                              sizeof(errstr));
    }
    sc.rk = rl_kafka_producer_new(conf, 1, errstr, sizeof(errstr));
    if (!sc.rk) {
        rl_log_error(NULL, "could not create the producer: %s", errstr);
        goto done;
    }
    /* The audit needs /metrics to report to. */
    if (sc.http && sc.audit_every_ms) {
        au.cfg = cfg;
        au.http = sc.http;
        au.cron_flags = sc.cron_flags;
        au.every_ms = sc.audit_every_ms;
        au.grace_s = sc.audit_grace_s;
        au.started = pthread_create(&au.tid, NULL, audit_main, &au) == 0;
    }
    rl_log_info(NULL, "scheduler %s standing by for the lease", sc.holder);
    while (!atomic_load(&scheduler_signal)) {
        int64_t t0 = wall_ms(), now = t0 / 1000, wait;
        int err;

        rl_http_heartbeat(sc.http);
        if (!sc.db) {
            sc.db = rl_db_connect(cfg->database_url, errstr, sizeof(errstr));
            if (!sc.db) {
                rl_log_warn(NULL, "%s", errstr);
                nap_ms(sc.tick_ms);
                continue;
            }
        }
        {
            int64_t epoch = 0;

            err = rl_db_scheduler_lease(sc.db, sc.holder, sc.lease_ms, &epoch,
                                        errstr, sizeof(errstr));
            if (err == 0 && epoch != sc.epoch) {
                rl_log_info(NULL, "scheduler %s active at lease epoch %lld",
                            sc.holder, (long long)epoch);
                /* Windows older than a tick were nobody's: missed. */
                sc.last_tick = now - (sc.tick_ms + 999) / 1000;
                sc.epoch = epoch;
            } else if (err == RL_ERR_STALE && sc.epoch) {
                rl_log_warn(NULL, "scheduler %s lost the lease; standing by",
                            sc.holder);
                sc.epoch = 0;
            } else if (err && err != RL_ERR_STALE) {
                rl_log_warn(NULL, "%s", errstr);
                rl_db_destroy(sc.db);
                sc.db = NULL;
                sc.epoch = 0;
            }
        }
        if (sc.epoch) {
            err = active_tick(&sc, now, sc.last_tick);
            sc.last_tick = now;
            if (err == RL_ERR_STALE) {
                sc.epoch = 0;
            } else if (err == RL_ERR_DB) {
                rl_db_destroy(sc.db);
                sc.db = NULL;
                sc.epoch = 0;
            }
        }
        rl_http_scheduler_state(sc.http, sc.epoch != 0,
                                (long long)sc.published);
        /* Wake just after the next whole second (window starts are whole
         * seconds) or after a tick, whichever is first. */
        wait = 1000 - wall_ms() % 1000 + 5;
        if (wait > sc.tick_ms)
            wait = sc.tick_ms;
        nap_ms(wait);
    }
    rl_log_info(NULL, "scheduler %s stopping; %lld events published", sc.holder,
                (long long)sc.published);
    if (sc.epoch && sc.db)
        rl_db_scheduler_release(sc.db, sc.holder, sc.epoch, errstr,
                                sizeof(errstr));
    rc = RL_EXIT_OK;
done:
    if (au.started)
        pthread_join(au.tid, NULL);
    rl_http_stopping(sc.http);
    if (sc.rk) {
        /* Whatever is not on the topic now is published again by the next
         * active scheduler: nothing here is worth waiting for. */
        rd_kafka_flush(sc.rk, 2000);
        rd_kafka_purge(sc.rk,
                       RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_destroy(sc.rk);
    }
    rl_db_destroy(sc.db);
    for (size_t i = 0; i < sc.zones.n; i++)
        rl_tz_destroy(sc.zones.tz[i]);
    free(sc.zones.tz);
    rl_http_stop(sc.http);
    rl_config_destroy(cfg);
    return rc;
}
