/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Which copied chunks a returning member may still tell its peers of
 * (resync_drop_redirtied): only those whose copy is the one a flush covers.
 * Its list of chunks made clean (clean_pending) has prefixes: the copies a
 * flush under way covers, those a finished flush covered, those whose clean
 * bits are on disk too; a chunk copied again after the flush began sits in
 * own_cleared. The pool is built by hand around real dirty maps.
 */
#include "unit.h"
#include <stdint.h>
#include <stdlib.h>

#include "dirty_map.h"
#include "resync.h"
#include "server_pool.h"

enum { SELF = 2, NCHUNKS = 64 };

static struct srv_pool *pool;
static struct dirty_map own;

static void setup(void)
{
	pool = calloc(1, sizeof(*pool));
	ck_assert_ptr_nonnull(pool);
	pool->params.member_id = SELF;
	pool->nchunks = NCHUNKS;
	ck_assert_int_eq(dirty_map_init(&own, NCHUNKS), 0);
	pool->maps[SELF] = &own;
	pool->own_cleared = &pool->own_sets[0];
	pool->own_flushing = &pool->own_sets[1];
	ck_assert_int_eq(dirty_map_init(pool->own_cleared, NCHUNKS), 0);
	ck_assert_int_eq(dirty_map_init(pool->own_flushing, NCHUNKS), 0);
	pool->clean_cap = 16;
	pool->clean_pending = calloc(pool->clean_cap, sizeof(uint64_t));
	ck_assert_ptr_nonnull(pool->clean_pending);
}

static void teardown(void)
{
	dirty_map_destroy(&own);
	dirty_map_destroy(pool->own_cleared);
	dirty_map_destroy(pool->own_flushing);
	free(pool->clean_pending);
	free(pool);
}

/* clean_pending := @chunks, with the prefixes given. */
static void pending(const uint64_t *chunks, uint64_t n, uint64_t flushing, uint64_t covered,
		    uint64_t durable)
{
	ck_assert_uint_le(n, pool->clean_cap);
	for (uint64_t i = 0; i < n; i++)
		pool->clean_pending[i] = chunks[i];
	pool->nclean_pending = n;
	pool->nclean_flushing = flushing;
	pool->nclean_covered = covered;
	pool->nclean_durable = durable;
}

static void expect_pending(const uint64_t *chunks, uint64_t n, uint64_t flushing,
			   uint64_t covered, uint64_t durable)
{
	ck_assert_uint_eq(pool->nclean_pending, n);
	for (uint64_t i = 0; i < n; i++)
		ck_assert_msg(pool->clean_pending[i] == chunks[i], "entry %llu is chunk %llu, not %llu",
			      (unsigned long long)i, (unsigned long long)pool->clean_pending[i],
			      (unsigned long long)chunks[i]);
	ck_assert_uint_eq(pool->nclean_flushing, flushing);
	ck_assert_uint_eq(pool->nclean_covered, covered);
	ck_assert_uint_eq(pool->nclean_durable, durable);
}

START_TEST(chunks_dirty_again_are_dropped_from_every_prefix)
{
	/* 1, 2 durable; 3 covered; 4 under the flush; 5, 6 copied since. */
	const uint64_t before[] = { 1, 2, 3, 4, 5, 6 };
	const uint64_t after[] = { 1, 3, 4, 6 };

	pending(before, 6, 4, 3, 2);
	/* A pulled map (or a verify) says writes missed this member again. */
	ck_assert_int_eq(dirty_map_mark(&own, 2, 1), 0);
	ck_assert_int_eq(dirty_map_mark(&own, 5, 1), 0);
	resync_drop_redirtied(pool);
	expect_pending(after, 4, 3, 2, 1);
}
END_TEST

START_TEST(a_copy_made_again_after_the_flush_began_is_not_told_as_covered)
{
	/*
	 * Chunks 3, 5 and 7 were copied, then a flush began for them. Chunk 5
	 * was dirtied and copied again within one tick: clean in the map, in
	 * own_cleared (no flush covers that copy), listed a second time. The
	 * first entry must go, or the peers would hear of it once this flush
	 * ends, though the copy the member holds is not durable.
	 */
	const uint64_t before[] = { 3, 5, 7, 5 };
	const uint64_t after[] = { 3, 7, 5 };

	pending(before, 4, 3, 0, 0);
	ck_assert_int_eq(dirty_map_mark(pool->own_flushing, 3, 1), 0);
	ck_assert_int_eq(dirty_map_mark(pool->own_flushing, 7, 1), 0);
	ck_assert_int_eq(dirty_map_mark(pool->own_cleared, 5, 1), 0);
	resync_drop_redirtied(pool);
	expect_pending(after, 3, 2, 0, 0);
}
END_TEST

START_TEST(a_copy_made_again_after_a_finished_flush_waits_for_the_next)
{
	/* A flush covered 3 and 5 (their blocks not written yet); 5 copied again since. */
	const uint64_t before[] = { 3, 5, 5 };
	const uint64_t after[] = { 3, 5 };

	pending(before, 3, 2, 2, 0);
	ck_assert_int_eq(dirty_map_mark(pool->own_cleared, 5, 1), 0);
	resync_drop_redirtied(pool);
	expect_pending(after, 2, 1, 1, 0);
}
END_TEST

START_TEST(a_copy_the_next_flush_covers_waits_for_it)
{
	/*
	 * A flush covered 3 and 5; 5 was copied again meanwhile, and the next
	 * flush, under way, took that copy over (own_flushing) before the
	 * peers were told: only the later entry stands for chunk 5.
	 */
	const uint64_t before[] = { 3, 5, 5 };
	const uint64_t after[] = { 3, 5 };

	pending(before, 3, 3, 2, 0);
	ck_assert_int_eq(dirty_map_mark(pool->own_flushing, 5, 1), 0);
	resync_drop_redirtied(pool);
	expect_pending(after, 2, 2, 1, 0);
}
END_TEST

START_TEST(copies_no_flush_has_begun_for_are_kept)
{
	/* Nothing under a flush: every copy since is in own_cleared, and stays listed. */
	const uint64_t chunks[] = { 9, 10, 11 };

	pending(chunks, 3, 0, 0, 0);
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(dirty_map_mark(pool->own_cleared, chunks[i], 1), 0);
	resync_drop_redirtied(pool);
	expect_pending(chunks, 3, 0, 0, 0);
	/* Nor does a durable, untouched entry go. */
	pending(chunks, 3, 3, 3, 3);
	dirty_map_clear_all(pool->own_cleared);
	resync_drop_redirtied(pool);
	expect_pending(chunks, 3, 3, 3, 3);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("resync");
	TCase *tc = tcase_create("drop_redirtied");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, chunks_dirty_again_are_dropped_from_every_prefix);
	tcase_add_test(tc, a_copy_made_again_after_the_flush_began_is_not_told_as_covered);
	tcase_add_test(tc, a_copy_made_again_after_a_finished_flush_waits_for_the_next);
	tcase_add_test(tc, a_copy_the_next_flush_covers_waits_for_it);
	tcase_add_test(tc, copies_no_flush_has_begun_for_are_kept);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
