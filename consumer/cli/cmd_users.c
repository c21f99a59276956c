/* `runledger users`: the people who sign in to the web console
 * (`runledger console`, schema/040_console.sql) and their roles. The
 * sign-in token is printed once; the ledger keeps only its SHA-256. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/db_conn.h"
#include "rl/db_console.h"
#include "rl/err.h"
#include "rl/runid.h"
#include "rl/token.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger users add NAME [--role viewer|approver|operator]\n"
"                          [--tenants T1,T2] [--actor NAME]\n"
"       runledger users list [--json]\n"
"       runledger users revoke NAME [--actor NAME]\n"
"\n"
"  add     a console user (role viewer by default) and print its one-time\n"
"          sign-in token, alone on the last line of stdout; the ledger\n"
"          keeps only its SHA-256, so a lost token means revoke and add.\n"
"          Adding a revoked user again gives it a new role and token.\n"
"          --tenants limits every page, list and report of the console\n"
"          to those tenants (others' runs are not found); default: all.\n"
"          The audit trail records who added it (--actor, default $USER).\n"
"  list    the users, their roles and their open sessions\n"
"  revoke  the user can no longer sign in and its sessions end; the audit\n"
"          trail records it (--actor defaults to $USER)\n"
"\n"
"Roles: viewer reads; approver also decides the proposals of the tenants\n"
"(and channels) `runledger approvers` lists it for; operator also acts on\n"
"runs and dead letters. NAME: letters, digits and . _ @ -, at most 64.\n"
"The ledger is DATABASE_URL (see `runledger config`).\n"
"Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage; 3 the user exists\n"
"(add) or there is no such user (revoke).\n";
/* clang-format on */

static const struct rl_cli_column user_columns[] = {
    {"NAME", "name", -24},
    {"ROLE", "role", -9},
    {"SESSIONS", "sessions", 8},
    {"CREATED_AT", "created_at", -32},
    {"REVOKED_AT", "revoked_at", 0}};

static const struct rl_cli_table user_table = {"", "  ", "-", user_columns,
                                               RL_CLI_NCOLUMNS(user_columns)};

static int
role_known(const char *role)
{
    return strcmp(role, "viewer") == 0 || strcmp(role, "approver") == 0 ||
           strcmp(role, "operator") == 0;
}

/* The console's rule for names: they appear in sign-in tokens
 * ("NAME.SECRET") and in the audit trail. */
static int
name_valid(const char *name)
{
    size_t len = strlen(name);

    if (len == 0 || len > 64 || name[0] == '.' || name[0] == '_' ||
        name[0] == '@' || name[0] == '-')
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '@' ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* "T1,T2" as the JSON array ["T1","T2"] (cJSON_free), or NULL when the
 * list is empty or names an empty tenant. */
static char *
tenants_to_json(const char *list)
{
    cJSON *arr = cJSON_CreateArray();
    char *copy = strdup(list), *save = NULL, *tok, *out = NULL;
    int n = 0, bad = !arr || !copy;

    for (tok = bad ? NULL : strtok_r(copy, ",", &save); tok && !bad;
         tok = strtok_r(NULL, ",", &save)) {
        if (!*tok || !cJSON_AddItemToArray(arr, cJSON_CreateString(tok)))
            bad = 1;
        n++;
    }
    if (!bad && n > 0 && strstr(list, ",,") == NULL && list[0] != ',' &&
        list[strlen(list) - 1] != ',')
        out = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    free(copy);
    return out;
}

static int
users_add(struct rl_db *db, const char *name, const char *role,
          const char *tenants_json, const char *actor)
{
    char secret[RL_TOKEN_HEX_SIZE], token[64 + 1 + RL_TOKEN_HEX_SIZE];
    char sum[RL_HEX_SIZE], errstr[512];
    int err;

    if (rl_token_new(secret) != 0) {
        fprintf(stderr, "runledger users add: could not draw a random "
                        "token: the CSPRNG failed\n");
        return RL_EXIT_FAILURE;
    }
    snprintf(token, sizeof(token), "%s.%s", name, secret);
    OPENSSL_cleanse(secret, sizeof(secret));
    if (rl_sha256_hex(token, strlen(token), sum) != 0) {
        OPENSSL_cleanse(token, sizeof(token));
        fprintf(stderr, "runledger users add: could not hash the token\n");
        return RL_EXIT_FAILURE;
    }
    err = rl_db_console_user_add(db, name, role, sum, tenants_json, actor,
                                 errstr, sizeof(errstr));
    if (err) {
        OPENSSL_cleanse(token, sizeof(token));
        return rl_cli_error("users add", err, errstr);
    }
    printf("console user %s added with role %s; its sign-in token (shown "
           "once):\n%s\n",
           name, role, token);
    OPENSSL_cleanse(token, sizeof(token));
    return RL_EXIT_OK;
}

int
rl_cmd_users(int argc, char **argv)
{
    enum { OPT_ROLE = 1, OPT_ACTOR, OPT_JSON, OPT_TENANTS };
    static const struct option options[] = {
        {"role", required_argument, NULL, OPT_ROLE},
        {"tenants", required_argument, NULL, OPT_TENANTS},
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "users",
        .usage = usage_text,
        .options = options,
        .operands = 1,
    };
    const char *role = "viewer", *actor = NULL, *name = NULL, *verb;
    const char *tenants = NULL;
    char *tenants_json = NULL;
    struct rl_db *db;
    char errstr[512], *json = NULL;
    int as_json = 0, err = 0, opt, rc;

    if (argc < 2) {
        fputs(usage_text, stderr);
        return RL_EXIT_USAGE;
    }
    verb = argv[1];
    if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0 ||
        strcmp(verb, "help") == 0) {
        fputs(usage_text, stdout);
        return RL_EXIT_OK;
    }
    if (strcmp(verb, "add") != 0 && strcmp(verb, "list") != 0 &&
        strcmp(verb, "revoke") != 0)
        return rl_cli_usage_error("users", "unknown users command \"%s\"",
                                  verb);
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc - 1, argv + 1, &rc)) > 0) {
        switch (opt) {
        case OPT_ROLE:
            role = optarg;
            break;
        case OPT_ACTOR:
            actor = optarg;
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        case OPT_TENANTS:
            tenants = optarg;
            break;
        }
    }
    if (opt < 0)
        return rc;
    /* optind indexes argv + 1. */
    if (optind < argc - 1)
        name = argv[1 + optind];
    if (optind + 1 < argc - 1)
        return rl_cli_usage_error("users", "unexpected argument \"%s\"",
                                  argv[2 + optind]);
    if (strcmp(verb, "list") == 0) {
        if (name)
            return rl_cli_usage_error("users", "users list takes no NAME");
    } else if (!name) {
        return rl_cli_usage_error("users", "users %s needs NAME", verb);
    } else if (!name_valid(name)) {
        return rl_cli_usage_error(
            "users",
            "user name \"%s\" is not valid: letters, digits and . _ @ -, "
            "at most 64, starting with a letter or digit",
            name);
    }
    if (!role_known(role))
        return rl_cli_usage_error(
            "users", "--role must be viewer, approver or operator, not \"%s\"",
            role);
    if (!actor || !*actor)
        actor = getenv("USER");
    if (!actor || !*actor)
        actor = "cli";

    rc = rl_cli_db_open("users", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    if (strcmp(verb, "add") == 0) {
        if (tenants) {
            tenants_json = tenants_to_json(tenants);
            if (!tenants_json) {
                rl_db_destroy(db);
                return rl_cli_usage_error(
                    "users",
                    "--tenants must be a list of tenant names, not \"%s\"",
                    tenants);
            }
        }
        rc = users_add(db, name, role, tenants_json, actor);
        cJSON_free(tenants_json);
        rl_db_destroy(db);
        return rc;
    }
    if (strcmp(verb, "revoke") == 0)
        err =
            rl_db_console_user_revoke(db, name, actor, errstr, sizeof(errstr));
    else
        err = rl_db_console_users_json(db, &json, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err)
        return rl_cli_error(strcmp(verb, "revoke") == 0 ? "users revoke"
                                                        : "users list",
                            err, errstr);
    if (strcmp(verb, "revoke") == 0)
        printf("console user %s revoked; its sessions are closed\n", name);
    else
        rl_cli_table_print_json(&user_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}
