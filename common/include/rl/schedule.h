#ifndef RL_SCHEDULE_H
#define RL_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "rl/cron.h"

struct rl_tz;

/* A schedule the ledger knows (schema/080_schedules.sql): what its window
 * events carry, when its windows start, and what happens to windows
 * missed while no scheduler ran. */

enum rl_catchup {
    RL_CATCHUP_SKIP = 0,   /* publish only windows due on time */
    RL_CATCHUP_LATEST = 1, /* and the latest missed one */
    RL_CATCHUP_ALL = 2     /* and every missed one */
};

struct rl_schedule {
    char *name, *job, *tenant, *cron, *timezone, *version, *window;
    char *request;          /* JSON text */
    char *input;            /* JSON text, or NULL */
    char *notify;           /* comma-separated channels, or NULL */
    int catchup;            /* enum rl_catchup */
    int64_t catchup_window; /* seconds back from now a missed window may
                               still be published; 0: no limit */
    int audit_only, paused;
    int64_t published_through; /* every window start at or before it is
                                  done (epoch seconds) */
    int64_t created_at;
    /* Filled by rl_schedule_prepare. */
    struct rl_cron parsed;
    struct rl_tz *tz;
};

/* "skip", "latest", "all" into enum rl_catchup; -1 when none. */
int rl_catchup_parse(const char *text);
const char *rl_catchup_name(int catchup);

/* Parses s->cron (flags as rl_cron_parse) and loads s->timezone (NULL or
 * "": UTC) into s->parsed and s->tz, and checks s->window. Returns 0 or
 * RL_ERR_INVALID with errstr set. */
int rl_schedule_prepare(struct rl_schedule *s, int flags, char *errstr,
                        size_t errstr_size);

/* Frees every member of s (not s itself) and zeroes it. */
void rl_schedule_clear(struct rl_schedule *s);

/* The schedule event of the window starting at start (epoch seconds, UTC),
 * exactly as `runledger publish --at <start> --window <window> ...` builds
 * it: job, tenant, scheduled_at, version, window, input, request, notify.
 * Returns malloc'd JSON text (free()) or NULL with errstr set. */
char *rl_schedule_event(const struct rl_schedule *s, int64_t start,
                        char *errstr, size_t errstr_size);

/* The windows to publish at now, in order, into starts (at most max):
 * those in (s->published_through, now]. A window that started at or before
 * missed_before was missed (no scheduler published it on time) and is
 * published per s->catchup within s->catchup_window; the others are on
 * time. *through is the cursor after them: every window start at or
 * before it is done (published, or left out by the policy). Returns
 * the number of starts. s must be prepared. */
size_t rl_schedule_due(const struct rl_schedule *s, int64_t now,
                       int64_t missed_before, int64_t *starts, size_t max,
                       int64_t *through);

#endif /* RL_SCHEDULE_H */
