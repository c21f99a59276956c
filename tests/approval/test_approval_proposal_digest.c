/* rl/approval.h and the "approval" member of a schedule event: approval is
 * part of the fingerprint only when required (every other event keeps the
 * fingerprint it had), and the proposal's digest covers one canonical
 * serialisation, so the text PostgreSQL prints for the stored jsonb hashes
 * to the digest computed when the proposal was made. */
#include <stdlib.h>
#include <string.h>

#include "rl/approval.h"
#include "rl/event.h"
#include "rl/runid.h"
#include "rltest.h"

#define EVENT(tail)                                                            \
    "{\"job\":\"competitor-summary\",\"tenant\":\"workspace-acme\","           \
    "\"scheduled_at\":\"2026-08-07T09:00:00+00:00\",\"version\":\"v1\","       \
    "\"notify\":[\"slack\",\"email\"],\"request\":{\"model\":\"m\","           \
    "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" tail "}"

static struct rl_event *
parse(const char *text, char *reason)
{
    struct rl_event_limits limits;
    char errstr[256];

    rl_event_limits_default(&limits);
    return rl_event_parse(text, strlen(text), &limits, reason, 64, errstr,
                          sizeof(errstr));
}

static void
test_event_approval(void)
{
    char reason[64];
    struct rl_event *plain = parse(EVENT(""), reason);
    struct rl_event *no =
        parse(EVENT(",\"approval\":{\"required\":false}"), reason);
    struct rl_event *nul = parse(EVENT(",\"approval\":null"), reason);
    struct rl_event *yes =
        parse(EVENT(",\"approval\":{\"required\":true}"), reason);

    RL_REQUIRE(plain && no && nul && yes);
    /* Byte-identical effective request without approval. */
    RL_CHECK_STREQ(plain->request_json,
                   "{\"notify\":[\"email\",\"slack\"],\"request\":{"
                   "\"messages\":[{\"content\":\"hi\",\"role\":\"user\"}],"
                   "\"model\":\"m\"}}");
    RL_CHECK_STREQ(no->fingerprint, plain->fingerprint);
    RL_CHECK_STREQ(nul->fingerprint, plain->fingerprint);
    RL_CHECK_INTEQ(plain->approval_required, 0);
    RL_CHECK_INTEQ(no->approval_required, 0);
    /* Approval changes the side effects: another fingerprint, same run. */
    RL_CHECK_INTEQ(yes->approval_required, 1);
    RL_CHECK_STREQ(yes->request_json,
                   "{\"approval\":{\"required\":true},"
                   "\"notify\":[\"email\",\"slack\"],\"request\":{"
                   "\"messages\":[{\"content\":\"hi\",\"role\":\"user\"}],"
                   "\"model\":\"m\"}}");
    RL_CHECK(strcmp(yes->fingerprint, plain->fingerprint) != 0);
    RL_CHECK_STREQ(yes->run_id, plain->run_id);
    RL_CHECK_INTEQ(rl_approval_required(yes->request_json), 1);
    RL_CHECK_INTEQ(rl_approval_required(plain->request_json), 0);
    /* The gate fails closed: what cannot be read is not "no gate". */
    RL_CHECK(rl_approval_required("not json") < 0);
    RL_CHECK(rl_approval_required(NULL) < 0);
    RL_CHECK(rl_approval_required("") < 0);
    RL_CHECK(rl_approval_required("[]") < 0);
    RL_CHECK(rl_approval_required("{\"approval\":{\"required\":true}") < 0);
    RL_CHECK(rl_approval_required("{\"approval\":true}") < 0);
    RL_CHECK(rl_approval_required("{\"approval\":{\"required\":\"yes\"}}") < 0);
    RL_CHECK(rl_approval_required("{\"approval\":{}}") < 0);
    RL_CHECK_INTEQ(rl_approval_required("{\"approval\":null}"), 0);
    RL_CHECK_INTEQ(rl_approval_required("{\"approval\":{\"required\":false}}"),
                   0);
    rl_event_destroy(plain);
    rl_event_destroy(no);
    rl_event_destroy(nul);
    rl_event_destroy(yes);

    RL_CHECK(parse(EVENT(",\"approval\":true"), reason) == NULL);
    RL_CHECK_STREQ(reason, "invalid_approval");
    RL_CHECK(parse(EVENT(",\"approval\":{\"required\":\"yes\"}"), reason) ==
             NULL);
    RL_CHECK_STREQ(reason, "invalid_approval");
    RL_CHECK(parse(EVENT(",\"approval\":{\"requried\":true}"), reason) == NULL);
    RL_CHECK_STREQ(reason, "invalid_approval");
}

static void
test_proposal_digest(void)
{
    const char *request = "{\"approval\":{\"required\":true},"
                          "\"notify\":[\"email\",\"slack\"],"
                          "\"request\":{\"model\":\"m\"}}";
    /* As PostgreSQL prints the stored jsonb: other key order, spaces. */
    const char *stored =
        "{\"content\": {\"text\": \"Please add a timeout\", \"n\": 1.0}, "
        "\"operation\": \"notify\", \"destination\": [{\"channel\": "
        "\"email\"}, {\"channel\": \"slack\"}]}";
    char *canonical = NULL, *again = NULL;
    char digest[RL_HEX_SIZE], digest2[RL_HEX_SIZE], fp[RL_HEX_SIZE];
    char errstr[256];

    RL_REQUIRE(rl_approval_proposal(
                   request, "{\"text\":\"Please add a timeout\",\"n\":1}",
                   &canonical, digest, errstr, sizeof(errstr)) == 0);
    RL_CHECK_STREQ(canonical,
                   "{\"content\":{\"n\":1,\"text\":\"Please add a timeout\"},"
                   "\"destination\":[{\"channel\":\"email\"},{\"channel\":"
                   "\"slack\"}],\"operation\":\"notify\"}");
    RL_REQUIRE(rl_sha256_hex(canonical, strlen(canonical), fp) == 0);
    RL_CHECK_STREQ(digest, fp);
    RL_REQUIRE(rl_approval_canonical(stored, &again, digest2, errstr,
                                     sizeof(errstr)) == 0);
    RL_CHECK_STREQ(again, canonical);
    RL_CHECK_STREQ(digest2, digest);
    free(again);

    /* Another destination or other words: another digest. */
    RL_REQUIRE(
        rl_approval_proposal("{\"notify\":[\"email\"]}",
                             "{\"text\":\"Please add a timeout\",\"n\":1}",
                             &again, digest2, errstr, sizeof(errstr)) == 0);
    RL_CHECK(strcmp(digest2, digest) != 0);
    free(again);
    RL_REQUIRE(rl_approval_proposal(
                   request, "{\"text\":\"Please add a retry\",\"n\":1}", &again,
                   digest2, errstr, sizeof(errstr)) == 0);
    RL_CHECK(strcmp(digest2, digest) != 0);
    free(again);
    free(canonical);

    RL_CHECK(rl_approval_proposal(request, "{oops", &again, digest2, errstr,
                                  sizeof(errstr)) != 0);
    RL_CHECK(again == NULL);
}

int
main(void)
{
    test_event_approval();
    test_proposal_digest();
    RL_TEST_END();
}
