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
 *
 * A file reports a failed write-back to one flush only: a failed check
 * whose result nobody took (its asker gave up) fails the next one asked
 * for, so that the failure is never lost.
 */
#ifndef RMR_CORE_STORE_PROBE_H
#define RMR_CORE_STORE_PROBE_H

#include <stdbool.h>
#include <stdint.h>

struct srv_pool;

/*
 * Begin a check (or join the one under way): sets *@ticket for
 * store_probe_result(). Returns 0, or -EIO if the read failed already or
 * a failed check was not told yet.
 */
int store_probe_begin(struct srv_pool *p, uint64_t *ticket);

/*
 * -EINPROGRESS while the check of @ticket runs; then 0, or -EIO if it or a
 * later one failed.
 */
int store_probe_result(struct srv_pool *p, uint64_t ticket);

/* Is a check under way? */
bool store_probe_running(struct srv_pool *p);

/*
 * The result of the check of @ticket and every later one, if they all
 * ended, the last at most @fresh_ns before @now: 0 if they passed, -EIO if
 * one failed (told, as by store_probe_result()); else -ENOENT.
 */
int store_probe_recent(struct srv_pool *p, uint64_t ticket, uint64_t now, uint64_t fresh_ns);

/* Periodic: take a finished check's result, timed. */
void store_probe_tick(struct srv_pool *p, uint64_t now);

#endif
