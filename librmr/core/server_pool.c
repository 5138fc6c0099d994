/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "server_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "log.h"
#include "wire.h"

/* librmr's metadata blob, version 1: what a member must remember across restarts. */
#define META_MAGIC 0x4d524d52u /* "RMRM" */
#define META_VERSION 1
struct meta_v1 {
	rmr_le32 magic;
	rmr_le32 version;
	rmr_le64 map_ver;   /* highest map version seen */
	rmr_le64 missed;    /* member ids known to have missed writes */
	rmr_le64 reserved;  /* zero */
};
_Static_assert(sizeof(struct meta_v1) == 32, "meta blob size");
#define META_MAX (4u << 20)

RMR_EXPORT size_t rmr_server_meta_max(void)
{
	return META_MAX;
}

int pool_meta_save(struct srv_pool *p)
{
	struct meta_v1 m = {
		.magic = cpu_to_le32(META_MAGIC),
		.version = cpu_to_le32(META_VERSION),
		.map_ver = cpu_to_le64(p->map_ver),
		.missed = cpu_to_le64(p->missed),
	};
	int ret;

	if (!p->ops.meta_save)
		return 0;
	ret = p->ops.meta_save(p->store, &m, sizeof(m));
	if (ret < 0)
		log_err("pool=%s member=%u: saving metadata failed: %s", p->name,
			p->params.member_id, strerror(-ret));
	else
		p->meta_saves++;
	return ret;
}

static int pool_meta_load(struct srv_pool *p)
{
	struct meta_v1 m;
	size_t len = 0;
	int ret;

	p->map_ver = 1;
	p->missed = 0;
	if (!p->ops.meta_load)
		return 0;
	ret = p->ops.meta_load(p->store, &m, sizeof(m), &len);
	if (ret < 0)
		return ret;
	if (len == 0)
		return 0; /* never saved: a fresh member */
	if (len != sizeof(m) || le32_to_cpu(m.magic) != META_MAGIC ||
	    le32_to_cpu(m.version) != META_VERSION || le64_to_cpu(m.reserved) != 0 ||
	    (le64_to_cpu(m.missed) & 1)) {
		log_err("pool=%s member=%u: metadata blob is corrupt or of an unknown version",
			p->name, p->params.member_id);
		return -EBADMSG;
	}
	p->map_ver = le64_to_cpu(m.map_ver);
	p->missed = le64_to_cpu(m.missed);
	return 0;
}

/*
 * Record what a message says about the pool (who missed writes, the map
 * version) before acting on it. Returns 0, or -errno if it could not be made
 * durable.
 */
int pool_note(struct srv_pool *p, uint64_t map_ver, uint64_t missed)
{
	/* A member never records itself: it only gets writes while it is current. */
	missed &= ~(1ull << p->params.member_id);
	if (map_ver <= p->map_ver && !(missed & ~p->missed))
		return 0;
	if (missed & ~p->missed)
		log_notice("pool=%s member=%u: recording members 0x%llx as having missed writes",
			   p->name, p->params.member_id, (unsigned long long)(missed & ~p->missed));
	p->map_ver = RMR_MAX(p->map_ver, map_ver);
	p->missed |= missed;
	return pool_meta_save(p);
}

/* Record in the maps of every member in @missed that it missed [addr, addr+len). */
int pool_mark(struct srv_pool *p, uint64_t missed, uint64_t addr, uint32_t len)
{
	uint32_t shift = (uint32_t)__builtin_ctz(p->params.chunk_size);
	uint64_t first, count;

	missed &= p->params.members_mask & ~(1ull << p->params.member_id);
	if (!missed || !len)
		return 0;
	first = addr >> shift;
	count = ((addr + len - 1) >> shift) - first + 1;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		int ret;

		if (!(missed & (1ull << id)))
			continue;
		ret = dirty_map_mark(p->maps[id], first, count);
		if (ret < 0) {
			log_err("pool=%s member=%u: cannot record chunks missed by member %u: %s",
				p->name, p->params.member_id, id, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

void pool_free(struct srv_pool *p)
{
	for (unsigned id = 0; id <= RMR_MAX_MEMBER_ID; id++) {
		if (p->maps[id])
			dirty_map_destroy(p->maps[id]);
		free(p->maps[id]);
	}
	free(p);
}

int pool_new(struct rmr_server *s, const struct rmr_pool_params *params,
	     const struct rmr_store_ops *ops, void *store, struct srv_pool **out)
{
	static const rmr_uuid zero;
	struct srv_pool *p;
	int ret;

	if (!params || !ops || params->size < sizeof(*params) || ops->size < sizeof(*ops) ||
	    !ops->io)
		return -EINVAL;
	if (!params->name || !*params->name || strlen(params->name) > RMR_NAME_MAX ||
	    !memcmp(&params->uuid, &zero, sizeof(zero)) || params->pool_size == 0 ||
	    params->chunk_size < 4096 || (params->chunk_size & (params->chunk_size - 1)) ||
	    params->member_id == 0 || params->member_id > RMR_MAX_MEMBER_ID ||
	    !(params->members_mask & (1ull << params->member_id)) || (params->members_mask & 1))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->srv = s;
	p->params = *params;
	snprintf(p->name, sizeof(p->name), "%s", params->name);
	p->params.name = p->name;
	p->ops = *ops;
	p->store = store;
	p->nchunks = (params->pool_size + params->chunk_size - 1) / params->chunk_size;
	if (p->nchunks > DIRTY_MAP_MAX_CHUNKS) {
		log_err("pool=%s: %llu chunks, more than dirty tracking covers", p->name,
			(unsigned long long)p->nchunks);
		free(p);
		return -EINVAL;
	}
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		if (!(params->members_mask & (1ull << id)) || id == params->member_id)
			continue;
		p->maps[id] = calloc(1, sizeof(*p->maps[id]));
		if (!p->maps[id] || dirty_map_init(p->maps[id], p->nchunks) < 0) {
			pool_free(p);
			return -ENOMEM;
		}
	}
	ret = pool_meta_load(p);
	if (ret < 0) {
		pool_free(p);
		return ret;
	}
	*out = p;
	return 0;
}
