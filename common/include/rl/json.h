#ifndef RL_JSON_H
#define RL_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Canonical JSON, the form a request fingerprint is computed over:
 * - objects: members sorted by key, compared as raw UTF-8 bytes (which is
 *   code point order); a duplicate key is an error;
 * - no whitespace outside strings;
 * - strings: UTF-8 as is, except '"' and '\\' escaped, the short escapes
 *   \b \f \n \r \t, and any other byte below 0x20 as \u00xx (lowercase hex);
 *   '/' and non-ASCII are never escaped;
 * - numbers: a value that is integral and within +-2^53 is written as an
 *   integer without exponent or fraction (so 1, 1.0 and 1e0 are equal);
 *   others use the shortest %.*g form (up to 17 digits) that reads back to
 *   the same double; NaN and infinities are an error;
 * - true, false, null as such.
 * Semantically equal requests therefore hash equal. */

/* Returns the canonical text of item (malloc'd; free with free()), or NULL
 * with errstr set. */
char *rl_json_canonical(const cJSON *item, char *errstr, size_t errstr_size);

/* item as compact JSON text in plain malloc'd memory (free with free(),
 * unlike cJSON_PrintUnformatted's), or NULL when out of memory. */
char *rl_json_print(const cJSON *item);

#endif /* RL_JSON_H */
