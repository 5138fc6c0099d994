/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "sync_index.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

static uint32_t hash(uint64_t chunk)
{
	/* Fibonacci hashing spreads runs of neighbouring chunks. */
	return (uint32_t)((chunk * 0x9e3779b97f4a7c15ull) >> 32);
}

int sync_index_init(struct sync_index *ix, uint32_t max_active)
{
	uint32_t cap = 4;

	if (max_active == 0 || max_active > (1u << 24))
		return -EINVAL;
	while (cap < max_active * 2)
		cap <<= 1;
	ix->slots = calloc(cap, sizeof(*ix->slots));
	if (!ix->slots)
		return -ENOMEM;
	ix->mask = cap - 1;
	ix->count = 0;
	ix->max = max_active;
	return 0;
}

void sync_index_destroy(struct sync_index *ix)
{
	free(ix->slots);
	ix->slots = NULL;
}

struct sync_entry *sync_index_find(struct sync_index *ix, uint64_t chunk)
{
	for (uint32_t i = hash(chunk) & ix->mask;; i = (i + 1) & ix->mask) {
		struct sync_entry *e = &ix->slots[i];

		if (!e->used)
			return NULL;
		if (e->chunk == chunk)
			return e;
	}
}

struct sync_entry *sync_index_add(struct sync_index *ix, uint64_t chunk, uint32_t refs)
{
	uint32_t i;

	if (ix->count >= ix->max || sync_index_find(ix, chunk))
		return NULL;
	for (i = hash(chunk) & ix->mask; ix->slots[i].used; i = (i + 1) & ix->mask)
		;
	ix->slots[i] = (struct sync_entry){ .chunk = chunk, .refs = refs, .used = 1 };
	ix->count++;
	return &ix->slots[i];
}

void sync_index_wait(struct sync_entry *e, struct sync_waiter *w)
{
	w->next = NULL;
	if (e->tail)
		e->tail->next = w;
	else
		e->head = w;
	e->tail = w;
}

/* Is @home (where an entry hashes to) cyclically outside (hole, pos]? */
static bool may_move(uint32_t hole, uint32_t pos, uint32_t home)
{
	if (hole <= pos)
		return home <= hole || home > pos;
	return home <= hole && home > pos;
}

struct sync_waiter *sync_index_remove(struct sync_index *ix, struct sync_entry *e)
{
	struct sync_waiter *waiters = e->head;
	uint32_t hole = (uint32_t)(e - ix->slots);

	/* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
	for (uint32_t pos = (hole + 1) & ix->mask; ix->slots[pos].used; pos = (pos + 1) & ix->mask) {
		if (may_move(hole, pos, hash(ix->slots[pos].chunk) & ix->mask)) {
			ix->slots[hole] = ix->slots[pos];
			hole = pos;
		}
	}
	ix->slots[hole] = (struct sync_entry){ 0 };
	ix->count--;
	return waiters;
}
