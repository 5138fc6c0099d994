/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Resync: a member copies the chunks it missed (its own dirty map) from the
 * peers that hold them, over member-to-member sessions.
 *
 * Two things start a chunk copy. A client request that touches a chunk dirty
 * for this member waits for that chunk, and for nothing else, while it is
 * copied; a write that covers a whole dirty chunk makes it clean without a
 * copy. And the background resync walks the own map with at most
 * sync_queue_depth chunks in flight, under a rate limit, taking each chunk
 * from a peer whose map says it holds it (round-robin over those), so that
 * all healthy peers serve at once. It resumes from the bits left after any
 * interruption.
 *
 * A copied chunk is clean in memory at once; its clean bit reaches the disk
 * after the store flushed the data (pool_flush_clears), and only then are
 * the peers told (MAP_CLEAR), so a crash never leaves a peer believing this
 * member holds a chunk it lost.
 */
#ifndef RMR_CORE_RESYNC_H
#define RMR_CORE_RESYNC_H

#include <stdbool.h>
#include <stdint.h>

#include <rmr/server.h>

struct srv_pool;
struct srv_req;

/*
 * A client request may touch chunks dirty for this member. Returns true if
 * it must wait: server_req_resume() is called when it may go on.
 */
bool resync_hold(struct srv_pool *p, struct srv_req *req);
/*
 * Can a write of [@addr, +@len) be applied here? Not if it covers part of a
 * chunk this member has yet to copy in that no peer that is up holds: the
 * write would land on stale bytes that nothing can complete. A @patch
 * (RMR_IO_PATCH) covers every chunk of its range in part.
 */
bool resync_write_possible(struct srv_pool *p, uint64_t addr, uint64_t len, bool patch);
/* The store finished @req (see resync_hold): chunks it covered whole are clean if @status is 0. */
void resync_release(struct srv_pool *p, struct srv_req *req, int status);
/* Something changed (the maps were pulled): copy what can be copied. */
void resync_kick(struct srv_pool *p);
/*
 * The session to peer @id is up: it may have missed MAP_CLEARs while it was
 * down, so it hears "I hold every chunk" as soon as that is true.
 */
void resync_peer_up(struct srv_pool *p, uint16_t id);
/* Periodic: durable clean bits, MAP_CLEAR to peers, rate limit, progress. */
void resync_tick(struct srv_pool *p, uint64_t now);
/* A peer says it holds chunks [first, first+count) again. */
void resync_peer_clean(struct srv_pool *p, uint16_t id, uint64_t map_ver, uint64_t first,
		       uint64_t count);
/*
 * Chunks made clean but not yet told to the peers whose copy is not the one
 * a flush covered: dirty again (a write missed this member after the copy,
 * as a pulled map says, or a verify marked them), or copied again since
 * the flush began. The peers must not hear of those.
 */
void resync_drop_redirtied(struct srv_pool *p);
/* Pool removal: fail every copy and every waiting request. */
void resync_stop(struct srv_pool *p);
/* Fill the resync part of a pool's status. */
void resync_status(const struct srv_pool *p, struct rmr_server_pool_status *ps);

#endif
