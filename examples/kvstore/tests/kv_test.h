/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the kvstore unit tests share. */
#ifndef KVSTORE_TEST_H
#define KVSTORE_TEST_H

#include <check.h>
#include <stdint.h>

/* A plain check for loops of many iterations: ck_assert writes a checkpoint each time. */
#define expect(cond)                                                              \
	do {                                                                      \
		if (!(cond))                                                      \
			ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #cond);     \
	} while (0)

/* A small deterministic random source (xorshift64*), seeded per test. */
static inline uint64_t test_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

static inline int test_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
