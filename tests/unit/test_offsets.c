/* The committed position only ever covers a contiguous prefix of offsets
 * whose runs are durable: a done offset behind an unfinished one is never
 * committable. */
#include "rl/offsets.h"
#include "rl/testing.h"
#include "rltest.h"

static void
test_prefix_only_moves_over_contiguous_done(void)
{
    struct rl_offsets *t = rl_offsets_new();

    RL_REQUIRE(t);
    for (int64_t o = 10; o < 15; o++)
        RL_CHECK_INTEQ(rl_offsets_add(t, 0, o), 0);
    RL_CHECK_INTEQ(rl_offsets_in_flight(t), 5);

    /* 11 and 12 done, 10 not: nothing may be committed. */
    RL_CHECK_INTEQ(rl_offsets_done(t, 0, 11), 0);
    RL_CHECK_INTEQ(rl_offsets_done(t, 0, 12), 0);
    RL_CHECK_INTEQ(rl_offsets_take_committable(t, 0), -1);

    /* 10 done: the prefix 10..12 is durable, commit position 13. */
    RL_CHECK_INTEQ(rl_offsets_done(t, 0, 10), 1);
    RL_CHECK_INTEQ(rl_offsets_take_committable(t, 0), 13);
    RL_CHECK_INTEQ(rl_offsets_take_committable(t, 0), -1);
    RL_CHECK_INTEQ(rl_offsets_in_flight(t), 2);

    RL_CHECK_INTEQ(rl_offsets_done(t, 0, 14), 0);
    RL_CHECK_INTEQ(rl_offsets_done(t, 0, 13), 1);
    RL_CHECK_INTEQ(rl_offsets_take_committable(t, 0), 15);
    RL_CHECK_INTEQ(rl_offsets_in_flight(t), 0);
    rl_offsets_destroy(t);
}

static void
test_partitions_are_independent(void)
{
    struct rl_offsets *t = rl_offsets_new();

    RL_REQUIRE(t);
    RL_CHECK_INTEQ(rl_offsets_add(t, 0, 0), 0);
    RL_CHECK_INTEQ(rl_offsets_add(t, 1, 100), 0);
    RL_CHECK_INTEQ(rl_offsets_add(t, 1, 101), 0);
    RL_CHECK_INTEQ(rl_offsets_done(t, 1, 100), 1);
    RL_CHECK_INTEQ(rl_offsets_take_committable(t, 1), 101);
    RL_CHECK_INTEQ(rl_offsets_take_committable(t, 0), -1);
    rl_offsets_destroy(t);
}

static void
test_out_of_order_add_is_refused(void)
{
    struct rl_offsets *t = rl_offsets_new();

    RL_REQUIRE(t);
    RL_CHECK_INTEQ(rl_offsets_add(t, 0, 5), 0);
    RL_CHECK(rl_offsets_add(t, 0, 5) != 0);
    RL_CHECK(rl_offsets_add(t, 0, 4) != 0);
    rl_offsets_destroy(t);
}

static void
test_revoked_partition_ignores_late_done(void)
{
    struct rl_offsets *t = rl_offsets_new();

    RL_REQUIRE(t);
    RL_CHECK_INTEQ(rl_offsets_add(t, 3, 7), 0);
    rl_offsets_forget(t, 3);
    RL_CHECK_INTEQ(rl_offsets_in_flight(t), 0);
    RL_CHECK_INTEQ(rl_offsets_done(t, 3, 7), 0);
    RL_CHECK_INTEQ(rl_offsets_take_committable(t, 3), -1);
    rl_offsets_destroy(t);
}

static void
test_ring_growth_keeps_order(void)
{
    struct rl_offsets *t = rl_offsets_new();

    RL_REQUIRE(t);
    /* Wrap the ring, then grow it while wrapped. */
    for (int64_t o = 0; o < 50; o++)
        RL_REQUIRE(rl_offsets_add(t, 0, o) == 0);
    for (int64_t o = 0; o < 40; o++)
        rl_offsets_done(t, 0, o);
    RL_CHECK_INTEQ(rl_offsets_take_committable(t, 0), 40);
    for (int64_t o = 50; o < 1000; o++)
        RL_REQUIRE(rl_offsets_add(t, 0, o) == 0);
    for (int64_t o = 999; o >= 40; o--)
        rl_offsets_done(t, 0, o);
    RL_CHECK_INTEQ(rl_offsets_take_committable(t, 0), 1000);
    RL_CHECK_INTEQ(rl_offsets_in_flight(t), 0);
    rl_offsets_destroy(t);
}

int
main(void)
{
    test_prefix_only_moves_over_contiguous_done();
    test_partitions_are_independent();
    test_out_of_order_add_is_refused();
    test_revoked_partition_ignores_late_done();
    test_ring_growth_keeps_order();
    RL_TEST_END();
}
