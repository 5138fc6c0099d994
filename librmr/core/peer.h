/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Member-to-member sessions: each member of a pool dials every other member
 * (the addresses come from the pool's membership, no operator step) and uses
 * that session to take dirty maps (MAP_GET), copy chunks it missed
 * (SYNC_READ) and tell which chunks it holds again (MAP_CLEAR). The
 * compute client never carries any of it.
 *
 * A peer reconnects by itself with backoff and jitter. Requests get a
 * callback exactly once: with the answer, or with a negative status when the
 * session fails or the request times out.
 */
#ifndef RMR_CORE_PEER_H
#define RMR_CORE_PEER_H

#include <stdbool.h>
#include <stdint.h>

#include <rmr/server.h>

#include "wire.h"

struct peer;
struct srv_pool;

/*
 * Answer of a peer request: @rsp is the decoded answer (its payload valid
 * only during the call), or NULL when @status < 0 says why there is none.
 */
typedef void (*peer_done_fn)(void *ctx, struct peer *pe, const struct rmr_msg *rsp, int status);

int peer_create(struct srv_pool *p, const struct rmr_peer *cfg, struct peer **out);
/* Close the session; requests in flight complete with -ECANCELED first. */
void peer_destroy(struct peer *pe);
void peer_tick(struct peer *pe, uint64_t now);

bool peer_is_up(const struct peer *pe);
/* The peer dialled us: it is up, so a redial waiting out its backoff goes now. */
void peer_redial_now(struct peer *pe);
/* The boot of its host its session runs in (rmr_pool_params.boot_id); 0: down or unknown. */
uint64_t peer_boot(const struct peer *pe);
uint16_t peer_id(const struct peer *pe);
const char *peer_addr(const struct peer *pe);
/* Largest SYNC_READ the peer accepts. */
uint32_t peer_max_io(const struct peer *pe);
/*
 * Send a request. Returns 0 (@done will run), -ENOTCONN if the session is
 * not up, -EBUSY if every request slot is taken.
 */
int peer_send(struct peer *pe, unsigned type, uint16_t op, uint64_t addr, uint32_t len,
	      peer_done_fn done, void *ctx);
/* MAP_MARK: chunks [first, first+count) are dirty for every member in @ids. */
int peer_send_mark(struct peer *pe, uint64_t ids, uint64_t first, uint32_t count,
		   peer_done_fn done, void *ctx);
void peer_count_sync_bytes(struct peer *pe, uint64_t bytes);
void peer_count_map_bytes(struct peer *pe, uint64_t bytes);
void peer_status(const struct peer *pe, struct rmr_peer_status *ps);

/* Transport upcalls for a connection whose conn_ctx is a peer. */
void peer_on_connected(struct peer *pe, int status);
void peer_on_recv(struct peer *pe, void *buf, size_t len, void *rx);
void peer_on_send_done(struct peer *pe, void *op_ctx, int status);
void peer_on_closed(struct peer *pe, int reason);

#endif
