/* Invariant: a run's id, fingerprint and proposal digest, and an
 * approval's digest, are 64 lowercase hexadecimal characters, refused
 * otherwise at every write of the row, insert and update alike: too short
 * or too long, an upper-case or non-hex letter, a trailing newline, and a
 * multi-byte character that makes 63 characters 64 bytes. (The checks are
 * written as a byte length and an unbounded character class, which
 * PostgreSQL evaluates 13 times faster than the bounded '{64}':
 * schema/024.) */
#include <stdio.h>
#include <string.h>

#include "rl/db_conn.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

#define HEX63 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde"

static const char insert_sql[] =
    "INSERT INTO runs (run_id, job, tenant, scheduled_at, version,"
    "                  fingerprint, request, next_attempt_at)"
    " VALUES ($1, $2, 'workspace-acme', '2026-08-07T09:00:00+00:00', 'v1',"
    "         $3, '{}', now())";

/* Inserts a run with this id and fingerprint (job: a fresh name); returns
 * rl_db_exec's result, errstr the message. */
static int
insert_run(struct rl_db *db, const char *run_id, const char *fingerprint,
           char *errstr, size_t size)
{
    static int n;
    char job[32];
    const char *params[3] = {run_id, job, fingerprint};

    snprintf(job, sizeof(job), "checked-%d", n++);
    return rl_db_exec(db, insert_sql, 3, params, NULL, 0, errstr, size);
}

static void
refused(int rc, const char *errstr, const char *constraint, const char *what)
{
    if (rc >= 0 || !strstr(errstr, constraint))
        fprintf(stderr, "# %s: rc %d, %s\n", what, rc, errstr);
    RL_CHECK(rc == RL_ERR_INVALID);
    RL_CHECK(strstr(errstr, constraint) != NULL);
}

/* Runs sql ($1 a digest, $2 the run's id) with two bad digests, each
 * refused by constraint, then with good_digest, which writes one row. */
static void
digest_checked(struct rl_db *db, const char *sql, const char *constraint,
               const char *bad1, const char *bad2, const char *good_digest,
               const char *run_id)
{
    const char *digests[3] = {bad1, bad2, good_digest};
    char errstr[512];

    for (size_t i = 0; i < 3; i++) {
        const char *params[2] = {digests[i], run_id};
        int rc =
            rl_db_exec(db, sql, 2, params, NULL, 0, errstr, sizeof(errstr));

        if (i < 2)
            refused(rc, errstr, constraint, constraint);
        else
            RL_CHECK_INTEQ(rc, 1);
    }
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);
    static const char *const bad[] = {
        HEX63, /* 63 characters */
        HEX63 "0"
              "0",  /* 65 */
        HEX63 "A",  /* upper case */
        HEX63 "g",  /* not hex */
        HEX63 "\n", /* a trailing newline */
        /* 62 characters and a two-byte one: 64 bytes */
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
        "\xc3\xa9",
        "",
    };
    const char *good = HEX63 "f";
    const char *good2 = HEX63 "e";
    char errstr[512];

    RL_CHECK_INTEQ(strlen(bad[5]), 64);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char what[64];

        snprintf(what, sizeof(what), "bad run_id %zu", i);
        refused(insert_run(db, bad[i], good, errstr, sizeof(errstr)), errstr,
                "runs_run_id_is_sha256_hex", what);
        snprintf(what, sizeof(what), "bad fingerprint %zu", i);
        refused(insert_run(db, good, bad[i], errstr, sizeof(errstr)), errstr,
                "runs_fingerprint_is_sha256_hex", what);
    }
    RL_CHECK_INTEQ(insert_run(db, good, good, errstr, sizeof(errstr)), 1);

    /* An update is checked as well (every check runs at every write):
     * a proposal's digest, the one such column an update may set. */
    digest_checked(db,
                   "UPDATE runs SET proposal = '{}', proposal_digest = $1"
                   " WHERE run_id = $2",
                   "runs_proposal_digest_is_sha256_hex", bad[3], bad[5], good2,
                   good);
    /* An approval's digest. */
    digest_checked(db,
                   "INSERT INTO approvals (run_id, digest, actor, decision)"
                   " VALUES ($2, $1, 'ops@example.com', 'approve')",
                   "approvals_digest_is_sha256_hex", bad[2], bad[5], good2,
                   good);
    fixture_drop(db, schema);
    RL_TEST_END();
}
