/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* RESP2 reply encoders; see resp.h. */
#include "resp.h"

#include <inttypes.h>
#include <stdbool.h>
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

/*
 * "<type><number>\r\n" into @s (room for 24 bytes), written by hand: the
 * header of every GET's answer, where snprintf took 4 % of the front.
 */
static size_t number_line(char *s, char type, bool neg, uint64_t v)
{
	char digits[20];
	size_t n = 0, k = 0;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	s[k++] = type;
	if (neg)
		s[k++] = '-';
	while (n)
		s[k++] = digits[--n];
	s[k++] = '\r';
	s[k++] = '\n';
	return k;
}

void resp_int(struct kv_buf *b, int64_t v)
{
	char s[24];
	/* The magnitude, also of INT64_MIN. */
	uint64_t mag = v < 0 ? -(uint64_t)v : (uint64_t)v;

	kv_buf_append(b, s, number_line(s, ':', v < 0, mag));
}

void resp_bulk(struct kv_buf *b, const void *data, size_t len)
{
	char s[24];
	size_t n = number_line(s, '$', false, len);

	if (!kv_buf_reserve(b, n + len + 2))
		return;
	kv_buf_append(b, s, n);
	kv_buf_append(b, data, len);
	kv_buf_append(b, "\r\n", 2);
}

void resp_nil(struct kv_buf *b)
{
	kv_buf_append(b, "$-1\r\n", 5);
}

void resp_array(struct kv_buf *b, size_t n)
{
	char s[24];

	kv_buf_append(b, s, number_line(s, '*', false, n));
}
