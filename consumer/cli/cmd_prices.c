/* `runledger prices`: what each model's tokens cost, live and in a batch,
 * for `runledger report --cost` (schema/062_model_prices.sql). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "helpers.h"
#include "rl/db_conn.h"
#include "rl/db_prices.h"
#include "table.h"

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger prices set --model M --input X --output Y\n"
"                            [--batch-discount 0.5] [--actor NAME]\n"
"       runledger prices show [--json]\n"
"       runledger prices remove --model M\n"
"\n"
"  set     the price of a million input (prompt) and output (completion)\n"
"          tokens of model M, in any currency; --batch-discount D (0..1,\n"
"          default 0.5): the part of that price a batch does not charge\n"
"  show    every model's price\n"
"  remove  drop the model's price (report --cost shows no cost for it)\n"
"\n"
"Exit status: 0 ok; 1 PostgreSQL failed; 2 bad usage; 3 no such price.\n";
/* clang-format on */

static const struct rl_cli_column price_columns[] = {
    {"MODEL", "model", -24},
    {"INPUT_PER_M", "input_per_mtok", 12},
    {"OUTPUT_PER_M", "output_per_mtok", 12},
    {"BATCH_DISCOUNT", "batch_discount", 14},
    {"UPDATED_BY", "updated_by", -12}};

static const struct rl_cli_table price_table = {"", " ", "-", price_columns,
                                                RL_CLI_NCOLUMNS(price_columns)};

/* A decimal number within [min, max]; returns 0 when it is one. */
static int
check_number(const char *text, double min, double max)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(text, &end);
    if (errno || end == text || *end || v < min || v > max ||
        strspn(text, "0123456789.") != strlen(text))
        return -1;
    return 0;
}

int
rl_cmd_prices(int argc, char **argv)
{
    static const char *const actions[] = {"set", "show", "remove", NULL};
    enum {
        OPT_MODEL = 1,
        OPT_INPUT,
        OPT_OUTPUT,
        OPT_DISCOUNT,
        OPT_ACTOR,
        OPT_JSON
    };
    static const struct option options[] = {
        {"model", required_argument, NULL, OPT_MODEL},
        {"input", required_argument, NULL, OPT_INPUT},
        {"output", required_argument, NULL, OPT_OUTPUT},
        {"batch-discount", required_argument, NULL, OPT_DISCOUNT},
        {"actor", required_argument, NULL, OPT_ACTOR},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const struct rl_cli_opts opts = {
        .command = "prices",
        .usage = usage_text,
        .options = options,
        .name_errors = 1,
    };
    const char *model = NULL, *input = NULL, *output = NULL, *discount = NULL;
    const char *actor = getenv("USER"), *action;
    char errstr[512], what[32], *json = NULL;
    struct rl_db *db;
    int as_json = 0, opt, err, rc;

    rc = rl_cli_action("prices", usage_text, argc, argv, actions, &action);
    if (rc >= 0)
        return rc;
    rl_cli_opts_begin();
    while ((opt = rl_cli_next_opt(&opts, argc - 1, argv + 1, &rc)) > 0) {
        switch (opt) {
        case OPT_MODEL:
            model = optarg;
            break;
        case OPT_INPUT:
            input = optarg;
            break;
        case OPT_OUTPUT:
            output = optarg;
            break;
        case OPT_DISCOUNT:
            discount = optarg;
            break;
        case OPT_ACTOR:
            actor = optarg;
            break;
        case OPT_JSON:
            as_json = 1;
            break;
        }
    }
    if (opt < 0)
        return rc;
    if (strcmp(action, "show") != 0 && (!model || !*model))
        return rl_cli_usage_error("prices", "%s needs --model", action);
    if (strcmp(action, "set") == 0) {
        if (!input || check_number(input, 0, 1e9) != 0)
            return rl_cli_usage_error(
                "prices", "--input must be a price >= 0 per million tokens");
        if (!output || check_number(output, 0, 1e9) != 0)
            return rl_cli_usage_error(
                "prices", "--output must be a price >= 0 per million tokens");
        if (discount && check_number(discount, 0, 1) != 0)
            return rl_cli_usage_error("prices",
                                      "--batch-discount must be within 0..1");
    }

    rc = rl_cli_db_open("prices", &db);
    if (rc != RL_EXIT_OK)
        return rc;
    if (strcmp(action, "set") == 0) {
        err = rl_db_price_set(db, model, input, output, discount, actor, errstr,
                              sizeof(errstr));
        if (!err)
            printf("price of model %s: %s input, %s output per million "
                   "tokens; a batch %s cheaper\n",
                   model, input, output, discount ? discount : "0.5");
    } else if (strcmp(action, "remove") == 0) {
        err = rl_db_price_remove(db, model, errstr, sizeof(errstr));
        if (!err)
            printf("price of model %s removed\n", model);
    } else {
        err = rl_db_prices_json(db, &json, errstr, sizeof(errstr));
    }
    rl_db_destroy(db);
    if (err) {
        snprintf(what, sizeof(what), "prices %s", action);
        return rl_cli_error(what, err, errstr);
    }
    if (json)
        rl_cli_table_print_json(&price_table, json, as_json);
    free(json);
    return RL_EXIT_OK;
}
