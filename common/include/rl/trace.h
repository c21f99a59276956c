#ifndef RL_TRACE_H
#define RL_TRACE_H

/* W3C Trace Context for runs: the `traceparent` a schedule event carries,
 * the ids of a run's spans, and the header values sent on. A run whose
 * event had no traceparent gets a trace id derived from its run_id, so
 * every run is traceable and every worker and retry agrees on it without
 * storing anything. @locality any thread: no shared state. */

#include <stddef.h>
#include <stdint.h>

#define RL_TRACE_ID_SIZE 33      /* 32 hex + NUL */
#define RL_TRACE_SPAN_ID_SIZE 17 /* 16 hex + NUL */
#define RL_TRACEPARENT_SIZE 56   /* "00-" 32 "-" 16 "-" 2, + NUL */
#define RL_TRACE_FLAG_SAMPLED 0x01

/* A parsed traceparent: version 00 only. */
struct rl_trace_ctx {
    char trace_id[RL_TRACE_ID_SIZE];       /* lowercase hex */
    char parent_id[RL_TRACE_SPAN_ID_SIZE]; /* "" when the run is a root */
    unsigned flags;
};

/* Parses a traceparent header value (len bytes, need not be
 * NUL-terminated): version 00, 32 lowercase hex trace id not all zero,
 * 16 lowercase hex parent id not all zero, 2 hex flags, nothing after.
 * Returns 0 and fills ctx, or RL_ERR_INVALID with the reason in errstr. */
int rl_trace_parse(const char *value, size_t len, struct rl_trace_ctx *ctx,
                   char *errstr, size_t errstr_size);

/* The trace of a run: the stored traceparent when there is one (NULL or
 * "" for none, or one that does not parse), else trace id = the first 32
 * hex digits of run_id, no parent, sampled. */
void rl_trace_for_run(const char *run_id, const char *traceparent,
                      struct rl_trace_ctx *ctx);

/* The span id of the run span of run_id's claim with lease epoch epoch:
 * 16 hex digits of SHA-256("run-span:" run_id ":" epoch), never all zero.
 * Deterministic so that the relay, which knows the epoch that completed
 * the run, can name it as the notification's parent. */
void rl_trace_run_span_id(const char *run_id, int64_t epoch,
                          char out[RL_TRACE_SPAN_ID_SIZE]);

/* A new random span id (16 hex, never all zero). */
void rl_trace_new_span_id(char out[RL_TRACE_SPAN_ID_SIZE]);

/* Writes "00-<trace_id>-<span_id>-<flags>" into out. */
void rl_trace_format(const char *trace_id, const char *span_id, unsigned flags,
                     char out[RL_TRACEPARENT_SIZE]);

#endif /* RL_TRACE_H */
