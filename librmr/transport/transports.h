/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The transports built into librmr; see include/rmr/transport.h. */
#ifndef RMR_TRANSPORT_TRANSPORTS_H
#define RMR_TRANSPORT_TRANSPORTS_H

#include <rmr/transport.h>

/* libfabric: providers "tcp" (default), "shm", "verbs". */
extern const struct rmr_transport_ops rmr_fabric_transport_ops;
/* In-process transport for tests: addresses are names within one process. */
extern const struct rmr_transport_ops rmr_mem_transport_ops;

#endif
