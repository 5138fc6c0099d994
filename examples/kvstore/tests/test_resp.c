/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RESP parser: frames as redis-cli and redis-benchmark send them, inline
 * commands, every malformed frame refused with its reason, the frame limit
 * enforced before the data arrives, any frame split at any byte, and random
 * bytes that never make it read out of bounds (ASan watches).
 */
#include "../resp.h"
#include "kv_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct resp_limits lim = { .max_frame = 1024, .max_args = 8 };

static enum resp_result parse(const char *s, struct resp_arg *argv, struct resp_frame *fr)
{
	return resp_parse(s, strlen(s), &lim, argv, fr);
}

static void expect_args(const struct resp_arg *argv, const struct resp_frame *fr, unsigned n,
			const char *const *want)
{
	ck_assert_uint_eq(fr->argc, n);
	for (unsigned i = 0; i < n; i++) {
		ck_assert_uint_eq(argv[i].len, strlen(want[i]));
		ck_assert(memcmp(argv[i].p, want[i], argv[i].len) == 0);
	}
}

START_TEST(multibulk_frames)
{
	static const char *const set[] = { "SET", "key", "va\r\nl" };
	static const char *const empty_arg[] = { "ECHO", "" };
	struct resp_arg argv[8];
	struct resp_frame fr;
	const char *s = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\n*1\r\n$4\r\nPING\r\n";

	ck_assert_int_eq(parse(s, argv, &fr), RESP_DONE);
	expect_args(argv, &fr, 3, set);
	ck_assert_uint_eq(fr.len, strlen(s) - strlen("*1\r\n$4\r\nPING\r\n"));
	ck_assert_int_eq(parse("*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", argv, &fr), RESP_DONE);
	expect_args(argv, &fr, 2, empty_arg);
	/* Empty commands are skipped, as Redis does. */
	ck_assert_int_eq(parse("*0\r\n", argv, &fr), RESP_DONE);
	ck_assert_uint_eq(fr.argc, 0);
	ck_assert_uint_eq(fr.len, 4);
	ck_assert_int_eq(parse("*-1\r\n", argv, &fr), RESP_DONE);
	ck_assert_uint_eq(fr.argc, 0);
}
END_TEST

START_TEST(inline_frames)
{
	static const char *const ping[] = { "PING" };
	static const char *const set[] = { "set", "a", "1" };
	struct resp_arg argv[8];
	struct resp_frame fr;

	ck_assert_int_eq(parse("PING\r\n", argv, &fr), RESP_DONE);
	expect_args(argv, &fr, 1, ping);
	ck_assert_int_eq(parse("  set\ta   1 \n", argv, &fr), RESP_DONE);
	expect_args(argv, &fr, 3, set);
	ck_assert_uint_eq(fr.len, 13);
	ck_assert_int_eq(parse("\r\n", argv, &fr), RESP_DONE);
	ck_assert_uint_eq(fr.argc, 0);
	ck_assert_int_eq(parse("PING", argv, &fr), RESP_MORE);
}
END_TEST

START_TEST(malformed_frames_are_refused)
{
	static const char *const bad[] = {
		"*x\r\n", "*1\r\n:3\r\n", "*1\r\n$x\r\n", "*1\r\n$-1\r\n", "*1\r\n$3\r\nabcXY",
		"*1\r\n$3\nabc\r\n", "*1x\r\n", "*\r\n", "*1\r\n$\r\n",
		"*1\r\n$1234567890123456789\r\n", "*12345678901234567890\r\n", "*1\r\r",
	};
	struct resp_arg argv[8];
	struct resp_frame fr;

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum resp_result r = parse(bad[i], argv, &fr);

		ck_assert_msg(r == RESP_BAD || r == RESP_TOO_BIG, "frame %u parsed as %d", i, r);
		ck_assert_ptr_nonnull(fr.error);
		ck_assert(strncmp(fr.error, "Protocol error: ", 16) == 0);
	}
}
END_TEST

START_TEST(limits_are_enforced_before_the_data)
{
	struct resp_arg argv[8];
	struct resp_frame fr;
	char big[2048];

	/* The declared length alone says it: no byte of the data needed. */
	ck_assert_int_eq(parse("*1\r\n$2000\r\n", argv, &fr), RESP_TOO_BIG);
	ck_assert_int_eq(parse("*2\r\n$3\r\nSET\r\n$1015\r\n", argv, &fr), RESP_TOO_BIG);
	ck_assert_int_eq(parse("*9\r\n", argv, &fr), RESP_TOO_BIG);
	/* An inline line with no end within the limit. */
	memset(big, 'a', sizeof(big));
	ck_assert_int_eq(resp_parse(big, 1023, &lim, argv, &fr), RESP_MORE);
	ck_assert_int_eq(resp_parse(big, sizeof(big), &lim, argv, &fr), RESP_TOO_BIG);
	/* More inline words than arguments. */
	ck_assert_int_eq(parse("a b c d e f g h i\r\n", argv, &fr), RESP_TOO_BIG);
	/* Exactly at the limit is fine: an 11-byte head, 1011 bytes, CRLF. */
	{
		static char f[1100];
		int n = snprintf(f, sizeof(f), "*1\r\n$%d\r\n", 1011);

		ck_assert_int_eq(n, 11);
		memset(f + 11, 'v', 1011);
		memcpy(f + 11 + 1011, "\r\n", 2);
		ck_assert_int_eq(resp_parse(f, 1024, &lim, argv, &fr), RESP_DONE);
		ck_assert_uint_eq(fr.len, 1024);
	}
}
END_TEST

/* Every prefix of a good frame is RESP_MORE; the whole is the same frame. */
START_TEST(split_at_every_byte)
{
	const char *s = "*4\r\n$4\r\nMSET\r\n$1\r\na\r\n$0\r\n\r\n$10\r\n0123456789\r\n";
	size_t n = strlen(s);
	struct resp_arg argv[8];
	struct resp_frame fr;

	for (size_t k = 0; k < n; k++)
		ck_assert_int_eq(resp_parse(s, k, &lim, argv, &fr), RESP_MORE);
	ck_assert_int_eq(resp_parse(s, n, &lim, argv, &fr), RESP_DONE);
	ck_assert_uint_eq(fr.len, n);
	ck_assert_uint_eq(fr.argc, 4);
}
END_TEST

/* Random bytes and mutated frames: whatever the answer, it is within bounds. */
START_TEST(random_input_stays_in_bounds)
{
	static const char *const seeds[] = { "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "PING\r\n",
					    "*1\r\n$4\r\nPING\r\n" };
	uint64_t rnd = 0x1234567 + (uint64_t)_i;
	struct resp_arg argv[8];
	struct resp_frame fr;

	for (int iter = 0; iter < 20000; iter++) {
		char buf[64];
		size_t len;
		enum resp_result r;

		if (iter & 1) {
			const char *s = seeds[test_rand(&rnd) % 3];

			len = strlen(s);
			memcpy(buf, s, len);
			buf[test_rand(&rnd) % len] = (char)test_rand(&rnd);
		} else {
			len = test_rand(&rnd) % sizeof(buf);
			for (size_t i = 0; i < len; i++)
				buf[i] = "*$\r\n0123-aZ "[test_rand(&rnd) % 13];
		}
		/* A heap copy of exactly len bytes: ASan catches any read past it. */
		{
			char *h = malloc(len ? len : 1);

			memcpy(h, buf, len);
			r = resp_parse(h, len, &lim, argv, &fr);
			if (r == RESP_DONE) {
				expect(fr.len > 0 && fr.len <= len && fr.argc <= lim.max_args);
				for (unsigned a = 0; a < fr.argc; a++)
					expect(argv[a].p >= h && argv[a].p + argv[a].len <= h + len);
			} else if (r == RESP_BAD || r == RESP_TOO_BIG) {
				expect(fr.error != NULL);
			} else {
				expect(r == RESP_MORE);
			}
			free(h);
		}
	}
}
END_TEST

START_TEST(reply_encoders)
{
	struct kv_buf b = { 0 };

	resp_simple(&b, "OK");
	resp_error(&b, "ERR bad\r\nthing %d", 7);
	resp_int(&b, -42);
	resp_bulk(&b, "ab", 2);
	resp_nil(&b);
	resp_array(&b, 3);
	kv_buf_append(&b, "", 1);
	ck_assert_str_eq(b.p, "+OK\r\n-ERR bad  thing 7\r\n:-42\r\n$2\r\nab\r\n$-1\r\n*3\r\n");
	kv_buf_free(&b);

	/* Numbers at their edges. */
	resp_int(&b, 0);
	resp_int(&b, INT64_MIN);
	resp_int(&b, INT64_MAX);
	resp_bulk(&b, "", 0);
	resp_array(&b, 0);
	resp_array(&b, 1234567890);
	kv_buf_append(&b, "", 1);
	ck_assert_str_eq(b.p, ":0\r\n:-9223372036854775808\r\n:9223372036854775807\r\n$0\r\n\r\n"
			      "*0\r\n*1234567890\r\n");
	kv_buf_free(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("resp");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, multibulk_frames);
	tcase_add_test(tc, inline_frames);
	tcase_add_test(tc, malformed_frames_are_refused);
	tcase_add_test(tc, limits_are_enforced_before_the_data);
	tcase_add_test(tc, split_at_every_byte);
	tcase_add_loop_test(tc, random_input_stays_in_bounds, 0, 4);
	tcase_add_test(tc, reply_encoders);
	suite_add_tcase(s, tc);
	return test_run(s);
}
