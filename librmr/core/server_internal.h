/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Server internals shared by server.c (sessions, requests), peer.c
 * (member-to-member sessions this member dials), resync.c (chunk copies) and
 * map_transfer.c (dirty-map updates). Everything here runs on the server's
 * event-loop thread, except the store-completion list (done_lock).
 */
#ifndef RMR_CORE_SERVER_INTERNAL_H
#define RMR_CORE_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <rmr/server.h>
#include <rmr/transport.h>

#include "loop.h"
#include "server_pool.h"
#include "sync_index.h"
#include "wire.h"

#define DEF_QUEUE_DEPTH 128
#define MAX_QUEUE_DEPTH 1024
#define DEF_MAX_IO (128u * 1024)
#define DEF_HEARTBEAT_MS 250
#define DEF_FAILURE_MS 2000
#define NS_PER_MS 1000000ull
#define HDR_LEN sizeof(struct rmr_wire_hdr)

/* What a send's op_ctx points to: every kind starts with this tag. */
enum send_kind { SEND_ANSWER = 1, SEND_CTRL = 2, SEND_PEER_CTRL = 3, SEND_PEER_REQ = 4 };

/* What a connection's conn_ctx points to: both kinds start with this tag. */
enum conn_kind { CONN_SESSION = 1, CONN_PEER = 2 };

struct srv_session;

struct srv_req {
	struct rmr_store_io io;      /* handed to the store; first for container_of */
	struct srv_session *sess;
	void *buf, *rx;              /* the receive buffer it arrived in */
	unsigned type;               /* request message type */
	uint32_t slot, seq;
	int status;
	uint32_t read_len;           /* bytes a read returns: len, or fewer if the store says so */
	bool busy;                   /* between arrival and answer handed to the transport */
	bool in_store;               /* the store has it, or it waits for a chunk copy */
	bool clears_chunk;           /* a whole-chunk write that makes a dirty chunk clean */
	uint64_t clear_epoch;        /* the resync epoch of its first such claim */
	uint64_t map_ver, missed;    /* WRITE: put on record just before it is applied */
	struct sync_waiter waiter;   /* waits for the copy of a dirty chunk */
	struct srv_req *done_next;   /* completions from other threads */
};

/*
 * An answer on its way out, holding the receive buffer it is sent from. Kept
 * apart from the request slot: the client may reuse the slot as soon as it
 * got the answer, which can be before our send completion is reaped.
 */
struct srv_answer {
	uint8_t kind;                /* SEND_ANSWER: send op_ctx points here */
	void *rx;
	struct srv_answer *next_free;
};

struct srv_ctrl {
	uint8_t kind;                /* SEND_CTRL */
	struct rmr_wire_hdr hdr;
	uint8_t body[sizeof(struct rmr_wire_hello_rsp) + RMR_WIRE_MEMBERS_MAX];
	uint32_t body_len;           /* of a HELLO_RSP waiting to go */
	bool sending;
};

struct srv_session {
	uint8_t conn_kind;           /* CONN_SESSION */
	struct rmr_server *srv;
	struct rmr_conn *conn;
	struct srv_pool *pool;       /* NULL until the hello */
	struct srv_session *next, *prev;
	uint64_t created, last_rx, last_tx;
	uint32_t qd, max_io;
	uint32_t role;
	uint16_t peer_id;            /* role PEER: the member that dialed */
	uint64_t incarnation;        /* of the process that opened the session */
	bool dead;                   /* closing: waits for the store, then freed */
	bool close_after_send;       /* refused hello: close once the answer left */
	bool hello_deferred;         /* answer waits until fenced writes left the store */
	unsigned in_store;
	struct srv_req *reqs;        /* qd request slots */
	struct srv_req *map_reqs;    /* qd MAP_ADD slots (same index as the write) */
	struct srv_answer *answers;  /* n_answers, one per send the transport may hold */
	struct srv_answer *free_answers;
	uint32_t n_answers;
	struct srv_ctrl hello_rsp, heartbeat, pull_rsp, reconcile_rsp, membership_rsp;
	/* A RECONCILE_OWN waits for the store check of this ticket (store_probe.h). */
	bool reconcile_waiting;
	uint64_t reconcile_probe, reconcile_map_ver;
	/*
	 * A hello for a keyed pool waits for its AUTH: the CHALLENGE went out
	 * (@challenge) and nothing but an AUTH that proves the key is taken.
	 * Until then @pool stays NULL: the hello had no effect yet.
	 */
	struct srv_pool *auth_pool;
	struct rmr_hello auth_hello;
	uint16_t auth_sender;
	uint8_t auth_nonce[RMR_NONCE_LEN]; /* ours, sent in the CHALLENGE */
	struct srv_ctrl challenge;
};

struct rmr_server {
	struct rmr_server_opts opts;
	struct rmr_server_events events;
	char listen_addr[RMR_ADDR_MAX + 1];
	char name[RMR_ADDR_MAX + 1];
	const struct rmr_transport_ops *tops;
	void *tp;
	struct loop *loop;
	uint64_t incarnation;
	struct srv_pool *pools[RMR_SERVER_MAX_POOLS];
	struct srv_session *sessions;
	uint32_t nsessions;
	uint64_t rejected;
	uint64_t auth_refused;       /* of those, for who they claimed to be; and peers that did not prove the key */

	pthread_mutex_t done_lock;
	struct srv_req *done_head;
};

/* server.c */
/* Send a control answer (@type, @status) on @sess from @cm. */
void server_ctrl_send(struct srv_session *sess, struct srv_ctrl *cm, unsigned type, int status,
		      size_t body_len);
/*
 * The member ids @p holds a live session with, either way: a client learns
 * from its heartbeats that a member it lost is back (HEARTBEAT `addr`).
 */
uint64_t server_peers_up(const struct srv_pool *p);
/* Send every client of @p a heartbeat now: a member came back. */
void server_announce_peers(struct srv_pool *p);
/* A request parked on a chunk copy may go on (the chunk is clean, or the copy failed). */
void server_req_resume(struct srv_req *req, int status);
/* Close @sess (freed once the store gave its requests back). */
void server_session_close(struct srv_session *sess, const char *reason);
/*
 * Count and log a session refused for who it claims to be, and tell the
 * consumer: @p may be NULL, @role is "client" or "member".
 */
void server_auth_refused(struct rmr_server *s, const struct srv_pool *p, const char *role,
			 uint16_t claimed_id, const char *reason);

/* writer.c: writer fencing */
/*
 * A client hello @h: grant it the writer epoch (in @granted), or refuse it:
 * -EBUSY (another writer is attached), -ESTALE (it was fenced), -errno if
 * the epoch could not be made durable.
 */
int writer_admit(struct srv_pool *p, const struct rmr_hello *h, uint64_t *granted);
/* Does the client of @sess hold the writer epoch? */
bool writer_holds(const struct srv_pool *p, const struct srv_session *sess);
/* Are requests of a writer that is not the holder still in the store? */
bool writer_fenced_in_store(const struct srv_pool *p);
/* A clean goodbye of a client session; @status < 0: its open failed. */
void writer_goodbye(struct srv_pool *p, const struct srv_session *sess, int status);

/* Is a live client session of @writer attached to @p? */
bool server_writer_attached(const struct srv_pool *p, uint64_t writer);
/* Tell the consumer (rmr_server_events); each does nothing without a callback. */
void server_event_dirty(struct srv_pool *p, uint16_t member_id, bool dirty);
void server_event_resync(struct srv_pool *p);
void server_event_map_update(struct srv_pool *p, uint16_t source, int status);

/* map_transfer.c */
/*
 * MAP_GET from a peer: fill @buf (@cap bytes) with the dirty ranges of every
 * map from cursor (@id, @chunk) on, and move the cursor past them. Sets
 * @last when nothing is left. Returns the payload bytes.
 */
uint32_t map_transfer_serve(const struct srv_pool *p, void *buf, uint32_t cap, uint16_t *id,
			    uint64_t *chunk, bool *last);
/*
 * MAP_PULL from a client on @sess: take every map from member @source, then
 * answer; the client's map version @map_ver counts once the maps are saved.
 * @flags: RMR_MAP_PULL_ABSORB, the ranges of the client's own activity log
 * become dirty here too (writes of unknown outcome); RMR_MAP_PULL_ALL
 * (@source 0), from every other member in turn, all added to ours.
 * @uncertain: members that may hold writes of unknown outcome, which this
 * member must not copy chunks from until each says it holds every chunk.
 */
void map_transfer_pull(struct srv_pool *p, struct srv_session *sess, uint16_t source,
		       uint64_t map_ver, uint32_t flags, uint64_t uncertain);
/* Periodic: a pull waiting for its source's session starts or gives up. */
void map_transfer_tick(struct srv_pool *p, uint64_t now);
/* The pool goes: what a pull that never ended holds. */
void map_transfer_free(struct srv_pool *p);
/* @sess is going away: a pull it asked for is answered to no one. */
void map_transfer_forget(struct srv_pool *p, struct srv_session *sess);

#endif
