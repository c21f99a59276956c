#include "table.h"

#include <stdio.h>
#include <string.h>

#include "helpers.h"

#define JOIN " / "
#define MAX_PARTS 4

/* Prints one cell: the column's members of row joined by JOIN, padded as
 * the column says. */
static void
print_cell(const struct rl_cli_column *col, const char *missing,
           const cJSON *row)
{
    const char *text[MAX_PARTS];
    char buf[MAX_PARTS][64];
    const char *name = col->member;
    size_t nparts = 0, len = 0;
    int pad;

    while (nparts < MAX_PARTS) {
        const char *end = strstr(name, JOIN);
        size_t n = end ? (size_t)(end - name) : strlen(name);
        char member[64];

        snprintf(member, sizeof(member), "%.*s", (int)n, name);
        text[nparts] = rl_cli_json_text(row, member, missing, buf[nparts],
                                        sizeof(buf[nparts]));
        len += strlen(text[nparts]) + (nparts ? strlen(JOIN) : 0);
        nparts++;
        if (!end)
            break;
        name = end + strlen(JOIN);
    }
    pad = (col->width < 0 ? -col->width : col->width) - (int)len;
    if (col->width > 0 && pad > 0)
        printf("%*s", pad, "");
    for (size_t i = 0; i < nparts; i++)
        printf("%s%s", i ? JOIN : "", text[i]);
    if (col->width < 0 && pad > 0)
        printf("%*s", pad, "");
}

/* Prints the heading line when row is NULL, else the row's line. */
static void
print_line(const struct rl_cli_table *table, const cJSON *row)
{
    fputs(table->indent, stdout);
    for (size_t i = 0; i < table->ncolumns; i++) {
        const struct rl_cli_column *col = &table->columns[i];

        if (i > 0)
            fputs(table->gap, stdout);
        if (row)
            print_cell(col, table->missing, row);
        else
            printf("%*s", col->width, col->heading);
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

void
rl_cli_table_print_per_job(const struct rl_cli_table *table, const char *json,
                           int as_json)
{
    cJSON *rows;
    cJSON *row;

    if (as_json) {
        printf("%s\n", json);
        return;
    }
    rows = cJSON_Parse(json);

    cJSON_ArrayForEach(row, rows)
    {
        const cJSON *job = cJSON_GetObjectItemCaseSensitive(row, "job");

        if (!cJSON_IsString(job) || !*job->valuestring) {
            cJSON_DeleteItemFromObjectCaseSensitive(row, "job");
            cJSON_AddStringToObject(row, "job", "(all)");
        }
    }
    rl_cli_table_print(table, rows);
    cJSON_Delete(rows);
}
