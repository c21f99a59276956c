#ifndef RL_TEST_SCHEMA_H
#define RL_TEST_SCHEMA_H

#include <stddef.h>

/* The values a CHECK constraint of schema/current.sql allows (its
 * ARRAY['a'::text, ...]), in their order, for the tests that hold a
 * string table of the code against the schema. Reads the file under
 * RL_SOURCE_DIR (the working directory when unset); a constraint not
 * found, or a value longer than 31 characters, fails the test at once.
 * Returns how many values it put in names (at most max). */
size_t rltest_schema_values(const char *constraint, char names[][32],
                            size_t max);

#endif /* RL_TEST_SCHEMA_H */
