#ifndef RL_BUF_H
#define RL_BUF_H

#include <stddef.h>

/* A growable byte buffer, always NUL-terminated once anything was put in
 * it. An allocation failure sticks (failed = 1) and makes every later put a
 * no-op, so a builder can put many pieces and check once at the end.
 *
 * Start from a zeroed struct: struct rl_buf b = {0}. The buffer owns data;
 * rl_buf_free releases it. Not thread-safe. */
struct rl_buf {
    char *data;
    size_t len;
    size_t cap;
    int failed;
};

/* Appends n bytes of s. */
void rl_buf_put(struct rl_buf *b, const void *s, size_t n);

/* Appends the string s (without its NUL). */
void rl_buf_puts(struct rl_buf *b, const char *s);

/* Appends printf-formatted text. */
void rl_buf_printf(struct rl_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Hands data over to the caller (free() it) and resets b; NULL when the
 * buffer failed or is empty. */
char *rl_buf_take(struct rl_buf *b);

/* Frees data and resets b to empty; accepts a zeroed buffer. */
void rl_buf_free(struct rl_buf *b);

#endif /* RL_BUF_H */
