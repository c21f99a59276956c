#include "rl/log.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static enum rl_log_level log_level = RL_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
rl_thread_name(const char *name)
{
    /* PR_SET_NAME names the calling thread; pthread_setname_np would need
     * _GNU_SOURCE. A failure only leaves the inherited name. */
    (void)prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

void
rl_log_set_level(enum rl_log_level level)
{
    log_level = level;
}

int
rl_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0)
            return i;
    }
    return -1;
}

void
rl_log(enum rl_log_level level, const struct rl_log_ctx *ctx, const char *fmt,
       ...)
{
    char msg[2048];
    char ts[64];
    struct timespec now;
    struct tm tm;
    va_list ap;
    cJSON *line;
    char *text;

    if (level < log_level)
        return;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);

    line = cJSON_CreateObject();
    if (!line)
        return;
    cJSON_AddStringToObject(line, "time", ts);
    cJSON_AddStringToObject(line, "level", level_names[level]);
    cJSON_AddStringToObject(line, "msg", msg);
    if (ctx) {
        if (ctx->run_id)
            cJSON_AddStringToObject(line, "run_id", ctx->run_id);
        if (ctx->tenant)
            cJSON_AddStringToObject(line, "tenant", ctx->tenant);
        if (ctx->job)
            cJSON_AddStringToObject(line, "job", ctx->job);
        if (ctx->attempt >= 0)
            cJSON_AddNumberToObject(line, "attempt", ctx->attempt);
        if (ctx->lease_epoch >= 0)
            cJSON_AddNumberToObject(line, "lease_epoch",
                                    (double)ctx->lease_epoch);
        if (ctx->topic)
            cJSON_AddStringToObject(line, "topic", ctx->topic);
        if (ctx->partition >= 0)
            cJSON_AddNumberToObject(line, "partition", ctx->partition);
        if (ctx->offset >= 0)
            cJSON_AddNumberToObject(line, "offset", (double)ctx->offset);
        if (ctx->trace_id && *ctx->trace_id)
            cJSON_AddStringToObject(line, "trace_id", ctx->trace_id);
        if (ctx->span_id && *ctx->span_id)
            cJSON_AddStringToObject(line, "span_id", ctx->span_id);
    }
    text = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    if (!text)
        return;

    /* One locked write per line: concurrent threads must never produce a
     * line that a log shipper cannot parse. */
    pthread_mutex_lock(&log_lock);
    fputs(text, stderr);
    fputc('\n', stderr);
    fflush(stderr);
    pthread_mutex_unlock(&log_lock);
    cJSON_free(text);
}
