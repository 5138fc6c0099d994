/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The digest of a member's data (KVDIGEST, kvstore-member digest): SHA-256
 * over the keys bucket by bucket, each bucket's keys in byte order, each
 * key as le32 klen, key, le32 vlen, value, le64 expire_ms. Sorting makes it
 * independent of where a page keeps its entries, so it compares the data,
 * not the history that produced it.
 */
#include "kv_sha256.h"
#include "kv_store.h"
#include "kv_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int key_order(const void *a, const void *b)
{
	const struct kv_entry *x = a, *y = b;
	uint32_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = n ? memcmp(x->key, y->key, n) : 0;

	if (c)
		return c;
	return x->klen < y->klen ? -1 : x->klen > y->klen;
}

int kv_store_digest(const struct kv_store *s, uint8_t digest[32], uint64_t *keys,
		    uint64_t *damaged)
{
	/* A page holds at most this many entries (each takes 24 bytes or more). */
	size_t cap = s->bucket_size / KV_ENTRY_HDR;
	struct kv_entry *e = malloc(cap * sizeof(*e));
	struct kv_sha256 h;

	if (!e)
		return -ENOMEM;
	*keys = 0;
	*damaged = 0;
	kv_sha256_init(&h);
	for (uint64_t b = 0; b < s->nbuckets; b++) {
		const uint8_t *page = kv_store_page(s, b);
		uint32_t off = 0;
		size_t n = 0;

		if (s->damaged[b]) {
			(*damaged)++;
			continue;
		}
		while (n < cap && kv_bucket_next(page, &off, &e[n]))
			n++;
		qsort(e, n, sizeof(*e), key_order);
		for (size_t i = 0; i < n; i++) {
			uint8_t num[8];

			kv_put_le32(num, e[i].klen);
			kv_sha256_update(&h, num, 4);
			kv_sha256_update(&h, e[i].key, e[i].klen);
			kv_put_le32(num, e[i].vlen);
			kv_sha256_update(&h, num, 4);
			kv_sha256_update(&h, e[i].value, e[i].vlen);
			kv_put_le64(num, e[i].expire_ms);
			kv_sha256_update(&h, num, 8);
		}
		*keys += n;
	}
	kv_sha256_final(&h, digest);
	free(e);
	return 0;
}
