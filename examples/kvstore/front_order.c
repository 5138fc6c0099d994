/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Per-bucket ordering of the front's requests; see front_order.h. */
#include "front_order.h"

#include <errno.h>
#include <stdlib.h>

int order_init(struct order *o, uint64_t nbuckets,
	       void (*start)(void *ctx, struct order_item *it), void *ctx)
{
	*o = (struct order){ .nbuckets = nbuckets, .start = start, .ctx = ctx };
	o->b = calloc(nbuckets, sizeof(*o->b));
	return o->b ? 0 : -ENOMEM;
}

void order_destroy(struct order *o)
{
	free(o->b);
	o->b = NULL;
}

static bool may_run(const struct order_bucket *b, enum order_class cls)
{
	switch (cls) {
	case ORDER_READ:
		return !b->exclusive && !b->writes;
	case ORDER_WRITE:
		return !b->exclusive && !b->reads;
	case ORDER_EXCLUSIVE:
		return !b->exclusive && !b->reads && !b->writes;
	case ORDER_GLOBAL:
		break;
	}
	return false;
}

static void run(struct order *o, struct order_bucket *b, struct order_item *it)
{
	switch (it->cls) {
	case ORDER_READ:
		b->reads++;
		break;
	case ORDER_WRITE:
		b->writes++;
		break;
	case ORDER_EXCLUSIVE:
		b->exclusive = true;
		break;
	case ORDER_GLOBAL:
		break;
	}
	o->start(o->ctx, it);
}

static void append(struct order_item **head, struct order_item **tail, struct order_item *it)
{
	it->next = NULL;
	if (*tail)
		(*tail)->next = it;
	else
		*head = it;
	*tail = it;
}

static void admit(struct order *o, struct order_item *it)
{
	struct order_bucket *b = &o->b[it->bucket];

	o->admitted++;
	if (!b->head && may_run(b, it->cls))
		run(o, b, it);
	else
		append(&b->head, &b->tail, it);
}

/* Let in what waits behind a GLOBAL, up to the next GLOBAL that must wait. */
static void drain_global(struct order *o)
{
	while (o->ghead && !o->global_running) {
		struct order_item *it = o->ghead;

		if (it->cls == ORDER_GLOBAL && o->admitted)
			return;
		o->ghead = it->next;
		if (!o->ghead)
			o->gtail = NULL;
		if (it->cls == ORDER_GLOBAL) {
			o->global_running = true;
			o->start(o->ctx, it);
		} else {
			admit(o, it);
		}
	}
}

void order_submit(struct order *o, struct order_item *it)
{
	if (it->cls == ORDER_GLOBAL || o->ghead || o->global_running) {
		append(&o->ghead, &o->gtail, it);
		drain_global(o);
		return;
	}
	admit(o, it);
}

void order_done(struct order *o, struct order_item *it)
{
	struct order_bucket *b;

	if (it->cls == ORDER_GLOBAL) {
		o->global_running = false;
		drain_global(o);
		return;
	}
	b = &o->b[it->bucket];
	switch (it->cls) {
	case ORDER_READ:
		b->reads--;
		break;
	case ORDER_WRITE:
		b->writes--;
		break;
	case ORDER_EXCLUSIVE:
		b->exclusive = false;
		break;
	case ORDER_GLOBAL:
		break;
	}
	o->admitted--;
	while (b->head && may_run(b, b->head->cls)) {
		struct order_item *next = b->head;

		b->head = next->next;
		if (!b->head)
			b->tail = NULL;
		run(o, b, next);
	}
	if (!o->admitted)
		drain_global(o);
}
