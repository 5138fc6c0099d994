/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The RESP frame parser: a pure function, see resp.h. Errors are worded as
 * Redis words them, so clients show what they would show against Redis.
 */
#include "resp.h"

#include <stdbool.h>
#include <string.h>

/* Most digits of a count or length: every such number fits a long long. */
#define NUM_DIGITS_MAX 18

static enum resp_result bad(struct resp_frame *out, const char *error)
{
	out->error = error;
	return RESP_BAD;
}

static enum resp_result too_big(struct resp_frame *out, const char *error)
{
	out->error = error;
	return RESP_TOO_BIG;
}

/*
 * A CRLF-terminated integer line at @p (after its type byte). @return
 * RESP_DONE with *@v and *@end (just past the LF), RESP_MORE, or RESP_BAD.
 */
static enum resp_result num_line(const char *p, const char *limit, bool allow_neg, long long *v,
				 const char **end)
{
	const char *q = p, *digits;
	bool neg = false;
	long long n = 0;

	if (q < limit && *q == '-' && allow_neg) {
		neg = true;
		q++;
	}
	for (digits = q; q < limit && *q >= '0' && *q <= '9'; q++) {
		if (q - digits == NUM_DIGITS_MAX)
			return RESP_BAD;
		n = n * 10 + (*q - '0');
	}
	if (q == limit)
		return RESP_MORE;
	if (*q != '\r' || q == digits)
		return RESP_BAD;
	if (q + 1 == limit)
		return RESP_MORE;
	if (q[1] != '\n')
		return RESP_BAD;
	*v = neg ? -n : n;
	*end = q + 2;
	return RESP_DONE;
}

static enum resp_result multibulk(const char *buf, size_t len, const struct resp_limits *lim,
				  struct resp_arg *argv, struct resp_frame *out)
{
	const char *p, *limit = buf + len;
	long long count, blen;
	enum resp_result r;

	r = num_line(buf + 1, limit, true, &count, &p);
	if (r == RESP_BAD)
		return bad(out, "Protocol error: invalid multibulk length");
	/* Even the header line counts against the limit (a limit below 22 bytes). */
	if ((r == RESP_MORE ? len : (size_t)(p - buf)) > lim->max_frame)
		return too_big(out, "Protocol error: frame larger than the limit");
	if (r == RESP_MORE)
		return RESP_MORE;
	if (count <= 0) {
		/* "*0", "*-1": an empty command, skipped as Redis does. */
		out->argc = 0;
		out->len = (size_t)(p - buf);
		return RESP_DONE;
	}
	if ((unsigned long long)count > lim->max_args)
		return too_big(out, "Protocol error: too many arguments in one command");
	for (long long i = 0; i < count; i++) {
		if (p == limit)
			return RESP_MORE;
		if (*p != '$')
			return bad(out, "Protocol error: expected '$' before a bulk string");
		r = num_line(p + 1, limit, false, &blen, &p);
		if (r == RESP_BAD)
			return bad(out, "Protocol error: invalid bulk length");
		if (r == RESP_MORE)
			return (size_t)(limit - buf) > lim->max_frame
				       ? too_big(out, "Protocol error: frame larger than the limit")
				       : RESP_MORE;
		/* Decided on the declared length, before any of the data arrives. */
		if ((unsigned long long)blen > lim->max_frame ||
		    (size_t)(p - buf) + (size_t)blen + 2 > lim->max_frame)
			return too_big(out, "Protocol error: frame larger than the limit");
		if ((size_t)(limit - p) < (size_t)blen + 2)
			return RESP_MORE;
		if (p[blen] != '\r' || p[blen + 1] != '\n')
			return bad(out, "Protocol error: bulk string not followed by CRLF");
		argv[i].p = p;
		argv[i].len = (size_t)blen;
		p += blen + 2;
	}
	out->argc = (unsigned)count;
	out->len = (size_t)(p - buf);
	return RESP_DONE;
}

static enum resp_result inline_cmd(const char *buf, size_t len, const struct resp_limits *lim,
				   struct resp_arg *argv, struct resp_frame *out)
{
	const char *nl = memchr(buf, '\n', len < lim->max_frame ? len : lim->max_frame);
	const char *p = buf, *end;
	unsigned argc = 0;

	if (!nl)
		return len >= lim->max_frame ? too_big(out, "Protocol error: too big inline request")
					     : RESP_MORE;
	end = nl > buf && nl[-1] == '\r' ? nl - 1 : nl;
	for (;;) {
		const char *w;

		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p == end)
			break;
		w = p;
		while (p < end && *p != ' ' && *p != '\t')
			p++;
		if (argc == lim->max_args)
			return too_big(out, "Protocol error: too many arguments in one command");
		argv[argc].p = w;
		argv[argc].len = (size_t)(p - w);
		argc++;
	}
	out->argc = argc;
	out->len = (size_t)(nl + 1 - buf);
	return RESP_DONE;
}

enum resp_result resp_parse(const char *buf, size_t len, const struct resp_limits *lim,
			    struct resp_arg *argv, struct resp_frame *out)
{
	out->argc = 0;
	out->len = 0;
	out->error = NULL;
	if (len == 0)
		return RESP_MORE;
	if (buf[0] == '*')
		return multibulk(buf, len, lim, argv, out);
	return inline_cmd(buf, len, lim, argv, out);
}
