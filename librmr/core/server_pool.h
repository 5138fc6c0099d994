/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A pool as one member serves it: identity, the consumer's store, and what
 * this member knows about the others (map version, who missed writes, and
 * which chunks). The session and request handling is in server.c.
 */
#ifndef RMR_CORE_SERVER_POOL_H
#define RMR_CORE_SERVER_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include <rmr/server.h>

#include "dirty_map.h"

struct srv_pool {
	struct rmr_server *srv;
	char name[RMR_NAME_MAX + 1];
	struct rmr_pool_params params;
	struct rmr_store_ops ops;
	void *store;
	uint64_t map_ver;
	uint64_t missed;
	/*
	 * Per member id, the chunks it missed, as this member recorded them
	 * (only ids of the pool). Kept in memory; the durable record is still
	 * the whole-member @missed mask until the dirty-map log exists.
	 */
	struct dirty_map *maps[RMR_MAX_MEMBER_ID + 1];
	uint64_t nchunks;
	bool removing;
	uint64_t reads, writes, read_bytes, write_bytes, errors, meta_saves;
};

/* Check @params and make a pool, loading librmr's metadata blob from the store. */
int pool_new(struct rmr_server *s, const struct rmr_pool_params *params,
	     const struct rmr_store_ops *ops, void *store, struct srv_pool **out);
void pool_free(struct srv_pool *p);
/* Durably save map_ver and the missed mask through the store. */
int pool_meta_save(struct srv_pool *p);
/*
 * Record what a message says about the pool (who missed writes, the map
 * version) before acting on it. Returns 0, or -errno if it could not be made
 * durable.
 */
int pool_note(struct srv_pool *p, uint64_t map_ver, uint64_t missed);
/* Mark [addr, addr+len) dirty for every member in @missed. */
int pool_mark(struct srv_pool *p, uint64_t missed, uint64_t addr, uint32_t len);

#endif
