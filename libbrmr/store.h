/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internals of a brmr store that the unit tests reach. */
#ifndef BRMR_STORE_H
#define BRMR_STORE_H

#include <rmr/brmr.h>

#include "superblock.h"

/* The store callbacks that brmr_store_serve() hands to librmr. */
extern const struct rmr_store_ops store_ops;

/* Completion of a data request: rmr_store_io_done() unless a test replaces it. */
typedef void (*store_done_fn)(struct rmr_store_io *io, int status);
void store_set_done(struct brmr_store *s, store_done_fn fn);

/*
 * Crash drill: the @p nth metadata write from now on (a dirty-map block or a
 * metadata blob) lands only its first @p keep bytes, and every write after
 * it fails with -EIO, as if the process had died in the middle of it.
 * @p nth 0 only counts. store_meta_writes() tells how many metadata writes
 * were made since; store_crashed() whether the drill fired.
 */
void store_crash_at(struct brmr_store *s, uint64_t nth, size_t keep);
uint64_t store_meta_writes(const struct brmr_store *s);
bool store_crashed(struct brmr_store *s);

/*
 * Serve the data area of a store on tmpfs through a mapping (store_mem.h;
 * brmr_store_serve() does it unless told not to). @return 1 if mapped, 0 if
 * the store is not on tmpfs, -errno if it could not be (it works unmapped).
 */
int store_map_memory(struct brmr_store *s);
/* Reads and writes served through the mapping so far. */
uint64_t store_mapped_ios(const struct brmr_store *s);

/*
 * The store's next fdatasync fails with @p err (> 0) whatever the disk
 * says, as a lost write-back is reported: once (tests).
 */
void store_fail_next_sync(struct brmr_store *s, int err);

/* Reads the workers made (the page cache did not hold them, or FUA). */
uint64_t store_worker_reads(const struct brmr_store *s);

/* Start the I/O worker threads (brmr_store_serve() does it). @return 0 or -errno. */
int store_workers_start(struct brmr_store *s);

/*
 * The pool parameters brmr_store_serve() hands to rmr_server_add_pool():
 * identity and geometry from the superblock, members and @p peers (every
 * listed member but this store; @p params points into @p peers and into the
 * store) from its member list, resync settings from @p opts (NULL: defaults).
 * @return 0, or -EINVAL if @c opts->size is too small to hold its size field.
 */
int store_pool_params(const struct brmr_store *s, const struct brmr_serve_opts *opts,
		      struct rmr_pool_params *params, struct rmr_peer peers[RMR_MAX_MEMBERS]);

/* The decoded superblock of an open store. */
const struct superblock *store_superblock(const struct brmr_store *s);

#endif
