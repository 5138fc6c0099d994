/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The table of transports: the only place where the core learns about
 * transport implementations, and only through their ops tables.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "compiler.h"
#include "transports.h"

#define MAX_TRANSPORTS 8

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct rmr_transport_ops *registry[MAX_TRANSPORTS] = {
	&rmr_fabric_transport_ops,
	&rmr_mem_transport_ops,
};

RMR_EXPORT const struct rmr_transport_ops *rmr_transport_find(const char *name)
{
	const struct rmr_transport_ops *found = NULL;

	if (!name)
		return NULL;
	pthread_mutex_lock(&registry_lock);
	for (size_t i = 0; i < MAX_TRANSPORTS && registry[i]; i++)
		if (!strcmp(registry[i]->name, name))
			found = registry[i];
	pthread_mutex_unlock(&registry_lock);
	return found;
}

RMR_EXPORT int rmr_transport_register(const struct rmr_transport_ops *ops)
{
	int ret = -ENOSPC;

	if (!ops || ops->size < sizeof(*ops) || !ops->name || !ops->create || !ops->destroy ||
	    !ops->listen || !ops->connect || !ops->send || !ops->recv_release || !ops->close ||
	    !ops->wait_fd || !ops->trywait || !ops->progress)
		return -EINVAL;
	pthread_mutex_lock(&registry_lock);
	for (size_t i = 0; i < MAX_TRANSPORTS; i++) {
		if (registry[i] && !strcmp(registry[i]->name, ops->name)) {
			ret = -EEXIST;
			break;
		}
		if (!registry[i]) {
			registry[i] = ops;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&registry_lock);
	return ret;
}
