/* rl/json.h: canonical JSON, the bytes a request fingerprint hashes. */
#include <math.h>

#include "rl/err.h"
#include "rl/json.h"
#include "rl/runid.h"
#include "rl/testing.h"
#include "rltest.h"

/* Parses text, canonicalises it and compares with want (NULL: must fail,
 * and errstr must then contain want_err when given). */
static void
check_canonical(const char *text, const char *want, const char *want_err)
{
    cJSON *item = cJSON_Parse(text);
    char errstr[256] = "";
    char *out;

    RL_REQUIRE(item != NULL);
    out = rl_json_canonical(item, errstr, sizeof(errstr));
    if (want) {
        RL_CHECK_STREQ(out, want);
    } else {
        RL_CHECK(out == NULL);
        RL_CHECK(errstr[0] != '\0');
        if (want_err)
            RL_CHECK(strstr(errstr, want_err) != NULL);
    }
    free(out);
    cJSON_Delete(item);
}

static void
fingerprint_of(const char *text, char *out)
{
    cJSON *item = cJSON_Parse(text);
    char errstr[256];

    RL_REQUIRE(item != NULL);
    RL_CHECK_INTEQ(rl_json_fingerprint(item, out, errstr, sizeof(errstr)),
                   RL_OK);
    cJSON_Delete(item);
}

static void
test_members_sorted_by_key_bytes(void)
{
    check_canonical("{\"b\":1,\"a\":2}", "{\"a\":2,\"b\":1}", NULL);
    check_canonical("{\"aa\":1,\"a\":2,\"B\":3,\"\":4}",
                    "{\"\":4,\"B\":3,\"a\":2,\"aa\":1}", NULL);
    /* UTF-8 byte order is code point order: Z < z < U+00E9 < U+4E2D. */
    check_canonical("{\"\xe4\xb8\xad\":1,\"\xc3\xa9\":2,\"z\":3,\"Z\":4}",
                    "{\"Z\":4,\"z\":3,\"\xc3\xa9\":2,\"\xe4\xb8\xad\":1}",
                    NULL);
}

static void
test_nested_values_and_whitespace(void)
{
    check_canonical(" { \"z\" : { \"y\" : [ 1 , { \"b\" : true , \"a\" : null "
                    "} ] } ,\n\t\"a\" : \"x\" , \"f\" : false } ",
                    "{\"a\":\"x\",\"f\":false,\"z\":{\"y\":[1,{\"a\":null,"
                    "\"b\":true}]}}",
                    NULL);
    check_canonical("{}", "{}", NULL);
    check_canonical("[]", "[]", NULL);
    check_canonical("[[],{},[{}]]", "[[],{},[{}]]", NULL);
    check_canonical("\"s\"", "\"s\"", NULL);
    check_canonical("null", "null", NULL);
    /* Array order is meaning (messages!), never sorted. */
    check_canonical("[3,1,2]", "[3,1,2]", NULL);
}

static void
test_numbers_written_by_value(void)
{
    check_canonical("[1,1.0,1e0,10e-1,1.00000]", "[1,1,1,1,1]", NULL);
    check_canonical("[-0,-0.0,0e5]", "[0,0,0]", NULL);
    check_canonical("[-5,123456789012,9007199254740992]",
                    "[-5,123456789012,9007199254740992]", NULL);
    check_canonical("[0.1,1.5,-2.25,0.30000000000000004]",
                    "[0.1,1.5,-2.25,0.30000000000000004]", NULL);
    check_canonical("[1e300,1E-7,2.5e-10]", "[1e+300,1e-07,2.5e-10]", NULL);
    /* Above 2^53 a double is no longer an exact integer: shortest %g,
     * which may still look like one. */
    check_canonical("[9007199254740994,1e20,12345678901234567890]",
                    "[9007199254740994,1e+20,1.2345678901234567e+19]", NULL);
    /* The temperature a client sends as 0.7 or 0.70 or 7e-1 is one value. */
    check_canonical("{\"temperature\":7e-1}", "{\"temperature\":0.7}", NULL);
    /* cJSON reads 1e400 as infinity: not a JSON number we can write. */
    check_canonical("[1e400]", NULL, "not finite");
}

static void
test_strings_escaped_minimally(void)
{
    check_canonical("\"a\\\"b\\\\c\\/d\"", "\"a\\\"b\\\\c/d\"", NULL);
    check_canonical("\"\\b\\f\\n\\r\\t\"", "\"\\b\\f\\n\\r\\t\"", NULL);
    check_canonical("\"\\u0001\\u001F\\u001b\"", "\"\\u0001\\u001f\\u001b\"",
                    NULL);
    /* DEL and non-ASCII stay raw; escaped and raw spellings are equal. */
    check_canonical("\"\x7f\"", "\"\x7f\"", NULL);
    check_canonical("\"\\u00e9\"", "\"\xc3\xa9\"", NULL);
    check_canonical("\"\xc3\xa9\"", "\"\xc3\xa9\"", NULL);
    check_canonical("\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\"", NULL);
    check_canonical("{\"k\\u0065y\\n\":1}", "{\"key\\n\":1}", NULL);
}

static void
test_duplicate_keys_rejected(void)
{
    check_canonical("{\"a\":1,\"a\":1}", NULL, "duplicate key \"a\"");
    check_canonical("{\"x\":[{\"b\":1,\"a\":2,\"b\":3}]}", NULL,
                    "duplicate key \"b\"");
    /* Escaped and raw spellings are the same key. */
    check_canonical("{\"\\u0061\":1,\"a\":2}", NULL, "duplicate key");
    /* Keys that differ only in case are different keys. */
    check_canonical("{\"a\":1,\"A\":2}", "{\"A\":2,\"a\":1}", NULL);
}

static void
test_values_that_are_not_json(void)
{
    cJSON *arr = cJSON_CreateArray();
    char errstr[128];
    char *out;

    RL_REQUIRE(arr != NULL);
    cJSON_AddItemToArray(arr, cJSON_CreateNumber(NAN));
    out = rl_json_canonical(arr, errstr, sizeof(errstr));
    RL_CHECK(out == NULL);
    RL_CHECK(strstr(errstr, "not finite") != NULL);
    cJSON_Delete(arr);

    arr = cJSON_CreateArray();
    RL_REQUIRE(arr != NULL);
    cJSON_AddItemToArray(arr, cJSON_CreateNumber(-INFINITY));
    RL_CHECK(rl_json_canonical(arr, errstr, sizeof(errstr)) == NULL);
    cJSON_Delete(arr);

    arr = cJSON_CreateRaw("{\"b\":1,\"a\":2}");
    RL_REQUIRE(arr != NULL);
    RL_CHECK(rl_json_canonical(arr, errstr, sizeof(errstr)) == NULL);
    cJSON_Delete(arr);

    RL_CHECK(rl_json_canonical(NULL, errstr, sizeof(errstr)) == NULL);
}

static void
test_equal_requests_equal_fingerprints(void)
{
    char a[RL_HEX_SIZE], b[RL_HEX_SIZE];

    fingerprint_of("{\"model\":\"m\",\"temperature\":0,\"messages\":[{\"role\":"
                   "\"user\",\"content\":\"hi\"}]}",
                   a);
    fingerprint_of("{ \"messages\" : [ { \"content\" : \"h\\u0069\", \"role\" "
                   ": \"user\" } ], \"temperature\" : 0.0 , \"model\" : \"m\" "
                   "}",
                   b);
    RL_CHECK_STREQ(a, b);
    /* The fingerprint is the SHA-256 of the canonical text. */
    RL_CHECK_INTEQ(
        rl_sha256_hex("{\"messages\":[{\"content\":\"hi\",\"role\":\"user\"}],"
                      "\"model\":\"m\",\"temperature\":0}",
                      strlen("{\"messages\":[{\"content\":\"hi\",\"role\":"
                             "\"user\"}],\"model\":\"m\",\"temperature\":0}"),
                      b),
        RL_OK);
    RL_CHECK_STREQ(a, b);

    /* Any change of meaning changes it. */
    fingerprint_of("{\"model\":\"m\",\"temperature\":0.1,\"messages\":[{"
                   "\"role\":\"user\",\"content\":\"hi\"}]}",
                   b);
    RL_CHECK(strcmp(a, b) != 0);
    fingerprint_of("{\"model\":\"m\",\"temperature\":0,\"messages\":[{\"role\":"
                   "\"user\",\"content\":\"hi \"}]}",
                   b);
    RL_CHECK(strcmp(a, b) != 0);
    fingerprint_of("{\"model\":\"m\",\"temperature\":\"0\",\"messages\":[{"
                   "\"role\":\"user\",\"content\":\"hi\"}]}",
                   b);
    RL_CHECK(strcmp(a, b) != 0);
}

int
main(void)
{
    test_members_sorted_by_key_bytes();
    test_nested_values_and_whitespace();
    test_numbers_written_by_value();
    test_strings_escaped_minimally();
    test_duplicate_keys_rejected();
    test_values_that_are_not_json();
    test_equal_requests_equal_fingerprints();
    RL_TEST_END();
}
