/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Request-slot allocator: a fixed set of indexes 0..n-1, taken and given back
 * from any thread. A slot index travels on the wire as mem_id, so a member
 * can keep per-slot state (last_io) without any allocation.
 */
#ifndef RMR_CORE_SLOTS_H
#define RMR_CORE_SLOTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct slot_pool {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	uint32_t *free;   /* stack of free indexes */
	uint32_t nfree;
	uint32_t n;
	uint32_t waiters;
	bool shutdown;
};

int slot_pool_init(struct slot_pool *p, uint32_t n);
void slot_pool_destroy(struct slot_pool *p);
/*
 * Take a slot. @wait: block while none is free. Returns the index, -EAGAIN
 * (none free, not waiting) or -ESHUTDOWN (pool shut down).
 */
int slot_pool_get(struct slot_pool *p, bool wait);
void slot_pool_put(struct slot_pool *p, uint32_t index);
/* Slots in use. */
uint32_t slot_pool_used(struct slot_pool *p);
/* Refuse further gets and wake every waiter. */
void slot_pool_shutdown(struct slot_pool *p);

#endif
