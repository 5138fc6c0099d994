/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kv_buf.h: a growable byte buffer. An allocation failure does not return
 * an error at every append: the buffer keeps what it had and remembers
 * @oom, which its owner checks once (a connection then closes).
 */
#ifndef KVSTORE_BUF_H
#define KVSTORE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct kv_buf {
	char *p;
	size_t len, cap;
	bool oom;
};

/* Room for @extra more bytes. @return false (and @oom) if it cannot grow. */
static inline bool kv_buf_reserve(struct kv_buf *b, size_t extra)
{
	size_t cap = b->cap ? b->cap : 256;
	char *n;

	if (b->len + extra <= b->cap)
		return true;
	if (b->oom || extra > ((size_t)-1) / 4 - b->len)
		goto fail;
	while (cap < b->len + extra)
		cap *= 2;
	n = realloc(b->p, cap);
	if (!n)
		goto fail;
	b->p = n;
	b->cap = cap;
	return true;
fail:
	b->oom = true;
	return false;
}

static inline void kv_buf_append(struct kv_buf *b, const void *data, size_t len)
{
	if (len && kv_buf_reserve(b, len)) {
		memcpy(b->p + b->len, data, len);
		b->len += len;
	}
}

/* Drop the first @n bytes. */
static inline void kv_buf_consume(struct kv_buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static inline void kv_buf_free(struct kv_buf *b)
{
	free(b->p);
	*b = (struct kv_buf){ 0 };
}

#endif
