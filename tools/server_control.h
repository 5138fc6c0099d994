/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * server_control: brmr-server's control socket and its recovery events.
 *
 * Protocol (--control PATH, mode 0600): the client writes one line.
 *   "status text", "status json", "status prometheus"  the rendered status
 *   "fault on", "fault off"    fault injection on every served store; "ok"
 *   "events"                   the event stream: the current state, then
 *                              every change, one JSON object a line, until
 *                              either side closes
 *   "events now"               the current state only, then close
 *   "resync stop|start [POOL]" pause or resume the background resync
 *   "resync rate BYTES [POOL]" its rate limit in bytes/s (0: none)
 *   "verify [repair] [POOL]"   start an online verify with this member as
 *                              the reference (progress in the status)
 *   "verify stop [POOL]"       stop it
 * POOL may be left out when the server serves one pool, or on the control
 * socket a pool file named for it (one server serving several pools
 * listens on each pool's socket); these answer "ok" or "error: REASON".
 * Anything else gets "error: unknown command". Every command but "events"
 * is answered and the connection closed.
 */
#ifndef BRMR_TOOLS_SERVER_CONTROL_H
#define BRMR_TOOLS_SERVER_CONTROL_H

#include <rmr/brmr.h>
#include <rmr/server.h>

#include "evstream.h"

/* A served store, as the events name it. */
struct served_pool {
	char name[RMR_NAME_MAX + 1];
	uint16_t member_id;
	struct brmr_store *store;
	struct rmr_server_pool *handle; /* set once it is served */
};

/* A control socket, and the pool it acts on when a command names none. */
struct ctl_socket {
	int fd;
	const char *path;
	const char *pool;               /* NULL: the only pool served, or name one */
};

struct server_ctl {
	struct ctl_socket socks[RMR_SERVER_MAX_POOLS]; /* none without --control or a pool file */
	unsigned nsocks;
	struct rmr_server *srv;         /* set once the server runs */
	struct served_pool pools[RMR_SERVER_MAX_POOLS];
	unsigned npools;
	struct evstream ev;
};

/* Recovery callbacks: a log line and an event each; priv is the server_ctl. */
extern const struct rmr_server_events server_ctl_events;

/* Prepare the event stream (before the server starts). @return 0 or -errno. */
int server_ctl_init(struct server_ctl *ctl);
/* Bind a control socket, replacing a stale one but never a live one; a
 * command on it that names no pool acts on @pool (NULL: the only one).
 * A path bound already is not bound twice (and then acts on no pool by
 * default). @return 0 or -errno (logged). */
int server_ctl_listen(struct server_ctl *ctl, const char *path, const char *pool);
/* Poll entries of the control sockets and the event listeners (room for
 * RMR_SERVER_MAX_POOLS + EVSTREAM_MAX_LISTENERS + 1). @return the entries used. */
unsigned server_ctl_pollfds(struct server_ctl *ctl, struct pollfd *pfd);
/* Act on the results of the entries server_ctl_pollfds() filled. */
void server_ctl_handle(struct server_ctl *ctl, const struct pollfd *pfd, unsigned n);
/* Close the sockets (and remove them) and every listener. */
void server_ctl_close(struct server_ctl *ctl);

#endif
