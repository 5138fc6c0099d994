/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A fault transport for the simulation: the in-process transport wrapped so
 * that the network misbehaves in every way a reliable connection may.
 *
 * A connection stays what transport.h promises: in order, at most once, and
 * a lost message breaks it. Within that contract the wrapper
 *   - delays each message by a random time (connections overtake each other:
 *     a reply on one may arrive before an older request on another; data
 *     queued before a close still arrives before the close);
 *   - loses a message and resets the connection (both ends see it closed);
 *   - loses a message and leaves the receiving end deaf, the other end
 *     unaware (a half-open connection: only heartbeats can tell);
 *   - delivers a message and then resets the connection before any reply can
 *     leave, so a request that was applied may be sent again elsewhere;
 *   - refuses a connection just after it was accepted.
 * Cut links, crashes and store faults come from the mem transport and the
 * test's store. Decisions use loop_random() and times loop_clock_ns(), so a
 * simulation seed replays the same faults; the wrapper is for simulations only.
 */
#ifndef RMR_TESTS_FAULT_TRANSPORT_H
#define RMR_TESTS_FAULT_TRANSPORT_H

#include <stdint.h>

#include <rmr/transport.h>

/* Probabilities are in parts per million, per message (per connection for @refuse). */
struct fault_cfg {
	uint32_t reset_ppm;       /* lose the message, reset the connection */
	uint32_t deaf_ppm;        /* lose it and everything after it at this end */
	uint32_t reply_lost_ppm;  /* deliver it, then reset before a reply leaves */
	uint32_t refuse_ppm;      /* a new connection is reset once it is up */
	uint32_t delay_max_us;    /* each message waits 0..this long */
};

struct fault_stats {
	uint64_t delivered, delayed, resets, deaf, replies_lost, refused;
};

/* Registered as "fault" by fault_transport_register(). */
extern const struct rmr_transport_ops fault_transport_ops;

/* Make "fault" known to rmr_transport_find (idempotent). */
void fault_transport_register(void);
/* The faults from now on (all zero: a well-behaved network). */
void fault_set(const struct fault_cfg *cfg);
/* What was injected since the last fault_reset_stats(). */
struct fault_stats fault_get_stats(void);
void fault_reset_stats(void);

#endif
