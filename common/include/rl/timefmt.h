#ifndef RL_TIMEFMT_H
#define RL_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

/* Length of "YYYY-MM-DDTHH:MM:SS+00:00" plus its NUL. */
#define RL_TIME_UTC_SIZE 26

/* Parses an RFC 3339 timestamp "YYYY-MM-DDTHH:MM:SS[.frac](Z|+hh:mm|-hh:mm)"
 * ('t' and 'z' accepted, a space is not) into seconds since the Unix epoch
 * in UTC, fractional seconds truncated (never rounded).
 * Returns 0, or RL_ERR_INVALID with errstr set and *reason set to a stable
 * machine-readable reason: "naive_timestamp" (no UTC offset),
 * "invalid_timestamp" (syntax, impossible date such as 2026-02-30, out of
 * range field, trailing garbage). reason may be NULL. */
int rl_time_parse(const char *text, int64_t *epoch, const char **reason,
                  char *errstr, size_t errstr_size);

/* Writes epoch as "YYYY-MM-DDTHH:MM:SS+00:00" (the run-ID form) into out,
 * which holds at least RL_TIME_UTC_SIZE bytes. */
void rl_time_format_utc(int64_t epoch, char *out);

/* A schedule window parsed from an ISO-8601 duration. */
struct rl_window {
    int months;      /* calendar part: PnY, PnM (years count as 12 months) */
    int64_t seconds; /* fixed part: PnW, PnD, PTnH, PTnM, PTnS */
};

/* Parses an ISO-8601 duration such as PT15M, PT1H, P1D, P1W, P1M.
 * A duration must be positive and may not mix a calendar part (Y, M) with
 * a fixed part. Returns 0 or RL_ERR_INVALID with errstr set. */
int rl_window_parse(const char *text, struct rl_window *win, char *errstr,
                    size_t errstr_size);

/* Floors epoch to the start of its window in UTC. Fixed windows are aligned
 * to the Unix epoch (so P1D starts at 00:00:00 UTC, PT15M at :00/:15/...),
 * except multiples of a week, which start on Monday 00:00 UTC (ISO 8601).
 * Calendar windows start on the first day of a month whose index since
 * 0000-01 is a multiple of months (P1M: each month, P1Y: each January). */
int64_t rl_window_floor(const struct rl_window *win, int64_t epoch);

#endif /* RL_TIMEFMT_H */
