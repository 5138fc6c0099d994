/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * When the client's loop polls instead of sleeping: the policy (which waits
 * are polled, and how it turns itself off and on again), and the loop's
 * side (no sleep before the deadline it is given, sleeps again after).
 */
#include "unit.h"
#include <stdatomic.h>
#include <time.h>

#include "loop.h"
#include "poll_policy.h"

#define US 1000ull
#define WINDOW (50 * US)

START_TEST(answers_of_one_request_are_polled_while_they_come_close)
{
	struct poll_policy p;
	uint64_t first = 0;

	poll_policy_init(&p, WINDOW);
	/* Member 1 answers at t = 1000 us, member 2 is still due: poll. */
	ck_assert_uint_eq(poll_on_answer(&p, &first, true, 1000 * US), 1000 * US + WINDOW);
	ck_assert_uint_eq(first, 1000 * US);
	/* Member 2 answers 20 us later: it paid, and the request is done. */
	ck_assert_uint_eq(poll_on_answer(&p, &first, false, 1020 * US), 0);
	ck_assert_uint_eq(first, 0);
	ck_assert(p.answers_pay);
	ck_assert_uint_eq(poll_on_answer(&p, &first, true, 2000 * US), 2000 * US + WINDOW);
}
END_TEST

START_TEST(a_slow_member_turns_the_answer_poll_off_until_answers_are_close_again)
{
	struct poll_policy p;
	uint64_t first = 0;

	poll_policy_init(&p, WINDOW);
	ck_assert_uint_ne(poll_on_answer(&p, &first, true, 1000 * US), 0);
	/* The second answer is 300 us behind: polling for it did not pay. */
	poll_on_answer(&p, &first, false, 1300 * US);
	ck_assert(!p.answers_pay);
	/* Next request: no poll, but its spread is still timed. */
	ck_assert_uint_eq(poll_on_answer(&p, &first, true, 2000 * US), 0);
	ck_assert_uint_eq(first, 2000 * US);
	ck_assert_uint_eq(poll_on_answer(&p, &first, false, 2000 * US + WINDOW), 0);
	ck_assert(p.answers_pay); /* exactly the window: it would have paid */
	ck_assert_uint_eq(poll_on_answer(&p, &first, true, 3000 * US), 3000 * US + WINDOW);
}
END_TEST

START_TEST(a_request_with_one_answer_changes_nothing)
{
	struct poll_policy p;
	uint64_t first = 0;

	poll_policy_init(&p, WINDOW);
	p.answers_pay = false;
	ck_assert_uint_eq(poll_on_answer(&p, &first, false, 1000 * US), 0);
	ck_assert_uint_eq(first, 0);
	ck_assert(!p.answers_pay);
}
END_TEST

START_TEST(the_next_request_is_polled_for_while_it_comes_soon)
{
	struct poll_policy p;

	poll_policy_init(&p, WINDOW);
	ck_assert_uint_eq(poll_on_idle(&p, 1000 * US), 1000 * US + WINDOW);
	poll_on_busy(&p, 1030 * US, 1);
	ck_assert(p.idle_pays);
	ck_assert_uint_eq(p.idle_since, 0);
	/* A consumer that pauses: the poll did not pay, the next idle time sleeps. */
	ck_assert_uint_eq(poll_on_idle(&p, 2000 * US), 2000 * US + WINDOW);
	poll_on_busy(&p, 2000 * US + WINDOW + 1, 1);
	ck_assert(!p.idle_pays);
	ck_assert_uint_eq(poll_on_idle(&p, 3000 * US), 0);
	/* Still timed while sleeping: a quick request turns the poll on again. */
	poll_on_busy(&p, 3010 * US, 1);
	ck_assert(p.idle_pays);
	ck_assert_uint_eq(poll_on_idle(&p, 4000 * US), 4000 * US + WINDOW);
	/* Requests while not idle (more in flight) change nothing. */
	poll_on_busy(&p, 4010 * US, 1);
	poll_on_busy(&p, 9000 * US, 1);
	ck_assert(p.idle_pays);
}
END_TEST

/*
 * POLL_LONE_RUN busy times of one request each, answered at once, from
 * @p t on (the last ends idle). @return the time after them.
 */
static uint64_t one_at_a_time(struct poll_policy *p, uint64_t t)
{
	uint64_t first = 0;

	for (unsigned i = 0; i < POLL_LONE_RUN; i++, t += 100 * US) {
		poll_on_busy(p, t, 1);
		poll_on_answer(p, &first, false, t + 10 * US);
		poll_on_idle(p, t + 10 * US);
	}
	return t;
}

START_TEST(the_first_answer_after_idle_is_polled_for_while_it_comes_soon)
{
	struct poll_policy p;
	uint64_t first = 0, t;

	poll_policy_init(&p, WINDOW);
	/* Requests that do not end an idle time (under load): no poll. */
	ck_assert_uint_eq(poll_on_busy(&p, 500 * US, 1), 0);
	/* A consumer that sends one request at a time, idle, then a request:
	 * poll for its first answer. */
	t = one_at_a_time(&p, 1000 * US);
	ck_assert_uint_eq(poll_on_busy(&p, t, 1), t + WINDOW);
	/* It comes 300 us later (a slow member): the next such wait sleeps... */
	poll_on_answer(&p, &first, false, t + 300 * US);
	poll_on_idle(&p, t + 300 * US);
	ck_assert_uint_eq(poll_on_busy(&p, t + 310 * US, 1), 0);
	/* ... and is still timed: a quick first answer turns the poll on again. */
	poll_on_answer(&p, &first, false, t + 330 * US);
	poll_on_idle(&p, t + 330 * US);
	ck_assert_uint_eq(poll_on_busy(&p, t + 340 * US, 1), t + 340 * US + WINDOW);
	/* Only the first answer counts: a late second one is the answer poll's matter. */
	poll_on_answer(&p, &first, true, t + 350 * US);
	poll_on_answer(&p, &first, false, t + 4000 * US);
	poll_on_idle(&p, t + 4000 * US);
	ck_assert_uint_eq(poll_on_busy(&p, t + 4010 * US, 1), t + 4010 * US + WINDOW);
	ck_assert_uint_eq(poll_on_answer(&p, &first, true, t + 4020 * US), 0);
}
END_TEST

START_TEST(a_consumer_with_several_requests_at_once_gets_no_first_answer_poll)
{
	struct poll_policy p;
	uint64_t first = 0, t;

	poll_policy_init(&p, WINDOW);
	/* Fewer than POLL_LONE_RUN one-request busy times: not yet. */
	for (t = 1000 * US; t < 1000 * US + (POLL_LONE_RUN - 1) * 100 * US; t += 100 * US) {
		ck_assert_uint_eq(poll_on_busy(&p, t, 1), 0);
		poll_on_idle(&p, t + 10 * US);
	}
	t = one_at_a_time(&p, t);
	ck_assert_uint_eq(poll_on_busy(&p, t, 1), t + WINDOW);
	/* One busy time with three in flight starts the count again. */
	poll_on_busy(&p, t + 1 * US, 3);
	poll_on_answer(&p, &first, false, t + 20 * US);
	poll_on_idle(&p, t + 30 * US);
	ck_assert_uint_eq(poll_on_busy(&p, t + 40 * US, 1), 0);
	poll_on_idle(&p, t + 50 * US);
	/* The idle poll does not depend on it. */
	ck_assert_uint_eq(poll_on_idle(&p, t + 60 * US), t + 60 * US + WINDOW);
	t = one_at_a_time(&p, t + 100 * US);
	ck_assert_uint_eq(poll_on_busy(&p, t, 1), t + WINDOW);
}
END_TEST

START_TEST(window_zero_never_polls)
{
	struct poll_policy p;
	uint64_t first = 0;

	poll_policy_init(&p, 0);
	ck_assert_uint_eq(poll_on_answer(&p, &first, true, 1000 * US), 0);
	ck_assert_uint_eq(poll_on_answer(&p, &first, false, 1000 * US), 0);
	ck_assert_uint_eq(poll_on_idle(&p, 2000 * US), 0);
	ck_assert_uint_eq(poll_on_busy(&p, 2000 * US, 1), 0);
	ck_assert_uint_eq(poll_on_idle(&p, 3000 * US), 0);
	/* Idle at time 0 still counts as idle. */
	poll_on_idle(&p, 0);
	ck_assert_uint_ne(p.idle_since, 0);
}
END_TEST

/* --- the loop --------------------------------------------------------------- */

static void noop_wake(void *ctx)
{
	(void)ctx;
}

static atomic_uint ticks;

static void count_tick(void *ctx, uint64_t now)
{
	(void)ctx;
	(void)now;
	atomic_fetch_add(&ticks, 1);
}

static const struct loop_ops noop_ops = { .wake = noop_wake, .tick = count_tick };

struct poll_call {
	struct loop *l;
	uint64_t until;
	uint64_t sleeps;          /* loop_sleeps() when the deadline was set, on the loop */
};

static void set_poll(void *arg)
{
	struct poll_call *pc = arg;

	loop_poll_until(pc->l, pc->until);
	pc->sleeps = loop_sleeps(pc->l);
}

static void pause_ms(unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

START_TEST(the_loop_does_not_sleep_before_its_poll_deadline)
{
	struct loop *l;
	struct poll_call pc;
	unsigned t0;

	/* A 1 ms tick: a loop that sleeps does so at least every millisecond. */
	ck_assert_int_eq(loop_create(&noop_ops, NULL, 1, &l), 0);
	ck_assert_int_eq(loop_start(l, "test-poll"), 0);
	pause_ms(20);
	ck_assert_uint_gt(loop_sleeps(l), 0);

	/* Poll for the next minute: not one sleep, however long we look, and
	 * the ticks (heartbeats, deadlines) still run. */
	pc = (struct poll_call){ .l = l, .until = loop_clock_ns() + 60 * 1000000000ull };
	loop_call(l, set_poll, &pc);
	t0 = atomic_load(&ticks);
	pause_ms(100);
	ck_assert_uint_eq(loop_sleeps(l), pc.sleeps);
	ck_assert_uint_gt(atomic_load(&ticks), t0);

	/* Cancelled: it sleeps again. */
	pc.until = 0;
	loop_call(l, set_poll, &pc);
	for (int i = 0; i < 5000 && loop_sleeps(l) == pc.sleeps; i++)
		pause_ms(1);
	ck_assert_uint_gt(loop_sleeps(l), pc.sleeps);
	loop_destroy(l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("poll");
	TCase *tc = tcase_create("policy");

	tcase_add_test(tc, answers_of_one_request_are_polled_while_they_come_close);
	tcase_add_test(tc, a_slow_member_turns_the_answer_poll_off_until_answers_are_close_again);
	tcase_add_test(tc, a_request_with_one_answer_changes_nothing);
	tcase_add_test(tc, the_next_request_is_polled_for_while_it_comes_soon);
	tcase_add_test(tc, the_first_answer_after_idle_is_polled_for_while_it_comes_soon);
	tcase_add_test(tc, a_consumer_with_several_requests_at_once_gets_no_first_answer_poll);
	tcase_add_test(tc, window_zero_never_polls);
	suite_add_tcase(s, tc);
	tc = tcase_create("loop");
	tcase_add_test(tc, the_loop_does_not_sleep_before_its_poll_deadline);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
