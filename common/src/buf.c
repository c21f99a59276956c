#include "rl/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for n more bytes and the NUL; 0 on success. */
static int
reserve(struct rl_buf *b, size_t n)
{
    size_t cap;
    char *data;

    if (b->failed)
        return -1;
    if (n >= (size_t)-1 - b->len - 1) {
        b->failed = 1;
        return -1;
    }
    if (b->len + n + 1 <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) {
        if (cap > (size_t)-1 / 2) {
            cap = b->len + n + 1;
            break;
        }
        cap *= 2;
    }
    data = realloc(b->data, cap);
    if (!data) {
        b->failed = 1;
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

void
rl_buf_put(struct rl_buf *b, const void *s, size_t n)
{
    if (reserve(b, n) != 0)
        return;
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void
rl_buf_puts(struct rl_buf *b, const char *s)
{
    rl_buf_put(b, s, strlen(s));
}

void
rl_buf_printf(struct rl_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->failed)
        return;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if (reserve(b, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *
rl_buf_take(struct rl_buf *b)
{
    char *data = b->failed ? NULL : b->data;

    if (b->failed)
        free(b->data);
    memset(b, 0, sizeof(*b));
    return data;
}

void
rl_buf_free(struct rl_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}
