/* Hostile schedule events: every bad value a producer can
 * put on the topic, in every field of the event, gets exactly the
 * dead-letter reason of rl/event.h; what the contract treats as plain data
 * (SQL, CRLF and header text in job, tenant, version, the request and the
 * input) is accepted byte for byte and can never leave the parser unescaped;
 * and no message, however large, deep or truncated, crashes the parser,
 * leaks, or is read past its length (run this under valgrind or an
 * RL_SANITIZE build to see the last part).
 *
 * Past 1,000 lines on purpose: it is a table of cases, a bad value per
 * field, and reads best as the one list the parser is held to. */
#include "rl/event.h"
#include "rl/runid.h"
#include "rltest.h"

/* event.h: "reason must hold at least 64 bytes". Exactly that, so a reason
 * that would not fit shows up as a cut one. */
#define REASON_SIZE 64
#define MIB (1024 * 1024)

/* The places a hostile value can go. */
enum slot {
    SLOT_JOB,
    SLOT_TENANT,
    SLOT_SCHEDULED_AT,
    SLOT_VERSION,
    SLOT_WINDOW,
    SLOT_NOTIFY,   /* the string is one channel: ["<value>"] */
    SLOT_REQUEST,  /* the whole request */
    SLOT_MODEL,    /* request.model */
    SLOT_MESSAGES, /* request.messages */
    SLOT_CONTENT,  /* request.messages[0].content */
    SLOT_KEY,      /* a member name inside request */
    SLOT_INPUT,
    SLOT_EXTRA, /* an unknown top-level member "x" */
    SLOT_COUNT,
    SLOT_NONE = SLOT_COUNT
};

static const char *const slot_names[SLOT_COUNT] = {
    "job",    "tenant",  "scheduled_at", "version",  "window",
    "notify", "request", "model",        "messages", "content",
    "key",    "input",   "extra"};

/* Identity fields: a rejection names the field ("wrong_type:job"). */
static int
is_identity_slot(enum slot slot)
{
    return slot == SLOT_JOB || slot == SLOT_TENANT ||
           slot == SLOT_SCHEDULED_AT || slot == SLOT_VERSION;
}

/* The event every case starts from; its run ID is that of
 * "nightly-digest|acme|2026-08-07T09:00:00+00:00|v1" (PT1H floors 09:00 to
 * itself). */
static const char *const defaults[SLOT_COUNT] = {
    [SLOT_JOB] = "\"nightly-digest\"",
    [SLOT_TENANT] = "\"acme\"",
    [SLOT_SCHEDULED_AT] = "\"2026-08-07T09:00:00Z\"",
    [SLOT_VERSION] = "\"v1\"",
    [SLOT_WINDOW] = "\"PT1H\"",
    [SLOT_NOTIFY] = "[\"email\"]",
    [SLOT_MODEL] = "\"m\"",
    [SLOT_CONTENT] = "\"hi\"",
    [SLOT_INPUT] = "{\"n\":1}",
};
#define DEFAULT_UTC "2026-08-07T09:00:00+00:00"

struct doc {
    char *data;
    size_t len;
    size_t cap;
};

static void
doc_add(struct doc *d, const void *bytes, size_t n)
{
    if (d->cap - d->len <= n) {
        size_t cap = d->cap ? d->cap : 1024;

        while (cap - d->len <= n)
            cap *= 2;
        d->data = realloc(d->data, cap);
        RL_REQUIRE(d->data != NULL);
        d->cap = cap;
    }
    memcpy(d->data + d->len, bytes, n);
    d->len += n;
    d->data[d->len] = '\0';
}

static void
doc_str(struct doc *d, const char *s)
{
    doc_add(d, s, strlen(s));
}

static void
doc_repeat(struct doc *d, const char *s, size_t times)
{
    for (size_t i = 0; i < times; i++)
        doc_str(d, s);
}

/* How the hostile bytes are placed: as the content of a JSON string (they
 * are then JSON text, so "\\r\\n" is an escaped CRLF), or as a JSON value. */
enum form { AS_STRING, AS_VALUE };

struct placement {
    enum slot slot;
    enum form form;
    const char *bytes;
    size_t len;
};

static void
put(struct doc *d, enum slot slot, const struct placement *p)
{
    if (slot != p->slot) {
        doc_str(d, defaults[slot]);
        return;
    }
    if (p->form == AS_VALUE) {
        doc_add(d, p->bytes, p->len);
        return;
    }
    doc_str(d, slot == SLOT_NOTIFY ? "[\"" : "\"");
    doc_add(d, p->bytes, p->len);
    doc_str(d, slot == SLOT_NOTIFY ? "\"]" : "\"");
}

/* The default event with p's bytes in p->slot. */
static struct doc
build(const struct placement *p)
{
    struct doc d = {NULL, 0, 0};

    doc_str(&d, "{\"job\":");
    put(&d, SLOT_JOB, p);
    doc_str(&d, ",\"tenant\":");
    put(&d, SLOT_TENANT, p);
    doc_str(&d, ",\"scheduled_at\":");
    put(&d, SLOT_SCHEDULED_AT, p);
    doc_str(&d, ",\"version\":");
    put(&d, SLOT_VERSION, p);
    doc_str(&d, ",\"window\":");
    put(&d, SLOT_WINDOW, p);
    doc_str(&d, ",\"notify\":");
    put(&d, SLOT_NOTIFY, p);
    doc_str(&d, ",\"request\":");
    if (p->slot == SLOT_REQUEST) {
        put(&d, SLOT_REQUEST, p);
    } else {
        doc_str(&d, "{\"model\":");
        put(&d, SLOT_MODEL, p);
        doc_str(&d, ",\"messages\":");
        if (p->slot == SLOT_MESSAGES) {
            put(&d, SLOT_MESSAGES, p);
        } else {
            doc_str(&d, "[{\"role\":\"user\",\"content\":");
            put(&d, SLOT_CONTENT, p);
            doc_str(&d, "}]");
        }
        if (p->slot == SLOT_KEY) {
            doc_str(&d, ",\"");
            doc_add(&d, p->bytes, p->len);
            doc_str(&d, "\":1");
        }
        doc_str(&d, ",\"temperature\":0}");
    }
    doc_str(&d, ",\"input\":");
    put(&d, SLOT_INPUT, p);
    if (p->slot == SLOT_EXTRA) {
        doc_str(&d, ",\"x\":");
        put(&d, SLOT_EXTRA, p);
    }
    doc_str(&d, "}");
    return d;
}

static struct doc
build_default(void)
{
    struct placement none = {SLOT_NONE, AS_STRING, "", 0};

    return build(&none);
}

static int cases, refused;

static int
is_printable_ascii(const char *s)
{
    for (; *s; s++) {
        if (*s < 0x20 || *s > 0x7e)
            return 0;
    }
    return 1;
}

static int
has_control_byte(const char *s)
{
    for (; *s; s++) {
        if ((unsigned char)*s < 0x20)
            return 1;
    }
    return 0;
}

/* Parses exactly len bytes from a buffer of exactly that size (so valgrind
 * and ASan see a read past the message) and checks what every outcome must
 * satisfy. want is the expected reason, or NULL when the event must be
 * accepted; the accepted event is returned when keep is set. */
static struct rl_event *
expect_len(const char *what, const void *bytes, size_t len, const char *want,
           int keep)
{
    char reason[REASON_SIZE] = "";
    char errstr[256] = "";
    char *copy = malloc(len ? len : 1);
    struct rl_event *ev;

    RL_REQUIRE(copy != NULL);
    if (len)
        memcpy(copy, bytes, len);
    ev = rl_event_parse(copy, len, NULL, reason, sizeof(reason), errstr,
                        sizeof(errstr));
    free(copy);
    cases++;
    if (!ev) {
        refused++;
        /* reason and errstr go into dead-letter headers and log lines: no
         * CR, LF or other byte of the event may reach them. */
        RL_CHECK(errstr[0] != '\0' && is_printable_ascii(errstr));
        RL_CHECK(is_printable_ascii(reason));
    }
    if (!want != !!ev || (want && strcmp(reason, want) != 0)) {
        fprintf(stderr, "%s: want %s, got %s%s%s\n", what,
                want ? want : "accepted", ev ? "accepted" : reason,
                ev ? "" : ": ", ev ? "" : errstr);
        RL_CHECK(!"verdict as documented");
    }
    if (ev) {
        /* What an accepted event hands on is escaped: the canonical JSON
         * has no raw control byte, whatever the event carried. */
        RL_CHECK(!has_control_byte(ev->request_json));
        RL_CHECK(!has_control_byte(ev->input_json));
    }
    if (!keep) {
        rl_event_destroy(ev);
        return NULL;
    }
    return ev;
}

static void
expect(const char *what, const char *text, const char *want)
{
    expect_len(what, text, strlen(text), want, 0);
}

/* Places bytes in slot and expects want; a want ending in ':' gets the
 * slot's name ("wrong_type:" in job is "wrong_type:job"). */
static struct rl_event *
expect_in(const char *what, enum slot slot, enum form form, const char *bytes,
          size_t len, const char *want, int keep)
{
    struct placement p = {slot, form, bytes, len};
    struct doc d = build(&p);
    char label[160], reason[REASON_SIZE];
    struct rl_event *ev;

    snprintf(label, sizeof(label), "%s in %s", what, slot_names[slot]);
    if (want && strchr(want, ':') && strchr(want, ':')[1] == '\0') {
        snprintf(reason, sizeof(reason), "%s%s", want, slot_names[slot]);
        want = reason;
    }
    ev = expect_len(label, d.data, d.len, want, keep);
    free(d.data);
    return ev;
}

/* run ID of the default event with one identity field replaced. */
static void
expected_run_id(enum slot slot, const char *value, char *out)
{
    char identity[512];

    snprintf(identity, sizeof(identity), "%s|%s|%s|%s",
             slot == SLOT_JOB ? value : "nightly-digest",
             slot == SLOT_TENANT ? value : "acme", DEFAULT_UTC,
             slot == SLOT_VERSION ? value : "v1");
    RL_REQUIRE(rl_sha256_hex(identity, strlen(identity), out) == 0);
}

/* The effective request carries the payload unchanged: read back from
 * request_json, model, content or the member name decode to exactly what
 * the event's JSON string said. */
static void
check_in_request(const struct rl_event *ev, enum slot slot, const char *json)
{
    struct doc quoted = {NULL, 0, 0};
    cJSON *payload, *wrapper, *request, *found = NULL;

    doc_str(&quoted, "\"");
    doc_str(&quoted, json);
    doc_str(&quoted, "\"");
    payload = cJSON_Parse(quoted.data);
    wrapper = cJSON_Parse(ev->request_json);
    RL_REQUIRE(cJSON_IsString(payload) && wrapper != NULL);
    request = cJSON_GetObjectItemCaseSensitive(wrapper, "request");
    if (slot == SLOT_MODEL)
        found = cJSON_GetObjectItemCaseSensitive(request, "model");
    else if (slot == SLOT_CONTENT)
        found = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(
                cJSON_GetObjectItemCaseSensitive(request, "messages"), 0),
            "content");
    if (slot == SLOT_KEY)
        RL_CHECK(cJSON_GetObjectItemCaseSensitive(
                     request, payload->valuestring) != NULL);
    else
        RL_CHECK(cJSON_IsString(found) &&
                 strcmp(found->valuestring, payload->valuestring) == 0);
    cJSON_Delete(payload);
    cJSON_Delete(wrapper);
    free(quoted.data);
}

/* Invalid UTF-8 anywhere, inside or outside a string, is refused before
 * any JSON is read. */
static void
test_invalid_utf8_in_every_field_is_refused(void)
{
    static const struct {
        const char *what;
        const char *bytes;
    } bad[] = {
        {"overlong '/' (c0 af)", "\xc0\xaf"},
        {"overlong U+007F (c1 bf)", "\xc1\xbf"},
        {"overlong 3-byte '/' (e0 80 af)", "\xe0\x80\xaf"},
        {"overlong 4-byte '/' (f0 80 80 af)", "\xf0\x80\x80\xaf"},
        {"overlong NUL (c0 80)", "\xc0\x80"},
        {"surrogate U+D800", "\xed\xa0\x80"},
        {"surrogate U+DFFF", "\xed\xbf\xbf"},
        {"cesu-8 surrogate pair", "\xed\xa0\xbd\xed\xb8\x80"},
        {"truncated 2-byte sequence", "\xc3"},
        {"truncated 3-byte sequence", "\xe2\x82"},
        {"truncated 4-byte sequence", "\xf0\x9f\x98"},
        {"lone continuation byte", "\x80"},
        {"above U+10FFFF", "\xf4\x90\x80\x80"},
        {"5-byte lead", "\xf8\x88\x80\x80\x80"},
        {"byte ff", "\xff"},
        {"latin-1 e9", "caf\xe9"},
    };
    char text[64];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(text, sizeof(text), "a%sb", bad[i].bytes);
        for (int slot = 0; slot < SLOT_COUNT; slot++)
            expect_in(bad[i].what, (enum slot)slot, AS_STRING, text,
                      strlen(text), "invalid_utf8", 0);
    }

    /* Outside strings, and cut off by the end of the message. */
    {
        struct doc d = build_default();
        static const char head[] = "{\"job\":\"x\xe2\x82";

        expect("invalid utf-8 between members", "{\xc0\xaf\"job\":1}",
               "invalid_utf8");
        expect_len("message cut inside a character", head, sizeof(head) - 1,
                   "invalid_utf8", 0);
        doc_str(&d, "\xe2\x82");
        expect_len("truncated sequence after the event", d.data, d.len,
                   "invalid_utf8", 0);
        free(d.data);
    }
}

/* A NUL would cut the C strings made of a value: refused raw and escaped. */
static void
test_nul_bytes_in_every_field_are_refused(void)
{
    for (int slot = 0; slot < SLOT_COUNT; slot++) {
        expect_in("raw nul", (enum slot)slot, AS_STRING, "a\0b", 3, "nul_byte",
                  0);
        expect_in("escaped \\u0000", (enum slot)slot, AS_STRING, "a\\u0000b", 8,
                  "nul_byte", 0);
        expect_in("leading \\u0000", (enum slot)slot, AS_STRING, "\\u0000v1", 8,
                  "nul_byte", 0);
    }
    {
        struct doc d = build_default();

        doc_add(&d, "\0", 1);
        expect_len("nul after the event", d.data, d.len, "nul_byte", 0);
        free(d.data);
    }
    /* An escaped backslash before "u0000" is text, not a NUL. */
    {
        struct rl_event *ev = expect_in("escaped backslash and u0000", SLOT_JOB,
                                        AS_STRING, "a\\\\u0000b", 9, NULL, 1);

        if (ev)
            RL_CHECK_STREQ(ev->job, "a\\u0000b");
        rl_event_destroy(ev);
    }
}

/* 100,000 levels in any value are refused by the linear scan, before the
 * recursive JSON parser could exhaust the stack. */
static void
test_deep_nesting_is_refused_before_parsing(void)
{
    enum { DEPTH = 100000 };
    struct doc arrays = {NULL, 0, 0}, objects = {NULL, 0, 0};
    struct doc deep_string = {NULL, 0, 0}, open = {NULL, 0, 0};

    doc_repeat(&arrays, "[", DEPTH);
    doc_repeat(&arrays, "]", DEPTH);
    doc_repeat(&objects, "{\"a\":", DEPTH);
    doc_str(&objects, "1");
    doc_repeat(&objects, "}", DEPTH);
    for (int slot = 0; slot < SLOT_COUNT; slot++) {
        if (slot == SLOT_KEY)
            continue;
        expect_in("100k nested arrays", (enum slot)slot, AS_VALUE, arrays.data,
                  arrays.len, "too_deep", 0);
        expect_in("100k nested objects", (enum slot)slot, AS_VALUE,
                  objects.data, objects.len, "too_deep", 0);
    }

    /* Unclosed, and the whole message. */
    doc_repeat(&open, "[", DEPTH);
    expect_len("100k unclosed '['", open.data, open.len, "too_deep", 0);
    expect_len("100k nested arrays as the event", arrays.data, arrays.len,
               "too_deep", 0);

    /* Brackets inside a string are text. */
    doc_repeat(&deep_string, "[{", DEPTH);
    expect_in("100k brackets inside a string", SLOT_CONTENT, AS_STRING,
              deep_string.data, deep_string.len, NULL, 0);

    /* The limit itself: the event object is level 1, so input may hold 63
     * more levels. */
    {
        struct doc ok = {NULL, 0, 0}, over = {NULL, 0, 0};

        doc_repeat(&ok, "[", 63);
        doc_repeat(&ok, "]", 63);
        doc_repeat(&over, "[", 64);
        doc_repeat(&over, "]", 64);
        expect_in("64 levels", SLOT_INPUT, AS_VALUE, ok.data, ok.len, NULL, 0);
        expect_in("65 levels", SLOT_INPUT, AS_VALUE, over.data, over.len,
                  "too_deep", 0);
        free(ok.data);
        free(over.data);
    }
    free(arrays.data);
    free(objects.data);
    free(deep_string.data);
    free(open.data);
}

/* More than 1 MiB is refused before anything reads it; below that, the
 * field limits (200 bytes, counted in bytes, not characters) decide. */
static void
test_huge_strings_are_refused_by_size(void)
{
    struct doc huge = {NULL, 0, 0}, big = {NULL, 0, 0};
    char long_text[301];

    doc_repeat(&huge, "AAAAAAAAAAAAAAAA", 2 * MIB / 16);
    for (int slot = 0; slot < SLOT_COUNT; slot++)
        expect_in("2 MiB string", (enum slot)slot, AS_STRING, huge.data,
                  huge.len, "too_large", 0);
    memset(huge.data, ' ', huge.len);
    expect_len("2 MiB of whitespace", huge.data, huge.len, "too_large", 0);
    free(huge.data);

    /* Exactly 1 MiB is allowed, one byte more is not. */
    {
        struct doc d = build_default();
        struct doc padded = {NULL, 0, 0};

        doc_add(&padded, d.data, d.len - 1);
        doc_str(&padded, ",\"pad\":\"");
        doc_repeat(&padded, "p", MIB - padded.len - 2);
        doc_str(&padded, "\"}");
        RL_REQUIRE(padded.len == MIB);
        expect_len("event of exactly 1 MiB", padded.data, padded.len, NULL, 0);
        doc_str(&padded, " ");
        expect_len("event of 1 MiB + 1", padded.data, padded.len, "too_large",
                   0);
        free(padded.data);
        free(d.data);
    }

    memset(long_text, 'x', 300);
    long_text[300] = '\0';
    for (int slot = 0; slot < SLOT_COUNT; slot++) {
        const char *want = NULL;

        if (is_identity_slot((enum slot)slot) || slot == SLOT_WINDOW)
            want = "field_too_long:";
        else if (slot == SLOT_NOTIFY)
            want = "invalid_notify";
        else if (slot == SLOT_REQUEST || slot == SLOT_MESSAGES)
            want = "invalid_request";
        expect_in("300-byte string", (enum slot)slot, AS_STRING, long_text, 300,
                  want, 0);
    }
    expect_in("300-byte tenant", SLOT_TENANT, AS_STRING, long_text, 300,
              "field_too_long:tenant", 0);

    /* 900 KiB fits the message but not a field. */
    doc_repeat(&big, "j", 900 * 1024);
    expect_in("900 KiB string", SLOT_JOB, AS_STRING, big.data, big.len,
              "field_too_long:", 0);
    expect_in("900 KiB string", SLOT_CONTENT, AS_STRING, big.data, big.len,
              NULL, 0);
    free(big.data);

    /* 100 x "é" is 200 bytes; 101 is 202. */
    {
        struct doc e = {NULL, 0, 0};

        doc_repeat(&e, "\xc3\xa9", 100);
        expect_in("200 bytes of 100 characters", SLOT_VERSION, AS_STRING,
                  e.data, e.len, NULL, 0);
        doc_str(&e, "\xc3\xa9");
        expect_in("202 bytes of 101 characters", SLOT_VERSION, AS_STRING,
                  e.data, e.len, "field_too_long:", 0);
        free(e.data);
    }
}

/* SQL, CRLF and header text is data: the parser neither interprets nor
 * repairs it. It is accepted where the contract allows any text (job,
 * tenant, version, the request, the input) and refused where a value has a
 * grammar (scheduled_at, window, channel names) or where '|' would forge
 * the run identity. */
static void
test_injection_payloads_are_data_or_refused(void)
{
    static const struct {
        const char *what;
        const char *json;   /* content of the JSON string */
        const char *text;   /* as job/tenant/version keep it (stripped) */
        const char *ident;  /* verdict for job, tenant, version */
        const char *window; /* verdict for window */
        const char *at;     /* verdict for scheduled_at */
    } payloads[] = {
        {"sql drop", "'; DROP TABLE runs; --", "'; DROP TABLE runs; --", NULL,
         "invalid_window", "invalid_timestamp"},
        {"sql paren", "Robert'); DROP TABLE runs;--",
         "Robert'); DROP TABLE runs;--", NULL, "invalid_window",
         "invalid_timestamp"},
        {"sql tautology", "1' OR '1'='1", "1' OR '1'='1", NULL,
         "invalid_window", "invalid_timestamp"},
        {"sql dollar quote", "$$; DELETE FROM runs; $$",
         "$$; DELETE FROM runs; $$", NULL, "invalid_window",
         "invalid_timestamp"},
        {"sql union", "v1/**/UNION/**/SELECT/**/passwd/**/FROM/**/pg_shadow",
         "v1/**/UNION/**/SELECT/**/passwd/**/FROM/**/pg_shadow", NULL,
         "invalid_window", "invalid_timestamp"},
        {"sql backslash quote", "\\\\'; COPY runs TO PROGRAM 'id'; --",
         "\\'; COPY runs TO PROGRAM 'id'; --", NULL, "invalid_window",
         "invalid_timestamp"},
        /* '|' is the identity separator. */
        {"sql concat", "' || pg_sleep(10) --", NULL,
         "invalid_field:", "invalid_window", "invalid_timestamp"},
        {"crlf header", "x\\r\\nX-Injected: 1", "x\r\nX-Injected: 1", NULL,
         "invalid_window", "invalid_timestamp"},
        {"http response split", "v1\\r\\n\\r\\nHTTP/1.1 200 OK",
         "v1\r\n\r\nHTTP/1.1 200 OK", NULL, "invalid_window",
         "invalid_timestamp"},
        {"log line forgery", "ok\\n{\\\"level\\\":\\\"error\\\"}",
         "ok\n{\"level\":\"error\"}", NULL, "invalid_window",
         "invalid_timestamp"},
        /* Leading and trailing CR/LF are whitespace (str.strip()). */
        {"crlf around", "\\r\\nX-Evil: 1\\r\\n", "X-Evil: 1", NULL,
         "invalid_window", "invalid_timestamp"},
        {"only crlf", "\\r\\n\\r\\n", NULL,
         "empty_field:", "empty_field:window", "invalid_timestamp"},
        {"unicode line separator", "v1\\u2028X-Evil: 1",
         "v1\xe2\x80\xa8X-Evil: 1", NULL, "invalid_window",
         "invalid_timestamp"},
        {"format string", "%s%s%n%x%p", "%s%s%n%x%p", NULL, "invalid_window",
         "invalid_timestamp"},
        {"ansi escape", "\\u001b[31mred\\u001b[0m", "\x1b[31mred\x1b[0m", NULL,
         "invalid_window", "invalid_timestamp"},
        {"path traversal", "../../../etc/passwd", "../../../etc/passwd", NULL,
         "invalid_window", "invalid_timestamp"},
        {"html", "<script>alert(1)</script>", "<script>alert(1)</script>", NULL,
         "invalid_window", "invalid_timestamp"},
        /* A valid value with a header smuggled after it is not valid. */
        {"timestamp then header", "2026-08-07T09:00:00Z\\r\\nX-Evil: 1",
         "2026-08-07T09:00:00Z\r\nX-Evil: 1", NULL, "invalid_window",
         "invalid_timestamp"},
        /* window is stripped like job; scheduled_at is not stripped. */
        {"window in crlf", "\\r\\nPT1H\\r\\n", "PT1H", NULL, NULL,
         "invalid_timestamp"},
    };

    for (size_t i = 0; i < sizeof(payloads) / sizeof(payloads[0]); i++) {
        const char *json = payloads[i].json;
        size_t len = strlen(json);

        for (int s = 0; s < SLOT_COUNT; s++) {
            enum slot slot = (enum slot)s;
            const char *want = NULL;
            struct rl_event *ev;

            if (slot == SLOT_JOB || slot == SLOT_TENANT || slot == SLOT_VERSION)
                want = payloads[i].ident;
            else if (slot == SLOT_SCHEDULED_AT)
                want = payloads[i].at;
            else if (slot == SLOT_WINDOW)
                want = payloads[i].window;
            else if (slot == SLOT_NOTIFY)
                want = "invalid_notify";
            else if (slot == SLOT_REQUEST || slot == SLOT_MESSAGES)
                want = "invalid_request";
            ev = expect_in(payloads[i].what, slot, AS_STRING, json, len, want,
                           1);
            if (!ev)
                continue;
            if (slot == SLOT_JOB || slot == SLOT_TENANT ||
                slot == SLOT_VERSION) {
                const char *kept = slot == SLOT_JOB      ? ev->job
                                   : slot == SLOT_TENANT ? ev->tenant
                                                         : ev->version;
                char want_id[RL_HEX_SIZE];

                /* Verbatim, and the run ID is the reference's
                 * sha256("job|tenant|utc|version") of that text. */
                RL_CHECK_STREQ(kept, payloads[i].text);
                expected_run_id(slot, payloads[i].text, want_id);
                RL_CHECK_STREQ(ev->run_id, want_id);
            }
            if (slot == SLOT_WINDOW)
                RL_CHECK_STREQ(ev->window, payloads[i].text);
            if (slot == SLOT_MODEL || slot == SLOT_CONTENT || slot == SLOT_KEY)
                check_in_request(ev, slot, json);
            rl_event_destroy(ev);
        }
    }

    /* The same text unescaped, with raw CR/LF inside the string: strict
     * JSON (RFC 8259) forbids it, and so does the event contract. */
    expect_in("raw crlf", SLOT_JOB, AS_STRING, "x\r\nX-Injected: 1",
              strlen("x\r\nX-Injected: 1"), "invalid_json", 0);
}

/* What each field accepts, by JSON type. */
enum kind {
    K_NUMBER,
    K_BOOL,
    K_NULL,
    K_STRING,
    K_EMPTY_ARRAY,
    K_CHANNELS, /* ["x"]: an array of one channel name */
    K_ARRAY,
    K_EMPTY_OBJECT,
    K_OBJECT,
    K_NONFINITE /* a number out of double range */
};

/* The contract of rl/event.h and docs/design.md, "Schedule event", by field. */
static const char *
type_verdict(enum slot slot, enum kind kind)
{
    switch (slot) {
    case SLOT_JOB:
    case SLOT_TENANT:
    case SLOT_VERSION:
        /* Required: null is not absent, it is the wrong type. */
        return kind == K_STRING ? NULL : "wrong_type:";
    case SLOT_SCHEDULED_AT:
        /* The string of this table ("text") is no timestamp. */
        return kind == K_STRING ? "invalid_timestamp" : "wrong_type:";
    case SLOT_WINDOW:
        if (kind == K_NULL)
            return NULL;
        return kind == K_STRING ? "invalid_window" : "wrong_type:window";
    case SLOT_NOTIFY:
        return kind == K_NULL || kind == K_EMPTY_ARRAY || kind == K_CHANNELS
                   ? NULL
                   : "invalid_notify";
    case SLOT_REQUEST:
        return "invalid_request"; /* none of these has model and messages */
    case SLOT_MODEL:
        return kind == K_STRING ? NULL : "invalid_request";
    case SLOT_MESSAGES:
        return kind == K_CHANNELS || kind == K_ARRAY ? NULL : "invalid_request";
    case SLOT_CONTENT:
        /* Free-form, but a fingerprint needs finite numbers. */
        return kind == K_NONFINITE ? "invalid_request" : NULL;
    case SLOT_INPUT:
        return kind == K_NONFINITE ? "invalid_json" : NULL;
    case SLOT_EXTRA:
        return NULL; /* unknown members are not read */
    default:
        return NULL;
    }
}

static void
test_wrong_types_get_the_documented_reason(void)
{
    static const struct {
        const char *json;
        enum kind kind;
    } values[] = {
        {"7", K_NUMBER},          {"-1.5e3", K_NUMBER},
        {"0", K_NUMBER},          {"true", K_BOOL},
        {"false", K_BOOL},        {"null", K_NULL},
        {"\"text\"", K_STRING},   {"[]", K_EMPTY_ARRAY},
        {"[\"x\"]", K_CHANNELS},  {"[7,{\"a\":null}]", K_ARRAY},
        {"{}", K_EMPTY_OBJECT},   {"{\"model\":\"m\"}", K_OBJECT},
        {"1e400", K_NONFINITE},   {"-1e400", K_NONFINITE},
        {"[1e400]", K_NONFINITE},
    };

    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        for (int s = 0; s < SLOT_COUNT; s++) {
            enum slot slot = (enum slot)s;
            const char *want = type_verdict(slot, values[i].kind);
            char what[64];

            if (slot == SLOT_KEY)
                continue;
            snprintf(what, sizeof(what), "value %s", values[i].json);
            expect_in(what, slot, AS_VALUE, values[i].json,
                      strlen(values[i].json), want, 0);
        }
    }
}

/* Numbers that do not fit: refused where they would enter a fingerprint,
 * written in their one canonical form where they fit a double. */
static void
test_numbers_out_of_range(void)
{
    static const struct {
        const char *json;
        const char *canonical; /* NULL: refused as invalid_request */
    } numbers[] = {
        {"1e400", NULL},
        {"-1e400", NULL},
        {"1e-400", "0"},
        {"-0", "0"},
        {"-0.0e5", "0"},
        {"9007199254740993", "9007199254740992"},
        {"99999999999999999999", "1e+20"},
        {"18446744073709551616", "1.8446744073709552e+19"},
        {"-9223372036854775809", "-9.223372036854776e+18"},
        {"1.7976931348623157e308", "1.7976931348623157e+308"},
        {"1.7976931348623159e308", NULL},
        {"5e-324", "5e-324"},
    };
    struct doc digits = {NULL, 0, 0};

    for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
        char value[128], want[160];
        struct rl_event *ev;

        snprintf(value, sizeof(value), "[%s]", numbers[i].json);
        ev = expect_in(numbers[i].json, SLOT_MESSAGES, AS_VALUE, value,
                       strlen(value),
                       numbers[i].canonical ? NULL : "invalid_request", 1);
        if (ev) {
            snprintf(want, sizeof(want), "\"messages\":[%s]",
                     numbers[i].canonical);
            if (!strstr(ev->request_json, want))
                fprintf(stderr, "%s: want %s in %s\n", numbers[i].json, want,
                        ev->request_json);
            RL_CHECK(strstr(ev->request_json, want) != NULL);
        }
        rl_event_destroy(ev);
        expect_in(numbers[i].json, SLOT_INPUT, AS_VALUE, numbers[i].json,
                  strlen(numbers[i].json),
                  numbers[i].canonical ? NULL : "invalid_json", 0);
        expect_in(numbers[i].json, SLOT_JOB, AS_VALUE, numbers[i].json,
                  strlen(numbers[i].json), "wrong_type:job", 0);
    }

    /* A 400-digit integer: out of double range however it is read. */
    doc_repeat(&digits, "9999999999", 40);
    expect_in("400-digit integer", SLOT_CONTENT, AS_VALUE, digits.data,
              digits.len, "invalid_request", 0);
    expect_in("400-digit integer", SLOT_INPUT, AS_VALUE, digits.data,
              digits.len, "invalid_json", 0);
    free(digits.data);

    /* Not JSON numbers at all. */
    expect_in("NaN", SLOT_CONTENT, AS_VALUE, "NaN", 3, "invalid_json", 0);
    expect_in("Infinity", SLOT_CONTENT, AS_VALUE, "Infinity", 8, "invalid_json",
              0);
    expect_in("-Infinity", SLOT_INPUT, AS_VALUE, "-Infinity", 9, "invalid_json",
              0);
    expect_in("hex", SLOT_INPUT, AS_VALUE, "0x10", 4, "invalid_json", 0);
    expect_in("plus sign", SLOT_INPUT, AS_VALUE, "+1", 2, "invalid_json", 0);
    expect_in("bare exponent", SLOT_INPUT, AS_VALUE, "1e", 2, "invalid_json",
              0);
}

/* A repeated member means different things to different readers. */
static void
test_duplicate_keys_are_invalid_json(void)
{
    static const char *const members[] = {
        ",\"job\":\"nightly-digest\"",
        ",\"job\":\"other\"",
        ",\"tenant\":\"acme\"",
        ",\"scheduled_at\":\"2026-08-07T10:00:00Z\"",
        ",\"version\":\"v2\"",
        ",\"window\":null",
        ",\"notify\":[]",
        ",\"request\":{\"model\":\"m\",\"messages\":[1]}",
        ",\"input\":null",
    };

    for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++) {
        struct doc d = build_default();

        d.len--; /* drop the closing brace */
        doc_str(&d, members[i]);
        doc_str(&d, "}");
        expect_len(members[i], d.data, d.len, "invalid_json", 0);
        free(d.data);
    }
    /* Keys compare decoded: an escaped spelling is the same key. */
    {
        struct doc d = build_default();

        d.len--;
        doc_str(&d, ",\"j\\u006fb\":\"other\"}");
        expect_len("job spelled with an escape", d.data, d.len, "invalid_json",
                   0);
        free(d.data);
    }
    /* Every object at every depth: the first reader and the last may not
     * disagree anywhere in the envelope. */
    expect_in("duplicate key in request", SLOT_KEY, AS_STRING, "model", 5,
              "invalid_json", 0);
    expect_in("duplicate key in input", SLOT_INPUT, AS_VALUE,
              "{\"a\":1,\"b\":{\"c\":1,\"c\":1}}",
              strlen("{\"a\":1,\"b\":{\"c\":1,\"c\":1}}"), "invalid_json", 0);
    expect_in(
        "duplicate key in a message", SLOT_MESSAGES, AS_VALUE,
        "[{\"role\":\"user\",\"content\":\"a\",\"content\":\"b\"}]",
        strlen("[{\"role\":\"user\",\"content\":\"a\",\"content\":\"b\"}]"),
        "invalid_json", 0);
    expect_in("duplicate key in input, inside an array", SLOT_INPUT, AS_VALUE,
              "[[{\"a\":1}],[{\"b\":1,\"b\":1}]]",
              strlen("[[{\"a\":1}],[{\"b\":1,\"b\":1}]]"), "invalid_json", 0);
    /* Unknown members are not read, but a repeated key in them still
     * makes the envelope mean two things. */
    expect_in("duplicate key in an unknown member", SLOT_EXTRA, AS_VALUE,
              "{\"c\":1,\"c\":2}", strlen("{\"c\":1,\"c\":2}"), "invalid_json",
              0);
}

/* Only whitespace may follow the object; nothing else is one event. */
static void
test_envelopes_that_are_not_one_object(void)
{
    static const struct {
        const char *what;
        const char *tail;
        size_t len;
        const char *want;
    } tails[] = {
        {"trailing letter", "x", 1, "invalid_json"},
        {"trailing brace", "}", 1, "invalid_json"},
        {"second object", "{}", 2, "invalid_json"},
        {"trailing comma", ",", 1, "invalid_json"},
        {"trailing comment", "//", 2, "invalid_json"},
        {"trailing vertical tab", "\v", 1, "invalid_json"},
        {"trailing form feed", "\f", 1, "invalid_json"},
        {"trailing nul", "\0", 1, "nul_byte"},
        {"trailing ff byte", "\xff", 1, "invalid_utf8"},
        {"trailing json whitespace", " \t\r\n", 4, NULL},
    };
    struct doc spaces = {NULL, 0, 0};

    for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
        struct doc d = build_default();

        doc_add(&d, tails[i].tail, tails[i].len);
        expect_len(tails[i].what, d.data, d.len, tails[i].want, 0);
        free(d.data);
    }

    expect_len("empty message", "", 0, "invalid_json", 0);
    RL_CHECK(rl_event_parse(NULL, 0, NULL, NULL, 0, NULL, 0) == NULL);
    expect("one space", " ", "invalid_json");
    expect("whitespace", " \t\r\n", "invalid_json");
    doc_repeat(&spaces, " ", 100000);
    expect_len("100k spaces", spaces.data, spaces.len, "invalid_json", 0);
    free(spaces.data);
    expect("null", "null", "not_object");
    expect("string", "\"event\"", "not_object");
    expect("array of the event", "[{}]", "not_object");
    expect("open brace", "{", "invalid_json");
    expect("unterminated string", "{\"job\":\"x", "invalid_json");
    expect("single quotes", "{'job':'x'}", "invalid_json");
    expect("trailing comma in object", "{\"job\":\"x\",}", "invalid_json");
    expect("lone surrogate escape", "{\"job\":\"\\ud800\"}", "invalid_json");
    expect("reversed surrogate escapes", "{\"job\":\"\\udc00\\ud800\"}",
           "invalid_json");
    expect("bad escape", "{\"job\":\"\\x41\"}", "invalid_json");
}

/* Parses text that strict JSON would refuse but the contract does not
 * mention: refused as invalid_json, or accepted as the same run (and the
 * same request) as the plain default event. */
static void
expect_refused_or_same_run(const char *what, const char *bytes, size_t len)
{
    struct doc plain = build_default();
    struct rl_event *a, *b;
    char reason[REASON_SIZE] = "";
    char errstr[256] = "";
    char *copy = malloc(len);

    RL_REQUIRE(copy != NULL);
    memcpy(copy, bytes, len);
    a = expect_len("the default event", plain.data, plain.len, NULL, 1);
    b = rl_event_parse(copy, len, NULL, reason, sizeof(reason), errstr,
                       sizeof(errstr));
    free(copy);
    cases++;
    if (a && b) {
        RL_CHECK_STREQ(a->run_id, b->run_id);
        RL_CHECK_STREQ(a->fingerprint, b->fingerprint);
    } else {
        refused++;
        if (strcmp(reason, "invalid_json") != 0)
            fprintf(stderr, "%s: want invalid_json or the same run, got %s\n",
                    what, reason);
        RL_CHECK_STREQ(reason, "invalid_json");
    }
    rl_event_destroy(a);
    rl_event_destroy(b);
    free(plain.data);
}

/* RFC 8259 lets a parser ignore a byte order mark, and cJSON also reads
 * control bytes below 0x20 as whitespace between tokens; the contract says
 * neither. Either way they must not make a different run. */
static void
test_lenient_json_is_not_another_run(void)
{
    struct doc plain = build_default();
    struct doc bom = {NULL, 0, 0}, twice = {NULL, 0, 0};
    struct doc vt = {NULL, 0, 0}, soh = {NULL, 0, 0};

    doc_str(&bom, "\xef\xbb\xbf");
    doc_add(&bom, plain.data, plain.len);
    doc_str(&twice, "\xef\xbb\xbf");
    doc_add(&twice, bom.data, bom.len);
    doc_str(&vt, "\v\f");
    doc_add(&vt, plain.data, plain.len);
    doc_str(&soh, "{\x01\x1f");
    doc_add(&soh, plain.data + 1, plain.len - 1);

    expect_refused_or_same_run("byte order mark", bom.data, bom.len);
    expect_refused_or_same_run("leading vertical tab", vt.data, vt.len);
    expect_refused_or_same_run("control bytes between tokens", soh.data,
                               soh.len);
    expect_len("two byte order marks", twice.data, twice.len, "invalid_json",
               0);
    expect_len("byte order mark alone", "\xef\xbb\xbf", 3, "invalid_json", 0);
    free(plain.data);
    free(bom.data);
    free(twice.data);
    free(vt.data);
    free(soh.data);
}

/* Every proper prefix of an event (a message cut anywhere) is refused, and
 * none is read past its end. */
static void
test_every_truncation_is_refused(void)
{
    struct placement p = {SLOT_TENANT, AS_STRING,
                          "\xc3\xa9t\xe2\x82\xac\xf0"
                          "\x9f\x98\x80",
                          10};
    struct doc d = build(&p);
    char what[64];

    for (size_t n = 0; n < d.len; n++) {
        char reason[REASON_SIZE] = "";
        char *copy = malloc(n ? n : 1);
        struct rl_event *ev;

        RL_REQUIRE(copy != NULL);
        memcpy(copy, d.data, n);
        ev = rl_event_parse(copy, n, NULL, reason, sizeof(reason), NULL, 0);
        free(copy);
        snprintf(what, sizeof(what), "prefix of %zu bytes", n);
        if (ev || (strcmp(reason, "invalid_json") != 0 &&
                   strcmp(reason, "invalid_utf8") != 0))
            fprintf(stderr, "%s: %s\n", what, ev ? "accepted" : reason);
        RL_CHECK(ev == NULL);
        RL_CHECK(strcmp(reason, "invalid_json") == 0 ||
                 strcmp(reason, "invalid_utf8") == 0);
        rl_event_destroy(ev);
        cases++;
        refused++;
    }
    expect_len("the whole event", d.data, d.len, NULL, 0);
    free(d.data);
}

int
main(void)
{
    test_invalid_utf8_in_every_field_is_refused();
    test_nul_bytes_in_every_field_are_refused();
    test_deep_nesting_is_refused_before_parsing();
    test_huge_strings_are_refused_by_size();
    test_injection_payloads_are_data_or_refused();
    test_wrong_types_get_the_documented_reason();
    test_numbers_out_of_range();
    test_duplicate_keys_are_invalid_json();
    test_envelopes_that_are_not_one_object();
    test_lenient_json_is_not_another_run();
    test_every_truncation_is_refused();
    fprintf(stderr, "%d hostile events: %d refused, %d accepted as data\n",
            cases, refused, cases - refused);
    RL_TEST_END();
}
