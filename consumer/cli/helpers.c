#include "helpers.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/err.h"
#include "rl/log.h"

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
rl_cli_action(const char *command, const char *usage, int argc, char **argv,
              const char *const *actions, const char **action)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? RL_EXIT_USAGE : RL_EXIT_OK;
    }
    for (; *actions; actions++) {
        if (strcmp(argv[1], *actions) == 0) {
            *action = *actions;
            return -1;
        }
    }
    return rl_cli_usage_error(command, "unknown action \"%s\"", argv[1]);
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

int
rl_cli_error(const char *command, int err, const char *errstr)
{
    fprintf(stderr, "runledger %s: %s\n", command, errstr);
    return rl_cli_exit_code(err);
}

void
rl_cli_opts_begin(void)
{
    /* Errors are reported in one line with the command's name; getopt's
     * own would be prefixed with argv[0] alone. */
    opterr = 0;
    optind = 1;
}

int
rl_cli_next_opt(const struct rl_cli_opts *opts, int argc, char **argv, int *rc)
{
    int opt = getopt_long(argc, argv, ":h", opts->options, NULL);
    const char *arg = argv[optind - 1];

    switch (opt) {
    case -1:
        if (opts->operands || optind >= argc)
            return 0;
        *rc = rl_cli_usage_error(opts->command, "unexpected argument \"%s\"",
                                 argv[optind]);
        return -1;
    case 'h':
        fputs(opts->usage, stdout);
        *rc = RL_EXIT_OK;
        return -1;
    case ':':
        if (opts->name_errors)
            *rc = rl_cli_usage_error(opts->command, "%s needs a value", arg);
        else
            *rc = rl_cli_usage_error(opts->command, "bad option %s", arg);
        return -1;
    case '?':
        if (!opts->name_errors)
            *rc = rl_cli_usage_error(opts->command, "bad option %s", arg);
        else if (optopt)
            *rc =
                rl_cli_usage_error(opts->command, "unknown option -%c", optopt);
        else
            *rc = rl_cli_usage_error(opts->command, "unknown option %s", arg);
        return -1;
    default:
        return opt;
    }
}

int
rl_cli_config_load(const char *command, struct rl_config **cfg)
{
    char errstr[1024];

    *cfg = rl_config_load(errstr, sizeof(errstr));
    if (!*cfg)
        return rl_cli_error(command, RL_ERR_INVALID, errstr);
    return RL_EXIT_OK;
}

void
rl_cli_log_init(const struct rl_config *cfg)
{
    int level = rl_log_level_parse(cfg->log_level);

    rl_log_set_level(level >= 0 ? level : RL_LOG_INFO);
}

int
rl_cli_db_open(const char *command, struct rl_db **db)
{
    struct rl_config *cfg;
    char errstr[1024];
    int rc;

    *db = NULL;
    rc = rl_cli_config_load(command, &cfg);
    if (rc != RL_EXIT_OK)
        return rc;
    *db = rl_db_connect(cfg->database_url, errstr, sizeof(errstr));
    rl_config_destroy(cfg);
    if (!*db)
        return rl_cli_error(command, RL_ERR_DB, errstr);
    return RL_EXIT_OK;
}

const char *
rl_cli_json_text(const cJSON *obj, const char *name, const char *missing,
                 char *buf, size_t size)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
    char *json;

    if (!item || cJSON_IsNull(item))
        return missing;
    if (cJSON_IsString(item))
        return item->valuestring;
    if (cJSON_IsBool(item))
        return cJSON_IsTrue(item) ? "yes" : "no";
    if (cJSON_IsNumber(item)) {
        snprintf(buf, size, "%.0f", item->valuedouble);
        return buf;
    }
    json = cJSON_PrintUnformatted(item);
    snprintf(buf, size, "%s", json ? json : "?");
    cJSON_free(json);
    return buf;
}
