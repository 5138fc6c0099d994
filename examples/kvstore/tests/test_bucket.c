/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Bucket pages: SET/DEL against a model, every change leaving a page that
 * checks good; a full bucket refused without a change; every single-bit
 * flip of a page found by the checks; pages of another bucket or pool
 * refused; the conditional delete of expired keys.
 */
#include "../kv_bucket.h"
#include "../kv_index.h"
#include "../kv_wire.h"
#include "kv_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 4096u

static struct kv_bucket_geom geom(uint64_t nbuckets)
{
	struct kv_bucket_geom g = { .size = PAGE, .nbuckets = nbuckets };

	memset(g.uuid, 0xab, sizeof(g.uuid));
	return g;
}

static int set(uint8_t *page, const struct kv_bucket_geom *g, const char *k, const char *v,
	       uint64_t exp, struct kv_change *ch)
{
	return kv_bucket_set(page, 0, g, k, (uint32_t)strlen(k), kv_hash(k, strlen(k)), v,
			     (uint32_t)strlen(v), exp, ch);
}

static bool get(const uint8_t *page, const char *k, struct kv_entry *e)
{
	return kv_bucket_find(page, k, (uint32_t)strlen(k), kv_hash(k, strlen(k)), e);
}

static void check_good(const uint8_t *page, const struct kv_bucket_geom *g)
{
	char why[160];

	if (kv_bucket_check(page, 0, g, why, sizeof(why)) != 0)
		ck_abort_msg("page refused: %s", why);
}

START_TEST(set_get_delete)
{
	struct kv_bucket_geom g = geom(1);
	uint8_t page[PAGE] = { 0 };
	struct kv_change ch;
	struct kv_entry e;

	check_good(page, &g);
	ck_assert(kv_bucket_is_empty(page));
	ck_assert_int_eq(set(page, &g, "alpha", "one", 0, &ch), 0);
	ck_assert(ch.hdr && ch.lo == KV_BUCKET_HDR && ch.hi > ch.lo);
	ck_assert_int_eq(set(page, &g, "beta", "two", 123, &ch), 0);
	check_good(page, &g);
	ck_assert_uint_eq(kv_bucket_count(page), 2);
	ck_assert(get(page, "alpha", &e));
	ck_assert(e.vlen == 3 && !memcmp(e.value, "one", 3) && e.expire_ms == 0);
	ck_assert(get(page, "beta", &e) && e.expire_ms == 123);
	ck_assert(!get(page, "gamma", &e));
	/* Same size: in place, header untouched. */
	ck_assert_int_eq(set(page, &g, "alpha", "uno", 5, &ch), 0);
	ck_assert(!ch.hdr);
	ck_assert(get(page, "alpha", &e) && !memcmp(e.value, "uno", 3) && e.expire_ms == 5);
	/* Another size: moved to the end. */
	ck_assert_int_eq(set(page, &g, "alpha", "a much longer value", 0, &ch), 0);
	ck_assert(ch.hdr);
	check_good(page, &g);
	ck_assert(get(page, "beta", &e) && !memcmp(e.value, "two", 3));
	ck_assert(get(page, "alpha", &e) && e.vlen == 19);
	/* The empty key and the empty value are data too. */
	ck_assert_int_eq(kv_bucket_set(page, 0, &g, "", 0, kv_hash("", 0), "", 0, 0, &ch), 0);
	check_good(page, &g);
	ck_assert(kv_bucket_find(page, "", 0, kv_hash("", 0), &e) && e.vlen == 0);
	ck_assert_int_eq(kv_bucket_del(page, 0, &g, "", 0, kv_hash("", 0), 0, &ch), 1);
	ck_assert_int_eq(kv_bucket_del(page, 0, &g, "alpha", 5, kv_hash("alpha", 5), 0, &ch), 1);
	ck_assert_int_eq(kv_bucket_del(page, 0, &g, "alpha", 5, kv_hash("alpha", 5), 0, &ch), 0);
	check_good(page, &g);
	ck_assert_int_eq(kv_bucket_del(page, 0, &g, "beta", 4, kv_hash("beta", 4), 0, &ch), 1);
	/* The last entry gone: the page is all zeroes again. */
	for (unsigned i = 0; i < PAGE; i++)
		ck_assert_uint_eq(page[i], 0);
}
END_TEST

START_TEST(delete_only_if_expired)
{
	struct kv_bucket_geom g = geom(1);
	uint8_t page[PAGE] = { 0 };
	struct kv_change ch;

	set(page, &g, "t", "v", 1000, &ch);
	set(page, &g, "p", "v", 0, &ch);
	ck_assert_int_eq(kv_bucket_del(page, 0, &g, "t", 1, kv_hash("t", 1), 999, &ch), 0);
	ck_assert_int_eq(kv_bucket_del(page, 0, &g, "p", 1, kv_hash("p", 1), 5000, &ch), 0);
	ck_assert_int_eq(kv_bucket_del(page, 0, &g, "t", 1, kv_hash("t", 1), 1000, &ch), 1);
	ck_assert_uint_eq(kv_bucket_count(page), 1);
	check_good(page, &g);
}
END_TEST

START_TEST(full_bucket_is_refused_unchanged)
{
	struct kv_bucket_geom g = geom(1);
	uint8_t page[PAGE] = { 0 }, before[PAGE];
	char key[16], val[200];
	struct kv_change ch;
	int n = 0;

	memset(val, 'x', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	for (;; n++) {
		snprintf(key, sizeof(key), "k%d", n);
		memcpy(before, page, PAGE);
		if (set(page, &g, key, val, 0, &ch) == -ENOSPC)
			break;
	}
	ck_assert_int_gt(n, 10);
	ck_assert(memcmp(before, page, PAGE) == 0);
	check_good(page, &g);
	/* The largest entry fits an empty bucket exactly. */
	{
		uint8_t empty[PAGE] = { 0 };
		uint32_t max = kv_bucket_max_kv(PAGE);
		char *big = calloc(1, max);

		ck_assert_int_eq(kv_bucket_set(empty, 0, &g, "k", 1, kv_hash("k", 1), big, max - 1, 0,
					       &ch), 0);
		check_good(empty, &g);
		memset(empty, 0, PAGE);
		ck_assert_int_eq(kv_bucket_set(empty, 0, &g, "k", 1, kv_hash("k", 1), big, max, 0,
					       &ch), -ENOSPC);
		free(big);
	}
}
END_TEST

/* Every one-bit change of a page with entries, anywhere up to past its end, is found. */
START_TEST(every_bit_flip_is_found)
{
	struct kv_bucket_geom g = geom(1);
	uint8_t page[PAGE] = { 0 };
	struct kv_change ch;
	char why[160];
	uint32_t end;

	set(page, &g, "first", "1", 0, &ch);
	set(page, &g, "second key", "a value of some length", 77, &ch);
	set(page, &g, "3", "", 0, &ch);
	end = KV_BUCKET_HDR + kv_bucket_used(page) + 64;
	for (uint32_t byte = 0; byte < end; byte++)
		for (int bit = 0; bit < 8; bit++) {
			page[byte] ^= (uint8_t)(1u << bit);
			if (kv_bucket_check(page, 0, &g, why, sizeof(why)) == 0)
				ck_abort_msg("flip of bit %d of byte %u not found", bit, byte);
			page[byte] ^= (uint8_t)(1u << bit);
		}
	check_good(page, &g);
	/* An empty page with one stray byte anywhere. */
	memset(page, 0, PAGE);
	for (uint32_t byte = 0; byte < PAGE; byte += 97) {
		page[byte] = 1;
		expect(kv_bucket_check(page, 0, &g, why, sizeof(why)) == -EBADMSG);
		page[byte] = 0;
	}
}
END_TEST

START_TEST(pages_of_elsewhere_are_refused)
{
	struct kv_bucket_geom g = geom(1), other = geom(1), two = geom(2);
	uint8_t page[PAGE] = { 0 };
	struct kv_change ch;
	char why[160];
	char k[16] = "key";
	int n = 0;

	set(page, &g, k, "v", 0, &ch);
	ck_assert_int_eq(kv_bucket_check(page, 1, &g, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "bucket"));
	memset(other.uuid, 0xcd, sizeof(other.uuid));
	ck_assert_int_eq(kv_bucket_check(page, 0, &other, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "another pool"));
	/* With two buckets, half the keys belong to the other one. */
	while (kv_bucket_of_hash(kv_hash(k, strlen(k)), 2) == 0)
		snprintf(k, sizeof(k), "key%d", ++n);
	memset(page, 0, PAGE);
	kv_bucket_set(page, 0, &two, k, (uint32_t)strlen(k), kv_hash(k, strlen(k)), "v", 1, 0, &ch);
	ck_assert_int_eq(kv_bucket_check(page, 0, &two, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "hash"));
}
END_TEST

/* Random SETs and DELs against a model; the page checks good after each. */
START_TEST(random_changes_match_a_model)
{
	enum { NKEYS = 40 };
	struct kv_bucket_geom g = geom(1);
	uint8_t page[PAGE] = { 0 };
	char model[NKEYS][64];
	bool present[NKEYS] = { false };
	uint64_t rnd = 42 + (uint64_t)_i;
	struct kv_change ch;

	for (int step = 0; step < 5000; step++) {
		unsigned k = (unsigned)(test_rand(&rnd) % NKEYS);
		char key[8];
		struct kv_entry e;

		snprintf(key, sizeof(key), "k%u", k);
		if (test_rand(&rnd) % 3) {
			char val[64];
			unsigned len = (unsigned)(test_rand(&rnd) % 60);

			for (unsigned i = 0; i < len; i++)
				val[i] = (char)('a' + test_rand(&rnd) % 26);
			val[len] = '\0';
			if (set(page, &g, key, val, 0, &ch) == 0) {
				strcpy(model[k], val);
				present[k] = true;
			}
		} else {
			expect(kv_bucket_del(page, 0, &g, key, (uint32_t)strlen(key),
					     kv_hash(key, strlen(key)), 0, &ch) == present[k]);
			present[k] = false;
		}
		expect(kv_bucket_check(page, 0, &g, NULL, 0) == 0);
		for (unsigned i = 0; i < NKEYS; i++) {
			snprintf(key, sizeof(key), "k%u", i);
			expect(get(page, key, &e) == present[i]);
			if (present[i])
				expect(e.vlen == strlen(model[i]) && !memcmp(e.value, model[i], e.vlen));
		}
	}
}
END_TEST

/*
 * The index follows the page through random changes (made through it, as
 * the store makes them) and always finds what a walk of the page finds.
 */
START_TEST(index_follows_the_page)
{
	enum { NKEYS = 300 };
	struct kv_bucket_geom g = geom(1);
	static uint8_t page[PAGE];
	struct kv_index x = { 0 };
	uint64_t rnd = 99 + (uint64_t)_i;
	struct kv_change ch;

	memset(page, 0, sizeof(page));
	ck_assert_int_eq(kv_index_build(&x, page), 0);
	for (int step = 0; step < 20000; step++) {
		char key[8], val[40];
		unsigned k = (unsigned)(test_rand(&rnd) % NKEYS);
		uint64_t h;
		struct kv_entry old, e, f;
		bool present;

		snprintf(key, sizeof(key), "k%u", k);
		h = kv_hash(key, strlen(key));
		present = kv_index_find(&x, page, key, (uint32_t)strlen(key), h, &old);
		expect(present == kv_bucket_find(page, key, (uint32_t)strlen(key), h, &f));
		if (test_rand(&rnd) % 3) {
			unsigned len = (unsigned)(test_rand(&rnd) % 30);
			uint32_t at;

			memset(val, 'a' + (int)(len % 26), len);
			if (kv_bucket_set_found(page, 0, &g, key, (uint32_t)strlen(key), h, val, len, 0,
						present ? &old : NULL, &ch, &at) < 0)
				continue;
			if (present && old.size == kv_entry_size(strlen(key), len))
				continue;
			if (present)
				kv_index_removed(&x, old.off, old.size, old.tag);
			expect(kv_index_added(&x, at, kv_entry_tag(h)) == 0);
		} else if (present) {
			kv_bucket_del_found(page, 0, &g, &old, &ch);
			kv_index_removed(&x, old.off, old.size, old.tag);
		}
		expect(x.n == kv_bucket_count(page));
		if (step % 97 == 0) {
			for (unsigned i = 0; i < NKEYS; i++) {
				snprintf(key, sizeof(key), "k%u", i);
				h = kv_hash(key, strlen(key));
				present = kv_bucket_find(page, key, (uint32_t)strlen(key), h, &f);
				expect(kv_index_find(&x, page, key, (uint32_t)strlen(key), h, &e) == present);
				expect(!present || e.off == f.off);
			}
			expect(kv_bucket_check(page, 0, &g, NULL, 0) == 0);
		}
	}
	kv_index_drop(&x);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bucket");
	TCase *tc = tcase_create("page");

	tcase_add_test(tc, set_get_delete);
	tcase_add_test(tc, delete_only_if_expired);
	tcase_add_test(tc, full_bucket_is_refused_unchanged);
	tcase_add_test(tc, every_bit_flip_is_found);
	tcase_add_test(tc, pages_of_elsewhere_are_refused);
	tcase_add_loop_test(tc, random_changes_match_a_model, 0, 3);
	tcase_add_loop_test(tc, index_follows_the_page, 0, 3);
	suite_add_tcase(s, tc);
	return test_run(s);
}
