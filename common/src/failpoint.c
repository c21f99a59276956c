#include "rl/failpoint.h"

#ifdef RL_FAILPOINTS

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rl/log.h"

#define FP_MAX 32

enum fp_action { FP_CRASH, FP_EXIT, FP_PAUSE, FP_DELAY, FP_ERROR };

struct fp {
    char name[64];
    enum fp_action action;
    long delay_ms;
    long nth; /* 0: every hit */
    atomic_long hits;
};

static struct fp fps[FP_MAX];
static int fp_count;
static pthread_once_t fp_once = PTHREAD_ONCE_INIT;

static void
fp_load(void)
{
    const char *env = getenv("RL_FAILPOINTS");
    char *copy, *tok, *save = NULL;

    if (!env || !*env)
        return;
    copy = strdup(env);
    if (!copy)
        return;
    for (tok = strtok_r(copy, ",", &save); tok && fp_count < FP_MAX;
         tok = strtok_r(NULL, ",", &save)) {
        struct fp *fp = &fps[fp_count];
        char *eq = strchr(tok, '=');
        char *at;

        if (!eq)
            continue;
        *eq = '\0';
        snprintf(fp->name, sizeof(fp->name), "%s", tok);
        at = strchr(eq + 1, '@');
        if (at) {
            *at = '\0';
            fp->nth = strtol(at + 1, NULL, 10);
        }
        if (strcmp(eq + 1, "crash") == 0)
            fp->action = FP_CRASH;
        else if (strcmp(eq + 1, "exit") == 0)
            fp->action = FP_EXIT;
        else if (strcmp(eq + 1, "pause") == 0)
            fp->action = FP_PAUSE;
        else if (strcmp(eq + 1, "error") == 0)
            fp->action = FP_ERROR;
        else if (strncmp(eq + 1, "delay:", 6) == 0) {
            fp->action = FP_DELAY;
            fp->delay_ms = strtol(eq + 7, NULL, 10);
        } else {
            rl_log_warn(NULL, "ignoring failpoint %s: unknown action %s",
                        fp->name, eq + 1);
            continue;
        }
        fp_count++;
    }
    free(copy);
}

int
rl_failpoint(const char *name)
{
    pthread_once(&fp_once, fp_load);
    for (int i = 0; i < fp_count; i++) {
        struct fp *fp = &fps[i];
        long hit;

        if (strcmp(fp->name, name) != 0)
            continue;
        hit = atomic_fetch_add(&fp->hits, 1) + 1;
        if (fp->nth && hit != fp->nth)
            return 0;
        rl_log_warn(NULL, "failpoint %s fired (hit %ld)", name, hit);
        switch (fp->action) {
        case FP_CRASH:
            raise(SIGKILL);
            break;
        case FP_EXIT:
            _exit(86);
        case FP_PAUSE:
            raise(SIGSTOP);
            return 0;
        case FP_DELAY: {
            struct timespec ts = {fp->delay_ms / 1000,
                                  (fp->delay_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
            return 0;
        }
        case FP_ERROR:
            return 1;
        }
    }
    return 0;
}

#else

/* ISO C forbids an empty translation unit. */
typedef int rl_failpoint_disabled;

#endif /* RL_FAILPOINTS */
