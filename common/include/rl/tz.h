#ifndef RL_TZ_H
#define RL_TZ_H

#include <stddef.h>
#include <stdint.h>

/* Time zones of the tz database, read from the system's compiled zoneinfo
 * files (TZif, RFC 8536) under $TZDIR or /usr/share/zoneinfo. A zone is its
 * list of UTC offset changes; the POSIX TZ rule at the end of a file is
 * expanded into explicit changes up to the year 2200, so a lookup is one
 * binary search and never consults the process's TZ or localtime(). */

struct rl_tz;

/* Loads the zone named name ("UTC", "Europe/Berlin"). A name must be a
 * relative path of letters, digits, '_', '-', '+' and '/', without "..".
 * Returns the zone (free with rl_tz_destroy) or NULL with errstr set.
 * Thread-safe: each call reads its own file. */
struct rl_tz *rl_tz_load(const char *name, char *errstr, size_t errstr_size);

/* Frees tz; NULL is allowed. */
void rl_tz_destroy(struct rl_tz *tz);

/* The zone's name as loaded. Owned by tz. */
const char *rl_tz_name(const struct rl_tz *tz);

/* The UTC offset in seconds (east positive) in effect at the UTC instant
 * utc. Thread-safe on a shared zone (read-only). */
int32_t rl_tz_offset(const struct rl_tz *tz, int64_t utc);

/* The local wall-clock time at utc, as seconds since 1970-01-01T00:00:00
 * read as if it were UTC ("naive local seconds"). */
int64_t rl_tz_to_local(const struct rl_tz *tz, int64_t utc);

/* The UTC instant a wall-clock time stands for under Runledger's rule
 * (docs/operations.md, "Schedules: time zones"):
 * - a local time that occurs once is that instant;
 * - a local time that occurs twice (the clock is set back) is its first
 *   occurrence, so it runs once;
 * - a local time that does not occur (the clock jumps forward over it) is
 *   the instant the jump happens: the first existing local time after it.
 * The result never decreases as local increases. *kind, when not NULL, is
 * set to 0 (occurs once), 1 (occurs twice) or 2 (does not occur). */
int64_t rl_tz_from_local(const struct rl_tz *tz, int64_t local, int *kind);

#endif /* RL_TZ_H */
