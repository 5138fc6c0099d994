/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * resp.h: RESP2, the Redis protocol, as far as the front needs it.
 *
 * resp_parse() is a pure function (no allocation, no I/O, no global state)
 * so that a fuzzer can drive it alone: it parses one command frame from the
 * start of a buffer, never reads past @len, and never accepts a frame above
 * the configured limit. A frame is either a multibulk array of bulk strings
 * ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", what redis-cli and redis-benchmark
 * send) or an inline command (a line of words separated by blanks, what a
 * person types into nc; no quoting).
 *
 * The encoders append replies to a kv_buf.
 */
#ifndef KVSTORE_RESP_H
#define KVSTORE_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "kv_buf.h"

/* One argument: bytes inside the parsed buffer (not NUL-terminated). */
struct resp_arg {
	const char *p;
	size_t len;
};

struct resp_limits {
	size_t max_frame;   /* the largest frame accepted, in bytes */
	unsigned max_args;  /* the most arguments in a frame (and the size of argv) */
};

enum resp_result {
	RESP_DONE,      /* a frame: @argc arguments (0: an empty one, to skip), @len bytes */
	RESP_MORE,      /* no whole frame yet: read more and call again */
	RESP_BAD,       /* malformed: answer @error and close the connection */
	RESP_TOO_BIG,   /* larger than max_frame (or more args than max_args): close */
};

struct resp_frame {
	unsigned argc;
	size_t len;          /* bytes of the frame (RESP_DONE) */
	const char *error;   /* why (RESP_BAD, RESP_TOO_BIG): "Protocol error: ..." */
};

/*
 * Parse one frame at the start of @buf (@len bytes). On RESP_DONE, @argv[0..
 * argc) point into @buf. RESP_MORE is returned only while the frame so far
 * fits the limits, so a caller that buffers at most max_frame bytes of one
 * frame never buffers more.
 */
enum resp_result resp_parse(const char *buf, size_t len, const struct resp_limits *lim,
			    struct resp_arg *argv, struct resp_frame *out);

/* Reply encoders. */
void resp_simple(struct kv_buf *b, const char *text);                  /* +text */
void resp_error(struct kv_buf *b, const char *fmt, ...)               /* -text */
	__attribute__((format(printf, 2, 3)));
void resp_int(struct kv_buf *b, int64_t v);                           /* :v */
void resp_bulk(struct kv_buf *b, const void *data, size_t len);       /* $len data */
void resp_nil(struct kv_buf *b);                                      /* $-1 */
void resp_array(struct kv_buf *b, size_t n);                          /* *n */

#endif
