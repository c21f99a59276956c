/* rl/runid.h: run IDs must equal docs/design.md's stable_run_id() byte for
 * byte. Every expected ID below was computed with that Python function
 * (Python 3.11, datetime.fromisoformat, isoformat(timespec="seconds")). */
#include "rl/err.h"
#include "rl/runid.h"
#include "rltest.h"

#define SEED_ID                                                                \
    "70130901deca1ba5c508cd0730a67be6cb7bf82aa4ad3d766d68a219acb42719"

static void
check_id(const char *job, const char *tenant, const char *at,
         const char *window, const char *version, const char *want_id,
         const char *want_utc)
{
    struct rl_run_identity id = {job, tenant, at, window, version};
    char run_id[RL_HEX_SIZE] = "";
    char utc[RL_TIME_UTC_SIZE] = "";
    const char *reason = NULL;
    char errstr[256] = "";
    int rc =
        rl_runid_compute(&id, run_id, utc, &reason, errstr, sizeof(errstr));

    if (rc != RL_OK)
        fprintf(stderr, "unexpected rejection of %s: %s\n", at, errstr);
    RL_CHECK_INTEQ(rc, RL_OK);
    RL_CHECK_STREQ(run_id, want_id);
    RL_CHECK_STREQ(utc, want_utc);
}

static void
check_rejected(const char *at, const char *window, const char *want_reason,
               const char *want_errstr)
{
    struct rl_run_identity id = {"job", "tenant", at, window, "v1"};
    char run_id[RL_HEX_SIZE];
    const char *reason = NULL;
    char errstr[256] = "";

    RL_CHECK_INTEQ(
        rl_runid_compute(&id, run_id, NULL, &reason, errstr, sizeof(errstr)),
        RL_ERR_INVALID);
    RL_CHECK_STREQ(reason, want_reason);
    if (want_errstr)
        RL_CHECK_STREQ(errstr, want_errstr);
}

static void
test_sha256_hex(void)
{
    char out[RL_HEX_SIZE];

    RL_CHECK_INTEQ(rl_sha256_hex("", 0, out), RL_OK);
    RL_CHECK_STREQ(
        out,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    RL_CHECK_INTEQ(rl_sha256_hex("abc", 3, out), RL_OK);
    RL_CHECK_STREQ(
        out,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void
test_reference_vector(void)
{
    check_id("competitor-summary", "workspace-acme",
             "2026-08-07T09:00:00+00:00", NULL, "v1", SEED_ID,
             "2026-08-07T09:00:00+00:00");
}

static void
test_same_instant_any_offset_same_id(void)
{
    check_id("competitor-summary", "workspace-acme", "2026-08-07T09:00:00Z",
             NULL, "v1", SEED_ID, "2026-08-07T09:00:00+00:00");
    check_id("competitor-summary", "workspace-acme",
             "2026-08-07T14:30:00+05:30", NULL, "v1", SEED_ID,
             "2026-08-07T09:00:00+00:00");
    check_id("competitor-summary", "workspace-acme",
             "2026-08-07T01:00:00-08:00", NULL, "v1", SEED_ID,
             "2026-08-07T09:00:00+00:00");
}

static void
test_offsets_roll_the_day_over(void)
{
    check_id("competitor-summary", "workspace-acme",
             "2026-08-07T02:00:00+05:30", NULL, "v1",
             "e934ab1f26cb682fc67ba87d402de082dc59263f83cbd17f22e09672e8c66c22",
             "2026-08-06T20:30:00+00:00");
    check_id("competitor-summary", "workspace-acme",
             "2026-08-06T20:00:00-08:00", NULL, "v1",
             "3f627623aedb9cb00959d487ab0ab70a4c10475d7e2f16e296c645dd1d3b0c18",
             "2026-08-07T04:00:00+00:00");
    check_id("competitor-summary", "workspace-acme",
             "2024-12-31T23:30:00-01:00", NULL, "v1",
             "c05c36e61be962443134bc02e6b9a4b981df863dee4e67e59bcef31d47818b36",
             "2025-01-01T00:30:00+00:00");
}

static void
test_fraction_truncated_like_isoformat_seconds(void)
{
    check_id("competitor-summary", "workspace-acme",
             "2026-08-07T09:00:00.999+00:00", NULL, "v1", SEED_ID,
             "2026-08-07T09:00:00+00:00");
    check_id("competitor-summary", "workspace-acme",
             "2026-08-07T09:00:00.999999+00:00", NULL, "v1", SEED_ID,
             "2026-08-07T09:00:00+00:00");
}

static void
test_whitespace_stripped_like_python(void)
{
    /* ASCII and Unicode spaces around every stripped field. */
    check_id("  competitor-summary\t\n",
             "\xe3\x80\x80workspace-acme\xc2\xa0", /* U+3000, U+00A0 */
             "2026-08-07T09:00:00+00:00", NULL, " v1\xe2\x80\xa9", /* U+2029 */
             SEED_ID, "2026-08-07T09:00:00+00:00");
    /* U+1680 U+2000 U+200A U+202F U+205F U+001C..U+001F U+0085, then
     * U+2028 U+000B U+000C U+000D. */
    check_id("\xe1\x9a\x80\xe2\x80\x80\xe2\x80\x8a\xe2\x80\xaf\xe2\x81\x9f"
             "\x1c\x1d\x1e\x1f\xc2\x85"
             "competitor-summary"
             "\xe2\x80\xa8\x0b\x0c\r",
             "workspace-acme", "2026-08-07T09:00:00+00:00", NULL, "v1", SEED_ID,
             "2026-08-07T09:00:00+00:00");
    /* U+200B ZERO WIDTH SPACE is not whitespace to Python: kept. */
    check_id("\xe2\x80\x8bjob", "tenant", "2026-08-07T09:00:00+00:00", NULL,
             "v1",
             "67e72f046a410b12b941a6684b3b194e24a01e25fae9ec1031b3b51a8886761d",
             "2026-08-07T09:00:00+00:00");
    /* Non-ASCII names hash as their UTF-8 bytes. */
    check_id("r\xc3\xa9sum\xc3\xa9 \xe2\x98\x83", "t\xc3\xbcnant",
             "2024-02-29T23:59:59-00:30", NULL, "v2",
             "f594cbda28c31161543f213836e5b1eaa236281a9f70368aa1604d11e7156334",
             "2024-03-01T00:29:59+00:00");
}

static void
check_strip(const char *text, const char *want)
{
    size_t len;
    const char *s = rl_strip(text, &len);

    RL_CHECK_INTEQ(len, strlen(want));
    RL_CHECK(strncmp(s, want, len) == 0);
}

static void
test_strip_matches_str_strip(void)
{
    /* Every code point for which str.isspace() holds, UTF-8 encoded. */
    static const char *const spaces[] = {"\t",           "\n",
                                         "\v",           "\f",
                                         "\r",           "\x1c",
                                         "\x1d",         "\x1e",
                                         "\x1f",         " ",
                                         "\xc2\x85",     "\xc2\xa0",
                                         "\xe1\x9a\x80", "\xe2\x80\x80",
                                         "\xe2\x80\x81", "\xe2\x80\x82",
                                         "\xe2\x80\x83", "\xe2\x80\x84",
                                         "\xe2\x80\x85", "\xe2\x80\x86",
                                         "\xe2\x80\x87", "\xe2\x80\x88",
                                         "\xe2\x80\x89", "\xe2\x80\x8a",
                                         "\xe2\x80\xa8", "\xe2\x80\xa9",
                                         "\xe2\x80\xaf", "\xe2\x81\x9f",
                                         "\xe3\x80\x80"};
    /* Look-alikes that str.isspace() rejects: U+180E, U+200B, U+2060,
     * U+FEFF, U+0000 is not reachable in a C string. */
    static const char *const not_spaces[] = {"\xe1\xa0\x8e", "\xe2\x80\x8b",
                                             "\xe2\x81\xa0", "\xef\xbb\xbf"};
    char text[64];

    for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++) {
        snprintf(text, sizeof(text), "%s%sx y%s%s", spaces[i], spaces[i],
                 spaces[i], spaces[i]);
        check_strip(text, "x y");
    }
    for (size_t i = 0; i < sizeof(not_spaces) / sizeof(not_spaces[0]); i++) {
        char want[64];

        snprintf(text, sizeof(text), " %sx%s ", not_spaces[i], not_spaces[i]);
        snprintf(want, sizeof(want), "%sx%s", not_spaces[i], not_spaces[i]);
        check_strip(text, want);
    }
    check_strip("", "");
    check_strip(" \t\xe3\x80\x80 ", "");
    check_strip("x", "x");
    /* A space character inside the text stays. */
    check_strip(" a\xe3\x80\x80"
                "b ",
                "a\xe3\x80\x80"
                "b");
    /* A 4-byte character at either end is not a space. */
    check_strip("\xf0\x9f\x98\x80 ", "\xf0\x9f\x98\x80");
    check_strip(" \xf0\x9f\x98\x80", "\xf0\x9f\x98\x80");
    /* Malformed UTF-8 (a lone continuation byte, an overlong space) is
     * never taken for a space. */
    check_strip(" \x80 ", "\x80");
    check_strip("\xc0\xa0x", "\xc0\xa0x");
    check_strip("x\xe0\x80\xa0", "x\xe0\x80\xa0");
}

static void
test_window_floors_before_hashing(void)
{
    static const char at[] = "2026-08-07T09:37:12+02:00";

    check_id("competitor-summary", "workspace-acme", at, "PT15M", "v1",
             "a574666dc1ded693845cc661173946c5361db3e3043fa080f3829b85db163f60",
             "2026-08-07T07:30:00+00:00");
    check_id("competitor-summary", "workspace-acme", at, "PT1H", "v1",
             "c89a1b4ed65b80d136668c5b598774666dc075e7206d41716bb4006054e3e0ac",
             "2026-08-07T07:00:00+00:00");
    check_id("competitor-summary", "workspace-acme", at, "PT1H30M", "v1",
             "a574666dc1ded693845cc661173946c5361db3e3043fa080f3829b85db163f60",
             "2026-08-07T07:30:00+00:00");
    check_id("competitor-summary", "workspace-acme", at, "P1D", "v1",
             "51f63f8bc001d3314d1f481aaea476f96969999f0edf46d3f0900470b8eac292",
             "2026-08-07T00:00:00+00:00");
    check_id("competitor-summary", "workspace-acme", at, "P1W", "v1",
             "711b500a0d9843fed6c21e86d0226cab06d823aa7958c1e19c37d92fbb733232",
             "2026-08-03T00:00:00+00:00");
    check_id("competitor-summary", "workspace-acme", at, "P1M", "v1",
             "8d7c03ca9d83988496efc04045dcc36fc7362baed07bbd4bab0015fcf965eeb1",
             "2026-08-01T00:00:00+00:00");
    check_id("competitor-summary", "workspace-acme", at, "P3M", "v1",
             "9abba238dd513ec7e171cc2afe73fbd2f87f8c5dde00766404aca25456cb9a59",
             "2026-07-01T00:00:00+00:00");
    check_id("competitor-summary", "workspace-acme", at, "P1Y", "v1",
             "239abbc7cc654723dc0a3df5a8bcbcd78e764e28ab4827a4cd30b70c87531b1e",
             "2026-01-01T00:00:00+00:00");
    check_id("competitor-summary", "workspace-acme",
             "2026-08-07T01:00:00+05:30", "P1D", "v1",
             "b5a36c86fb2c23e5200f7d1cc06492d2284de0c97f1bfe2f91dc78edf3dd7ee5",
             "2026-08-06T00:00:00+00:00");
    /* Any time inside the window gives the window's ID. */
    check_id("competitor-summary", "workspace-acme", "2026-08-07T09:00:00Z",
             "PT1H", "v1", SEED_ID, "2026-08-07T09:00:00+00:00");
    check_id("competitor-summary", "workspace-acme", "2026-08-07T09:59:59Z",
             "PT1H", "v1", SEED_ID, "2026-08-07T09:00:00+00:00");
}

static void
test_inputs_that_change_the_id(void)
{
    struct rl_run_identity a = {"job", "tenant", "2026-08-07T09:00:00Z", NULL,
                                "v1"};
    struct rl_run_identity b = a;
    char id_a[RL_HEX_SIZE], id_b[RL_HEX_SIZE];
    char errstr[128];

    RL_REQUIRE(rl_runid_compute(&a, id_a, NULL, NULL, errstr, sizeof(errstr)) ==
               RL_OK);
    b.version = "v2";
    RL_CHECK_INTEQ(
        rl_runid_compute(&b, id_b, NULL, NULL, errstr, sizeof(errstr)), RL_OK);
    RL_CHECK(strcmp(id_a, id_b) != 0);
    b = a;
    b.scheduled_at = "2026-08-07T09:00:01Z";
    RL_CHECK_INTEQ(
        rl_runid_compute(&b, id_b, NULL, NULL, errstr, sizeof(errstr)), RL_OK);
    RL_CHECK(strcmp(id_a, id_b) != 0);
    /* Case matters: Job names are not folded. */
    b = a;
    b.job = "Job";
    RL_CHECK_INTEQ(
        rl_runid_compute(&b, id_b, NULL, NULL, errstr, sizeof(errstr)), RL_OK);
    RL_CHECK(strcmp(id_a, id_b) != 0);
}

static void
test_rejections(void)
{
    check_rejected("2026-08-07T09:00:00", NULL, "naive_timestamp",
                   "scheduled_at has no utc offset");
    check_rejected("2026-02-30T09:00:00Z", NULL, "invalid_timestamp",
                   "scheduled_at day 30 is out of range for 2026-02");
    check_rejected("2026-08-07T09:00:00Z", "P1X", "invalid_window", NULL);
    check_rejected("2026-08-07T09:00:00Z", "", "invalid_window", NULL);
    /* A window that floors year 1 into year 0 has no reference ID. */
    check_rejected("0001-01-01T00:00:00Z", "PT5H", "invalid_timestamp", NULL);
}

int
main(void)
{
    test_sha256_hex();
    test_reference_vector();
    test_same_instant_any_offset_same_id();
    test_offsets_roll_the_day_over();
    test_fraction_truncated_like_isoformat_seconds();
    test_whitespace_stripped_like_python();
    test_strip_matches_str_strip();
    test_window_floors_before_hashing();
    test_inputs_that_change_the_id();
    test_rejections();
    RL_TEST_END();
}
