#include "helpers.h"

#include <stdarg.h>
#include <stdio.h>

#include "commands.h"
#include "rl/config.h"
#include "rl/err.h"

int
rl_cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "runledger %s: ", command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see runledger %s --help)\n", command);
    return RL_EXIT_USAGE;
}

int
rl_cli_exit_code(int err)
{
    switch (err) {
    case 0:
        return RL_EXIT_OK;
    case RL_ERR_NOTFOUND:
    case RL_ERR_CONFLICT:
        return RL_EXIT_REFUSED;
    case RL_ERR_INVALID:
        return RL_EXIT_USAGE;
    default:
        return RL_EXIT_FAILURE;
    }
}

struct rl_db *
rl_cli_open_ledger(char *errstr, size_t errstr_size, int *rc)
{
    struct rl_config *cfg = rl_config_load(errstr, errstr_size);
    struct rl_db *db;

    if (!cfg) {
        *rc = RL_EXIT_USAGE;
        return NULL;
    }
    db = rl_db_connect(cfg->database_url, errstr, errstr_size);
    rl_config_destroy(cfg);
    *rc = db ? RL_EXIT_OK : RL_EXIT_FAILURE;
    return db;
}

const char *
rl_cli_json_text(const cJSON *obj, const char *name, const char *missing,
                 char *buf, size_t size)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);

    if (cJSON_IsString(item))
        return item->valuestring;
    if (!cJSON_IsNumber(item))
        return missing;
    snprintf(buf, size, "%.0f", item->valuedouble);
    return buf;
}
