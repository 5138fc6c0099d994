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

/* Start the I/O worker threads (brmr_store_serve() does it). @return 0 or -errno. */
int store_workers_start(struct brmr_store *s);

/* The decoded superblock of an open store. */
const struct superblock *store_superblock(const struct brmr_store *s);

#endif
