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

static void expect_pending(const char *why, const uint64_t *chunks, uint64_t n,
			   uint64_t flushing, uint64_t covered, uint64_t durable)
{
	ck_assert_msg(pool->nclean_pending == n, "%s: %llu entries left, not %llu", why,
		      (unsigned long long)pool->nclean_pending, (unsigned long long)n);
	for (uint64_t i = 0; i < n; i++)
		ck_assert_msg(pool->clean_pending[i] == chunks[i], "%s: entry %llu is chunk %llu, not %llu",
			      why, (unsigned long long)i, (unsigned long long)pool->clean_pending[i],
			      (unsigned long long)chunks[i]);
	ck_assert_msg(pool->nclean_flushing == flushing && pool->nclean_covered == covered &&
			      pool->nclean_durable == durable,
		      "%s: prefixes %llu/%llu/%llu, not %llu/%llu/%llu", why,
		      (unsigned long long)pool->nclean_flushing,
		      (unsigned long long)pool->nclean_covered,
		      (unsigned long long)pool->nclean_durable, (unsigned long long)flushing,
		      (unsigned long long)covered, (unsigned long long)durable);
}

/* A list of chunks, ended by END. */
#define END UINT64_MAX
#define LIST(...) { __VA_ARGS__, END }

/* One case: clean_pending and its prefixes before and after, and the maps. */
struct drop_case {
	const char *why;
	uint64_t before[8], flushing, covered, durable;
	uint64_t own_dirty[4], own_cleared[4], own_flushing[4];
	uint64_t after[8], flushing_after, covered_after, durable_after;
};

static const struct drop_case cases[] = {
	{ "chunks dirty again (a pulled map, a verify) leave every prefix: "
	  "1, 2 durable, 3 covered, 4 under the flush, 5, 6 copied since",
	  LIST(1, 2, 3, 4, 5, 6), 4, 3, 2,
	  LIST(2, 5), LIST(END), LIST(END),
	  LIST(1, 3, 4, 6), 3, 2, 1 },
	{ "a copy made again after the flush began is not told as covered: 3, 5, 7 "
	  "under the flush, 5 dirtied and copied again within one tick (own_cleared)",
	  LIST(3, 5, 7, 5), 3, 0, 0,
	  LIST(END), LIST(5), LIST(3, 7),
	  LIST(3, 7, 5), 2, 0, 0 },
	{ "a copy made again after a finished flush waits for the next: 3, 5 covered "
	  "(their blocks not written yet), 5 copied again since",
	  LIST(3, 5, 5), 2, 2, 0,
	  LIST(END), LIST(5), LIST(END),
	  LIST(3, 5), 1, 1, 0 },
	{ "a copy the next flush took over waits for it: 3, 5 covered, 5 copied again "
	  "and under the flush now under way (own_flushing)",
	  LIST(3, 5, 5), 3, 2, 0,
	  LIST(END), LIST(END), LIST(5),
	  LIST(3, 5), 2, 1, 0 },
	{ "copies no flush began for stay listed",
	  LIST(9, 10, 11), 0, 0, 0,
	  LIST(END), LIST(9, 10, 11), LIST(END),
	  LIST(9, 10, 11), 0, 0, 0 },
	{ "durable entries nothing touched stay listed",
	  LIST(9, 10, 11), 3, 3, 3,
	  LIST(END), LIST(END), LIST(END),
	  LIST(9, 10, 11), 3, 3, 3 },
};

static uint64_t list_len(const uint64_t *l)
{
	uint64_t n = 0;

	while (l[n] != END)
		n++;
	return n;
}

static void mark_all(struct dirty_map *m, const uint64_t *l)
{
	for (; *l != END; l++)
		ck_assert_int_eq(dirty_map_mark(m, *l, 1), 0);
}

START_TEST(drop_redirtied_keeps_only_covered_copies)
{
	const struct drop_case *t = &cases[_i];

	pending(t->before, list_len(t->before), t->flushing, t->covered, t->durable);
	mark_all(&own, t->own_dirty);
	mark_all(pool->own_cleared, t->own_cleared);
	mark_all(pool->own_flushing, t->own_flushing);
	resync_drop_redirtied(pool);
	expect_pending(t->why, t->after, list_len(t->after), t->flushing_after, t->covered_after,
		       t->durable_after);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("resync");
	TCase *tc = tcase_create("drop_redirtied");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, drop_redirtied_keeps_only_covered_copies, 0,
			    (int)(sizeof(cases) / sizeof(cases[0])));
	suite_add_tcase(s, tc);
	return unit_run(s);
}
