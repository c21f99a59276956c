#ifndef RL_LOG_H
#define RL_LOG_H

#include <stdint.h>

/* Structured logging: one JSON object per line on stderr.
 * @locality any thread; lines from concurrent threads never interleave. */

enum rl_log_level { RL_LOG_DEBUG, RL_LOG_INFO, RL_LOG_WARN, RL_LOG_ERROR };

/* What a line is about. Unknown fields stay NULL (strings) or -1 (numbers)
 * and are left out of the line. Borrowed: nothing is freed. */
struct rl_log_ctx {
    const char *run_id;
    const char *tenant;
    const char *job;
    int attempt;
    int64_t lease_epoch;
    const char *topic;
    int32_t partition;
    int64_t offset;
    const char *trace_id; /* the run's W3C trace id (32 hex) */
    const char *span_id;  /* the span the line happens in (16 hex) */
};

#define RL_LOG_CTX_INIT                                                        \
    {                                                                          \
        NULL, NULL, NULL, -1, -1, NULL, -1, -1, NULL, NULL                     \
    }

/* Names the calling thread (at most 15 characters kept), so that top -H,
 * perf and /proc/PID/task tell the service's threads apart; librdkafka
 * names its own (rdk:). */
void rl_thread_name(const char *name);

/* Lines below level are dropped. Default RL_LOG_INFO. */
void rl_log_set_level(enum rl_log_level level);

/* Parses "debug", "info", "warn" or "error"; returns -1 when unknown. */
int rl_log_level_parse(const char *name);

/* Writes one line. ctx may be NULL. The message is formatted with printf
 * rules; never pass secrets in it. */
void rl_log(enum rl_log_level level, const struct rl_log_ctx *ctx,
            const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define rl_log_info(ctx, ...) rl_log(RL_LOG_INFO, ctx, __VA_ARGS__)
#define rl_log_warn(ctx, ...) rl_log(RL_LOG_WARN, ctx, __VA_ARGS__)
#define rl_log_error(ctx, ...) rl_log(RL_LOG_ERROR, ctx, __VA_ARGS__)
#define rl_log_debug(ctx, ...) rl_log(RL_LOG_DEBUG, ctx, __VA_ARGS__)

#endif /* RL_LOG_H */
