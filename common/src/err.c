#include "rl/err.h"

#include <stdarg.h>
#include <stdio.h>

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
