#ifndef RL_FAILPOINT_H
#define RL_FAILPOINT_H

/* Named failpoints for fault tests. Configured by the environment variable
 * RL_FAILPOINTS, a comma-separated list of name=action[@n], where action is
 *   crash        SIGKILL to the own process (as kill -9 would)
 *   exit         _exit(86) without flushing anything
 *   pause        SIGSTOP to the own process (frozen until SIGCONT)
 *   delay:MS     sleep MS milliseconds
 *   error        rl_failpoint() returns 1 so the caller fails the step
 * and @n fires only on the n-th hit (1-based); without it, every hit fires.
 * Compiled in only with -DRL_FAILPOINTS=ON; otherwise rl_failpoint() is a
 * constant 0 and costs nothing.
 * @locality any thread */

#ifdef RL_FAILPOINTS
/* Evaluates failpoint name; returns 1 when the action is "error", else 0
 * (or does not return). */
int rl_failpoint(const char *name);
#else
/* A function, not a constant macro: a statement call must not warn about
 * an unused value when failpoints are compiled out. */
static inline int
rl_failpoint(const char *name)
{
    (void)name;
    return 0;
}
#endif

#endif /* RL_FAILPOINT_H */
