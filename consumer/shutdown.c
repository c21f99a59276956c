/* SIGTERM and SIGINT for `runledger consume`: a signal thread and a
 * watchdog. The main thread's shutdown is a sequence of bounded waits,
 * but a library can still wait forever (librdkafka before 2.6.1 may hang
 * in rd_kafka_destroy once its broker came back as another cluster); the
 * watchdog ends the process at the grace period plus a margin with a log
 * line naming the step it was in, which beats the kubelet's SIGKILL to
 * it and says why. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rl/clock.h"
#include "rl/db_conn.h"
#include "rl/db_lease.h"
#include "rl/log.h"
#include "shutdown.h"

struct rl_shutdown {
    const struct rl_config *cfg; /* NULL once rl_shutdown_finish ran */
    void (*wake)(void *);
    void *opaque;
    sigset_t set;
    atomic_int signal;           /* the first signal, 0 before */
    atomic_llong deadline_ms;    /* rl_clock_ms() the watchdog fires at */
    _Atomic(const char *) phase; /* the step the process is in */
    pthread_mutex_t cfg_lock;    /* held while the signal thread uses cfg */
    int grace_seconds;
    int64_t signal_ms; /* rl_clock_ms() of the first signal */
};

static void
sleep_until(int64_t at_ms)
{
    for (;;) {
        int64_t left = at_ms - rl_clock_ms();
        struct timespec ts;

        if (left <= 0)
            return;
        ts.tv_sec = left / 1000;
        ts.tv_nsec = (left % 1000) * 1000000L;
        nanosleep(&ts, NULL);
    }
}

static void *
watchdog_main(void *arg)
{
    struct rl_shutdown *sd = arg;

    rl_thread_name("rl-watchdog");
    sleep_until(atomic_load(&sd->deadline_ms));
    rl_log_error(NULL,
                 "shutdown watchdog: still running %lld ms after signal %d "
                 "(grace %d s + margin %d s), stuck in %s; exiting now "
                 "(leases not released expire and another worker's "
                 "sweeper takes their runs)",
                 (long long)(rl_clock_ms() - sd->signal_ms),
                 atomic_load(&sd->signal), sd->grace_seconds,
                 RL_SHUTDOWN_MARGIN_SECONDS, atomic_load(&sd->phase));
    fflush(stderr);
    fflush(stdout);
    _exit(RL_EXIT_SHUTDOWN_FORCED);
    return NULL;
}

/* The second signal: every lease this worker holds goes back to pending
 * (the calls they wait for die with the process), then the process
 * exits without waiting for anything else. */
static void
exit_now(struct rl_shutdown *sd, int sig)
{
    char errstr[512];
    int released = -1;

    rl_log_warn(NULL,
                "signal %d again: releasing this worker's leases and "
                "exiting now",
                sig);
    pthread_mutex_lock(&sd->cfg_lock);
    if (sd->cfg) {
        struct rl_db *db = rl_db_connect_role(sd->cfg, RL_DB_ROLE_LEDGER,
                                              errstr, sizeof(errstr));

        if (db) {
            released = rl_db_release_leases_of_owner(
                db, sd->cfg->worker_id, "shutdown",
                "released at a second signal", errstr, sizeof(errstr));
            rl_db_destroy(db);
        }
        if (released < 0)
            rl_log_warn(NULL,
                        "could not release the leases: %s; they expire and "
                        "another worker's sweeper takes their runs",
                        errstr);
    } else {
        released = 0; /* the ledger has ended and released them */
    }
    pthread_mutex_unlock(&sd->cfg_lock);
    rl_log_warn(NULL, "exiting at signal %d: %d leases released", sig,
                released < 0 ? 0 : released);
    fflush(stderr);
    fflush(stdout);
    _exit(RL_EXIT_SHUTDOWN_FORCED);
}

static void *
signal_main(void *arg)
{
    struct rl_shutdown *sd = arg;
    pthread_t watchdog;
    int sig;

    rl_thread_name("rl-signals");
    while (sigwait(&sd->set, &sig) != 0 || sig == 0)
        ;
    sd->signal_ms = rl_clock_ms();
    atomic_store(&sd->deadline_ms,
                 sd->signal_ms +
                     (sd->grace_seconds + RL_SHUTDOWN_MARGIN_SECONDS) * 1000LL);
    atomic_store(&sd->signal, sig);
    pthread_mutex_lock(&sd->cfg_lock);
    if (sd->cfg)
        sd->wake(sd->opaque);
    pthread_mutex_unlock(&sd->cfg_lock);
    if (pthread_create(&watchdog, NULL, watchdog_main, sd) == 0)
        pthread_detach(watchdog);
    else
        rl_log_error(NULL, "could not start the shutdown watchdog");
    while (sigwait(&sd->set, &sig) != 0 || sig == 0)
        ;
    exit_now(sd, sig);
    return NULL;
}

struct rl_shutdown *
rl_shutdown_start(const struct rl_config *cfg, void (*wake)(void *),
                  void *opaque, char *errstr, size_t errstr_size)
{
    struct rl_shutdown *sd = calloc(1, sizeof(*sd));
    pthread_t tid;
    int err;

    if (!sd) {
        snprintf(errstr, errstr_size, "out of memory");
        return NULL;
    }
    sd->cfg = cfg;
    sd->grace_seconds = cfg->shutdown_grace_seconds;
    sd->wake = wake;
    sd->opaque = opaque;
    atomic_init(&sd->signal, 0);
    atomic_init(&sd->deadline_ms, INT64_MAX);
    atomic_init(&sd->phase, "letting in-flight runs finish");
    pthread_mutex_init(&sd->cfg_lock, NULL);
    sigemptyset(&sd->set);
    sigaddset(&sd->set, SIGTERM);
    sigaddset(&sd->set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sd->set, NULL);
    err = pthread_create(&tid, NULL, signal_main, sd);
    if (err != 0) {
        pthread_sigmask(SIG_UNBLOCK, &sd->set, NULL);
        pthread_mutex_destroy(&sd->cfg_lock);
        free(sd);
        snprintf(errstr, errstr_size, "could not start the signal thread: %s",
                 strerror(err));
        return NULL;
    }
    pthread_detach(tid);
    return sd;
}

/* A destroy given up on: the waiter and the thread share it, and the
 * last of the two to let go frees it. */
struct destroyer {
    rd_kafka_t *rk;
    int flags;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    int users;
};

static void
destroyer_release(struct destroyer *d)
{
    int last;

    pthread_mutex_lock(&d->lock);
    last = --d->users == 0;
    pthread_mutex_unlock(&d->lock);
    if (last) {
        pthread_cond_destroy(&d->cond);
        pthread_mutex_destroy(&d->lock);
        free(d);
    }
}

static void *
destroyer_main(void *arg)
{
    struct destroyer *d = arg;

    rl_thread_name("rl-kdestroy");
    rd_kafka_destroy_flags(d->rk, d->flags);
    pthread_mutex_lock(&d->lock);
    d->done = 1;
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->lock);
    destroyer_release(d);
    return NULL;
}

int
rl_shutdown_destroy_kafka(rd_kafka_t *rk, int flags, int timeout_ms)
{
    struct destroyer *d = calloc(1, sizeof(*d));
    pthread_condattr_t attr;
    struct timespec until;
    pthread_t tid;
    int done;

    if (!d) {
        rd_kafka_destroy_flags(rk, flags);
        return 1;
    }
    d->rk = rk;
    d->flags = flags;
    d->users = 2;
    pthread_mutex_init(&d->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&tid, NULL, destroyer_main, d) != 0) {
        d->users = 1;
        destroyer_release(d);
        rd_kafka_destroy_flags(rk, flags);
        return 1;
    }
    pthread_detach(tid);
    until = rl_clock_after(CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&d->lock);
    while (!d->done &&
           pthread_cond_timedwait(&d->cond, &d->lock, &until) != ETIMEDOUT)
        ;
    done = d->done;
    pthread_mutex_unlock(&d->lock);
    destroyer_release(d);
    return done;
}

int
rl_shutdown_signal(const struct rl_shutdown *sd)
{
    return sd ? atomic_load(&sd->signal) : 0;
}

void
rl_shutdown_phase(struct rl_shutdown *sd, const char *phase)
{
    if (sd)
        atomic_store(&sd->phase, phase);
    rl_log_debug(NULL, "shutdown: %s", phase);
}

void
rl_shutdown_finish(struct rl_shutdown *sd)
{
    if (!sd)
        return;
    pthread_mutex_lock(&sd->cfg_lock);
    sd->cfg = NULL;
    pthread_mutex_unlock(&sd->cfg_lock);
}
