/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every Check unit test shares. */
#ifndef RMR_TESTS_UNIT_H
#define RMR_TESTS_UNIT_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * A plain check for loops of millions of iterations: every ck_assert records
 * a checkpoint in a file, which makes such loops take minutes.
 */
#define expect(cond)                                                              \
	do {                                                                      \
		if (!(cond))                                                      \
			ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #cond);     \
	} while (0)

/* Run every test of @s; the exit status of the test program. */
static inline int unit_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose lists each test */
	failed = srunner_ntests_failed(sr);
	if (failed) {
		/* Again on stderr, last: a log cut to its tail (meson shows the
		 * last 100 lines) then still says what failed, after the
		 * library's warnings. */
		TestResult **tr = srunner_failures(sr);

		for (int i = 0; i < failed; i++)
			fprintf(stderr, "FAILED %s:%d: %s: %s\n", tr_lfile(tr[i]), tr_lno(tr[i]),
				tr_tcname(tr[i]), tr_msg(tr[i]));
		free(tr);
	}
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
