/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The per-bucket hash index of a member; see kv_index.h. */
#include "kv_index.h"
#include "kv_wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CAP 16u

static int resize(struct kv_index *x, uint32_t cap)
{
	struct kv_index_slot *old = x->slot, *n = calloc(cap, sizeof(*n));
	uint32_t oldcap = x->cap;

	if (!n)
		return -ENOMEM;
	x->slot = n;
	x->cap = cap;
	for (uint32_t i = 0; i < oldcap; i++) {
		uint32_t h;

		if (!old[i].off1)
			continue;
		for (h = old[i].tag & (cap - 1); n[h].off1; h = (h + 1) & (cap - 1))
			;
		n[h] = old[i];
	}
	free(old);
	return 0;
}

void kv_index_drop(struct kv_index *x)
{
	free(x->slot);
	*x = (struct kv_index){ 0 };
}

int kv_index_added(struct kv_index *x, uint32_t off, uint32_t tag)
{
	uint32_t h;

	/* At most half full: probes stay short. */
	if ((x->n + 1) * 2 > x->cap && resize(x, x->cap ? x->cap * 2 : MIN_CAP) < 0) {
		kv_index_drop(x);
		return -ENOMEM;
	}
	for (h = tag & (x->cap - 1); x->slot[h].off1; h = (h + 1) & (x->cap - 1))
		;
	x->slot[h] = (struct kv_index_slot){ .off1 = off + 1, .tag = tag };
	x->n++;
	return 0;
}

int kv_index_build(struct kv_index *x, const uint8_t *page)
{
	uint32_t cap = MIN_CAP, n = kv_bucket_count(page), off = 0;
	struct kv_entry e;

	kv_index_drop(x);
	while (cap < 2 * n)
		cap *= 2;
	if (resize(x, cap) < 0)
		return -ENOMEM;
	while (kv_bucket_next(page, &off, &e))
		if (kv_index_added(x, e.off, e.tag) < 0)
			return -ENOMEM;
	return 0;
}

bool kv_index_find(const struct kv_index *x, const uint8_t *page, const void *key, uint32_t klen,
		   uint64_t hash, struct kv_entry *e)
{
	uint32_t tag = kv_entry_tag(hash);

	for (uint32_t h = tag & (x->cap - 1); x->slot[h].off1; h = (h + 1) & (x->cap - 1))
		if (x->slot[h].tag == tag && kv_bucket_entry_at(page, x->slot[h].off1 - 1, e) &&
		    e->klen == klen && !memcmp(e->key, key, klen))
			return true;
	return false;
}

void kv_index_removed(struct kv_index *x, uint32_t off, uint32_t size, uint32_t tag)
{
	uint32_t mask = x->cap - 1, h, j;

	for (h = tag & mask; x->slot[h].off1 && x->slot[h].off1 != off + 1; h = (h + 1) & mask)
		;
	if (!x->slot[h].off1)
		return; /* not indexed: cannot happen while the index follows the page */
	/* Backward-shift deletion: later members of the cluster move up where they may. */
	x->slot[h].off1 = 0;
	x->n--;
	for (j = (h + 1) & mask; x->slot[j].off1; j = (j + 1) & mask) {
		uint32_t home = x->slot[j].tag & mask;

		/* Move slot j into the hole at h unless its home lies cyclically in (h, j]. */
		if (h <= j ? (home <= h || home > j) : (home <= h && home > j)) {
			x->slot[h] = x->slot[j];
			x->slot[j].off1 = 0;
			h = j;
		}
	}
	/* The entries after the removed one moved down by its size. */
	for (j = 0; j < x->cap; j++)
		if (x->slot[j].off1 > off + 1)
			x->slot[j].off1 -= size;
}
