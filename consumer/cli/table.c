#include "table.h"

#include <stdio.h>

#include "helpers.h"

/* Prints one line: the heading of each column when row is NULL, else the
 * row's members. */
static void
print_line(const struct rl_cli_table *table, const cJSON *row)
{
    if (table->indent)
        fputs(table->indent, stdout);
    for (size_t i = 0; i < table->ncolumns; i++) {
        const struct rl_cli_column *col = &table->columns[i];
        const char *missing = col->missing ? col->missing : table->missing;
        const char *text = col->heading;
        const char *after = col->after;
        char buf[256];

        if (row) {
            text =
                rl_cli_json_text(row, col->member, missing, buf, sizeof(buf));
            if (col->empty_is_missing && !*text)
                text = missing;
        }
        if (!after)
            after = i + 1 < table->ncolumns ? table->gap : "";
        printf("%*s%s", col->width, text, after);
    }
    putchar('\n');
}

void
rl_cli_table_print(const struct rl_cli_table *table, const cJSON *rows)
{
    const cJSON *row;

    print_line(table, NULL);
    cJSON_ArrayForEach(row, rows)
    {
        print_line(table, row);
    }
}

void
rl_cli_table_print_json(const struct rl_cli_table *table, const char *json,
                        int as_json)
{
    cJSON *rows;

    if (as_json) {
        printf("%s\n", json);
        return;
    }
    rows = cJSON_Parse(json);
    rl_cli_table_print(table, rows);
    cJSON_Delete(rows);
}
