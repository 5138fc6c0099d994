/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Online verify: this member compares its chunks with its peers', storage to
 * storage, by checksums (CHUNK_SUM over the member-to-member sessions); no
 * data moves and the client is not involved.
 *
 * Members apply non-overlapping writes to one chunk in any order, so two
 * checksums taken a moment apart can differ while writes land. A mismatch
 * therefore counts only when it persists: the chunk is asked again, twice,
 * a little later. Chunks a map says are missing on one side are skipped:
 * the resync already knows them.
 *
 * With repair, each chunk that differs is marked dirty for the members that
 * hold the other content, on this member and on every peer (MAP_MARK), so
 * they copy it from this one: the member that runs the verify is the
 * authority. It must hold every chunk itself (its own map empty).
 */
#ifndef RMR_CORE_VERIFY_H
#define RMR_CORE_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include <rmr/server.h>

struct srv_pool;

/* Start a verify (on the loop). Returns 0, -EBUSY, -EAGAIN or -EINVAL (see rmr_server_verify). */
int verify_start(struct srv_pool *p, const struct rmr_verify_opts *o);
/* Stop a running verify; -EALREADY if none runs. */
int verify_stop(struct srv_pool *p);
/* Periodic: retries that are due, the next batch, progress events. */
void verify_tick(struct srv_pool *p, uint64_t now);
/* Fill the verify part of a pool's status. */
void verify_status(const struct srv_pool *p, struct rmr_server_pool_status *ps);
/* Free what a verify left (pool removal). */
void verify_free(struct srv_pool *p);

/*
 * A peer asks for the checksums of chunks [first, first+count): fill @out
 * (count struct rmr_wire_chunk_sum). Returns 0 or -errno from the store.
 */
int verify_serve_sums(struct srv_pool *p, uint64_t first, uint32_t count, void *out);
/*
 * A peer's verify found chunks [first, first+count) differ on the members
 * in @ids (this one may be among them): mark them dirty, durably, under map
 * version @map_ver. Returns 0 or -errno.
 */
int verify_apply_marks(struct srv_pool *p, uint64_t ids, uint64_t map_ver, uint64_t first,
		       uint64_t count);

#endif
