/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Index of active sync entries, model-checked against a plain list. */
#include "unit.h"
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "sync_index.h"


START_TEST(waiters_are_released_in_order_per_chunk)
{
	struct sync_index ix;
	struct sync_waiter w[4];
	struct sync_entry *a, *b;
	struct sync_waiter *list;

	ck_assert_int_eq(sync_index_init(&ix, 8), 0);
	a = sync_index_add(&ix, 100, 3);
	b = sync_index_add(&ix, 101, 1);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_null(sync_index_add(&ix, 100, 1)); /* already tracked */
	sync_index_wait(a, &w[0]);
	sync_index_wait(b, &w[1]);
	sync_index_wait(a, &w[2]);
	list = sync_index_remove(&ix, sync_index_find(&ix, 100));
	ck_assert_ptr_eq(list, &w[0]);
	ck_assert_ptr_eq(list->next, &w[2]);
	ck_assert_ptr_null(list->next->next);
	ck_assert_ptr_null(sync_index_find(&ix, 100));
	b = sync_index_find(&ix, 101);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_eq(b->head, &w[1]);
	sync_index_destroy(&ix);
}
END_TEST

START_TEST(full_index_refuses)
{
	struct sync_index ix;

	ck_assert_int_eq(sync_index_init(&ix, 2), 0);
	ck_assert_ptr_nonnull(sync_index_add(&ix, 1, 1));
	ck_assert_ptr_nonnull(sync_index_add(&ix, 2, 1));
	ck_assert_ptr_null(sync_index_add(&ix, 3, 1));
	sync_index_remove(&ix, sync_index_find(&ix, 1));
	ck_assert_ptr_nonnull(sync_index_add(&ix, 3, 1));
	sync_index_destroy(&ix);
	ck_assert_int_eq(sync_index_init(&ix, 0), -EINVAL);
}
END_TEST

START_TEST(random_adds_and_removes_match_a_model)
{
	enum { MAX = 64, KEYS = 200 };
	struct sync_index ix;
	bool present[KEYS] = { 0 };
	unsigned count = 0;

	ck_assert_int_eq(sync_index_init(&ix, MAX), 0);
	srand(3);
	for (int op = 0; op < 200000; op++) {
		/* Keys that collide a lot: multiples of a large power of two. */
		unsigned k = (unsigned)rand() % KEYS;
		uint64_t chunk = (uint64_t)k << 20;
		struct sync_entry *e = sync_index_find(&ix, chunk);

		expect((e != NULL) == present[k]);
		if (e) {
			expect(e->chunk == chunk);
			sync_index_remove(&ix, e);
			present[k] = false;
			count--;
		} else if (count < MAX) {
			expect(sync_index_add(&ix, chunk, 1) != NULL);
			present[k] = true;
			count++;
		}
		expect(ix.count == count);
	}
	for (unsigned k = 0; k < KEYS; k++)
		expect((sync_index_find(&ix, (uint64_t)k << 20) != NULL) == present[k]);
	sync_index_destroy(&ix);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sync_index");
	TCase *tc = tcase_create("index");

	tcase_add_test(tc, waiters_are_released_in_order_per_chunk);
	tcase_add_test(tc, full_index_refuses);
	tcase_add_test(tc, random_adds_and_removes_match_a_model);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
