/* The stable identity of one logical run (docs/design.md, "One logical run").
 * Everything here must agree byte for byte with the Python
 * reference function in docs/design.md, stable_run_id(). */
#include "rl/runid.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rl/err.h"

int
rl_sha256_hex(const void *data, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;

    if (!EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL) ||
        md_len != 32) {
        out[0] = '\0';
        return RL_ERR_NOMEM;
    }
    for (unsigned int i = 0; i < md_len; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 0x0f];
    }
    out[2 * md_len] = '\0';
    return RL_OK;
}

int
rl_sha256_hex_valid(const char *s)
{
    size_t n = 0;

    for (; s[n]; n++) {
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return 0;
    }
    return n == 64;
}

/* Python's str.isspace() set (Unicode White_Space plus the information
 * separators U+001C..U+001F), as CPython 3.11 defines it. */
static int
is_py_space(uint32_t cp)
{
    if (cp <= 0x20)
        return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20);
    switch (cp) {
    case 0x85:
    case 0xa0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x3000:
        return 1;
    }
    return cp >= 0x2000 && cp <= 0x200a;
}

/* Decodes one well-formed UTF-8 sequence of at most 3 bytes (every space
 * above is in the BMP) from s[0..n). Returns its length, or 0 when it is not
 * such a sequence: that byte is then simply not whitespace. */
static size_t
decode_bmp(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n >= 1 && s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (n >= 2 && s[0] >= 0xc2 && s[0] <= 0xdf && (s[1] & 0xc0) == 0x80) {
        *cp = ((uint32_t)(s[0] & 0x1f) << 6) | (s[1] & 0x3f);
        return 2;
    }
    if (n >= 3 && (s[0] & 0xf0) == 0xe0 && (s[1] & 0xc0) == 0x80 &&
        (s[2] & 0xc0) == 0x80) {
        *cp = ((uint32_t)(s[0] & 0x0f) << 12) | ((uint32_t)(s[1] & 0x3f) << 6) |
              (s[2] & 0x3f);
        /* Overlong forms and surrogates are not characters Python has. */
        if (*cp < 0x800 || (*cp >= 0xd800 && *cp <= 0xdfff))
            return 0;
        return 3;
    }
    return 0;
}

const char *
rl_strip(const char *text, size_t *len)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t start = 0, end = strlen(text);
    uint32_t cp;
    size_t n;

    while (start < end && (n = decode_bmp(s + start, end - start, &cp)) != 0 &&
           is_py_space(cp))
        start += n;
    while (end > start) {
        size_t lead = end - 1;

        /* Step back over continuation bytes to the lead byte of the last
         * character (at most 2 for a BMP character). */
        while (lead > start && end - lead < 3 && (s[lead] & 0xc0) == 0x80)
            lead--;
        n = decode_bmp(s + lead, end - lead, &cp);
        if (n != end - lead || !is_py_space(cp))
            break;
        end = lead;
    }
    *len = end - start;
    return text + start;
}

/* rl_time_parse() messages start with "timestamp"; say which field the
 * caller gave instead, so the reason reads "scheduled_at has no utc offset"
 * without losing the parser's detail. */
static void
name_field(char *errstr, size_t errstr_size, const char *field,
           const char *detail)
{
    static const char subject[] = "timestamp";

    if (strncmp(detail, subject, sizeof(subject) - 1) == 0)
        snprintf(errstr, errstr_size, "%s%s", field,
                 detail + sizeof(subject) - 1);
    else
        snprintf(errstr, errstr_size, "%s: %s", field, detail);
}

int
rl_runid_compute(const struct rl_run_identity *id, char *run_id,
                 char *scheduled_utc, const char **reason, char *errstr,
                 size_t errstr_size)
{
    const char *job, *tenant, *version;
    size_t job_len, tenant_len, version_len;
    char utc[RL_TIME_UTC_SIZE];
    char detail[256];
    const char *why = NULL;
    int64_t epoch;
    char *identity, *p;
    size_t len;
    int err;

    if (!id->job || !id->tenant || !id->scheduled_at || !id->version) {
        static const char *const names[] = {"job", "tenant", "scheduled_at",
                                            "version"};
        static const char *const reasons[] = {
            "missing_field:job", "missing_field:tenant",
            "missing_field:scheduled_at", "missing_field:version"};
        int i = !id->job ? 0 : !id->tenant ? 1 : !id->scheduled_at ? 2 : 3;

        if (reason)
            *reason = reasons[i];
        snprintf(errstr, errstr_size, "%s is missing", names[i]);
        return RL_ERR_INVALID;
    }

    err = rl_time_parse(id->scheduled_at, &epoch, &why, detail, sizeof(detail));
    if (err) {
        if (reason)
            *reason = why;
        name_field(errstr, errstr_size, "scheduled_at", detail);
        return err;
    }
    if (id->window) {
        struct rl_window win;

        err = rl_window_parse(id->window, &win, detail, sizeof(detail));
        if (err) {
            if (reason)
                *reason = "invalid_window";
            snprintf(errstr, errstr_size, "%s", detail);
            return err;
        }
        epoch = rl_window_floor(&win, epoch);
    }
    rl_time_format_utc(epoch, utc);
    /* A window can floor an instant in year 1 back into year 0, which the
     * reference function cannot express. */
    if (utc[0] == '-' || strncmp(utc, "0000-", 5) == 0) {
        if (reason)
            *reason = "invalid_timestamp";
        snprintf(errstr, errstr_size,
                 "scheduled_at floored to its window is before year 0001");
        return RL_ERR_INVALID;
    }

    job = rl_strip(id->job, &job_len);
    tenant = rl_strip(id->tenant, &tenant_len);
    version = rl_strip(id->version, &version_len);

    /* "job|tenant|utc|version", exactly the reference's "|".join(...). */
    len = job_len + tenant_len + version_len + strlen(utc) + 3;
    identity = malloc(len);
    if (!identity) {
        snprintf(errstr, errstr_size, "could not allocate the run identity");
        return RL_ERR_NOMEM;
    }
    p = identity;
    memcpy(p, job, job_len);
    p += job_len;
    *p++ = '|';
    memcpy(p, tenant, tenant_len);
    p += tenant_len;
    *p++ = '|';
    memcpy(p, utc, strlen(utc));
    p += strlen(utc);
    *p++ = '|';
    memcpy(p, version, version_len);
    err = rl_sha256_hex(identity, len, run_id);
    free(identity);
    if (err) {
        snprintf(errstr, errstr_size, "could not compute sha-256");
        return err;
    }
    if (scheduled_utc)
        memcpy(scheduled_utc, utc, RL_TIME_UTC_SIZE);
    return RL_OK;
}
