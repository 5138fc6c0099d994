/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Request-slot allocator: exhaustion, reuse, waiting, shutdown, threads. */
#include "unit.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "slots.h"

START_TEST(take_all_then_exhausted)
{
	struct slot_pool p;
	bool seen[8] = { 0 };

	ck_assert_int_eq(slot_pool_init(&p, 8), 0);
	for (int i = 0; i < 8; i++) {
		int s = slot_pool_get(&p, false);

		ck_assert_int_ge(s, 0);
		ck_assert_int_lt(s, 8);
		ck_assert(!seen[s]);
		seen[s] = true;
	}
	ck_assert_int_eq(slot_pool_get(&p, false), -EAGAIN);
	ck_assert_uint_eq(slot_pool_used(&p), 8);
	slot_pool_put(&p, 5);
	ck_assert_int_eq(slot_pool_get(&p, false), 5);
	slot_pool_destroy(&p);
}
END_TEST

START_TEST(low_indexes_first)
{
	struct slot_pool p;

	ck_assert_int_eq(slot_pool_init(&p, 4), 0);
	ck_assert_int_eq(slot_pool_get(&p, false), 0);
	ck_assert_int_eq(slot_pool_get(&p, false), 1);
	slot_pool_destroy(&p);
	ck_assert_int_eq(slot_pool_init(&p, 0), -EINVAL);
}
END_TEST

struct waiter_arg {
	struct slot_pool *p;
	atomic_int got;
};

static void *waiter(void *arg)
{
	struct waiter_arg *w = arg;

	atomic_store(&w->got, slot_pool_get(w->p, true));
	return NULL;
}

START_TEST(wait_is_woken_by_put_and_by_shutdown)
{
	struct slot_pool p;
	struct waiter_arg w = { .p = &p, .got = -100 };
	pthread_t t;

	ck_assert_int_eq(slot_pool_init(&p, 1), 0);
	ck_assert_int_eq(slot_pool_get(&p, false), 0);
	pthread_create(&t, NULL, waiter, &w);
	slot_pool_put(&p, 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(atomic_load(&w.got), 0);

	atomic_store(&w.got, -100);
	pthread_create(&t, NULL, waiter, &w);
	slot_pool_shutdown(&p);
	pthread_join(t, NULL);
	ck_assert_int_eq(atomic_load(&w.got), -ESHUTDOWN);
	ck_assert_int_eq(slot_pool_get(&p, false), -ESHUTDOWN);
	slot_pool_destroy(&p);
}
END_TEST

static struct slot_pool shared;
static atomic_int owner[16];

static void *churn(void *arg)
{
	(void)arg;
	for (int n = 0; n < 20000; n++) {
		int s = slot_pool_get(&shared, true);

		ck_assert_int_ge(s, 0);
		/* No slot is ever held by two threads at once. */
		ck_assert_int_eq(atomic_fetch_add(&owner[s], 1), 0);
		atomic_fetch_sub(&owner[s], 1);
		slot_pool_put(&shared, (uint32_t)s);
	}
	return NULL;
}

START_TEST(threads_never_share_a_slot)
{
	pthread_t t[4];

	ck_assert_int_eq(slot_pool_init(&shared, 3), 0);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, churn, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ck_assert_uint_eq(slot_pool_used(&shared), 0);
	slot_pool_destroy(&shared);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("slots");
	TCase *tc = tcase_create("allocator");

	tcase_add_test(tc, take_all_then_exhausted);
	tcase_add_test(tc, low_indexes_first);
	tcase_add_test(tc, wait_is_woken_by_put_and_by_shutdown);
	tcase_add_test(tc, threads_never_share_a_slot);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
