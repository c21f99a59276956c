/* Canonical JSON (see rl/json.h): the byte form a request fingerprint is
 * computed over. Two requests that mean the same must give the same bytes,
 * or a harmless re-send of an event would look like a conflicting request. */
#include "rl/json.h"

#include <math.h> /* isnan, isinf: macros, no libm */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/buf.h"
#include "rl/err.h"
#include "rl/runid.h"
#include "rl/testing.h"

/* cJSON's parser stops at 1000 levels; a tree built by hand could go deeper
 * and this writer recurses, so it refuses instead of exhausting the stack. */
#define MAX_DEPTH 1000

/* Integers up to 2^53 are exact in a double; above it, writing an integer
 * form would claim a precision the value does not have. */
#define MAX_EXACT_INT 9007199254740992.0

struct buf {
    struct rl_buf out;
    int err;      /* first rl_err met; the text is then abandoned */
    char *errstr; /* caller's */
    size_t errstr_size;
};

static void buf_fail(struct buf *b, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
buf_fail(struct buf *b, int err, const char *fmt, ...)
{
    va_list ap;

    if (b->err)
        return;
    b->err = err;
    if (b->errstr && b->errstr_size) {
        va_start(ap, fmt);
        vsnprintf(b->errstr, b->errstr_size, fmt, ap);
        va_end(ap);
    }
}

static void
buf_append(struct buf *b, const char *s, size_t n)
{
    if (b->err)
        return;
    rl_buf_put(&b->out, s, n);
    if (b->out.failed)
        buf_fail(b, RL_ERR_NOMEM, "could not allocate canonical json");
}

static void
buf_puts(struct buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

static void
write_string(struct buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const char *run = s;

    buf_append(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[7];

        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        buf_append(b, run, (size_t)(s - run));
        run = s + 1;
        switch (c) {
        case '"':
            buf_puts(b, "\\\"");
            break;
        case '\\':
            buf_puts(b, "\\\\");
            break;
        case '\b':
            buf_puts(b, "\\b");
            break;
        case '\f':
            buf_puts(b, "\\f");
            break;
        case '\n':
            buf_puts(b, "\\n");
            break;
        case '\r':
            buf_puts(b, "\\r");
            break;
        case '\t':
            buf_puts(b, "\\t");
            break;
        default:
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 0x0f];
            esc[6] = '\0';
            buf_puts(b, esc);
        }
    }
    buf_append(b, run, (size_t)(s - run));
    buf_append(b, "\"", 1);
}

static void
write_number(struct buf *b, double v)
{
    char text[64];

    if (isnan(v) || isinf(v)) {
        buf_fail(b, RL_ERR_INVALID,
                 "number is not finite (nan, infinity or out of range)");
        return;
    }
    /* 1, 1.0 and 1e0 are one value; -0 is written 0 for the same reason. */
    if (v >= -MAX_EXACT_INT && v <= MAX_EXACT_INT &&
        v == (double)(long long)v) {
        snprintf(text, sizeof(text), "%lld", (long long)v);
    } else {
        /* The shortest form that reads back to the same double, so the
         * text depends on the value only, not on how it was spelled. */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(text, sizeof(text), "%.*g", prec, v);
            if (strtod(text, NULL) == v)
                break;
        }
    }
    buf_puts(b, text);
}

static int
compare_keys(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a;
    const cJSON *y = *(const cJSON *const *)b;

    /* strcmp compares as unsigned char: UTF-8 byte order is code point
     * order. */
    return strcmp(x->string, y->string);
}

/* Puts key into errstr only when it is short, printable ASCII: the key came
 * from an untrusted event and errstr ends up in logs and headers. */
static const char *
printable_key(const char *key)
{
    size_t n = strlen(key);

    if (n > 64)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (key[i] < 0x20 || key[i] > 0x7e || key[i] == '"' || key[i] == '\\')
            return NULL;
    }
    return key;
}

static void write_value(struct buf *b, const cJSON *item, int depth);

static void
write_object(struct buf *b, const cJSON *item, int depth)
{
    const cJSON *child;
    const cJSON **members;
    size_t n = 0, i;

    for (child = item->child; child; child = child->next)
        n++;
    if (n == 0) {
        buf_puts(b, "{}");
        return;
    }
    members = malloc(n * sizeof(*members));
    if (!members) {
        buf_fail(b, RL_ERR_NOMEM, "could not allocate canonical json");
        return;
    }
    for (i = 0, child = item->child; child; child = child->next) {
        if (!child->string) {
            buf_fail(b, RL_ERR_INVALID, "object member has no key");
            free(members);
            return;
        }
        members[i++] = child;
    }
    qsort(members, n, sizeof(*members), compare_keys);
    buf_append(b, "{", 1);
    for (i = 0; i < n && !b->err; i++) {
        /* After sorting, a repeated key sits next to its twin. Keeping
         * either one would make the fingerprint depend on which one a
         * parser happened to keep. */
        if (i > 0 && strcmp(members[i - 1]->string, members[i]->string) == 0) {
            const char *key = printable_key(members[i]->string);

            if (key)
                buf_fail(b, RL_ERR_INVALID, "duplicate key \"%s\" in object",
                         key);
            else
                buf_fail(b, RL_ERR_INVALID, "duplicate key in object");
            break;
        }
        if (i > 0)
            buf_append(b, ",", 1);
        write_string(b, members[i]->string);
        buf_append(b, ":", 1);
        write_value(b, members[i], depth + 1);
    }
    buf_append(b, "}", 1);
    free(members);
}

static void
write_value(struct buf *b, const cJSON *item, int depth)
{
    const cJSON *child;

    if (b->err)
        return;
    if (depth > MAX_DEPTH) {
        buf_fail(b, RL_ERR_INVALID, "json is nested deeper than %d levels",
                 MAX_DEPTH);
        return;
    }
    switch (item->type & 0xff) {
    case cJSON_False:
        buf_puts(b, "false");
        break;
    case cJSON_True:
        buf_puts(b, "true");
        break;
    case cJSON_NULL:
        buf_puts(b, "null");
        break;
    case cJSON_Number:
        write_number(b, item->valuedouble);
        break;
    case cJSON_String:
        if (!item->valuestring) {
            buf_fail(b, RL_ERR_INVALID, "string has no value");
            break;
        }
        write_string(b, item->valuestring);
        break;
    case cJSON_Array:
        buf_append(b, "[", 1);
        for (child = item->child; child && !b->err; child = child->next) {
            if (child != item->child)
                buf_append(b, ",", 1);
            write_value(b, child, depth + 1);
        }
        buf_append(b, "]", 1);
        break;
    case cJSON_Object:
        write_object(b, item, depth);
        break;
    default:
        /* cJSON_Raw carries unchecked text, cJSON_Invalid nothing. */
        buf_fail(b, RL_ERR_INVALID, "value is not a json value");
    }
}

static char *
canonical(const cJSON *item, int *err, char *errstr, size_t errstr_size)
{
    struct buf b = {{0}, 0, errstr, errstr_size};

    if (!item)
        buf_fail(&b, RL_ERR_INVALID, "no json value");
    else
        write_value(&b, item, 1);
    *err = b.err;
    if (b.err) {
        rl_buf_free(&b.out);
        return NULL;
    }
    return rl_buf_take(&b.out);
}

char *
rl_json_canonical(const cJSON *item, char *errstr, size_t errstr_size)
{
    int err;

    return canonical(item, &err, errstr, errstr_size);
}

int
rl_json_fingerprint(const cJSON *item, char *out, char *errstr,
                    size_t errstr_size)
{
    int err;
    char *text = canonical(item, &err, errstr, errstr_size);

    if (!text)
        return err;
    err = rl_sha256_hex(text, strlen(text), out);
    free(text);
    if (err)
        snprintf(errstr, errstr_size, "could not compute sha-256");
    return err;
}

char *
rl_json_print(const cJSON *item)
{
    char *printed = cJSON_PrintUnformatted(item);
    char *copy;

    if (!printed)
        return NULL;
    copy = strdup(printed);
    cJSON_free(printed);
    return copy;
}
