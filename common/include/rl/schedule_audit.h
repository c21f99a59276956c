#ifndef RL_SCHEDULE_AUDIT_H
#define RL_SCHEDULE_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "rl/runid.h"

struct rl_db;
struct rl_schedule;

/* The completeness audit (docs/operations.md, "Schedules"): the windows a
 * schedule expects compared with the runs the ledger registered. The run
 * of a window is the run ID of the schedule's event for it (rl_event_parse
 * of rl_schedule_event), whoever published it. */

/* A window without its run, or whose run has another fingerprint. */
struct rl_schedule_gap {
    int64_t start;                 /* window start, epoch seconds UTC */
    char run_id[RL_HEX_SIZE];      /* the run the window should have */
    char fingerprint[RL_HEX_SIZE]; /* of the schedule's request */
    int conflict; /* 1: a run with another fingerprint holds the run ID */
};

/* What the ledger holds for one window. */
enum rl_window_state {
    RL_WINDOW_RUN = 0,     /* its run, with the schedule's fingerprint */
    RL_WINDOW_MISSING = 1, /* no run (nor a purged one) */
    RL_WINDOW_CONFLICT = 2 /* a run with another fingerprint holds its ID */
};

/* A window, its run ID and what the ledger holds for it. */
struct rl_schedule_window {
    int64_t start;                 /* window start, epoch seconds UTC */
    char run_id[RL_HEX_SIZE];      /* the run the window should have */
    char fingerprint[RL_HEX_SIZE]; /* of the schedule's request */
    int state;                     /* enum rl_window_state */
};

/* The window starts of s in (from, to] outside its pauses (pairs of
 * [paused, resumed) epochs, npauses of them), at most max, into starts.
 * Returns how many. s must be prepared. */
size_t rl_schedule_windows(const struct rl_schedule *s, int64_t from,
                           int64_t to, const int64_t *pauses, size_t npauses,
                           int64_t *starts, size_t max);

/* The run ID of each of the n windows of s starting at starts[i], and
 * whether the ledger registered it, into out[i] (n entries, the caller's).
 * The one check behind rl_schedule_gaps and the console's schedules page.
 * Returns 0, RL_ERR_INVALID (the schedule's event is invalid), RL_ERR_NOMEM
 * or RL_ERR_DB. */
int rl_schedule_windows_check(struct rl_db *db, const struct rl_schedule *s,
                              const int64_t *starts, size_t n,
                              size_t max_event_bytes,
                              struct rl_schedule_window *out, char *errstr,
                              size_t errstr_size);

/* The gaps of s among its windows in (from, to]: reads the schedule's
 * pauses and the runs. *gaps (malloc'd, *n entries; may be NULL when 0)
 * holds missing windows and conflicts in window order, at most max_windows
 * windows looked at. max_event_bytes: RUNLEDGER_MAX_EVENT_BYTES. Returns 0,
 * RL_ERR_INVALID (the schedule's event is invalid), RL_ERR_NOMEM or
 * RL_ERR_DB. */
int rl_schedule_gaps(struct rl_db *db, const struct rl_schedule *s,
                     int64_t from, int64_t to, size_t max_windows,
                     size_t max_event_bytes, struct rl_schedule_gap **gaps,
                     size_t *n, char *errstr, size_t errstr_size);

#endif /* RL_SCHEDULE_AUDIT_H */
