/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The transports built into librmr; see include/rmr/transport.h. */
#ifndef RMR_TRANSPORT_TRANSPORTS_H
#define RMR_TRANSPORT_TRANSPORTS_H

#include <stdbool.h>

#include <rmr/transport.h>

/* libfabric: providers "tcp" (default), "shm", "verbs". */
extern const struct rmr_transport_ops rmr_fabric_transport_ops;
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

#endif
