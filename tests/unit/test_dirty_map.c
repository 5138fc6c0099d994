/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Dirty map: model-checked against a plain array, memory follows the spread. */
#include "unit.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dirty_map.h"


START_TEST(matches_a_plain_array_under_random_operations)
{
	const uint64_t n = 4096 * 512 + 3 * 4096 + 777; /* crosses a first-level page, odd tail */
	uint8_t *model = calloc(n, 1);
	struct dirty_map m;
	uint64_t dirty = 0;

	ck_assert_int_eq(dirty_map_init(&m, n), 0);
	srand(7);
	for (int op = 0; op < 200000; op++) {
		/* Cluster half of the operations in one page so it turns dense. */
		uint64_t c = (op & 1) ? (uint64_t)rand() % 4096 + 8192 : (uint64_t)rand() % n;
		uint8_t v = (uint8_t)(rand() % 4);

		if (rand() % 3 == 0)
			v = 0;
		expect(dirty_map_set(&m, c, v) == 0);
		dirty += (uint64_t)(int64_t)((int)(v & DIRTY_BIT) - (int)(model[c] & DIRTY_BIT));
		model[c] = v;
		if (op % 50000 == 0) {
			for (uint64_t i = 0; i < n; i += 97)
				expect(dirty_map_get(&m, i) == model[i]);
		}
	}
	ck_assert_uint_eq(dirty_map_count(&m), dirty);
	for (uint64_t i = 0; i < n; i++)
		expect(dirty_map_get(&m, i) == model[i]);

	/* next() visits exactly the entries with the bits asked for. */
	uint64_t c = dirty_map_next(&m, 0, DIRTY_BIT);
	for (uint64_t i = 0; i < n; i++) {
		if (model[i] & DIRTY_BIT) {
			expect(c == i);
			c = dirty_map_next(&m, i + 1, DIRTY_BIT);
		}
	}
	ck_assert_uint_eq(c, UINT64_MAX);

	/* Clearing every entry one by one frees every page. */
	for (uint64_t i = 0; i < n; i++)
		expect(dirty_map_set(&m, i, 0) == 0);
	ck_assert_uint_eq(dirty_map_count(&m), 0);
	ck_assert_uint_eq(dirty_map_memory(&m), 0);
	dirty_map_destroy(&m);
	free(model);
}
END_TEST

START_TEST(memory_follows_the_dirty_spread)
{
	/* 1 TiB at 128 KiB chunks: 2^23 chunks; 1 % of them dirty, spread evenly. */
	const uint64_t n = 1ull << 23;
	struct dirty_map m;

	ck_assert_int_eq(dirty_map_init(&m, n), 0);
	ck_assert_uint_eq(dirty_map_memory(&m), 0);
	for (uint64_t c = 0; c < n; c += 100)
		expect(dirty_map_set(&m, c, DIRTY_BIT) == 0);
	ck_assert_uint_eq(dirty_map_count(&m), (n + 99) / 100);
	ck_assert_uint_le(dirty_map_memory(&m), 8u << 20);
	/* Fully dirty: one byte per chunk plus page headers. */
	ck_assert_int_eq(dirty_map_mark(&m, 0, n), 0);
	ck_assert_uint_eq(dirty_map_count(&m), n);
	ck_assert_uint_le(dirty_map_memory(&m), n + n / 64);
	dirty_map_clear_all(&m);
	ck_assert_uint_eq(dirty_map_memory(&m), 0);
	ck_assert_uint_eq(dirty_map_next(&m, 0, DIRTY_BIT), UINT64_MAX);
	dirty_map_destroy(&m);
}
END_TEST

START_TEST(capacity_and_bounds)
{
	struct dirty_map m;

	ck_assert_int_eq(dirty_map_init(&m, 0), -EINVAL);
	ck_assert_int_eq(dirty_map_init(&m, DIRTY_MAP_MAX_CHUNKS + 1), -EINVAL);
	ck_assert_int_eq(dirty_map_init(&m, DIRTY_MAP_MAX_CHUNKS), 0);
	ck_assert_int_eq(dirty_map_set(&m, DIRTY_MAP_MAX_CHUNKS - 1, DIRTY_BIT), 0);
	ck_assert_int_eq(dirty_map_set(&m, DIRTY_MAP_MAX_CHUNKS, DIRTY_BIT), -ERANGE);
	ck_assert_int_eq(dirty_map_mark(&m, DIRTY_MAP_MAX_CHUNKS - 1, 2), -ERANGE);
	ck_assert_uint_eq(dirty_map_next(&m, 0, DIRTY_BIT), DIRTY_MAP_MAX_CHUNKS - 1);
	ck_assert_uint_eq(dirty_map_get(&m, DIRTY_MAP_MAX_CHUNKS + 5), 0);
	ck_assert_uint_lt(dirty_map_memory(&m), 8192);
	/* The syncing bit alone is not dirty. */
	ck_assert_int_eq(dirty_map_set(&m, 5, SYNCING_BIT), 0);
	ck_assert_uint_eq(dirty_map_count(&m), 1);
	ck_assert_uint_eq(dirty_map_next(&m, 0, SYNCING_BIT), 5);
	dirty_map_destroy(&m);
}
END_TEST

/*
 * A cover holds every dirty chunk, no chunk past the end, at most the
 * ranges asked for, and no more chunks than the finest block size that
 * fits needs; exact when the runs fit. Merge adds one map to another.
 */
START_TEST(cover_holds_every_dirty_chunk_in_few_ranges)
{
	const uint64_t n = 100003;
	struct dirty_map m, sum;
	struct dirty_range r[8];
	unsigned got;

	ck_assert_int_eq(dirty_map_init(&m, n), 0);
	ck_assert_uint_eq(dirty_map_cover(&m, 8, r), 0);
	/* Three runs, one at the odd end: exact. */
	ck_assert_int_eq(dirty_map_mark(&m, 5, 3), 0);
	ck_assert_int_eq(dirty_map_mark(&m, 4096, 1), 0);
	ck_assert_int_eq(dirty_map_mark(&m, n - 2, 2), 0);
	got = dirty_map_cover(&m, 8, r);
	ck_assert_uint_eq(got, 3);
	ck_assert(r[0].first == 5 && r[0].count == 3);
	ck_assert(r[1].first == 4096 && r[1].count == 1);
	ck_assert(r[2].first == n - 2 && r[2].count == 2);
	/* Adjacent runs are one range. */
	ck_assert_int_eq(dirty_map_mark(&m, 8, 2), 0);
	ck_assert_uint_eq(dirty_map_cover(&m, 8, r), 3);
	ck_assert(r[0].first == 5 && r[0].count == 5);

	/* Many scattered chunks into a few ranges. */
	srand(11);
	for (int k = 0; k < 500; k++)
		ck_assert_int_eq(dirty_map_mark(&m, (uint64_t)rand() % n, 1), 0);
	for (unsigned max = 1; max <= 8; max++) {
		uint64_t covered = 0;

		got = dirty_map_cover(&m, max, r);
		ck_assert(got >= 1 && got <= max);
		for (unsigned i = 0; i < got; i++) {
			ck_assert(r[i].count >= 1 && r[i].first + r[i].count <= n);
			if (i)
				ck_assert(r[i].first > r[i - 1].first + r[i - 1].count);
			covered += r[i].count;
		}
		for (uint64_t c = dirty_map_next(&m, 0, DIRTY_BIT); c != UINT64_MAX;
		     c = dirty_map_next(&m, c + 1, DIRTY_BIT)) {
			bool in = false;

			for (unsigned i = 0; i < got && !in; i++)
				in = c >= r[i].first && c < r[i].first + r[i].count;
			expect(in);
		}
		ck_assert_uint_le(covered, n);
	}
	/* One range: from the first dirty block to the end. */
	ck_assert_uint_eq(dirty_map_cover(&m, 1, r), 1);
	ck_assert_uint_eq(r[0].first + r[0].count, n);

	ck_assert_int_eq(dirty_map_init(&sum, n), 0);
	ck_assert_int_eq(dirty_map_mark(&sum, 1, 1), 0);
	ck_assert_int_eq(dirty_map_merge(&sum, &m), 0);
	ck_assert_uint_eq(dirty_map_count(&sum), dirty_map_count(&m) + !(dirty_map_get(&m, 1) & DIRTY_BIT));
	for (uint64_t c = dirty_map_next(&m, 0, DIRTY_BIT); c != UINT64_MAX;
	     c = dirty_map_next(&m, c + 1, DIRTY_BIT))
		expect(dirty_map_get(&sum, c) & DIRTY_BIT);
	dirty_map_destroy(&sum);
	dirty_map_destroy(&m);
}
END_TEST

/*
 * Records (RECORD_BIT): counted like misses, never together with one in a
 * map of another member; a miss replaces a record, a record leaves a miss;
 * merge keeps each kind, absorb makes records misses that remember they
 * were records, cover finds them on their own.
 */
START_TEST(records_yield_to_misses)
{
	const uint64_t n = 20000;
	struct dirty_map m, sum;
	struct dirty_range r[4];

	ck_assert_int_eq(dirty_map_init(&m, n), 0);
	ck_assert_int_eq(dirty_map_record(&m, 10, 5), 0);
	ck_assert_uint_eq(dirty_map_count(&m), 5);
	ck_assert_uint_eq(dirty_map_get(&m, 10), RECORD_BIT);
	ck_assert_uint_eq(dirty_map_next(&m, 0, DIRTY_BIT), UINT64_MAX);
	/* A miss replaces the record it lands on; a record leaves a miss alone. */
	ck_assert_int_eq(dirty_map_mark(&m, 12, 1), 0);
	ck_assert_uint_eq(dirty_map_get(&m, 12), DIRTY_BIT);
	ck_assert_int_eq(dirty_map_record(&m, 12, 1), 0);
	ck_assert_uint_eq(dirty_map_get(&m, 12), DIRTY_BIT);
	ck_assert_uint_eq(dirty_map_count(&m), 5);
	/* A whole page of misses over records: misses, each counted once. */
	ck_assert_int_eq(dirty_map_record(&m, 4096, 10), 0);
	ck_assert_int_eq(dirty_map_mark(&m, 4096, 4096), 0);
	ck_assert_uint_eq(dirty_map_count(&m), 5 + 4096);
	ck_assert_uint_eq(dirty_map_records(&m), 4);
	ck_assert_uint_eq(dirty_map_get(&m, 4100), DIRTY_BIT);
	ck_assert_uint_eq(dirty_map_next(&m, 20, RECORD_BIT), UINT64_MAX);
	/* Cleared, a record is gone and uncounted. */
	ck_assert_int_eq(dirty_map_set(&m, 10, 0), 0);
	ck_assert_uint_eq(dirty_map_count(&m), 4 + 4096);
	ck_assert_uint_eq(dirty_map_records(&m), 3);
	/* Cover by kind: the records 11, 13, 14 only. */
	ck_assert_uint_eq(dirty_map_cover_bits(&m, RECORD_BIT, 4, r), 2);
	ck_assert(r[0].first == 11 && r[0].count == 1);
	ck_assert(r[1].first == 13 && r[1].count == 2);

	/* Merge: misses win over records, records fill clean entries. */
	ck_assert_int_eq(dirty_map_init(&sum, n), 0);
	ck_assert_int_eq(dirty_map_mark(&sum, 11, 1), 0);
	ck_assert_int_eq(dirty_map_record(&sum, 12, 1), 0);
	ck_assert_int_eq(dirty_map_merge(&sum, &m), 0);
	ck_assert_uint_eq(dirty_map_get(&sum, 11), DIRTY_BIT);
	ck_assert_uint_eq(dirty_map_get(&sum, 12), DIRTY_BIT);
	ck_assert_uint_eq(dirty_map_get(&sum, 13), RECORD_BIT);
	ck_assert_uint_eq(dirty_map_count(&sum), dirty_map_count(&m));
	dirty_map_destroy(&sum);

	/* Absorb: records become misses that were records; misses stay plain. */
	ck_assert_int_eq(dirty_map_init(&sum, n), 0);
	ck_assert_int_eq(dirty_map_absorb(&sum, &m), 0);
	ck_assert_uint_eq(dirty_map_get(&sum, 12), DIRTY_BIT);
	ck_assert_uint_eq(dirty_map_get(&sum, 13), DIRTY_BIT | RECORD_BIT);
	ck_assert_uint_eq(dirty_map_next(&sum, 0, DIRTY_BIT), 11);
	ck_assert_uint_eq(dirty_map_count(&sum), dirty_map_count(&m));
	/* A later miss of such a chunk is a plain miss. */
	ck_assert_int_eq(dirty_map_mark(&sum, 13, 1), 0);
	ck_assert_uint_eq(dirty_map_get(&sum, 13), DIRTY_BIT);
	ck_assert_int_eq(dirty_map_record(&sum, n - 1, 2), -ERANGE);
	dirty_map_destroy(&sum);
	dirty_map_destroy(&m);
}
END_TEST

/*
 * Records of an older boot (RECORD_OLD_BIT): aged in place, kept through
 * merges and absorbs from either side, dropped by a miss with the record.
 */
START_TEST(older_boot_records_stay_older)
{
	const uint64_t n = 10000;
	struct dirty_map m, sum;

	ck_assert_int_eq(dirty_map_init(&m, n), 0);
	ck_assert_int_eq(dirty_map_record(&m, 10, 4), 0);
	ck_assert_int_eq(dirty_map_mark(&m, 20, 1), 0);
	ck_assert_int_eq(dirty_map_age(&m, 0, 12), 0);
	ck_assert_uint_eq(dirty_map_get(&m, 10), RECORD_BIT | RECORD_OLD_BIT);
	ck_assert_uint_eq(dirty_map_get(&m, 11), RECORD_BIT | RECORD_OLD_BIT);
	ck_assert_uint_eq(dirty_map_get(&m, 12), RECORD_BIT);
	ck_assert_uint_eq(dirty_map_get(&m, 20), DIRTY_BIT); /* a miss is no record to age */
	ck_assert_uint_eq(dirty_map_records(&m), 4);
	ck_assert_uint_eq(dirty_map_count(&m), 5);
	/* A new record on an aged one leaves it older; a miss replaces both bits. */
	ck_assert_int_eq(dirty_map_record(&m, 10, 1), 0);
	ck_assert_uint_eq(dirty_map_get(&m, 10), RECORD_BIT | RECORD_OLD_BIT);
	ck_assert_int_eq(dirty_map_mark(&m, 11, 1), 0);
	ck_assert_uint_eq(dirty_map_get(&m, 11), DIRTY_BIT);
	ck_assert_int_eq(dirty_map_age(&m, n, 1), -ERANGE);

	/* Merge: an older record stays older over a current one, and ages it. */
	ck_assert_int_eq(dirty_map_init(&sum, n), 0);
	ck_assert_int_eq(dirty_map_record(&sum, 10, 4), 0);
	ck_assert_int_eq(dirty_map_merge(&sum, &m), 0);
	ck_assert_uint_eq(dirty_map_get(&sum, 10), RECORD_BIT | RECORD_OLD_BIT);
	ck_assert_uint_eq(dirty_map_get(&sum, 11), DIRTY_BIT);
	ck_assert_uint_eq(dirty_map_get(&sum, 12), RECORD_BIT);
	/* ...and a merge that ages what it adds. */
	ck_assert_int_eq(dirty_map_merge_records(&sum, &m, false, true), 0);
	ck_assert_uint_eq(dirty_map_get(&sum, 12), RECORD_BIT | RECORD_OLD_BIT);
	ck_assert_uint_eq(dirty_map_get(&sum, 13), RECORD_BIT | RECORD_OLD_BIT);
	ck_assert_uint_eq(dirty_map_records(&sum), 3);
	dirty_map_destroy(&sum);

	/* Absorb: a miss that was an older record; an existing one takes the age. */
	ck_assert_int_eq(dirty_map_init(&sum, n), 0);
	ck_assert_int_eq(dirty_map_set(&sum, 12, DIRTY_BIT | RECORD_BIT), 0);
	ck_assert_int_eq(dirty_map_merge_records(&sum, &m, true, true), 0);
	ck_assert_uint_eq(dirty_map_get(&sum, 10), DIRTY_BIT | RECORD_BIT | RECORD_OLD_BIT);
	ck_assert_uint_eq(dirty_map_get(&sum, 12), DIRTY_BIT | RECORD_BIT | RECORD_OLD_BIT);
	ck_assert_uint_eq(dirty_map_get(&sum, 11), DIRTY_BIT);
	ck_assert_uint_eq(dirty_map_count(&sum), dirty_map_count(&m));
	dirty_map_destroy(&sum);
	dirty_map_destroy(&m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dirty_map");
	TCase *tc = tcase_create("map");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, matches_a_plain_array_under_random_operations);
	tcase_add_test(tc, memory_follows_the_dirty_spread);
	tcase_add_test(tc, capacity_and_bounds);
	tcase_add_test(tc, cover_holds_every_dirty_chunk_in_few_ranges);
	tcase_add_test(tc, records_yield_to_misses);
	tcase_add_test(tc, older_boot_records_stay_older);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
