/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * front_order.h: the order in which the front lets requests about one bucket
 * run, so that every client sees its own commands take effect in order.
 *
 * librmr orders overlapping writes, but a read may overtake a write in
 * flight (it goes to one member, the write to all), and a read-modify-write
 * (INCR, SET NX, DEL's count) must see every earlier write and hold off
 * every later request to its bucket until its own write is done. So, per
 * bucket, requests wait in arrival order:
 *   READ       runs alongside other reads; not while a write or RMW runs
 *   WRITE      runs alongside other writes (librmr orders them); not while
 *              a read or RMW runs
 *   EXCLUSIVE  runs alone (a read-modify-write)
 * and nothing overtakes a request that waits before it. Requests of
 * different buckets never wait for each other. A GLOBAL request (FLUSHALL,
 * DBSIZE, KVDIGEST: every bucket) waits until no bucket has anything running
 * or waiting, and everything that arrives after it waits for it.
 *
 * Pure logic, single-threaded, no allocation after order_init(): the front
 * calls it from its event loop; the unit test drives it against a model.
 */
#ifndef KVSTORE_FRONT_ORDER_H
#define KVSTORE_FRONT_ORDER_H

#include <stdbool.h>
#include <stdint.h>

enum order_class {
	ORDER_READ,
	ORDER_WRITE,
	ORDER_EXCLUSIVE,
	ORDER_GLOBAL,
};

/* Embedded in the caller's request. */
struct order_item {
	struct order_item *next;  /* waiting list */
	uint64_t bucket;          /* ignored for ORDER_GLOBAL */
	enum order_class cls;
};

struct order_bucket {
	uint32_t reads, writes;   /* running */
	bool exclusive;           /* an EXCLUSIVE runs */
	struct order_item *head, *tail; /* waiting, in arrival order */
};

struct order {
	struct order_bucket *b;
	uint64_t nbuckets;
	uint64_t admitted;        /* items running or waiting in a bucket */
	struct order_item *ghead, *gtail; /* items that arrived during or after a GLOBAL */
	bool global_running;
	/* Called when an item may run; must not call back into the order. */
	void (*start)(void *ctx, struct order_item *it);
	void *ctx;
};

/* @return 0 or -ENOMEM. */
int order_init(struct order *o, uint64_t nbuckets,
	       void (*start)(void *ctx, struct order_item *it), void *ctx);
void order_destroy(struct order *o);
/* A new item: started now (through @start) or when its turn comes. */
void order_submit(struct order *o, struct order_item *it);
/* A started item finished: whatever may run now is started. */
void order_done(struct order *o, struct order_item *it);

#endif
