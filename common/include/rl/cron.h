#ifndef RL_CRON_H
#define RL_CRON_H

#include <stddef.h>
#include <stdint.h>

struct rl_tz;

/* Cron expressions as schedules use them (docs/operations.md, "Schedules"):
 * five fields (minute hour day-of-month month day-of-week), each '*', a
 * number or name, a range "a-b", a step "x/n" (on '*', a range, or a single
 * start meaning start to the field's end), or a comma list of those. Months
 * JAN-DEC and days SUN-SAT are names (any case); day-of-week 7 is Sunday.
 * The macros @yearly, @annually, @monthly, @weekly, @daily, @midnight and
 * @hourly stand for their usual expressions.
 *
 * Day-of-month and day-of-week: when both fields are restricted (neither is
 * exactly '*' or '?'), a day matches if either does; otherwise both must,
 * as Vixie cron and Kubernetes CronJobs have it. */

/* Accept a sixth field, seconds, in front (tests drive windows of seconds
 * with it; schedules set refuses it unless its test switch is on). */
#define RL_CRON_SECONDS 0x1

/* A parsed expression: one bit per allowed value of each field. */
struct rl_cron {
    uint64_t second;                /* bits 0-59 */
    uint64_t minute;                /* bits 0-59 */
    uint32_t hour;                  /* bits 0-23 */
    uint32_t dom;                   /* bits 1-31 */
    uint16_t month;                 /* bits 1-12 */
    uint8_t dow;                    /* bits 0-6, Sunday 0 */
    unsigned char dom_any, dow_any; /* the field was '*' or '?' */
};

/* Parses expr into *cron. flags: 0 or RL_CRON_SECONDS. Refuses an
 * expression that can never match (such as "0 0 30 2 *").
 * Returns 0 or RL_ERR_INVALID with errstr set. */
int rl_cron_parse(const char *expr, int flags, struct rl_cron *cron,
                  char *errstr, size_t errstr_size);

/* The next matching wall-clock time strictly after local, both naive
 * local seconds (rl_tz_to_local), or -1 if none within 10 years. */
int64_t rl_cron_next_local(const struct rl_cron *cron, int64_t local);

/* The next window start of cron in zone tz strictly after the UTC instant
 * after, under the rule of rl_tz_from_local (a repeated local time fires
 * once, at its first occurrence; local times skipped by a jump forward fire
 * once, at the jump). Returns the UTC instant, or -1 if none within 10
 * years. Thread-safe: cron and tz are only read. */
int64_t rl_cron_next(const struct rl_cron *cron, const struct rl_tz *tz,
                     int64_t after);

#endif /* RL_CRON_H */
