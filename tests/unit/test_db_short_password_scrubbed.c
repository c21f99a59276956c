/* A connection error never carries the password, however short: every
 * occurrence of a one- or two-character password becomes "***", and the
 * message, which grows by the replacement, stays inside its buffer (the
 * address sanitizer build catches a write past it). No server is needed:
 * every host of the list refuses, and libpq's message for the attempt
 * names each of them, over a kilobyte in all. */
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rltest.h"

static void
check_scrubbed(const char *password)
{
    char conninfo[1024];
    char errstr[4096];
    size_t o;
    struct rl_db *db;

    o = (size_t)snprintf(conninfo, sizeof(conninfo), "host=");
    for (int i = 0; i < 24; i++)
        o += (size_t)snprintf(conninfo + o, sizeof(conninfo) - o, "%s127.0.0.1",
                              i ? "," : "");
    snprintf(conninfo + o, sizeof(conninfo) - o,
             " port=1 user=u dbname=d connect_timeout=2 password=%s", password);
    db = rl_db_connect(conninfo, errstr, sizeof(errstr));
    RL_REQUIRE(db == NULL);
    RL_CHECK(strncmp(errstr, "could not connect to postgresql: ", 33) == 0);
    /* The host list is what carried the password: it must have been cut
     * to "***" everywhere, not only at its first occurrence. */
    RL_CHECK(strstr(errstr, "***") != NULL);
    if (strstr(errstr, password)) {
        fprintf(stderr, "password \"%s\" left in: %s\n", password, errstr);
        RL_CHECK(strstr(errstr, password) == NULL);
    }
    RL_CHECK(strlen(errstr) < 1024 + 64);
}

int
main(void)
{
    check_scrubbed("7");
    check_scrubbed("0.");
    check_scrubbed("127");
    RL_TEST_END();
}
