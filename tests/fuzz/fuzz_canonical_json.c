/* libFuzzer target: rl_json_canonical() on whatever cJSON parses. The
 * canonical text is valid JSON, and it is a fixed point: parsing it and
 * writing it again gives the same bytes, so a fingerprint never changes
 * when a stored request is read back and hashed again. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rl/err.h"
#include "rl/json.h"
#include "rl/runid.h"
#include "rl/testing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char errstr[256] = "";
    char fingerprint[RL_HEX_SIZE], hex[RL_HEX_SIZE];
    char *text, *first = NULL, *second = NULL;
    cJSON *root = NULL, *reparsed = NULL;
    int rc;

    /* As event.c does: cJSON gets a NUL-terminated copy. */
    text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    root = cJSON_ParseWithLength(text, size);
    if (!root)
        goto done;

    first = rl_json_canonical(root, errstr, sizeof(errstr));
    rc = rl_json_fingerprint(root, fingerprint, errstr, sizeof(errstr));
    if (!first) {
        /* Refused (duplicate key, non-finite number, too deep): with a
         * message, and the fingerprint refuses too. */
        FUZZ_CHECK(fuzz_is_message(errstr));
        FUZZ_CHECK(rc != RL_OK);
        goto done;
    }
    FUZZ_CHECK(rc == RL_OK);
    FUZZ_CHECK(rl_sha256_hex(first, strlen(first), hex) == RL_OK);
    FUZZ_CHECK(strcmp(hex, fingerprint) == 0);

    reparsed = cJSON_Parse(first);
    FUZZ_CHECK(reparsed != NULL);
    second = rl_json_canonical(reparsed, errstr, sizeof(errstr));
    if (!second)
        fprintf(stderr, "canonical text refused on re-read: %s\n%s\n", errstr,
                first);
    FUZZ_CHECK(second != NULL);
    if (strcmp(first, second) != 0)
        fprintf(stderr, "not idempotent:\n%s\n%s\n", first, second);
    FUZZ_CHECK(strcmp(first, second) == 0);

done:
    free(second);
    free(first);
    cJSON_Delete(reparsed);
    cJSON_Delete(root);
    free(text);
    return 0;
}
