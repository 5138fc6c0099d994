/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "slots.h"

#include <errno.h>
#include <stdlib.h>

#include "loop.h"

int slot_pool_init(struct slot_pool *p, uint32_t n)
{
	if (n == 0)
		return -EINVAL;
	p->free = calloc(n, sizeof(*p->free));
	if (!p->free)
		return -ENOMEM;
	/* Hand out low indexes first: keeps the members' per-slot state dense. */
	for (uint32_t i = 0; i < n; i++)
		p->free[i] = n - 1 - i;
	p->nfree = n;
	p->n = n;
	p->waiters = 0;
	p->shutdown = false;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->freed, NULL);
	return 0;
}

void slot_pool_destroy(struct slot_pool *p)
{
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->freed);
	free(p->free);
	p->free = NULL;
}

int slot_pool_get(struct slot_pool *p, bool wait)
{
	int ret;

	pthread_mutex_lock(&p->lock);
	while (!p->shutdown && p->nfree == 0 && wait) {
		p->waiters++;
		if (loop_sim_active())
			loop_sim_wait(&p->lock);
		else
			pthread_cond_wait(&p->freed, &p->lock);
		p->waiters--;
	}
	if (p->shutdown)
		ret = -ESHUTDOWN;
	else if (p->nfree == 0)
		ret = -EAGAIN;
	else
		ret = (int)p->free[--p->nfree];
	pthread_mutex_unlock(&p->lock);
	return ret;
}

void slot_pool_put(struct slot_pool *p, uint32_t index)
{
	pthread_mutex_lock(&p->lock);
	p->free[p->nfree++] = index;
	if (p->waiters)
		pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->lock);
}

uint32_t slot_pool_used(struct slot_pool *p)
{
	uint32_t used;

	pthread_mutex_lock(&p->lock);
	used = p->n - p->nfree;
	pthread_mutex_unlock(&p->lock);
	return used;
}

void slot_pool_shutdown(struct slot_pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->shutdown = true;
	pthread_cond_broadcast(&p->freed);
	pthread_mutex_unlock(&p->lock);
}
