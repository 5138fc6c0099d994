/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* RESP2 reply encoders; see resp.h. */
#include "resp.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

void resp_simple(struct kv_buf *b, const char *text)
{
	kv_buf_append(b, "+", 1);
	kv_buf_append(b, text, strlen(text));
	kv_buf_append(b, "\r\n", 2);
}

void resp_error(struct kv_buf *b, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	/* An error is one line: a CR or LF (from a client's argument) would end it early. */
	for (int i = 0; i < n; i++)
		if (msg[i] == '\r' || msg[i] == '\n')
			msg[i] = ' ';
	kv_buf_append(b, "-", 1);
	kv_buf_append(b, msg, (size_t)n);
	kv_buf_append(b, "\r\n", 2);
}

void resp_int(struct kv_buf *b, int64_t v)
{
	char s[32];
	int n = snprintf(s, sizeof(s), ":%" PRId64 "\r\n", v);

	kv_buf_append(b, s, (size_t)n);
}

void resp_bulk(struct kv_buf *b, const void *data, size_t len)
{
	char s[32];
	int n = snprintf(s, sizeof(s), "$%zu\r\n", len);

	if (!kv_buf_reserve(b, (size_t)n + len + 2))
		return;
	kv_buf_append(b, s, (size_t)n);
	kv_buf_append(b, data, len);
	kv_buf_append(b, "\r\n", 2);
}

void resp_nil(struct kv_buf *b)
{
	kv_buf_append(b, "$-1\r\n", 5);
}

void resp_array(struct kv_buf *b, size_t n)
{
	char s[32];
	int k = snprintf(s, sizeof(s), "*%zu\r\n", n);

	kv_buf_append(b, s, (size_t)k);
}
