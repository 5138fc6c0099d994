/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The transports built into librmr; see include/rmr/transport.h. */
#ifndef RMR_TRANSPORT_TRANSPORTS_H
#define RMR_TRANSPORT_TRANSPORTS_H

#include <stdbool.h>
#include <stddef.h>

#include <rmr/transport.h>

/* libfabric: providers "tcp" (default), "shm", "verbs". */
extern const struct rmr_transport_ops rmr_fabric_transport_ops;
/* What the libfabric transport did, for tests and status. */
struct rmr_fabric_stats {
	unsigned long long bundles_sent;     /* provider messages carrying several */
	unsigned long long bundled_msgs;     /* messages sent in them */
	unsigned long long bundles_received;
};
/* The counters of a fabric instance (@p tp from its create). */
void rmr_fabric_stats(void *tp, struct rmr_fabric_stats *out);
/*
 * A bundle's framing (docs/protocol.md): the message at *@p off of the
 * bundle @p buf of @p len bytes, for a receiver of @p max_msg. @return 1
 * (*@p msg, *@p msg_len set, *@p off moved past it), 0 at the end, or
 * -EPROTO if the rest is malformed.
 */
int rmr_fabric_bundle_next(const void *buf, size_t len, size_t *off, size_t max_msg,
			   const void **msg, size_t *msg_len);
/* In-process transport for tests: addresses are names within one process. */
extern const struct rmr_transport_ops rmr_mem_transport_ops;
/*
 * Tests: cut (@cut true) or restore the link between the mem transport
 * instances named @a and @b (their rmr_transport_params name), as a pulled
 * cable under TCP: nothing is closed, only silence tells. Connection
 * requests vanish; messages on a connection wait and arrive, in order, once
 * the link is restored, unless an end closed it first (a timeout gave up on
 * it). Returns 0 or -ENOSPC.
 */
int rmr_mem_link_cut(const char *a, const char *b, bool cut);

/*
 * Tests: @fn sees each message the mem transport sends from now on, from
 * the instance named @from to the one named @to, once copied for the
 * receiver, and may change it in place (a member's answer made to break a
 * rule); it returns the bytes to deliver, at most @len. It runs under the
 * transport's lock and must not call the transport. NULL: none.
 */
typedef size_t (*rmr_mem_tamper_fn)(void *ctx, const char *from, const char *to, void *msg,
				    size_t len);
void rmr_mem_tamper(rmr_mem_tamper_fn fn, void *ctx);

#endif
