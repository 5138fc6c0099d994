/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The daemons' event stream (tools/evstream.c): line format, the initial
 * state before queued changes, several listeners, a listener that never
 * reads is dropped while publishing never blocks, a half-closed listener
 * keeps listening, and the listener limit.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../tools/evstream.h"

#include "unit.h"

static struct evstream es;

/* A listener: its end in the stream (attached; a send buffer of @p sndbuf
 * bytes if not 0) and ours (@p peer). */
static int listener_buf(int *peer, int sndbuf)
{
	int sv[2], slot;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	if (sndbuf)
		ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
	slot = evstream_attach(&es, sv[0]);
	ck_assert_int_ge(slot, 0);
	*peer = sv[1];
	return slot;
}

static int listener(int *peer)
{
	return listener_buf(peer, 0);
}

/* What the stream sent to @p peer so far (non-blocking), appended to @p buf. */
static size_t drain(int peer, char *buf, size_t cap, size_t len)
{
	for (;;) {
		ssize_t n = recv(peer, buf + len, cap - 1 - len, MSG_DONTWAIT);

		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return len;
}

/* One round of the main loop without waiting. */
static void main_loop_once(void)
{
	struct pollfd pfd[EVSTREAM_MAX_LISTENERS + 1];
	unsigned n = evstream_pollfds(&es, pfd);

	ck_assert_int_ge(poll(pfd, n, 0), 0);
	evstream_handle(&es, pfd, n);
}

static void setup(void)
{
	ck_assert_int_eq(evstream_init(&es, "test"), 0);
}

static void teardown(void)
{
	evstream_destroy(&es);
}

START_TEST(line_format)
{
	struct evline l;
	const char *s;
	char big[600];

	evline_begin(&l, "client", "change", "member_state", "vol\"1");
	evline_u64(&l, "member", 2);
	evline_int(&l, "status", -5);
	evline_bool(&l, "tracking", true);
	evline_str(&l, "reason", "a\\b\nc");
	evline_str(&l, "error", NULL);
	s = evline_end(&l);
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(!strncmp(s, "{\"time\":\"", 9) && s[9 + 23] == 'Z' && s[9 + 10] == 'T', "%s", s);
	ck_assert_str_eq(s + 9 + 26,
			 "\"role\":\"client\",\"type\":\"change\",\"kind\":\"member_state\","
			 "\"pool\":\"vol\\\"1\",\"member\":2,\"status\":-5,\"tracking\":true,"
			 "\"reason\":\"a\\\\b\\u000ac\",\"error\":null}");
	evline_begin(&l, "member", "exists-done", NULL, NULL);
	ck_assert_str_eq(evline_end(&l) + 9 + 26, "\"role\":\"member\",\"type\":\"exists-done\"}");
	/* Too long: no line at all rather than a cut one. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	evline_begin(&l, "member", "change", "x", NULL);
	evline_str(&l, "a", big);
	evline_str(&l, "b", big);
	ck_assert_ptr_null(evline_end(&l));
}
END_TEST

START_TEST(initial_state_first)
{
	char buf[256];
	int peer, slot = listener(&peer);

	/* A change between attach and start waits behind the initial state. */
	evstream_publish(&es, "{\"change\":1}");
	ck_assert_uint_eq(drain(peer, buf, sizeof(buf), 0), 0);
	evstream_start(&es, slot, "{\"exists\":1}\n", 13);
	evstream_publish(&es, "{\"change\":2}");
	drain(peer, buf, sizeof(buf), 0);
	ck_assert_str_eq(buf, "{\"exists\":1}\n{\"change\":1}\n{\"change\":2}\n");
	ck_assert_uint_eq(evstream_listeners(&es), 1);
	close(peer);
}
END_TEST

START_TEST(several_listeners)
{
	char a[256], b[256];
	int pa, pb, sa = listener(&pa), sb = listener(&pb);

	evstream_start(&es, sa, "", 0);
	evstream_start(&es, sb, "", 0);
	evstream_publish(&es, "one");
	evstream_publish(&es, "two");
	drain(pa, a, sizeof(a), 0);
	drain(pb, b, sizeof(b), 0);
	ck_assert_str_eq(a, "one\ntwo\n");
	ck_assert_str_eq(b, "one\ntwo\n");
	ck_assert_uint_eq(evstream_listeners(&es), 2);
	close(pa);
	close(pb);
}
END_TEST

/* 400 KiB of events: the listener that never reads passes the queue limit
 * and is dropped; the one that reads gets every line, in order. */
START_TEST(slow_listener_dropped)
{
	static char got[512 * 1024];
	char line[1024], want[8];
	size_t len = 0, linelen;
	int slow, fast, sslow = listener_buf(&slow, 4096), sfast = listener(&fast);
	int lines = 400;

	evstream_start(&es, sslow, "", 0);
	evstream_start(&es, sfast, "", 0);
	for (int i = 0; i < lines; i++) {
		snprintf(line, sizeof(line), "{\"n\":%04d,\"pad\":\"%0990d\"}", i, 0);
		evstream_publish(&es, line);
		main_loop_once();
		len = drain(fast, got, sizeof(got), len);
	}
	linelen = strlen(line) + 1;
	for (int k = 0; k < 100 && len < (size_t)lines * linelen; k++) {
		main_loop_once();
		len = drain(fast, got, sizeof(got), len);
	}
	ck_assert_uint_eq(len, (size_t)lines * linelen);
	for (int i = 0; i < lines; i++) {
		snprintf(want, sizeof(want), "%04d", i);
		expect(!strncmp(got + (size_t)i * linelen + 5, want, 4));
	}
	/* Dropped: the main loop closed it; the peer reads the end of the stream. */
	main_loop_once();
	ck_assert_uint_eq(evstream_listeners(&es), 1);
	{
		char junk[4096];
		ssize_t n;

		while ((n = recv(slow, junk, sizeof(junk), MSG_DONTWAIT)) > 0)
			;
		ck_assert_int_eq(n, 0);
	}
	close(slow);
	close(fast);
}
END_TEST

START_TEST(half_closed_listener)
{
	char buf[256];
	int peer, slot = listener(&peer);

	evstream_start(&es, slot, "", 0);
	/* Done sending (as `... | brmrctl events` may be): still listening. */
	shutdown(peer, SHUT_WR);
	main_loop_once();
	main_loop_once();
	ck_assert_uint_eq(evstream_listeners(&es), 1);
	evstream_publish(&es, "still");
	drain(peer, buf, sizeof(buf), 0);
	ck_assert_str_eq(buf, "still\n");
	/* Gone: POLLHUP closes it. */
	close(peer);
	main_loop_once();
	ck_assert_uint_eq(evstream_listeners(&es), 0);
	evstream_publish(&es, "nobody");
}
END_TEST

START_TEST(listener_limit)
{
	int peers[EVSTREAM_MAX_LISTENERS], sv[2];

	for (int i = 0; i < EVSTREAM_MAX_LISTENERS; i++)
		evstream_start(&es, listener(&peers[i]), "", 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(evstream_attach(&es, sv[0]), -EMFILE);
	close(sv[0]);
	close(sv[1]);
	close(peers[3]);
	main_loop_once();
	ck_assert_uint_eq(evstream_listeners(&es), EVSTREAM_MAX_LISTENERS - 1);
	evstream_start(&es, listener(&peers[3]), "", 0);
	for (int i = 0; i < EVSTREAM_MAX_LISTENERS; i++)
		close(peers[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("evstream");
	TCase *tc = tcase_create("evstream");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, line_format);
	tcase_add_test(tc, initial_state_first);
	tcase_add_test(tc, several_listeners);
	tcase_add_test(tc, slow_listener_dropped);
	tcase_add_test(tc, half_closed_listener);
	tcase_add_test(tc, listener_limit);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
