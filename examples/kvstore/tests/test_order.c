/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The front's bucket order, against its rules: random arrivals and
 * completions over a few buckets, with every running set checked (no read
 * beside a write or an exclusive one, nothing beside a global one, nothing
 * overtaking an earlier arrival of its bucket), and everything finishing.
 */
#include "../front_order.h"
#include "kv_test.h"

#include <stdlib.h>
#include <string.h>

#define NB 4
#define NITEMS 4000

struct item {
	struct order_item it;
	unsigned seq;
	bool started, finished;
};

static struct item items[NITEMS];
static struct item *running[NITEMS];
static unsigned nrunning;
static unsigned started_total;

static void on_start(void *ctx, struct order_item *it)
{
	struct item *x = (struct item *)it;

	(void)ctx;
	expect(!x->started);
	x->started = true;
	running[nrunning++] = x;
	started_total++;
}

/* The rules hold for what runs now. */
static void check_running(void)
{
	unsigned reads[NB] = { 0 }, writes[NB] = { 0 }, excl[NB] = { 0 }, global = 0;

	for (unsigned i = 0; i < nrunning; i++) {
		const struct order_item *it = &running[i]->it;

		switch (it->cls) {
		case ORDER_READ:
			reads[it->bucket]++;
			break;
		case ORDER_WRITE:
			writes[it->bucket]++;
			break;
		case ORDER_EXCLUSIVE:
			excl[it->bucket]++;
			break;
		case ORDER_GLOBAL:
			global++;
			break;
		}
	}
	expect(global <= 1);
	expect(!global || nrunning == 1);
	for (unsigned b = 0; b < NB; b++) {
		expect(excl[b] <= 1);
		expect(!excl[b] || (!reads[b] && !writes[b]));
		expect(!reads[b] || !writes[b]);
	}
}

START_TEST(random_schedule_obeys_the_rules)
{
	struct order o;
	uint64_t rnd = 7 + (uint64_t)_i;
	unsigned submitted = 0;

	memset(items, 0, sizeof(items));
	nrunning = started_total = 0;
	ck_assert_int_eq(order_init(&o, NB, on_start, NULL), 0);
	while (submitted < NITEMS || nrunning) {
		bool submit = submitted < NITEMS && (!nrunning || test_rand(&rnd) % 2);

		if (submit) {
			struct item *x = &items[submitted];
			unsigned r = (unsigned)(test_rand(&rnd) % 100);

			x->seq = submitted++;
			x->it.bucket = test_rand(&rnd) % NB;
			x->it.cls = r < 45 ? ORDER_READ : r < 80 ? ORDER_WRITE : r < 97 ? ORDER_EXCLUSIVE
											 : ORDER_GLOBAL;
			order_submit(&o, &x->it);
		} else {
			unsigned k = (unsigned)(test_rand(&rnd) % nrunning);
			struct item *x = running[k];

			running[k] = running[--nrunning];
			x->finished = true;
			order_done(&o, &x->it);
		}
		check_running();
		/* Nothing started before an earlier arrival of its bucket (or a global). */
		for (unsigned i = 0; i < nrunning; i++) {
			struct item *x = running[i];

			for (unsigned j = 0; j < x->seq; j++) {
				struct item *e = &items[j];

				if (e->it.bucket == x->it.bucket || e->it.cls == ORDER_GLOBAL ||
				    x->it.cls == ORDER_GLOBAL)
					expect(e->started);
			}
		}
	}
	/* Nothing is left behind. */
	ck_assert_uint_eq(started_total, NITEMS);
	ck_assert_uint_eq(o.admitted, 0);
	ck_assert(!o.global_running && !o.ghead);
	order_destroy(&o);
}
END_TEST

/* Reads of one bucket run together; a write waits for them, and a later read for it. */
START_TEST(reads_share_writes_wait)
{
	struct item x[4];
	struct order o;

	memset(x, 0, sizeof(x));
	nrunning = started_total = 0;
	ck_assert_int_eq(order_init(&o, 2, on_start, NULL), 0);
	x[0].it = (struct order_item){ .bucket = 1, .cls = ORDER_READ };
	x[1].it = (struct order_item){ .bucket = 1, .cls = ORDER_READ };
	x[2].it = (struct order_item){ .bucket = 1, .cls = ORDER_WRITE };
	x[3].it = (struct order_item){ .bucket = 1, .cls = ORDER_READ };
	for (int i = 0; i < 4; i++)
		order_submit(&o, &x[i].it);
	ck_assert(x[0].started && x[1].started && !x[2].started && !x[3].started);
	order_done(&o, &x[0].it);
	ck_assert(!x[2].started);
	order_done(&o, &x[1].it);
	ck_assert(x[2].started && !x[3].started);
	order_done(&o, &x[2].it);
	ck_assert(x[3].started);
	order_done(&o, &x[3].it);
	ck_assert_uint_eq(o.admitted, 0);
	order_destroy(&o);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("order");
	TCase *tc = tcase_create("order");

	tcase_add_test(tc, reads_share_writes_wait);
	tcase_add_loop_test(tc, random_schedule_obeys_the_rules, 0, 8);
	suite_add_tcase(s, tc);
	return test_run(s);
}
