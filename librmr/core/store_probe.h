/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The store check a member makes before it takes the dirty maps, or before
 * it becomes the member the others converge on (RECONCILE_OWN): a read of
 * its first bytes, then a flush, which also reports a write-back that
 * failed since the last one. A member whose store fails it must not be
 * taken as current.
 *
 * The flush writes back every page dirtied since the last one, which on a
 * busy or slow disk takes longer than the heartbeat timeout, so it runs off
 * the event loop, on a flusher of its own (flusher.h): a check is begun,
 * and its result taken on a later turn, while the member keeps answering.
 * A check asked for while one runs shares that one's result.
 */
#ifndef RMR_CORE_STORE_PROBE_H
#define RMR_CORE_STORE_PROBE_H

#include <stdbool.h>
#include <stdint.h>

struct srv_pool;

/*
 * Begin a check (or join the one under way): sets *@ticket for
 * store_probe_result(). Returns 0, or -EIO if the read failed already.
 */
int store_probe_begin(struct srv_pool *p, uint64_t *ticket);

/* -EINPROGRESS while the check of @ticket runs; then 0, or -EIO if it failed. */
int store_probe_result(struct srv_pool *p, uint64_t ticket);

/* Is a check under way? */
bool store_probe_running(struct srv_pool *p);

#endif
