#ifndef RL_RUNID_H
#define RL_RUNID_H

#include <stddef.h>

#include "rl/timefmt.h"

/* 64 lowercase hex digits of a SHA-256, plus NUL. */
#define RL_HEX_SIZE 65

/* SHA-256 (OpenSSL EVP) of len bytes as lowercase hex into out
 * (RL_HEX_SIZE bytes). Returns 0 or RL_ERR_NOMEM. */
int rl_sha256_hex(const void *data, size_t len, char *out);

/* 1 when s is exactly 64 lowercase hex digits (a run ID, a digest, a
 * session secret as rl_sha256_hex writes them), else 0. */
int rl_sha256_hex_valid(const char *s);

/* Strips leading and trailing whitespace exactly as Python's str.strip()
 * with no arguments does (every code point for which str.isspace() holds,
 * decoded from UTF-8), so run IDs match the reference function
 * (docs/design.md). Returns a pointer into text and the stripped length in
 * *len. */
const char *rl_strip(const char *text, size_t *len);

/* The inputs of one logical run, as the event carried them. */
struct rl_run_identity {
    const char *job;
    const char *tenant;
    const char *scheduled_at; /* RFC 3339 with offset */
    const char *window;       /* ISO-8601 duration or NULL */
    const char *version;
};

/* run_id = sha256_hex(strip(job) "|" strip(tenant) "|" utc "|"
 *                     strip(version)), where utc is scheduled_at converted
 * to UTC, floored to the window start if a window is given, and written
 * YYYY-MM-DDTHH:MM:SS+00:00.
 * Fills run_id (RL_HEX_SIZE) and, when not NULL, scheduled_utc
 * (RL_TIME_UTC_SIZE). Returns 0, or RL_ERR_INVALID with errstr and *reason
 * ("naive_timestamp", "invalid_timestamp", "invalid_window") set. */
int rl_runid_compute(const struct rl_run_identity *id, char *run_id,
                     char *scheduled_utc, const char **reason, char *errstr,
                     size_t errstr_size);

#endif /* RL_RUNID_H */
