#ifndef RL_CLI_TABLE_H
#define RL_CLI_TABLE_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* The tables the operator commands print: one heading line, then one line
 * per row of a JSON array of objects, each cell a member of the row as
 * rl_cli_json_text shows it. */

/* One column: its heading, and the member of each row it shows, or
 * several joined by " / " ("job / tenant / version": the three members
 * with " / " between them). width is a printf field width, as in "%*s":
 * negative pads on the right (text left-aligned), positive on the left,
 * 0 not at all. */
struct rl_cli_column {
    const char *heading;
    const char *member;
    int width;
};

/* A table: the text before each line, the gap between two columns, the
 * text of an absent or null member, and the columns. */
struct rl_cli_table {
    const char *indent;
    const char *gap;
    const char *missing;
    const struct rl_cli_column *columns;
    size_t ncolumns;
};

/* The ncolumns of a table whose columns are the array cols. */
#define RL_CLI_NCOLUMNS(cols) (sizeof(cols) / sizeof((cols)[0]))

/* Prints the heading line and one line per element of rows (a JSON array;
 * NULL prints the heading alone) on stdout. */
void rl_cli_table_print(const struct rl_cli_table *table, const cJSON *rows);

/* Prints json, a JSON array of row objects as the ledger returns it: as
 * it is on one line when as_json, else as the table. */
void rl_cli_table_print_json(const struct rl_cli_table *table, const char *json,
                             int as_json);

/* rl_cli_table_print_json for the rows of a tenant's settings per job (its
 * budgets, its limits): in the table, the row of the tenant itself, whose
 * job is empty because it covers all of them, shows job "(all)". */
void rl_cli_table_print_per_job(const struct rl_cli_table *table,
                                const char *json, int as_json);

#endif /* RL_CLI_TABLE_H */
