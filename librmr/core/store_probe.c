/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A member's store check, its flush off the loop; see store_probe.h. */
#include "store_probe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "log.h"
#include "loop.h"
#include "server_internal.h"

static void probe_ended(struct srv_pool *p, int status)
{
	p->probe_ended = p->probe_begun;
	p->probe_ended_ns = loop_now(p->srv->loop);
	if (status < 0) {
		p->probe_failed = p->probe_ended;
		p->probe_untold = true;
		log_warn("pool=%s member=%u: store check failed: %s", p->name, p->params.member_id,
			 strerror(-status));
	}
}

/* Take the result of a check that finished. */
static void collect(struct srv_pool *p)
{
	int status;

	if (flusher_done(&p->prober, &status))
		probe_ended(p, status);
}

int store_probe_begin(struct srv_pool *p, uint64_t *ticket)
{
	uint32_t len = RMR_MIN(4096u, pool_chunk_len(p, 0));
	void *buf;
	int ret;

	collect(p);
	*ticket = p->probe_begun;
	if (p->probe_untold) {
		p->probe_untold = false;
		return -EIO;
	}
	if (p->probe_ended < p->probe_begun)
		return 0; /* one runs: its result is ours */
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	ret = p->ops.chunk_export(p->store, 0, buf, len);
	free(buf);
	*ticket = ++p->probe_begun;
	if (ret < 0) {
		probe_ended(p, ret);
		p->probe_untold = false;
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
	collect(p);
	if (p->probe_ended < ticket)
		return -EINPROGRESS;
	if (p->probe_failed >= ticket) {
		p->probe_untold = false;
		return -EIO;
	}
	return 0;
}

bool store_probe_running(struct srv_pool *p)
{
	collect(p);
	return p->probe_ended < p->probe_begun;
}

int store_probe_recent(struct srv_pool *p, uint64_t ticket, uint64_t now, uint64_t fresh_ns)
{
	if (!ticket || store_probe_running(p))
		return -ENOENT;
	if (store_probe_result(p, ticket) < 0)
		return -EIO;
	return now - p->probe_ended_ns <= fresh_ns ? 0 : -ENOENT;
}

void store_probe_tick(struct srv_pool *p, uint64_t now)
{
	(void)now;
	collect(p);
}
