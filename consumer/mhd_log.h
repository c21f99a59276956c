#ifndef RL_MHD_LOG_H
#define RL_MHD_LOG_H

/* libmicrohttpd's error log into the process's log: the one
 * MHD_OPTION_EXTERNAL_LOGGER of every HTTP server of the process (health
 * and metrics, the console). */

#include <stdarg.h>

/* Logs libmicrohttpd's message as a warning, its trailing newlines cut,
 * prefixed with cls: a NUL-terminated name of the server ("http",
 * "console http") that outlives it.
 * @locality libmicrohttpd's threads */
void rl_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#endif /* RL_MHD_LOG_H */
