#include "rl/err.h"

#include <stdarg.h>
#include <stdio.h>

const char *
rl_err_name(int err)
{
    switch (err) {
    case RL_OK:
        return "ok";
    case RL_ERR_INVALID:
        return "invalid";
    case RL_ERR_NOMEM:
        return "nomem";
    case RL_ERR_IO:
        return "io";
    case RL_ERR_DB:
        return "db";
    case RL_ERR_CONFLICT:
        return "conflict";
    case RL_ERR_STALE:
        return "stale";
    case RL_ERR_NOTFOUND:
        return "notfound";
    case RL_ERR_KAFKA:
        return "kafka";
    case RL_ERR_HTTP:
        return "http";
    case RL_ERR_CHECKSUM:
        return "checksum";
    }
    return "unknown";
}

void
rl_set_err(char *errstr, size_t errstr_size, const char *fmt, ...)
{
    va_list ap;

    if (!errstr || errstr_size == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(errstr, errstr_size, fmt, ap);
    va_end(ap);
}
