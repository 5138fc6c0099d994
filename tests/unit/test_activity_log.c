/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Activity log: last_io pins, eviction, the record codec and torn records. */
#include "unit.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "activity_log.h"

static struct activity_log al;
static uint8_t rec[AL_RECORD_BYTES];

static bool has(uint64_t first, uint32_t count)
{
	for (unsigned i = 0; i < AL_MAX_ENTRIES; i++)
		if (al.e[i].used && al.e[i].first == first && al.e[i].count == count)
			return true;
	return false;
}

START_TEST(a_range_is_written_once_while_hot)
{
	al_init(&al);
	ck_assert_int_eq(al_note(&al, 0, 10, 1), 1);
	ck_assert_int_eq(al_note(&al, 1, 10, 1), 0); /* same range, other slot */
	ck_assert_int_eq(al_note(&al, 0, 10, 1), 0);
	ck_assert_int_eq(al_note(&al, 0, 10, 2), 1); /* another range */
	ck_assert_uint_eq(al.n, 2);
	ck_assert_int_eq(al_note(&al, AL_SLOTS, 10, 1), -EINVAL);
	ck_assert_int_eq(al_note(&al, 0, 10, 0), -EINVAL);
}
END_TEST

/*
 * A spread workload: the log never grows past the cache, and the last write
 * of every slot stays in it however many others come by (last_io).
 */
START_TEST(pinned_ranges_survive_eviction)
{
	const unsigned slots = AL_SLOTS;

	al_init(&al);
	for (unsigned s = 0; s < slots; s++)
		ck_assert_int_eq(al_note(&al, s, 1000000 + s, 1), 1);
	ck_assert_uint_eq(al.n, slots); /* all pinned: nothing could go */
	/* Slot 0 moves on 5000 times: each time its previous range may go. */
	for (unsigned k = 0; k < 5000; k++) {
		ck_assert_int_eq(al_note(&al, 0, (uint64_t)k * 7, 1), 1);
		expect(al.n <= slots + 1);
	}
	for (unsigned s = 1; s < slots; s++)
		expect(has(1000000 + s, 1));
	ck_assert(has(4999ull * 7, 1));
	ck_assert_uint_gt(al.evictions, 4000);
}
END_TEST

START_TEST(the_cache_keeps_recent_ranges)
{
	al_init(&al);
	for (unsigned k = 0; k < 100000; k++) {
		/* Slot k%32, ranges spread over 4096 chunks. */
		int r = al_note(&al, k % 32, (uint64_t)(rand() % 4096), 1);

		expect(r == 0 || r == 1);
		expect(al.n <= AL_CACHE_ENTRIES + 32);
	}
	/* A hot set of 100 ranges costs no record once it is in. */
	for (unsigned k = 0; k < 100; k++)
		al_note(&al, k % 32, 50000 + k, 1);
	for (unsigned k = 0; k < 10000; k++)
		expect(al_note(&al, k % 32, 50000 + k % 100, 1) == 0);
}
END_TEST

START_TEST(records_round_trip)
{
	struct activity_log back;
	struct al_record r;
	char why[128];
	size_t len;

	al_init(&al);
	al.writer = 0x1234;
	al.writer_epoch = 7;
	al.holder = 0x5678;
	al.seq = 41;
	for (unsigned s = 0; s < 300; s++)
		ck_assert_int_ge(al_note(&al, s, s * 3, 1 + s % 4), 0);
	len = al_encode(&al, rec);
	ck_assert_uint_eq(len % 4096, 0);
	ck_assert_uint_eq(len, al_record_len(al.n));
	ck_assert_int_eq(al_decode(rec, len, 100000, &r, why, sizeof(why)), 0);
	ck_assert_uint_eq(r.seq, 42);
	ck_assert_uint_eq(r.writer, 0x1234);
	ck_assert_uint_eq(r.writer_epoch, 7);
	ck_assert_uint_eq(r.holder, 0x5678);
	ck_assert_uint_eq(r.count, al.n);
	al_init(&back);
	al_load(&back, rec, &r);
	ck_assert_uint_eq(back.n, al.n);
	ck_assert_uint_eq(back.seq, 42);
	ck_assert_uint_eq(back.holder, 0x5678);
	ck_assert_uint_eq(back.writer_epoch, 7);
	for (unsigned s = 0; s < 300; s++)
		expect(al.e[al.slot_entry[s]].used);
	for (unsigned i = 0; i < AL_MAX_ENTRIES; i++)
		if (back.e[i].used)
			expect(has(back.e[i].first, back.e[i].count) && back.e[i].pins == 0);

	/* An empty log is one block; an empty record still names its writer. */
	al_reset(&al, 0x99);
	ck_assert_uint_eq(al_encode(&al, rec), 4096);
	ck_assert_int_eq(al_decode(rec, 4096, 100000, &r, why, sizeof(why)), 0);
	ck_assert_uint_eq(r.count, 0);
	ck_assert_uint_eq(r.writer, 0x99);
}
END_TEST

/*
 * A write is logged as the whole extents around it (4 MiB of 128 KiB
 * chunks: 32), cut at the pool's end; extents of one chunk log the chunks
 * written.
 */
START_TEST(writes_are_logged_as_whole_extents)
{
	const uint32_t per = AL_EXTENT_BYTES / (128 * 1024);
	uint64_t first = 99, f2, n1, n2;

	ck_assert_uint_eq(per, 32);
	ck_assert_uint_eq(al_extent_cover(0, 0, per, 1000, &first), per);
	ck_assert_uint_eq(first, 0);
	ck_assert_uint_eq(al_extent_cover(31, 31, per, 1000, &first), per);
	ck_assert_uint_eq(first, 0);
	ck_assert_uint_eq(al_extent_cover(32, 32, per, 1000, &first), per);
	ck_assert_uint_eq(first, 32);
	/* Across an extent boundary: both extents. */
	ck_assert_uint_eq(al_extent_cover(31, 32, per, 1000, &first), 2 * per);
	ck_assert_uint_eq(first, 0);
	/* The last extent stops at the pool's last chunk (999). */
	ck_assert_uint_eq(al_extent_cover(995, 999, per, 1000, &first), 1000 - 992);
	ck_assert_uint_eq(first, 992);
	/* A pool smaller than one extent. */
	ck_assert_uint_eq(al_extent_cover(3, 4, per, 5, &first), 5);
	ck_assert_uint_eq(first, 0);
	/* Extents of one chunk: the chunks themselves. */
	ck_assert_uint_eq(al_extent_cover(7, 9, 1, 100, &first), 3);
	ck_assert_uint_eq(first, 7);
	/* Two writes in one extent: the second costs no record. */
	al_init(&al);
	n1 = al_extent_cover(40, 40, per, 1000, &first);
	n2 = al_extent_cover(63, 63, per, 1000, &f2);
	ck_assert_int_eq(al_note(&al, 0, first, (uint32_t)n1), 1);
	ck_assert_int_eq(al_note(&al, 1, f2, (uint32_t)n2), 0);
}
END_TEST

/* Every way a record can be torn or corrupt is refused, with a reason. */
START_TEST(torn_and_corrupt_records_are_refused)
{
	struct al_record r;
	char why[128];
	size_t len;

	al_init(&al);
	for (unsigned s = 0; s < 600; s++) /* 600 entries: 3 blocks */
		ck_assert_int_ge(al_note(&al, s, s * 2, 1), 0);
	len = al_encode(&al, rec);
	ck_assert_uint_eq(len, 3 * 4096);
	ck_assert_int_eq(al_decode(rec, len, 100000, &r, why, sizeof(why)), 0);

	/* A torn write: the second block is still the old one. */
	memset(rec + 4096, 0x5a, 4096);
	ck_assert_int_eq(al_decode(rec, len, 100000, &r, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "checksum"));
	al_encode(&al, rec);
	/* Cut short, beyond the pool, unknown version, bad magic, flipped bit. */
	ck_assert_int_eq(al_decode(rec, 4096, 100000, &r, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "cut"));
	ck_assert_int_eq(al_decode(rec, len, 1000, &r, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "outside the pool"));
	ck_assert_int_eq(al_decode(rec, 10, 100000, &r, why, sizeof(why)), -EBADMSG);
	rec[4] ^= 1;
	ck_assert_int_eq(al_decode(rec, len, 100000, &r, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "version"));
	rec[4] ^= 1;
	rec[0] ^= 1;
	ck_assert_int_eq(al_decode(rec, len, 100000, &r, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "magic"));
	rec[0] ^= 1;
	rec[200] ^= 0x10;
	ck_assert_int_eq(al_decode(rec, len, 100000, &r, why, sizeof(why)), -EBADMSG);
	rec[200] ^= 0x10;
	ck_assert_int_eq(al_decode(rec, len, 100000, &r, why, sizeof(why)), 0);
	/* Random bytes with a valid magic never pass. */
	srand(3);
	for (unsigned k = 0; k < 2000; k++) {
		for (size_t i = 8; i < 4096; i++)
			rec[i] = (uint8_t)rand();
		expect(al_decode(rec, 4096, 100000, &r, why, sizeof(why)) == -EBADMSG);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("activity_log");
	TCase *tc = tcase_create("log");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_range_is_written_once_while_hot);
	tcase_add_test(tc, pinned_ranges_survive_eviction);
	tcase_add_test(tc, the_cache_keeps_recent_ranges);
	tcase_add_test(tc, records_round_trip);
	tcase_add_test(tc, writes_are_logged_as_whole_extents);
	tcase_add_test(tc, torn_and_corrupt_records_are_refused);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
