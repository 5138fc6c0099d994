/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kv_index.h: a member's in-memory hash index of one bucket page, so that
 * finding a key costs a probe or two instead of a walk over every entry of
 * the page (a page of 128 KiB holds a thousand small entries). Open
 * addressing with linear probing over (offset, tag) slots; kept in step
 * with the page by the store after each change, dropped (and rebuilt at its
 * next use) whenever the page is replaced whole.
 */
#ifndef KVSTORE_INDEX_H
#define KVSTORE_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "kv_bucket.h"
#include "kv_wire.h"

struct kv_index_slot {
	uint32_t off1;              /* entry offset + 1; 0: empty */
	uint32_t tag;
};

struct kv_index {
	struct kv_index_slot *slot;
	uint32_t cap;               /* a power of two; 0: not built */
	uint32_t n;
};

/* Index good page @page. @return 0 or -ENOMEM (then the index stays unbuilt). */
int kv_index_build(struct kv_index *x, const uint8_t *page);
/* Forget it; kv_index_build() again before use. */
void kv_index_drop(struct kv_index *x);
/* Find @key (hash @hash) in @page through a built index. */
bool kv_index_find(const struct kv_index *x, const uint8_t *page, const void *key, uint32_t klen,
		   uint64_t hash, struct kv_entry *e);
/*
 * A lookup of a random key misses the cache twice, on its slot and then on
 * its entry. Callers with many keys at hand start those fetches for a few
 * keys ahead, so that the misses overlap instead of queueing: first the
 * slot, then (once it is likely fetched) the entry the slot points to.
 */
static inline void kv_index_prefetch_slot(const struct kv_index *x, uint64_t hash)
{
	__builtin_prefetch(&x->slot[kv_entry_tag(hash) & (x->cap - 1)]);
}

static inline void kv_index_prefetch_entry(const struct kv_index *x, const uint8_t *page,
					   uint64_t hash)
{
	uint32_t off1 = x->slot[kv_entry_tag(hash) & (x->cap - 1)].off1;

	if (off1)
		__builtin_prefetch(page + off1 - 1);
}

/* An entry with @tag was appended at @off. @return 0 or -ENOMEM (the index is then dropped). */
int kv_index_added(struct kv_index *x, uint32_t off, uint32_t tag);
/* The entry at @off (@size bytes, @tag) was removed; the entries after it moved down. */
void kv_index_removed(struct kv_index *x, uint32_t off, uint32_t size, uint32_t tag);

#endif
