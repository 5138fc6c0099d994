/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A member's store check, its flush off the loop; see store_probe.h. */
#include "store_probe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "log.h"
#include "server_pool.h"

static void probe_ended(struct srv_pool *p, int status)
{
	p->probe_ended = p->probe_begun;
	p->probe_status = status < 0 ? -EIO : 0;
	if (status < 0)
		log_warn("pool=%s member=%u: store check failed: %s", p->name, p->params.member_id,
			 strerror(-status));
}

int store_probe_begin(struct srv_pool *p, uint64_t *ticket)
{
	uint32_t len = RMR_MIN(4096u, pool_chunk_len(p, 0));
	void *buf;
	int ret;

	*ticket = p->probe_begun;
	if (flusher_busy(&p->prober))
		return 0;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	ret = p->ops.chunk_export(p->store, 0, buf, len);
	free(buf);
	*ticket = ++p->probe_begun;
	if (ret < 0) {
		probe_ended(p, ret);
		return -EIO;
	}
	if (p->ops.flush)
		flusher_start(&p->prober);
	else
		probe_ended(p, 0);
	return 0;
}

int store_probe_result(struct srv_pool *p, uint64_t ticket)
{
	int status;

	if (flusher_done(&p->prober, &status))
		probe_ended(p, status);
	return p->probe_ended >= ticket ? p->probe_status : -EINPROGRESS;
}

bool store_probe_running(struct srv_pool *p)
{
	return store_probe_result(p, p->probe_begun) == -EINPROGRESS;
}
