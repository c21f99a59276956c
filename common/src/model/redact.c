/* Redaction: the secrets the client holds (the API key, the extra
 * headers' values) never reach an error message, whole or cut, and are
 * wiped when freed. */
#include "model_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cut error ending in this many bytes of a secret's start is redacted
 * there (fewer say nothing: "sk-" is every key's start). */
#define SECRET_TAIL_MIN 4

/* Where in text (length len) the first echo of any secret starts; sets
 * *secret_len. len when there is none. */
static size_t
find_secret(const struct rl_model *m, const char *text, size_t len,
            size_t *secret_len)
{
    size_t best = len;

    for (size_t k = 0; k < m->nsecrets; k++) {
        size_t n = m->secret_lens[k];

        for (size_t i = 0; n <= len && i <= len - n && i < best; i++) {
            if (text[i] == m->secrets[k][0] &&
                memcmp(text + i, m->secrets[k], n) == 0) {
                best = i;
                *secret_len = n;
                break;
            }
        }
    }
    return best;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if none:
 * PostgreSQL refuses invalid UTF-8 in the attempts table. */
static size_t
utf8_len(const unsigned char *p, size_t n)
{
    size_t len;
    unsigned int cp;

    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        len = 2, cp = p[0] & 0x1fu;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        len = 3, cp = p[0] & 0x0fu;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        len = 4, cp = p[0] & 0x07u;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* Copies src into dst (size dst_size), every echo of a secret (the API
 * key, the extra headers' values) replaced and control bytes escaped
 * (\n, \r, \t, \\, else \xNN; so are bytes that are not UTF-8): an
 * endpoint may echo the key in an error message, and errors end up in logs
 * and the attempts table. The whole of src is scanned before anything is
 * cut, so an echo that straddles the cut is caught; a tail of dst that
 * could be the start of a secret is redacted too. */
static void
copy_redacted(const struct rl_model *m, char *dst, size_t dst_size,
              const char *src)
{
    static const char mark[] = "[redacted]";
    size_t len = strlen(src), o = 0, i = 0;
    size_t secret_len = 0, next;

    if (dst_size == 0)
        return;
    next = find_secret(m, src, len, &secret_len);
    while (i < len && o + 1 < dst_size) {
        const unsigned char c = (unsigned char)src[i];
        char esc[8];
        size_t n = 1, adv = 1;
        const char *out = esc;

        if (i == next) {
            out = mark;
            n = sizeof(mark) - 1;
            adv = secret_len;
        } else if (c == '\n' || c == '\r' || c == '\t' || c == '\\') {
            esc[0] = '\\';
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
            n = 2;
        } else if (c >= 0x20 && c < 0x7f) {
            esc[0] = (char)c;
        } else {
            size_t u = c >= 0x80
                           ? utf8_len((const unsigned char *)src + i, len - i)
                           : 0;

            /* Never step over the start of a secret. */
            if (u > 0 && i + u <= next) {
                out = src + i;
                n = adv = u;
            } else {
                snprintf(esc, sizeof(esc), "\\x%02x", c);
                n = 4;
            }
        }
        /* An escape or a character is never cut in half; the mark is. */
        if (n > dst_size - 1 - o) {
            if (out != mark)
                break;
            n = dst_size - 1 - o;
        }
        memcpy(dst + o, out, n);
        o += n;
        i += adv;
        if (i > next)
            next = i + find_secret(m, src + i, len - i, &secret_len);
    }
    dst[o] = '\0';
    if (i == len)
        return;
    /* Cut short: a secret whose start is all that fits must not show. */
    for (size_t k = 0; k < m->nsecrets; k++) {
        for (size_t p = o > m->secret_lens[k] ? o - m->secret_lens[k] : 0;
             p < o; p++) {
            size_t tail = o - p;

            if (tail < SECRET_TAIL_MIN && tail < m->secret_lens[k])
                break;
            if (memcmp(dst + p, m->secrets[k], tail) == 0) {
                size_t n = sizeof(mark) - 1;

                if (n > dst_size - 1 - p)
                    n = dst_size - 1 - p;
                memcpy(dst + p, mark, n);
                o = p + n;
                dst[o] = '\0';
                break;
            }
        }
    }
}

/* Formats the whole message before copy_redacted() cuts it to the size of
 * call->error: cutting first could split an echoed key and keep its
 * start. */
void
model_call_error(const struct rl_model *m, struct rl_model_call *call,
                 const char *fmt, ...)
{
    char small[sizeof(call->error)];
    char *raw = small;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(small)) {
        raw = malloc((size_t)n + 1);
        if (!raw) {
            /* What was kept may end in the start of an echoed key. */
            snprintf(call->error, sizeof(call->error),
                     "model call failed (out of memory formatting its "
                     "error)");
            return;
        }
        va_start(ap, fmt);
        vsnprintf(raw, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    copy_redacted(m, call->error, sizeof(call->error), raw);
    if (raw != small)
        free(raw);
}

/* Keeps a copy of s[0..len) to redact from errors. */
int
model_add_secret(struct rl_model *m, const char *s, size_t len)
{
    char *copy = malloc(len + 1);

    if (!copy)
        return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    m->secrets[m->nsecrets] = copy;
    m->secret_lens[m->nsecrets++] = len;
    return 0;
}

void
model_wipe_free(char *s)
{
    if (!s)
        return;
    /* volatile: the key should not outlive the client in freed memory */
    for (volatile char *p = s; *p; p++)
        *p = '\0';
    free(s);
}
