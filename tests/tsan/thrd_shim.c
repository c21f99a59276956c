/* C11 threads on top of the pthread calls ThreadSanitizer intercepts.
 *
 * glibc 2.36 implements thrd_create with an internal __pthread_create that
 * TSan's pthread_create interceptor never sees. librdkafka 2.0.2 starts
 * every thread of its own with thrd_create, so under TSan those threads run
 * without a TSan thread state and the first malloc on one of them crashes
 * inside the TSan allocator. Preloaded (LD_PRELOAD) into a TSan build, these
 * definitions come before glibc's, and pthread_create resolves to TSan's
 * interceptor, so librdkafka's threads are known to TSan.
 *
 * Thread start, join, detach and exit are replaced: glibc's join and detach
 * bypass the interceptors too, and TSan would miss the ordering a join
 * gives. mtx_* and cnd_* stay glibc's, so librdkafka's locking stays
 * invisible to TSan; tests/tsan/suppressions.txt deals with that.
 *
 * Built by tests/tsan/CMakeLists.txt only when RL_SANITIZE is "thread". The
 * file is not compiled with -fsanitize=thread: it holds no shared state. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

struct start {
    thrd_start_t func;
    void *arg;
};

static void *
trampoline(void *opaque)
{
    struct start s = *(struct start *)opaque;

    free(opaque);
    /* A C11 thread's int result travels through the void * of pthreads,
     * as glibc's own thrd_create does. */
    return (void *)(intptr_t)s.func(s.arg);
}

int
thrd_create(thrd_t *thr, thrd_start_t func, void *arg)
{
    struct start *s = malloc(sizeof(*s));
    pthread_t tid;
    int rc;

    if (!s)
        return thrd_nomem;
    s->func = func;
    s->arg = arg;
    rc = pthread_create(&tid, NULL, trampoline, s);
    if (rc != 0) {
        free(s);
        return rc == ENOMEM ? thrd_nomem : thrd_error;
    }
    *thr = (thrd_t)tid;
    return thrd_success;
}

int
thrd_join(thrd_t thr, int *res)
{
    void *value;

    if (pthread_join((pthread_t)thr, &value) != 0)
        return thrd_error;
    if (res)
        *res = (int)(intptr_t)value;
    return thrd_success;
}

int
thrd_detach(thrd_t thr)
{
    return pthread_detach((pthread_t)thr) == 0 ? thrd_success : thrd_error;
}

void
thrd_exit(int res)
{
    pthread_exit((void *)(intptr_t)res);
}
