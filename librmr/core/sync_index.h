/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Index of active sync entries: chunk -> reference count + wait list.
 *
 * While a chunk is being copied from a peer (resync), I/O to that chunk waits
 * on the chunk's own list, and nothing else waits: there is no global lock.
 * A fixed-size open-addressing table (linear probing, backward-shift
 * deletion) bounded by the sync queue depth and the session queue depth, so
 * nothing is allocated while the pool runs. Not thread-safe: owned by one
 * event loop.
 */
#ifndef RMR_CORE_SYNC_INDEX_H
#define RMR_CORE_SYNC_INDEX_H

#include <stdint.h>

/* Embedded in whatever waits (a server request); intrusive, no allocation. */
struct sync_waiter {
	struct sync_waiter *next;
};

struct sync_entry {
	uint64_t chunk;
	uint32_t refs;                  /* pieces of the copy still in flight */
	uint32_t used;                  /* slot taken */
	void *owner;                    /* what holds the chunk when no copy does */
	struct sync_waiter *head, *tail;
};

struct sync_index {
	struct sync_entry *slots;
	uint32_t mask;  /* capacity - 1, capacity a power of two */
	uint32_t count;
	uint32_t max;   /* entries allowed: capacity / 2 keeps probes short */
};

/* Room for @max_active chunks at once. Returns 0, -EINVAL or -ENOMEM. */
int sync_index_init(struct sync_index *ix, uint32_t max_active);
void sync_index_destroy(struct sync_index *ix);

struct sync_entry *sync_index_find(struct sync_index *ix, uint64_t chunk);
/*
 * Start tracking @chunk with @refs references. Returns the entry, or NULL if
 * the chunk is already tracked or the index is full (check with find first).
 */
struct sync_entry *sync_index_add(struct sync_index *ix, uint64_t chunk, uint32_t refs);
/* Queue @w behind the copy of @e's chunk; waiters are released in order. */
void sync_index_wait(struct sync_entry *e, struct sync_waiter *w);
/*
 * Stop tracking @e's chunk and return its waiters (oldest first). @e, and
 * every other entry pointer, is invalid afterwards: entries move.
 */
struct sync_waiter *sync_index_remove(struct sync_index *ix, struct sync_entry *e);

#endif
