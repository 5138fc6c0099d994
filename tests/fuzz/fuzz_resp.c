/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_resp: bytes from a client connection through resp_parse(), the
 * kvstore front's RESP2 parser, frame after frame as the front consumes
 * them.
 *
 * Input: 1 byte that picks the limits (max_frame 16..4096 bytes, max_args
 * 1..16), then the stream.
 *
 * Besides "no crash": a frame is never longer than the bytes given nor than
 * max_frame, never has more than max_args arguments, and every argument
 * lies inside the frame; an error always has a reason; RESP_MORE is
 * answered only while the bytes so far fit max_frame; a frame parses the
 * same when the stream is cut right after it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ARGS_MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct resp_limits lim;
	struct resp_arg argv[ARGS_MAX], again[ARGS_MAX];
	const char *buf;
	size_t len;

	if (size < 1)
		return 0;
	lim.max_frame = 16u + (size_t)(data[0] & 0x3f) * 64u;
	lim.max_args = 1u + (data[0] >> 6) * 5u;
	buf = (const char *)data + 1;
	len = size - 1;
	while (len) {
		struct resp_frame f, g;
		enum resp_result r;

		memset(&f, 0, sizeof(f));
		r = resp_parse(buf, len, &lim, argv, &f);
		if (r == RESP_MORE) {
			if (len > lim.max_frame)
				abort(); /* buffering more than a frame may hold */
			break;
		}
		if (r == RESP_BAD || r == RESP_TOO_BIG) {
			if (!f.error || !*f.error)
				abort();
			break;
		}
		if (r != RESP_DONE || f.len == 0 || f.len > len || f.len > lim.max_frame ||
		    f.argc > lim.max_args)
			abort();
		for (unsigned i = 0; i < f.argc; i++)
			if (argv[i].p < buf || argv[i].len > f.len ||
			    argv[i].p + argv[i].len > buf + f.len)
				abort();
		/* The frame alone parses to the same arguments. */
		memset(&g, 0, sizeof(g));
		if (resp_parse(buf, f.len, &lim, again, &g) != RESP_DONE || g.len != f.len ||
		    g.argc != f.argc)
			abort();
		for (unsigned i = 0; i < f.argc; i++)
			if (again[i].p != argv[i].p || again[i].len != argv[i].len)
				abort();
		buf += f.len;
		len -= f.len;
	}
	return 0;
}
