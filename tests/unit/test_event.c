/* rl/event.h: a schedule event is validated, normalised and fingerprinted,
 * and every hostile or malformed value is refused with a stable reason. */
#include "rl/event.h"
#include "rl/runid.h"
#include "rltest.h"

#define SEED_ID                                                                \
    "70130901deca1ba5c508cd0730a67be6cb7bf82aa4ad3d766d68a219acb42719"

#define REQUEST                                                                \
    "\"request\":{\"model\":\"m\",\"temperature\":0,\"messages\":[{\"role\":"  \
    "\"user\",\"content\":\"hi\"}]}"

#define SEED_EVENT                                                             \
    "{\"job\":\"competitor-summary\",\"tenant\":\"workspace-acme\","           \
    "\"scheduled_at\":\"2026-08-07T09:00:00+00:00\",\"version\":\"v1\","       \
    "\"input\":{\"docs\":[{\"title\":\"Release notes\"}],\"n\":1.0},"          \
    "\"notify\":[\"slack\",\"email\"]," REQUEST "}"

/* An event with the identity of the seed and the given tail of members. */
#define EVENT(tail)                                                            \
    "{\"job\":\"competitor-summary\",\"tenant\":\"workspace-acme\","           \
    "\"scheduled_at\":\"2026-08-07T09:00:00+00:00\",\"version\":\"v1\"" tail   \
    "}"

static struct rl_event *
parse_len(const char *text, size_t len, const struct rl_event_limits *limits)
{
    char reason[64] = "";
    char errstr[256] = "";
    struct rl_event *ev = rl_event_parse(
        text, len, limits, reason, sizeof(reason), errstr, sizeof(errstr));

    if (!ev)
        fprintf(stderr, "unexpected rejection: %s: %s\n", reason, errstr);
    RL_CHECK(ev != NULL);
    return ev;
}

static struct rl_event *
parse(const char *text)
{
    return parse_len(text, strlen(text), NULL);
}

static void
check_rejected_len(const char *text, size_t len,
                   const struct rl_event_limits *limits,
                   const char *want_reason, const char *want_errstr)
{
    char reason[64] = "";
    char errstr[256] = "";
    struct rl_event *ev = rl_event_parse(
        text, len, limits, reason, sizeof(reason), errstr, sizeof(errstr));

    RL_CHECK(ev == NULL);
    RL_CHECK_STREQ(reason, want_reason);
    /* A sentence for people: lowercase start, no trailing period. */
    RL_CHECK(errstr[0] != '\0' && !(errstr[0] >= 'A' && errstr[0] <= 'Z'));
    RL_CHECK(errstr[0] && errstr[strlen(errstr) - 1] != '.');
    if (want_errstr)
        RL_CHECK_STREQ(errstr, want_errstr);
    rl_event_destroy(ev);
}

static void
check_rejected(const char *text, const char *want_reason)
{
    check_rejected_len(text, strlen(text), NULL, want_reason, NULL);
}

static void
test_seed_event(void)
{
    struct rl_event *ev = parse(SEED_EVENT);
    char fp[RL_HEX_SIZE];

    if (!ev)
        return;
    RL_CHECK_STREQ(ev->run_id, SEED_ID);
    RL_CHECK_STREQ(ev->job, "competitor-summary");
    RL_CHECK_STREQ(ev->tenant, "workspace-acme");
    RL_CHECK_STREQ(ev->version, "v1");
    RL_CHECK(ev->window == NULL);
    RL_CHECK_STREQ(ev->scheduled_at, "2026-08-07T09:00:00+00:00");
    RL_CHECK_INTEQ(ev->scheduled_epoch, 1786093200);
    RL_CHECK_STREQ(ev->input_json,
                   "{\"docs\":[{\"title\":\"Release notes\"}],\"n\":1}");
    RL_CHECK_STREQ(ev->request_json,
                   "{\"notify\":[\"email\",\"slack\"],\"request\":{"
                   "\"messages\":[{\"content\":\"hi\",\"role\":\"user\"}],"
                   "\"model\":\"m\",\"temperature\":0}}");
    RL_CHECK_INTEQ(ev->notify_count, 2);
    if (ev->notify_count == 2) {
        RL_CHECK_STREQ(ev->notify[0], "email");
        RL_CHECK_STREQ(ev->notify[1], "slack");
    }
    RL_REQUIRE(rl_sha256_hex(ev->request_json, strlen(ev->request_json), fp) ==
               0);
    RL_CHECK_STREQ(ev->fingerprint, fp);
    rl_event_destroy(ev);
    rl_event_destroy(NULL);
}

static void
test_identity_normalised(void)
{
    /* Unicode and ASCII whitespace around names, another offset, a
     * fraction: still the seed's run. */
    struct rl_event *ev = parse(
        "{\"job\":\" competitor-summary\\t\",\"tenant\":\"\\u3000workspace-"
        "acme\xc2\xa0\",\"scheduled_at\":\"2026-08-07T14:30:00.999+05:30\","
        "\"version\":\"v1\\u2029\"," REQUEST "}");

    if (ev) {
        RL_CHECK_STREQ(ev->run_id, SEED_ID);
        RL_CHECK_STREQ(ev->job, "competitor-summary");
        RL_CHECK_STREQ(ev->tenant, "workspace-acme");
        RL_CHECK_STREQ(ev->version, "v1");
        RL_CHECK_STREQ(ev->input_json, "null");
        RL_CHECK_INTEQ(ev->notify_count, 0);
    }
    rl_event_destroy(ev);

    /* A window floors scheduled_at before the run ID is computed. */
    ev = parse("{\"job\":\"competitor-summary\",\"tenant\":\"workspace-acme\","
               "\"scheduled_at\":\"2026-08-07T09:37:12+02:00\",\"version\":"
               "\"v1\",\"window\":\" P1W \"," REQUEST "}");
    if (ev) {
        RL_CHECK_STREQ(ev->window, "P1W");
        RL_CHECK_STREQ(ev->scheduled_at, "2026-08-03T00:00:00+00:00");
        RL_CHECK_STREQ(ev->run_id, "711b500a0d9843fed6c21e86d0226cab06d823aa7"
                                   "958c1e19c37d92fbb733232");
    }
    rl_event_destroy(ev);
}

static void
test_tolerated_shapes(void)
{
    static const char padded[] = "\n " SEED_EVENT " \r\n\t";
    static const char tail[] = SEED_EVENT "garbage";
    struct rl_event *ev;

    /* Unknown members are ignored; null optionals mean absent. */
    ev = parse(EVENT(",\"priority\":7,\"window\":null,\"notify\":null,"
                     "\"input\":null,\"x\":{\"a\":1,\"b\":2}," REQUEST));
    if (ev) {
        RL_CHECK_STREQ(ev->run_id, SEED_ID);
        RL_CHECK(ev->window == NULL);
        RL_CHECK_STREQ(ev->input_json, "null");
    }
    rl_event_destroy(ev);
    /* Whitespace around the document. */
    rl_event_destroy(parse(padded));
    /* The value is a byte range, not a C string: bytes past len are not
     * read as part of it. */
    rl_event_destroy(parse_len(tail, strlen(SEED_EVENT), NULL));
    /* An escaped backslash followed by "u0000" is not a NUL. */
    ev = parse(EVENT(",\"input\":\"\\\\u0000\"," REQUEST));
    if (ev)
        RL_CHECK_STREQ(ev->input_json, "\"\\\\u0000\"");
    rl_event_destroy(ev);
    /* Exactly max_depth levels are allowed. */
    {
        char doc[512];
        char nest[128] = "";
        char close[128] = "";
        struct rl_event_limits limits;

        rl_event_limits_default(&limits);
        limits.max_depth = 8;
        /* The event object is level 1; input adds 7 arrays. */
        strcat(nest, "[[[[[[[");
        strcat(close, "]]]]]]]");
        snprintf(doc, sizeof(doc), EVENT(",\"input\":%s1%s," REQUEST), nest,
                 close);
        rl_event_destroy(parse_len(doc, strlen(doc), &limits));
        snprintf(doc, sizeof(doc), EVENT(",\"input\":%s[1]%s," REQUEST), nest,
                 close);
        check_rejected_len(doc, strlen(doc), &limits, "too_deep", NULL);
    }
}

static void
fingerprint_of(const char *text, char *out)
{
    struct rl_event *ev = parse(text);

    out[0] = '\0';
    if (ev)
        memcpy(out, ev->fingerprint, RL_HEX_SIZE);
    rl_event_destroy(ev);
}

static void
test_fingerprints(void)
{
    char a[RL_HEX_SIZE], b[RL_HEX_SIZE];

    fingerprint_of(EVENT(",\"notify\":[\"email\",\"slack\"]," REQUEST), a);
    /* Semantically equal: member order, number spelling, escapes,
     * whitespace, notify order and repetition. */
    fingerprint_of(
        EVENT(", \"notify\" : [\"slack\", \"email\", \"slack\"],"
              "\"request\":{ \"messages\":[{\"content\":\"h\\u0069\",\"role\""
              ":\"user\"}],\"temperature\":0.0e0,\"model\":\"m\"}"),
        b);
    RL_CHECK_STREQ(a, b);
    /* The input is not part of the effective request. */
    fingerprint_of(EVENT(",\"input\":{\"x\":1},\"notify\":[\"slack\","
                         "\"email\"]," REQUEST),
                   b);
    RL_CHECK_STREQ(a, b);

    /* Different notify channels, different request: different. */
    fingerprint_of(EVENT(",\"notify\":[\"email\"]," REQUEST), b);
    RL_CHECK(strcmp(a, b) != 0);
    fingerprint_of(EVENT("," REQUEST), b);
    RL_CHECK(strcmp(a, b) != 0);
    fingerprint_of(EVENT(",\"notify\":[\"email\",\"slack\"],\"request\":{"
                         "\"model\":\"m2\",\"temperature\":0,\"messages\":[{"
                         "\"role\":\"user\",\"content\":\"hi\"}]}"),
                   b);
    RL_CHECK(strcmp(a, b) != 0);
    fingerprint_of(EVENT(",\"notify\":[\"email\",\"slack\"],\"request\":{"
                         "\"model\":\"m\",\"temperature\":0.2,\"messages\":[{"
                         "\"role\":\"user\",\"content\":\"hi\"}]}"),
                   b);
    RL_CHECK(strcmp(a, b) != 0);

    /* No notify member and an empty list are the same request. */
    fingerprint_of(EVENT("," REQUEST), a);
    fingerprint_of(EVENT(",\"notify\":[]," REQUEST), b);
    RL_CHECK_STREQ(a, b);
}

static void
test_rejected_before_parsing(void)
{
    struct rl_event_limits limits;
    char *deep;
    size_t n = 100000;

    rl_event_limits_default(&limits);
    limits.max_bytes = 64;
    check_rejected_len(SEED_EVENT, strlen(SEED_EVENT), &limits, "too_large",
                       NULL);

    check_rejected(EVENT(",\"x\":\"\xff\"," REQUEST), "invalid_utf8");
    check_rejected(EVENT(",\"x\":\"\xc0\xaf\"," REQUEST), "invalid_utf8");
    check_rejected(EVENT(",\"x\":\"\xe0\x80\xaf\"," REQUEST), "invalid_utf8");
    check_rejected(EVENT(",\"x\":\"\xed\xa0\x80\"," REQUEST), "invalid_utf8");
    check_rejected(EVENT(",\"x\":\"\xf4\x90\x80\x80\"," REQUEST),
                   "invalid_utf8");
    check_rejected(EVENT(",\"x\":\"\xe2\x82\"," REQUEST), "invalid_utf8");
    check_rejected_len("{\"job\":\"a\xe2\x82", 11, NULL, "invalid_utf8", NULL);

    check_rejected_len("{\"job\":\"a\0b\"}", 13, NULL, "nul_byte", NULL);
    check_rejected(EVENT(",\"x\":\"a\\u0000b\"," REQUEST), "nul_byte");
    check_rejected(EVENT(",\"k\\u0000\":1," REQUEST), "nul_byte");

    /* 100,000 levels never reach cJSON's recursion. */
    deep = malloc(2 * n + 1);
    RL_REQUIRE(deep != NULL);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    check_rejected_len(deep, 2 * n, NULL, "too_deep",
                       "event nests deeper than 64 levels");
    free(deep);
    /* Brackets inside strings are text, not nesting. */
    rl_event_destroy(
        parse(EVENT(",\"x\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"[[[\","
                    "\"input\":\"{{{\"," REQUEST)));
}

static void
test_rejected_envelopes(void)
{
    check_rejected_len("", 0, NULL, "invalid_json", NULL);
    check_rejected_len(NULL, 0, NULL, "invalid_json", NULL);
    check_rejected("{", "invalid_json");
    check_rejected("{\"job\":}", "invalid_json");
    check_rejected(SEED_EVENT "x", "invalid_json");
    check_rejected(SEED_EVENT SEED_EVENT, "invalid_json");
    /* A repeated member would mean different runs to different readers. */
    check_rejected(EVENT(",\"job\":\"other\"," REQUEST), "invalid_json");

    check_rejected("[]", "not_object");
    check_rejected("\"event\"", "not_object");
    check_rejected("42", "not_object");

    check_rejected("{\"tenant\":\"t\",\"scheduled_at\":\"2026-08-07T09:00:00Z"
                   "\",\"version\":\"v1\"," REQUEST "}",
                   "missing_field:job");
    check_rejected_len("{\"job\":\"j\",\"scheduled_at\":\"2026-08-07T09:00:00"
                       "Z\",\"version\":\"v1\"," REQUEST "}",
                       strlen("{\"job\":\"j\",\"scheduled_at\":\"2026-08-07T0"
                              "9:00:00Z\",\"version\":\"v1\"," REQUEST "}"),
                       NULL, "missing_field:tenant", "tenant is missing");
    check_rejected("{\"job\":\"j\",\"tenant\":\"t\",\"version\":\"v1\"," REQUEST
                   "}",
                   "missing_field:scheduled_at");
    check_rejected("{\"job\":\"j\",\"tenant\":\"t\",\"scheduled_at\":\"2026-"
                   "08-07T09:00:00Z\"," REQUEST "}",
                   "missing_field:version");
    check_rejected(EVENT(""), "missing_field:request");
    /* Keys are case-sensitive. */
    check_rejected("{\"Job\":\"j\",\"tenant\":\"t\",\"scheduled_at\":\"2026-"
                   "08-07T09:00:00Z\",\"version\":\"v1\"," REQUEST "}",
                   "missing_field:job");

    check_rejected("{\"job\":7,\"tenant\":\"t\",\"scheduled_at\":\"2026-08-07"
                   "T09:00:00Z\",\"version\":\"v1\"," REQUEST "}",
                   "wrong_type:job");
    check_rejected("{\"job\":\"j\",\"tenant\":[\"t\"],\"scheduled_at\":\"2026-"
                   "08-07T09:00:00Z\",\"version\":\"v1\"," REQUEST "}",
                   "wrong_type:tenant");
    check_rejected("{\"job\":\"j\",\"tenant\":\"t\",\"scheduled_at\":null,"
                   "\"version\":\"v1\"," REQUEST "}",
                   "wrong_type:scheduled_at");
    check_rejected(EVENT(",\"window\":3600," REQUEST), "wrong_type:window");

    check_rejected("{\"job\":\" \\t \",\"tenant\":\"t\",\"scheduled_at\":\""
                   "2026-08-07T09:00:00Z\",\"version\":\"v1\"," REQUEST "}",
                   "empty_field:job");
    check_rejected("{\"job\":\"j\",\"tenant\":\"\\u3000\\u00a0\","
                   "\"scheduled_at\":\"2026-08-07T09:00:00Z\",\"version\":\"v1"
                   "\"," REQUEST "}",
                   "empty_field:tenant");
    check_rejected(EVENT(",\"window\":\"\"," REQUEST), "empty_field:window");

    {
        char doc[1024];
        char name[202];

        memset(name, 'x', 201);
        name[201] = '\0';
        snprintf(doc, sizeof(doc),
                 "{\"job\":\"j\",\"tenant\":\"%s\",\"scheduled_at\":\"2026-08-"
                 "07T09:00:00Z\",\"version\":\"v1\"," REQUEST "}",
                 name);
        check_rejected(doc, "field_too_long:tenant");
        /* 200 bytes is the limit itself, and padding does not count. */
        name[200] = '\0';
        snprintf(doc, sizeof(doc),
                 "{\"job\":\"j\",\"tenant\":\"  %s  \",\"scheduled_at\":\"2026-"
                 "08-07T09:00:00Z\",\"version\":\"v1\"," REQUEST "}",
                 name);
        rl_event_destroy(parse(doc));
    }

    /* '|' joins the identity fields: "a|b"+"c" would collide "a"+"b|c". */
    check_rejected("{\"job\":\"a|b\",\"tenant\":\"c\",\"scheduled_at\":\"2026-"
                   "08-07T09:00:00Z\",\"version\":\"v1\"," REQUEST "}",
                   "invalid_field:job");
}

static void
test_rejected_values(void)
{
    check_rejected_len(
        "{\"job\":\"j\",\"tenant\":\"t\",\"scheduled_at\":\"2026-"
        "08-07T09:00:00\",\"version\":\"v1\"," REQUEST "}",
        strlen("{\"job\":\"j\",\"tenant\":\"t\",\"scheduled_at\""
               ":\"2026-08-07T09:00:00\",\"version\":\"v1\"," REQUEST "}"),
        NULL, "naive_timestamp", "scheduled_at has no utc offset");
    check_rejected("{\"job\":\"j\",\"tenant\":\"t\",\"scheduled_at\":\"2026-"
                   "02-30T09:00:00Z\",\"version\":\"v1\"," REQUEST "}",
                   "invalid_timestamp");
    check_rejected("{\"job\":\"j\",\"tenant\":\"t\",\"scheduled_at\":\"2026-"
                   "08-07T09:00:00Z \",\"version\":\"v1\"," REQUEST "}",
                   "invalid_timestamp");
    check_rejected("{\"job\":\"j\",\"tenant\":\"t\",\"scheduled_at\":\"\","
                   "\"version\":\"v1\"," REQUEST "}",
                   "empty_field:scheduled_at");
    check_rejected(EVENT(",\"window\":\"P1M1D\"," REQUEST), "invalid_window");
    check_rejected(EVENT(",\"window\":\"1 hour\"," REQUEST), "invalid_window");

    check_rejected(EVENT(",\"notify\":\"email\"," REQUEST), "invalid_notify");
    check_rejected(EVENT(",\"notify\":[\"email\",7]," REQUEST),
                   "invalid_notify");
    check_rejected(EVENT(",\"notify\":[\"Email\"]," REQUEST), "invalid_notify");
    check_rejected(EVENT(",\"notify\":[\"\"]," REQUEST), "invalid_notify");
    check_rejected(EVENT(",\"notify\":[\"e mail\"]," REQUEST),
                   "invalid_notify");
    check_rejected(EVENT(",\"notify\":[\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                         "xxxxxxxxxxxxxxxxxxxxxxxxxxxx\"]," REQUEST),
                   "invalid_notify");
    check_rejected(EVENT(",\"notify\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\","
                         "\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\","
                         "\"o\",\"p\",\"q\"]," REQUEST),
                   "invalid_notify");
    rl_event_destroy(parse(EVENT(
        ",\"notify\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\","
        "\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p.q_r-0\"]," REQUEST)));

    check_rejected(EVENT(",\"request\":[]"), "invalid_request");
    check_rejected(EVENT(",\"request\":\"prompt\""), "invalid_request");
    check_rejected(EVENT(",\"request\":{\"messages\":[{}]}"),
                   "invalid_request");
    check_rejected(EVENT(",\"request\":{\"model\":7,\"messages\":[{}]}"),
                   "invalid_request");
    check_rejected(EVENT(",\"request\":{\"model\":\"m\"}"), "invalid_request");
    check_rejected(EVENT(",\"request\":{\"model\":\"m\",\"messages\":[]}"),
                   "invalid_request");
    check_rejected(EVENT(",\"request\":{\"model\":\"m\",\"messages\":{}}"),
                   "invalid_request");
    /* A repeated key at any depth is invalid_json, before the request is
     * read; non-finite numbers cannot be fingerprinted. */
    check_rejected(EVENT(",\"request\":{\"model\":\"m\",\"messages\":[{\"a\":1,"
                         "\"a\":2}]}"),
                   "invalid_json");
    check_rejected(EVENT(",\"request\":{\"model\":\"m\",\"messages\":[1e999]}"),
                   "invalid_request");
    check_rejected(EVENT(",\"input\":{\"a\":1,\"a\":2}," REQUEST),
                   "invalid_json");
}

/* The first reader and the last must not disagree anywhere: a repeated
 * key in any object at any depth is refused, whichever member it is in. */
static void
test_duplicate_keys_at_every_depth(void)
{
    static const char *const events[] = {
        /* "last wins" would turn the gate off */
        EVENT(",\"approval\":{\"required\":true,\"required\":false}," REQUEST),
        EVENT(",\"approval\":{\"required\":false,\"required\":true}," REQUEST),
        EVENT(",\"input\":{\"docs\":[{\"title\":\"a\",\"title\":\"b\"}]}"
              "," REQUEST),
        EVENT(",\"input\":[[[{\"k\":{\"x\":1,\"y\":2,\"x\":3}}]]]," REQUEST),
        EVENT(",\"notify\":[\"email\"],\"x\":{\"a\":1,\"a\":1}," REQUEST),
        EVENT(",\"window\":\"PT1H\",\"meta\":[{\"w\":{\"p\":1,\"p\":2}}]"
              "," REQUEST),
        EVENT(",\"request\":{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
              "\"content\":\"hi\",\"role\":\"system\"}]}"),
        EVENT(",\"request\":{\"model\":\"m\",\"response_format\":{\"type\":"
              "\"a\",\"type\":\"b\"},\"messages\":[{\"role\":\"user\","
              "\"content\":\"hi\"}]}"),
    };

    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++)
        check_rejected(events[i], "invalid_json");
    /* The same keys once each are accepted. */
    rl_event_destroy(
        parse(EVENT(",\"approval\":{\"required\":true}," REQUEST)));
    rl_event_destroy(parse(EVENT(
        ",\"input\":[[[{\"k\":{\"x\":1,\"y\":2}}]],{\"x\":1}]," REQUEST)));
}

static void
test_reason_buffer_is_bounded(void)
{
    char reason[8];
    char errstr[8];
    struct rl_event *ev =
        rl_event_parse(EVENT(",\"window\":3600," REQUEST),
                       strlen(EVENT(",\"window\":3600," REQUEST)), NULL, reason,
                       sizeof(reason), errstr, sizeof(errstr));

    RL_CHECK(ev == NULL);
    RL_CHECK_STREQ(reason, "wrong_t");
    RL_CHECK_INTEQ(strlen(errstr), 7);
}

int
main(void)
{
    test_seed_event();
    test_identity_normalised();
    test_tolerated_shapes();
    test_fingerprints();
    test_rejected_before_parsing();
    test_rejected_envelopes();
    test_rejected_values();
    test_duplicate_keys_at_every_depth();
    test_reason_buffer_is_bounded();
    RL_TEST_END();
}
