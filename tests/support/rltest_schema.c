/* rltest_schema.h: a CHECK constraint's values as schema/current.sql
 * prints them. */
#include "rltest_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rltest.h"

size_t
rltest_schema_values(const char *constraint, char names[][32], size_t max)
{
    const char *src = getenv("RL_SOURCE_DIR");
    char path[1024], line[4096], needle[128];
    const char *p = NULL;
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/schema/current.sql", src ? src : ".");
    snprintf(needle, sizeof(needle), "CONSTRAINT %s ", constraint);
    f = fopen(path, "r");
    RL_REQUIRE(f);
    while (!p && fgets(line, sizeof(line), f))
        if (strstr(line, needle))
            p = strstr(line, "ARRAY[");
    fclose(f);
    RL_REQUIRE(p);
    while (n < max && (p = strchr(p, '\'')) != NULL) {
        const char *end = strchr(p + 1, '\'');

        RL_REQUIRE(end && (size_t)(end - p - 1) < sizeof(names[0]));
        memcpy(names[n], p + 1, (size_t)(end - p - 1));
        names[n][end - p - 1] = '\0';
        n++;
        p = end + 1;
    }
    return n;
}
