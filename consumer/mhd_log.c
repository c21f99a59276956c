/* mhd_log.c: libmicrohttpd's error log, as one line of the process's log. */
#include "mhd_log.h"

#include <stdio.h>
#include <string.h>

#include "rl/log.h"

void
rl_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    size_t len;

    vsnprintf(msg, sizeof(msg), fmt, ap);
    len = strlen(msg);
    while (len > 0 && msg[len - 1] == '\n')
        msg[--len] = '\0';
    rl_log_warn(NULL, "%s: %s", cls ? (const char *)cls : "http", msg);
}
