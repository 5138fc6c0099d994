/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The member session state table: the whole matrix, edge by edge. */
#include "unit.h"
#include <string.h>

#include "member_state.h"

#define N RMR_MEMBER_NEW
#define OK RMR_MEMBER_NORMAL
#define F RMR_MEMBER_FAILED
#define R RMR_MEMBER_RECONNECTING
#define M RMR_MEMBER_MAINTENANCE
#define D RMR_MEMBER_DETACHED
#define X RMR_MEMBER_REMOVED

START_TEST(matrix)
{
	/* expected[from][to]: the design's transitions and nothing else. */
	static const bool expected[RMR_MEMBER_STATE_COUNT][RMR_MEMBER_STATE_COUNT] = {
		[N] = { [R] = true, [F] = true, [D] = true, [X] = true },
		[R] = { [OK] = true, [F] = true, [M] = true, [D] = true, [X] = true },
		[OK] = { [F] = true, [M] = true, [D] = true, [X] = true },
		[F] = { [R] = true, [D] = true, [X] = true },
		[M] = { [R] = true, [F] = true, [D] = true, [X] = true },
		[D] = { [F] = true, [X] = true },
		[X] = { [N] = true },
	};

	for (int from = 0; from < RMR_MEMBER_STATE_COUNT; from++)
		for (int to = 0; to < RMR_MEMBER_STATE_COUNT; to++)
			ck_assert_msg(member_state_can_move(from, to) == expected[from][to],
				      "%s -> %s", rmr_member_state_name(from),
				      rmr_member_state_name(to));
}
END_TEST

START_TEST(only_normal_serves_io)
{
	for (int s = 0; s < RMR_MEMBER_STATE_COUNT; s++)
		ck_assert(member_state_serves_io(s) == (s == OK));
}
END_TEST

START_TEST(names_and_out_of_range)
{
	ck_assert_str_eq(rmr_member_state_name(OK), "normal");
	ck_assert_str_eq(rmr_member_state_name(F), "failed");
	ck_assert_str_eq(rmr_member_state_name(M), "maintenance");
	ck_assert_str_eq(rmr_member_state_name(D), "detached");
	ck_assert_str_eq(rmr_member_state_name(X), "removed");
	ck_assert_str_eq(rmr_member_state_name(RMR_MEMBER_STATE_COUNT), "invalid");
	ck_assert(!member_state_can_move(RMR_MEMBER_STATE_COUNT, OK));
	ck_assert(!member_state_can_move(OK, (enum rmr_member_state)-1));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("member_state");
	TCase *tc = tcase_create("table");

	tcase_add_test(tc, matrix);
	tcase_add_test(tc, only_normal_serves_io);
	tcase_add_test(tc, names_and_out_of_range);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
