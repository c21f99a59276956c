/* The completeness audit: each expected window of a schedule, its run ID,
 * and whether the ledger registered that run (rl/schedule_audit.h). */
#include "rl/schedule_audit.h"

#include <stdlib.h>
#include <string.h>

#include "rl/db_schedules.h"
#include "rl/err.h"
#include "rl/event.h"
#include "rl/schedule.h"

/* Run IDs asked of the ledger in one statement. */
#define AUDIT_CHUNK 500

size_t
rl_schedule_windows(const struct rl_schedule *s, int64_t from, int64_t to,
                    const int64_t *pauses, size_t npauses, int64_t *starts,
                    size_t max)
{
    size_t n = 0;
    int64_t t = from;

    while (n < max) {
        int paused = 0;

        t = rl_cron_next(&s->parsed, s->tz, t);
        if (t < 0 || t > to)
            break;
        for (size_t i = 0; i < npauses; i++)
            paused |= t >= pauses[2 * i] && t < pauses[2 * i + 1];
        if (!paused)
            starts[n++] = t;
    }
    return n;
}

/* The run ID and fingerprint of s's event for the window at start. */
static int
window_identity(const struct rl_schedule *s, int64_t start,
                size_t max_event_bytes, struct rl_schedule_window *w,
                char *errstr, size_t errstr_size)
{
    struct rl_event_limits limits;
    char reason[96];
    char *text = rl_schedule_event(s, start, errstr, errstr_size);
    struct rl_event *ev;

    if (!text)
        return RL_ERR_INVALID;
    rl_event_limits_default(&limits);
    limits.max_bytes = max_event_bytes;
    ev = rl_event_parse(text, strlen(text), &limits, reason, sizeof(reason),
                        errstr, errstr_size);
    free(text);
    if (!ev)
        return RL_ERR_INVALID;
    w->start = start;
    memcpy(w->run_id, ev->run_id, RL_HEX_SIZE);
    memcpy(w->fingerprint, ev->fingerprint, RL_HEX_SIZE);
    w->state = RL_WINDOW_MISSING;
    rl_event_destroy(ev);
    return 0;
}

int
rl_schedule_windows_check(struct rl_db *db, const struct rl_schedule *s,
                          const int64_t *starts, size_t n,
                          size_t max_event_bytes,
                          struct rl_schedule_window *out, char *errstr,
                          size_t errstr_size)
{
    for (size_t base = 0; base < n; base += AUDIT_CHUNK) {
        size_t k = n - base < AUDIT_CHUNK ? n - base : AUDIT_CHUNK;
        struct rl_schedule_window *w = out + base;
        const char *ids[AUDIT_CHUNK];
        char *fps[AUDIT_CHUNK];
        int err;

        for (size_t i = 0; i < k; i++) {
            err = window_identity(s, starts[base + i], max_event_bytes, &w[i],
                                  errstr, errstr_size);
            if (err)
                return err;
            ids[i] = w[i].run_id;
        }
        err = rl_db_runs_fingerprints(db, ids, k, fps, errstr, errstr_size);
        if (err)
            return err;
        for (size_t i = 0; i < k; i++) {
            if (!fps[i])
                w[i].state = RL_WINDOW_MISSING;
            else if (strcmp(fps[i], w[i].fingerprint) != 0)
                w[i].state = RL_WINDOW_CONFLICT;
            else
                w[i].state = RL_WINDOW_RUN;
            free(fps[i]);
        }
    }
    return 0;
}

int
rl_schedule_gaps(struct rl_db *db, const struct rl_schedule *s, int64_t from,
                 int64_t to, size_t max_windows, size_t max_event_bytes,
                 struct rl_schedule_gap **gaps, size_t *n, char *errstr,
                 size_t errstr_size)
{
    int64_t *pauses = NULL, *starts = NULL;
    size_t npauses = 0, nstarts, ngaps = 0;
    struct rl_schedule_gap *out = NULL;
    struct rl_schedule_window *chunk = NULL;
    int err;

    *gaps = NULL;
    *n = 0;
    err = rl_db_schedule_pauses(db, s->name, &pauses, &npauses, errstr,
                                errstr_size);
    if (err)
        return err;
    starts = malloc((max_windows ? max_windows : 1) * sizeof(*starts));
    chunk = malloc(AUDIT_CHUNK * sizeof(*chunk));
    if (!starts || !chunk) {
        err = RL_ERR_NOMEM;
        goto nomem;
    }
    nstarts =
        rl_schedule_windows(s, from, to, pauses, npauses, starts, max_windows);
    for (size_t base = 0; base < nstarts; base += AUDIT_CHUNK) {
        size_t k = nstarts - base < AUDIT_CHUNK ? nstarts - base : AUDIT_CHUNK;

        err =
            rl_schedule_windows_check(db, s, starts + base, k, max_event_bytes,
                                      chunk, errstr, errstr_size);
        if (err)
            goto done;
        for (size_t i = 0; i < k; i++) {
            if (chunk[i].state == RL_WINDOW_RUN)
                continue;
            if ((ngaps & (ngaps + 1)) == 0 || !out) {
                struct rl_schedule_gap *grown =
                    realloc(out, (2 * ngaps + 1) * sizeof(*out));

                if (!grown) {
                    err = RL_ERR_NOMEM;
                    goto nomem;
                }
                out = grown;
            }
            out[ngaps].start = chunk[i].start;
            memcpy(out[ngaps].run_id, chunk[i].run_id, RL_HEX_SIZE);
            memcpy(out[ngaps].fingerprint, chunk[i].fingerprint, RL_HEX_SIZE);
            out[ngaps].conflict = chunk[i].state == RL_WINDOW_CONFLICT;
            ngaps++;
        }
    }
    err = 0;
    goto done;
nomem:
    rl_set_err(errstr, errstr_size,
               "could not audit schedule %s: out of "
               "memory",
               s->name);
done:
    free(pauses);
    free(starts);
    free(chunk);
    if (err) {
        free(out);
        return err;
    }
    *gaps = out;
    *n = ngaps;
    return 0;
}
