/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Member-to-member sessions; see peer.h. */
#include "peer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "compiler.h"
#include "log.h"
#include "resync.h"
#include "server_internal.h"

#define RECONNECT_MIN_MS 200
#define RECONNECT_MAX_MS 5000
#define REQUEST_MS 10000
#define EXTRA_SLOTS 8 /* MAP_GET and MAP_CLEAR beside the resync pieces */

struct peer_req {
	uint8_t kind;                /* SEND_PEER_REQ */
	struct peer *pe;
	struct rmr_wire_hdr hdr;
	uint32_t index, seq;
	bool busy, sending, waiting;
	unsigned type;
	peer_done_fn done;
	void *ctx;
	uint64_t deadline;
	struct peer_req *next_free;
};

struct peer_ctrl {
	uint8_t kind;                /* SEND_PEER_CTRL */
	struct rmr_wire_hdr hdr;
	union {
		struct rmr_wire_hello hello;
		struct rmr_wire_auth auth;
	} body;
	bool sending;
};

struct peer {
	uint8_t conn_kind;           /* CONN_PEER: conn_ctx points here */
	struct srv_pool *pool;
	struct rmr_server *srv;
	uint16_t id;
	char addr[RMR_ADDR_MAX + 1];
	struct rmr_conn *conn;
	void *rx_lent;
	bool connected, up;
	uint64_t last_rx, last_tx, hello_deadline, next_connect;
	unsigned backoff_ms;
	uint64_t map_ver, incarnation;
	uint64_t boot;               /* its host's boot, as its hello answer said (0: unknown) */
	uint32_t max_io;
	struct peer_ctrl hello, heartbeat, auth;
	uint8_t nonce[RMR_NONCE_LEN]; /* ours, in the hello of a keyed pool */
	bool authed;                 /* its CHALLENGE proved the key; our AUTH went out */
	bool auth_refusing;          /* it did not: our AUTH said so, its answer is awaited */
	struct peer_req *reqs;
	uint32_t nreqs;
	struct peer_req *free_reqs;
	char reason[64];
	bool ever_up;
	uint64_t sync_bytes, map_bytes, reconnects;
};

static const char *pname(const struct peer *pe)
{
	return pe->pool->name;
}

static void schedule_reconnect(struct peer *pe)
{
	pe->next_connect = loop_now(pe->srv->loop) +
			   loop_backoff_ns(&pe->backoff_ms, RECONNECT_MIN_MS, RECONNECT_MAX_MS);
}

static void req_free(struct peer *pe, struct peer_req *r)
{
	r->busy = false;
	r->seq++;
	r->next_free = pe->free_reqs;
	pe->free_reqs = r;
}

/* Complete a request that has no answer; frees its slot once its send is back. */
static void req_fail(struct peer *pe, struct peer_req *r, int status)
{
	peer_done_fn done = r->done;

	r->waiting = false;
	r->done = NULL;
	if (!r->sending)
		req_free(pe, r);
	if (done)
		done(r->ctx, pe, NULL, status);
}

static void peer_drop(struct peer *pe, const char *reason, int status)
{
	struct rmr_server *s = pe->srv;
	bool was_up = pe->up;

	if (pe->conn) {
		if (pe->rx_lent)
			s->tops->recv_release(s->tp, pe->conn, pe->rx_lent);
		pe->rx_lent = NULL;
		s->tops->close(s->tp, pe->conn);
		pe->conn = NULL;
	}
	pe->connected = pe->up = pe->authed = pe->auth_refusing = false;
	pe->hello.sending = pe->heartbeat.sending = pe->auth.sending = false;
	snprintf(pe->reason, sizeof(pe->reason), "%s", reason);
	/* Sends are abandoned with the connection: every slot is ours again. */
	for (uint32_t i = 0; i < pe->nreqs; i++)
		pe->reqs[i].sending = false;
	for (uint32_t i = 0; i < pe->nreqs; i++) {
		struct peer_req *r = &pe->reqs[i];

		if (r->busy && r->waiting)
			req_fail(pe, r, status);
		else if (r->busy)
			req_free(pe, r);
	}
	if (was_up)
		log_warn("pool=%s member=%u: session to member %u (%s) lost: %s", pname(pe),
			 pe->pool->params.member_id, pe->id, pe->addr, reason);
	if (!pe->pool->removing && !pe->next_connect)
		schedule_reconnect(pe);
}

static void peer_connect(struct peer *pe)
{
	struct rmr_server *s = pe->srv;
	int ret;

	pe->next_connect = 0;
	ret = s->tops->connect(s->tp, pe->addr, pe, &pe->conn);
	if (ret < 0) {
		pe->conn = NULL;
		peer_drop(pe, "connect failed", -ENOTCONN);
		return;
	}
	pe->hello_deadline = loop_now(s->loop) + s->opts.failure_timeout_ms * NS_PER_MS;
}

int peer_create(struct srv_pool *p, const struct rmr_peer *cfg, struct peer **out)
{
	struct peer *pe = calloc(1, sizeof(*pe));

	if (!pe)
		return -ENOMEM;
	pe->conn_kind = CONN_PEER;
	pe->pool = p;
	pe->srv = p->srv;
	pe->id = cfg->member_id;
	snprintf(pe->addr, sizeof(pe->addr), "%s", cfg->addr);
	snprintf(pe->reason, sizeof(pe->reason), "not connected yet");
	pe->nreqs = p->params.sync_queue_depth + EXTRA_SLOTS;
	pe->reqs = calloc(pe->nreqs, sizeof(*pe->reqs));
	if (!pe->reqs) {
		free(pe);
		return -ENOMEM;
	}
	for (uint32_t i = pe->nreqs; i-- > 0;) {
		pe->reqs[i].kind = SEND_PEER_REQ;
		pe->reqs[i].pe = pe;
		pe->reqs[i].index = i;
		pe->reqs[i].next_free = pe->free_reqs;
		pe->free_reqs = &pe->reqs[i];
	}
	pe->hello.kind = pe->heartbeat.kind = pe->auth.kind = SEND_PEER_CTRL;
	/* Dial soon, not at once: the peer may be starting up beside us. */
	pe->next_connect = loop_now(p->srv->loop) + 1;
	*out = pe;
	return 0;
}

void peer_destroy(struct peer *pe)
{
	if (!pe)
		return;
	peer_drop(pe, "pool removed", -ECANCELED);
	free(pe->reqs);
	free(pe);
}

bool peer_is_up(const struct peer *pe)
{
	return pe && pe->up;
}

uint64_t peer_boot(const struct peer *pe)
{
	return peer_is_up(pe) ? pe->boot : 0;
}

uint16_t peer_id(const struct peer *pe)
{
	return pe->id;
}

const char *peer_addr(const struct peer *pe)
{
	return pe->addr;
}

uint32_t peer_max_io(const struct peer *pe)
{
	return pe->max_io;
}

void peer_redial_now(struct peer *pe)
{
	uint64_t now = loop_now(pe->srv->loop);

	if (!pe->conn && pe->next_connect > now)
		pe->next_connect = now;
}

void peer_count_sync_bytes(struct peer *pe, uint64_t bytes)
{
	pe->sync_bytes += bytes;
}

void peer_count_map_bytes(struct peer *pe, uint64_t bytes)
{
	pe->map_bytes += bytes;
}

static struct rmr_msg peer_msg(struct peer *pe, unsigned type)
{
	struct srv_pool *p = pe->pool;
	struct rmr_msg m = {
		.type = type,
		.pool_uuid = p->params.uuid,
		.sender_id = p->params.member_id,
		.map_ver = p->map_ver,
	};

	return m;
}

static int peer_xmit(struct peer *pe, const struct iovec *iov, int iovcnt, void *op_ctx)
{
	struct rmr_server *s = pe->srv;
	int ret;

	if (!pe->conn || !pe->connected)
		return -ENOTCONN;
	ret = s->tops->send(s->tp, pe->conn, iov, iovcnt, op_ctx);
	if (ret == 0)
		pe->last_tx = loop_now(s->loop);
	return ret;
}

/* Send request @m (type and fields set; slot and seq are filled in). */
static int send_req(struct peer *pe, struct rmr_msg *m, peer_done_fn done, void *ctx)
{
	struct peer_req *r = pe->free_reqs;
	struct iovec iov;
	int ret;

	if (!pe->up)
		return -ENOTCONN;
	if (!r)
		return -EBUSY;
	pe->free_reqs = r->next_free;
	r->busy = r->waiting = true;
	r->type = m->type;
	r->done = done;
	r->ctx = ctx;
	r->deadline = loop_now(pe->srv->loop) + REQUEST_MS * NS_PER_MS;
	m->slot = r->index;
	m->seq = r->seq;
	rmr_wire_encode(&r->hdr, m);
	iov.iov_base = &r->hdr;
	iov.iov_len = sizeof(r->hdr);
	ret = peer_xmit(pe, &iov, 1, &r->kind);
	if (ret < 0) {
		r->waiting = false;
		r->done = NULL;
		req_free(pe, r);
		peer_drop(pe, "send failed", -ENOTCONN);
		return -ENOTCONN;
	}
	r->sending = true;
	return 0;
}

int peer_send(struct peer *pe, unsigned type, uint16_t op, uint64_t addr, uint32_t len,
	      peer_done_fn done, void *ctx)
{
	struct rmr_msg m = peer_msg(pe, type);

	m.op = op;
	m.addr = addr;
	m.len = len;
	return send_req(pe, &m, done, ctx);
}

int peer_send_mark(struct peer *pe, uint64_t ids, uint64_t first, uint32_t count,
		   peer_done_fn done, void *ctx)
{
	struct rmr_msg m = peer_msg(pe, RMR_MSG_MAP_MARK);

	m.missed = ids;
	m.addr = first;
	m.len = count;
	return send_req(pe, &m, done, ctx);
}

static void send_ctrl_status(struct peer *pe, struct peer_ctrl *cm, unsigned type, int status,
			     size_t body_len)
{
	struct rmr_msg m = peer_msg(pe, type);
	struct iovec iov[2] = {
		{ .iov_base = &cm->hdr, .iov_len = sizeof(cm->hdr) },
		{ .iov_base = &cm->body, .iov_len = body_len },
	};

	if (cm->sending)
		return;
	m.status = status;
	m.payload_len = (uint32_t)body_len;
	rmr_wire_encode(&cm->hdr, &m);
	if (peer_xmit(pe, iov, body_len ? 2 : 1, &cm->kind) == 0)
		cm->sending = true;
}

static void send_ctrl(struct peer *pe, struct peer_ctrl *cm, unsigned type, size_t body_len)
{
	send_ctrl_status(pe, cm, type, 0, body_len);
}

void peer_on_connected(struct peer *pe, int status)
{
	struct rmr_server *s = pe->srv;
	struct srv_pool *p = pe->pool;
	struct rmr_hello h = {
		.role = RMR_ROLE_PEER,
		.queue_depth = pe->nreqs,
		.max_io_size = s->opts.max_io_size,
		.heartbeat_ms = s->opts.heartbeat_ms,
		.incarnation = s->incarnation,
	};

	if (status < 0) {
		peer_drop(pe, "connect failed", -ENOTCONN);
		return;
	}
	pe->connected = true;
	pe->last_rx = loop_now(s->loop);
	snprintf(h.pool_name, sizeof(h.pool_name), "%s", p->name);
	if (p->keyed) {
		h.flags |= RMR_HELLO_AUTH;
		rmr_auth_nonce(pe->nonce);
		memcpy(h.nonce, pe->nonce, RMR_NONCE_LEN);
	}
	rmr_wire_encode_hello(&pe->hello.body.hello, &h);
	send_ctrl(pe, &pe->hello, RMR_MSG_HELLO, sizeof(pe->hello.body));
	if (!pe->hello.sending)
		peer_drop(pe, "cannot send hello", -ENOTCONN);
}

/* The peer failed authentication: count it, say why (once per reason), drop it. */
static void auth_fail(struct peer *pe, const char *why)
{
	struct srv_pool *p = pe->pool;

	server_auth_refused(pe->srv, p, "member", pe->id, why);
	peer_drop(pe, "authentication failed", -EACCES);
}

/*
 * Its CHALLENGE does not prove the key (or names another member or pool):
 * count it, then say so (AUTH with -EACCES, no proof) rather than hang up,
 * so that it counts us as holding another key; its refusal ends the session.
 */
static void auth_refuse(struct peer *pe, const char *why)
{
	static const struct rmr_auth none;

	server_auth_refused(pe->srv, pe->pool, "member", pe->id, why);
	rmr_wire_encode_auth(&pe->auth.body.auth, &none);
	send_ctrl_status(pe, &pe->auth, RMR_MSG_AUTH, -EACCES, sizeof(pe->auth.body.auth));
	if (!pe->auth.sending) {
		peer_drop(pe, "authentication failed", -EACCES);
		return;
	}
	pe->auth_refusing = true;
}

/* A keyed pool's member proves the key: check it, then prove it back. */
static void on_challenge(struct peer *pe, const struct rmr_msg *msg)
{
	struct srv_pool *p = pe->pool;
	struct rmr_auth_ctx ctx;
	struct rmr_auth a;
	char why[160];

	if (!p->keyed) {
		auth_fail(pe, "it asks for a pool key, this member has none");
		return;
	}
	if (rmr_wire_decode_auth(msg, &a, why, sizeof(why)) < 0) {
		auth_fail(pe, why);
		return;
	}
	if (msg->sender_id != pe->id || memcmp(&msg->pool_uuid, &p->params.uuid, sizeof(rmr_uuid))) {
		snprintf(why, sizeof(why), "%s answers as member %u or for another pool UUID",
			 pe->addr, msg->sender_id);
		auth_refuse(pe, why);
		return;
	}
	memset(&ctx, 0, sizeof(ctx));
	memcpy(ctx.initiator_nonce, pe->nonce, RMR_NONCE_LEN);
	memcpy(ctx.member_nonce, a.nonce, RMR_NONCE_LEN);
	ctx.pool_uuid = p->params.uuid;
	ctx.role = RMR_ROLE_PEER;
	ctx.initiator_id = p->params.member_id;
	ctx.member_id = pe->id;
	if (!rmr_auth_check(p->key, RMR_AUTH_MEMBER, &ctx, a.proof)) {
		auth_refuse(pe, "it did not prove the pool key (wrong key)");
		return;
	}
	memset(a.nonce, 0, sizeof(a.nonce));
	rmr_auth_proof(p->key, RMR_AUTH_INITIATOR, &ctx, a.proof);
	rmr_wire_encode_auth(&pe->auth.body.auth, &a);
	send_ctrl(pe, &pe->auth, RMR_MSG_AUTH, sizeof(pe->auth.body.auth));
	if (!pe->auth.sending) {
		peer_drop(pe, "cannot send auth", -ENOTCONN);
		return;
	}
	pe->authed = true;
}

static void on_hello_rsp(struct peer *pe, const struct rmr_msg *msg)
{
	struct srv_pool *p = pe->pool;
	struct rmr_hello_rsp h;
	char why[160];

	if (msg->status == -EACCES || msg->status == -EADDRINUSE) {
		const char *r = msg->status == -EACCES ? "hello refused: wrong or missing pool key"
						       : "hello refused: our id is held by another process";

		/* Logged once per reason: the peer is dialed again and again. */
		if (strcmp(pe->reason, r))
			log_warn("pool=%s member=%u: member %u (%s) refused our hello: %s", p->name,
				 p->params.member_id, pe->id, pe->addr,
				 msg->status == -EACCES ? "our pool key (or lack of one) is not its own"
							: "a live session of another process holds our member id");
		peer_drop(pe, r, -ECONNREFUSED);
		return;
	}
	if (msg->status < 0) {
		snprintf(why, sizeof(why), "hello refused: %s", strerror(-msg->status));
		peer_drop(pe, why, -ECONNREFUSED);
		return;
	}
	if (p->keyed && !pe->authed) {
		auth_fail(pe, "it answered without proving the pool key (no key?)");
		return;
	}
	if (rmr_wire_decode_hello_rsp(msg, &h, why, sizeof(why)) < 0) {
		peer_drop(pe, "bad hello answer", -EPROTO);
		return;
	}
	/* Its membership may be older or newer than ours: the client brings both up to date. */
	if (h.member_id != pe->id || memcmp(&msg->pool_uuid, &p->params.uuid, sizeof(rmr_uuid)) ||
	    h.pool_size != p->params.pool_size || h.chunk_size != p->params.chunk_size) {
		log_err("pool=%s member=%u: %s answers as member %u of another pool or geometry",
			p->name, p->params.member_id, pe->addr, h.member_id);
		peer_drop(pe, "not the member we expected", -EPROTO);
		return;
	}
	if (pe->ever_up)
		pe->reconnects++;
	pe->ever_up = true;
	pe->up = true;
	pe->backoff_ms = 0;
	pe->map_ver = h.map_ver;
	pe->incarnation = h.incarnation;
	pe->boot = h.boot_id;
	pe->max_io = RMR_MIN(h.max_io_size, pe->srv->opts.max_io_size);
	snprintf(pe->reason, sizeof(pe->reason), "hello answered");
	log_info("pool=%s member=%u: session to member %u (%s) up", p->name, p->params.member_id,
		 pe->id, pe->addr);
	resync_peer_up(p, pe->id);
	server_announce_peers(p);
}

static void on_answer(struct peer *pe, const struct rmr_msg *msg)
{
	struct peer_req *r;
	peer_done_fn done;

	if (msg->slot >= pe->nreqs) {
		peer_drop(pe, "answer for an unknown slot", -EPROTO);
		return;
	}
	r = &pe->reqs[msg->slot];
	if (!r->busy || !r->waiting || r->seq != msg->seq)
		return; /* stale: its request already timed out */
	if (msg->type != r->type + 1) {
		peer_drop(pe, "answer of the wrong type", -EPROTO);
		return;
	}
	done = r->done;
	r->waiting = false;
	r->done = NULL;
	if (!r->sending)
		req_free(pe, r);
	if (done)
		done(r->ctx, pe, msg, msg->status);
}

void peer_on_recv(struct peer *pe, void *buf, size_t len, void *rx)
{
	struct rmr_server *s = pe->srv;
	struct rmr_msg msg;
	char why[128];
	int ret;

	pe->rx_lent = rx;
	pe->last_rx = loop_now(s->loop);
	ret = rmr_wire_decode(buf, len, &msg, why, sizeof(why));
	if (ret == 0 && pe->up && msg.sender_id != pe->id) {
		snprintf(why, sizeof(why), "sender id %u on the session to member %u",
			 msg.sender_id, pe->id);
		ret = -EBADMSG;
	}
	if (ret < 0) {
		log_err("pool=%s member=%u: malformed message from member %u: %s", pname(pe),
			pe->pool->params.member_id, pe->id, why);
		peer_drop(pe, "malformed message", -EPROTO);
		return;
	}
	/* We refused its proof: only its refusal, which ends the session, is awaited. */
	if (pe->auth_refusing) {
		if (msg.type == RMR_MSG_HELLO_RSP)
			peer_drop(pe, "authentication failed", -EACCES);
		goto release;
	}
	switch (msg.type) {
	case RMR_MSG_HELLO_RSP:
		if (!pe->up)
			on_hello_rsp(pe, &msg);
		break;
	case RMR_MSG_CHALLENGE:
		if (pe->up || pe->authed)
			peer_drop(pe, "protocol violation", -EPROTO);
		else
			on_challenge(pe, &msg);
		break;
	case RMR_MSG_HEARTBEAT:
		break;
	case RMR_MSG_MAP_GET_RSP:
	case RMR_MSG_SYNC_READ_RSP:
	case RMR_MSG_MAP_CLEAR_RSP:
	case RMR_MSG_CHUNK_SUM_RSP:
	case RMR_MSG_MAP_MARK_RSP:
		if (pe->up)
			on_answer(pe, &msg);
		break;
	case RMR_MSG_GOODBYE:
		peer_drop(pe, "peer said goodbye", -ECONNRESET);
		break;
	default:
		peer_drop(pe, "protocol violation", -EPROTO);
		break;
	}
release:
	if (pe->rx_lent && pe->conn)
		s->tops->recv_release(s->tp, pe->conn, pe->rx_lent);
	pe->rx_lent = NULL;
}

void peer_on_send_done(struct peer *pe, void *op_ctx, int status)
{
	uint8_t kind = *(uint8_t *)op_ctx;

	if (kind == SEND_PEER_CTRL) {
		((struct peer_ctrl *)op_ctx)->sending = false;
	} else {
		struct peer_req *r = rmr_container_of(op_ctx, struct peer_req, kind);

		r->sending = false;
		if (r->busy && !r->waiting)
			req_free(pe, r);
	}
	if (status < 0 && pe->conn)
		peer_drop(pe, "send failed", -ENOTCONN);
}

void peer_on_closed(struct peer *pe, int reason)
{
	char why[64];

	snprintf(why, sizeof(why), "connection lost: %s", strerror(-reason));
	peer_drop(pe, why, -ENOTCONN);
}

void peer_tick(struct peer *pe, uint64_t now)
{
	struct rmr_server *s = pe->srv;

	if (pe->conn && !pe->up && now > pe->hello_deadline) {
		peer_drop(pe, pe->connected ? "no hello answer" : "connect timeout", -ETIMEDOUT);
		return;
	}
	if (pe->conn && pe->connected && now - pe->last_rx > s->opts.failure_timeout_ms * NS_PER_MS) {
		peer_drop(pe, "heartbeat timeout", -ETIMEDOUT);
		return;
	}
	for (uint32_t i = 0; pe->up && i < pe->nreqs; i++) {
		struct peer_req *r = &pe->reqs[i];

		if (r->busy && r->waiting && now > r->deadline)
			req_fail(pe, r, -ETIMEDOUT);
	}
	if (pe->up && now - pe->last_tx >= s->opts.heartbeat_ms * NS_PER_MS)
		send_ctrl(pe, &pe->heartbeat, RMR_MSG_HEARTBEAT, 0);
	if (!pe->conn && pe->next_connect && now >= pe->next_connect && !pe->pool->removing)
		peer_connect(pe);
}

void peer_status(const struct peer *pe, struct rmr_peer_status *ps)
{
	ps->member_id = pe->id;
	snprintf(ps->addr, sizeof(ps->addr), "%s", pe->addr);
	ps->connected = pe->up;
	ps->map_ver = pe->map_ver;
	ps->sync_bytes = pe->sync_bytes;
	ps->map_bytes = pe->map_bytes;
	ps->reconnects = pe->reconnects;
	snprintf(ps->reason, sizeof(ps->reason), "%s", pe->reason);
}
