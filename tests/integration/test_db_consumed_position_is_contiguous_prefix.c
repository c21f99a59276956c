/* Invariant: a partition's consumed position (consumed_positions) is never
 * past an offset whose registration or note is not in the ledger. A
 * failover to an asynchronous standby keeps a prefix of the transactions,
 * so a position that ran ahead of a registration (or a refused event's
 * note ahead of the registrations of its batch) would leave a lost run
 * behind it, and nothing would read its event again.
 *
 * Registrations of offsets 0, 1 and 3 move the position to 2, not 4; a
 * note of offset 5 before 2..4 are in does not move it; it moves one by
 * one as 2, 3, 4 and 5 come in. A partition with no row starts at its
 * first offset registered, and a refused event's note never carries it
 * past a registration of its batch that is missing. A note's range covers
 * the offsets Kafka never delivers before an event (transaction markers),
 * which no registration names. */
#include <stdio.h>
#include <string.h>

#include "rl/db_claim.h"
#include "rl/db_conn.h"
#include "rl/db_positions.h"
#include "rl/err.h"
#include "rltest.h"
#include "rltest_db.h"
#include "test_db_fixture.h"

static const char request[] =
    "{\"notify\":[],\"request\":{\"messages\":[],\"model\":\"m\"}}";

static void
register_at(struct rl_db *db, const int *offsets, size_t n, int32_t partition)
{
    struct fixture_run runs[8];
    struct rl_run_reg regs[8];
    struct rl_claim claims[8];
    char errstr[512], when[64];

    RL_REQUIRE(n <= 8);
    for (size_t i = 0; i < n; i++) {
        snprintf(when, sizeof(when), "2026-08-07T09:%02d:%02d+00:00",
                 (int)partition, offsets[i]);
        fixture_run_init_at(&runs[i], "positions", when, request, NULL);
        regs[i] = runs[i].reg;
        regs[i].source_topic = "events";
        regs[i].source_partition = partition;
        regs[i].source_offset = offsets[i];
    }
    RL_REQUIRE(rl_db_register_claim_some(
                   db, regs, n,
                   &(struct rl_claim_opts){
                       .worker = "w1", .lease_seconds = 30, .max = 0},
                   claims, errstr, sizeof(errstr)) == 0);
    for (size_t i = 0; i < n; i++)
        rl_claim_clear(&claims[i]);
}

static int64_t
position(struct rl_db *db, int32_t partition)
{
    int64_t next = -2;
    char errstr[512];

    RL_REQUIRE(rl_db_read_positions(db, "events", &partition, 1, &next, errstr,
                                    sizeof(errstr)) == 0);
    return next;
}

static void
note(struct rl_db *db, int32_t partition, int64_t offset)
{
    char errstr[512];
    int64_t next = offset + 1;

    RL_REQUIRE(rl_db_note_positions(db, "events", &partition, &offset, &next, 1,
                                    errstr, sizeof(errstr)) == 0);
}

static void
note_range(struct rl_db *db, int32_t partition, int64_t first, int64_t next)
{
    char errstr[512];

    RL_REQUIRE(rl_db_note_positions(db, "events", &partition, &first, &next, 1,
                                    errstr, sizeof(errstr)) == 0);
}

int
main(void)
{
    char schema[RL_DB_SCHEMA_MAX + 1];
    struct rl_db *db = fixture_ledger(schema);

    register_at(db, (const int[]){0, 1, 3}, 3, 0);
    RL_CHECK_INTEQ(position(db, 0), 2);
    note(db, 0, 5);
    RL_CHECK_INTEQ(position(db, 0), 2);
    /* the position moves over what one statement names: offset 3 of an
     * earlier one is named again (the events read again from the gap) */
    register_at(db, (const int[]){2}, 1, 0);
    RL_CHECK_INTEQ(position(db, 0), 3);
    register_at(db, (const int[]){3}, 1, 0);
    RL_CHECK_INTEQ(position(db, 0), 4);
    note(db, 0, 4);
    RL_CHECK_INTEQ(position(db, 0), 5);
    note(db, 0, 5);
    RL_CHECK_INTEQ(position(db, 0), 6);

    /* a refused event noted first on a partition with no row yet, then
     * the registrations of its batch around it */
    note(db, 1, 11);
    RL_CHECK_INTEQ(position(db, 1), 12);
    register_at(db, (const int[]){12, 14}, 2, 1);
    RL_CHECK_INTEQ(position(db, 1), 13);

    /* offsets Kafka never delivers (transaction markers at 21 and 23)
     * are covered by the range of the event after them */
    register_at(db, (const int[]){20, 22, 24}, 3, 2);
    RL_CHECK_INTEQ(position(db, 2), 21);
    note_range(db, 2, 21, 23);
    note_range(db, 2, 23, 25);
    RL_CHECK_INTEQ(position(db, 2), 25);

    fixture_drop(db, schema);
    RL_TEST_END();
}
