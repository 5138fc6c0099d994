/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A pool as one member serves it: identity, the consumer's store, and what
 * this member knows about every member of the pool, itself included: the map
 * version and, per member, the chunks it missed (its dirty map).
 *
 * Durability: a chunk marked dirty is written to the store's dirty-map area
 * before the request that marked it is answered. Chunks that became clean
 * are written lazily (pool_flush_clears), after the store flushed the data
 * that made them clean: a stale dirty bit costs one redundant copy, a stale
 * clean bit would lose data.
 *
 * The session and request handling is in server.c, member-to-member sessions
 * in peer.c, chunk copies in resync.c, map transfer in map_transfer.c.
 */
#ifndef RMR_CORE_SERVER_POOL_H
#define RMR_CORE_SERVER_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include <rmr/server.h>

#include "activity_log.h"
#include "dirty_map.h"
#include "flusher.h"
#include "sync_index.h"
#include "wire.h"

struct copy;
struct peer;
struct verify;
struct srv_session;

struct srv_pool {
	struct rmr_server *srv;
	char name[RMR_NAME_MAX + 1];
	struct rmr_pool_params params;
	bool keyed;                  /* sessions must prove @key (auth.h) */
	uint8_t key[RMR_KEY_LEN];
	struct rmr_store_ops ops;
	void *store;
	uint64_t map_ver;
	uint64_t missed;             /* durable coarse record: ids that missed writes */
	struct rmr_membership membership; /* who the members are (membership.h) */
	bool fresh;                  /* the store never saved the metadata blob */
	uint32_t chunk_shift;
	uint64_t nchunks;
	uint32_t al_extent_chunks;   /* chunks per activity log extent */
	/* Per member id (this member's own included): chunks it missed. */
	struct dirty_map *maps[RMR_MAX_MEMBER_ID + 1];
	/* Highest map version of a message that marked each member dirty. */
	uint64_t mark_ver[RMR_MAX_MEMBER_ID + 1];
	/* The newest version at which each member told us it holds every chunk. */
	uint64_t full_clear_ver[RMR_MAX_MEMBER_ID + 1];
	/*
	 * The boot of its host each member's records were made in (0:
	 * unknown), but those marked RECORD_OLD_BIT (an older one); saved.
	 * Ours too: the records of our own map. A member running in that boot
	 * still lost none of them (pool_holds).
	 */
	uint64_t record_boot[RMR_MAX_MEMBER_ID + 1];
	bool removing;

	/* dirty-map area: which 4 KiB blocks need rewriting (cleared bits) */
	uint64_t bitmap_bytes;       /* one member's bitmap, 4 KiB rounded */
	uint8_t *stale_blocks;       /* one per block of the area: BLOCK_* (server_pool.c) */
	uint64_t nblocks;
	bool clears_pending;         /* blocks to write, or own clears to cover */
	/*
	 * This member's own chunks made clean in memory (copied in, or
	 * overwritten whole) whose data no finished flush made durable yet:
	 * cleared since the last flush began, and covered by the one under
	 * way. Every write of an own block shows them dirty, so that its bits
	 * on disk never run ahead of the data. The flush runs off the loop
	 * (flusher.h). A peer's cleared bits need no flush here: the peer made
	 * its chunks durable before it said so.
	 */
	struct dirty_map *own_cleared, *own_flushing;
	struct dirty_map own_sets[2];
	struct flusher flusher;
	/*
	 * The store check (store_probe.h): its own flusher; the checks begun
	 * and ended, the last that failed, when the last ended (ns); a
	 * failure nobody was told of yet.
	 */
	struct flusher prober;
	uint64_t probe_begun, probe_ended, probe_failed, probe_ended_ns;
	bool probe_untold;

	/*
	 * Activity log (activity_log.h): the ranges written lately for the
	 * writer, durable in the dirty-map area after the bitmaps.
	 */
	struct activity_log *al;
	void *al_buf;                /* one record */
	uint64_t al_offset;          /* of the first record in the dirty-map area */
	uint64_t al_reconciled_for;  /* writer that reconciled the entries of an older one */
	/* writer.c: the holder and epoch before the last grant, restored if the new one leaves unused */
	uint64_t prev_holder;
	uint64_t prev_epoch;
	uint64_t fenced;             /* requests refused from writers that lost the epoch */

	/* member-to-member sessions this member dials, by member id */
	struct peer *peers[RMR_MAX_MEMBER_ID + 1];
	unsigned rr_peer;

	/* resync of this member's own dirty chunks (resync.c) */
	struct sync_index syncing;   /* chunks being copied in, or held by a whole-chunk write */
	bool maps_current;           /* own map is complete: pulled, or admitted to I/O */
	/*
	 * Bumped when a map pull starts and when it is applied. A copy or a
	 * whole-chunk write begun in an older epoch may have raced a write that
	 * missed this member: it never makes its chunk clean.
	 */
	uint64_t resync_epoch;
	uint64_t resync_cursor;      /* background resync: next chunk to look at */
	uint32_t copies;             /* chunk copies in progress */
	uint32_t background_copies;  /* of those, started by the background resync */
	uint32_t background_peak;    /* the most of them at once, since the start */
	struct copy *copy_queue;     /* copies waiting for a free peer request slot */
	bool pumping, pump_again;    /* resync.c's pump runs; a copy that ended asks for more */
	struct sync_waiter *overflow; /* requests waiting for room in @syncing */
	uint64_t resync_retry_ns;    /* the background resync waits until then (ns) */
	uint64_t rate_tokens;        /* bytes the rate limit still allows */
	uint64_t rate_last_ns;
	uint64_t resync_done;        /* chunks made clean since the member last was clean */
	uint64_t resync_bytes, served_sync_bytes;
	uint64_t window_start_ns, window_bytes, resync_bps;
	uint64_t progress_ns;        /* last resync_progress event */
	bool resync_waiting;         /* own chunks dirty, no peer can provide them */
	bool resync_paused;          /* the operator paused the background resync */
	uint64_t full_clear_due;     /* peer ids to tell "I hold every chunk" once that is true */
	uint64_t *clean_pending;     /* chunks made clean, not yet told to peers */
	uint64_t nclean_pending, clean_cap;
	/*
	 * Of those, the first ones the flush under way covers; those a finished
	 * flush covered; and those whose bits are on disk too, which the peers
	 * may hear of (durable <= covered <= flushing <= pending).
	 */
	uint64_t nclean_flushing, nclean_covered, nclean_durable;

	/* map pull requested by a client (map_transfer.c) */
	struct srv_session *pull_sess; /* who asked; NULL once it went away */
	bool pull_running;           /* a pull was asked for and not answered yet */
	bool pull_started;           /* its MAP_GETs are under way */
	bool pull_probing;           /* they wait for the store check (store_probe.h) */
	uint64_t pull_probe;         /* its ticket */
	uint64_t pull_probe_until;   /* ns: past this, the pull is refused (map_transfer.c) */
	uint64_t pull_refused_probe; /* the check a pull was refused for: the next may take it */
	uint64_t pull_wait_until;    /* ns: give up waiting for the source's session */
	uint16_t pull_source;
	uint64_t pull_map_ver;       /* the client's map version in the MAP_PULL */
	uint64_t pull_writer;        /* the incarnation of the client that asked */
	uint32_t pull_flags;         /* RMR_MAP_PULL_ABSORB, RMR_MAP_PULL_ALL */
	uint64_t pull_left;          /* RMR_MAP_PULL_ALL: member ids still to take maps from */
	struct gather *gather;       /* RMR_MAP_PULL_ALL: each source's records, until all are in */
	uint64_t pull_done_ver;      /* the client's version at our last pull (0: none); saved */
	uint64_t pull_uncertain;     /* the MAP_PULL's members holding writes of unknown outcome */
	/*
	 * Peers not to copy from: they may hold writes of unknown outcome that
	 * the others lack (seed 6187). Each leaves it once it told us it holds
	 * every chunk (a full MAP_CLEAR), after it converged.
	 */
	uint64_t uncertain_peers;
	uint64_t pull_mark_ver[RMR_MAX_MEMBER_ID + 1]; /* the source's, per member (MAP_GET_RSP) */
	uint64_t pull_record_boot[RMR_MAX_MEMBER_ID + 1]; /* ... and the boot of its records */
	struct dirty_map *pull_maps[RMR_MAX_MEMBER_ID + 1];
	uint64_t map_pulls;
	void *records_loaded;        /* the metadata blob's records, until the maps are loaded */
	unsigned nrecords_loaded;

	struct verify *verify;       /* this member's verify, and its scratch buffer (verify.c) */

	uint64_t reads, writes, read_bytes, write_bytes, errors, meta_saves, map_writes;
};

/* Check @params and make a pool, loading librmr's metadata and dirty maps. */
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
/*
 * Mark [addr, addr+len) dirty for every member in @missed (never this
 * member), durably. @map_ver is the version of the message that says so.
 */
int pool_mark(struct srv_pool *p, uint64_t missed, uint64_t map_ver, uint64_t addr,
	      uint64_t len);
/*
 * The same for a client's MAP_ADD: chunks that no member outside @missed
 * holds, as far as this one knows (this one lacks them too), stay
 * unmarked. A mark there would leave no copy anyone may read, while the
 * members in @missed hold the newest there is (a record of writes no flush
 * covered on a member that left, say: if its host lost power, nobody has
 * them anyway).
 */
int pool_mark_held(struct srv_pool *p, uint64_t missed, uint64_t map_ver, uint64_t addr,
		   uint64_t len);
/*
 * A client's record (MAP_ADD with RMR_WIRE_MAP_ADD_RECORD): the members in
 * @ids may have lost the chunks of [addr, addr+len) to a power loss of their
 * host. Records, not misses (RECORD_BIT), durably. Returns 0 or -errno.
 */
int pool_record(struct srv_pool *p, uint64_t ids, uint64_t map_ver, uint64_t addr,
		uint64_t len, uint64_t boot);
/*
 * Add the records (and misses) of @src, made in @src_boot, to @dst, whose
 * records were made in *@dst_boot (@absorb: @dst is the member's own map,
 * dirty_map_absorb). One boot stays the map's: @current (the boot the
 * member runs in now) if either is, else @dst's; the records of the other
 * become of an older boot (RECORD_OLD_BIT), never void.
 */
int pool_records_add(struct dirty_map *dst, uint64_t *dst_boot, const struct dirty_map *src,
		     uint64_t src_boot, uint64_t current, bool absorb);
/* The boot member @id runs in now, as this member knows it (0: unknown). */
uint64_t pool_member_boot(const struct srv_pool *p, unsigned id);
/*
 * Does member @id hold @chunk, as far as this member knows: no miss and no
 * record of it, or a record made in the boot its host runs in still (the
 * map's record boot, not of an older one: its page cache kept those
 * writes; ours: p->params.boot_id, a peer's: its session's)?
 */
bool pool_holds(const struct srv_pool *p, unsigned id, uint64_t chunk);
/* Mark chunks [first, first+count) of member @id dirty, durably. */
int pool_mark_chunks(struct srv_pool *p, unsigned id, uint64_t first, uint64_t count);
/*
 * Clear chunk @chunk of member @id; the durable record follows lazily.
 * @return 0, or -ENOMEM (it stays dirty).
 */
int pool_clear_chunk(struct srv_pool *p, unsigned id, uint64_t chunk);
/*
 * Write the blocks of the dirty-map area that hold cleared bits: a peer's
 * at once, this member's own once a flush of the store (started here, run
 * off the loop) made their chunks' data durable; called every tick while
 * any are pending. Chunks [0, nclean_durable) of clean_pending may then be
 * told to the peers (resync.c). Returns 0 or -errno.
 */
int pool_flush_clears(struct srv_pool *p);
/* Rewrite this member's whole dirty-map area from memory. Returns 0 or -errno. */
int pool_save_all_maps(struct srv_pool *p);
/* Member ids (never this one) with dirty chunks. */
uint64_t pool_missed_ids(const struct srv_pool *p);
/*
 * Activity log. A write of @writer in request slot @slot covers
 * [addr, addr+len): make the range durable in the log before the write goes
 * to the store. Returns 0, -EIO if the log still holds another writer's
 * entries that were never reconciled, or -errno from the store.
 */
int pool_al_note(struct srv_pool *p, uint64_t writer, uint32_t slot, uint64_t addr,
		 uint64_t len);
/* Does the log hold entries of a writer other than @writer, not reconciled by it? */
bool pool_al_stale(const struct srv_pool *p, uint64_t writer);
/*
 * RECONCILE from @writer: every range in a stale log (with @own, in @writer's
 * own log as well) becomes dirty for every other member, durably, under a
 * new map version, newer than the client's @map_ver too. The entries stay
 * until @writer writes (a crash before that reconciles again).
 */
int pool_al_reconcile(struct srv_pool *p, uint64_t writer, bool own, uint64_t map_ver);
/*
 * A map pull for @writer: the ranges of a stale log (with @own, of @writer's
 * own log as well) become dirty in this member's own map, in memory (the
 * caller saves the maps).
 */
int pool_al_absorb(struct srv_pool *p, uint64_t writer, bool own);
/*
 * Would pool_al_absorb() mark a chunk that the source, whose own map is
 * @source, lacks too? Then the pull must wait: this member may be the only
 * one holding it (seed 15983).
 */
bool pool_al_absorb_lacked(struct srv_pool *p, uint64_t writer, bool own,
			   const struct dirty_map *source);
/* Write the log (and the writer epoch kept with it) durably. */
int pool_al_save(struct srv_pool *p);
/* Empty the log durably, after a clean goodbye of its writer or an absorb. */
int pool_al_clear(struct srv_pool *p);

/* Chunks of [addr, addr+len). */
static inline uint64_t pool_first_chunk(const struct srv_pool *p, uint64_t addr)
{
	return addr >> p->chunk_shift;
}
static inline uint64_t pool_last_chunk(const struct srv_pool *p, uint64_t addr, uint64_t len)
{
	return (addr + len - 1) >> p->chunk_shift;
}
/* Bytes of chunk @chunk (the last one may be short). */
uint32_t pool_chunk_len(const struct srv_pool *p, uint64_t chunk);
static inline struct dirty_map *pool_own_map(const struct srv_pool *p)
{
	return p->maps[p->params.member_id];
}

#endif
