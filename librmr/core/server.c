/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Server: sessions from clients, pools served from consumer stores.
 *
 * Each request is handled in the receive buffer it arrived in: a write's
 * payload is applied from it, a read is read into it, and the answer is sent
 * from it. The buffer goes back to the transport when the answer's send
 * completes, so the data path allocates nothing.
 *
 * Before a write that names members that missed it (or a newer map version)
 * is applied, the member records that durably in its metadata blob: a write
 * acknowledged by this member implies the record survives a crash.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "auth.h"
#include "compiler.h"
#include "log.h"
#include "loop.h"
#include "peer.h"
#include "resync.h"
#include "membership.h"
#include "server_internal.h"
#include "store_probe.h"
#include "verify.h"
#include "wire.h"
#include <rmr/server.h>
#include <rmr/transport.h>

/* --- sessions -------------------------------------------------------------- */

static void session_free(struct srv_session *sess)
{
	struct rmr_server *s = sess->srv;

	/* Requests are out of the store here; answers in flight are abandoned. */
	for (uint32_t i = 0; sess->reqs && i < sess->qd; i++) {
		if (sess->reqs[i].rx)
			s->tops->recv_release(s->tp, sess->conn, sess->reqs[i].rx);
		if (sess->map_reqs[i].rx)
			s->tops->recv_release(s->tp, sess->conn, sess->map_reqs[i].rx);
	}
	for (uint32_t i = 0; i < sess->n_answers; i++)
		if (sess->answers[i].rx)
			s->tops->recv_release(s->tp, sess->conn, sess->answers[i].rx);
	if (sess->conn)
		s->tops->close(s->tp, sess->conn);
	if (sess->prev)
		sess->prev->next = sess->next;
	else
		s->sessions = sess->next;
	if (sess->next)
		sess->next->prev = sess->prev;
	s->nsessions--;
	free(sess->reqs);
	free(sess->map_reqs);
	free(sess->answers);
	free(sess);
}

/* Close a session; it is freed once the store gave back every request. */
static void session_close(struct srv_session *sess, const char *reason)
{
	struct rmr_server *s = sess->srv;

	if (!sess->dead)
		log_info("%s: session%s%s closed: %s", s->name, sess->pool ? " of pool=" : "",
			 sess->pool ? sess->pool->name : "", reason);
	sess->dead = true;
	map_transfer_forget(sess->pool, sess);
	if (sess->in_store == 0)
		session_free(sess);
}

void server_session_close(struct srv_session *sess, const char *reason)
{
	session_close(sess, reason);
}

static void session_reject(struct srv_session *sess, const char *why)
{
	sess->srv->rejected++;
	log_warn("%s: refusing session: %s", sess->srv->name, why);
	session_close(sess, why);
}

static int session_send(struct srv_session *sess, void *buf, size_t len, void *op_ctx)
{
	struct rmr_server *s = sess->srv;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	int ret = s->tops->send(s->tp, sess->conn, &iov, 1, op_ctx);

	if (ret == 0)
		sess->last_tx = loop_now(s->loop);
	return ret;
}

void server_ctrl_send(struct srv_session *sess, struct srv_ctrl *cm, unsigned type, int status,
		      size_t body_len)
{
	struct rmr_msg msg = {
		.type = type,
		.sender_id = sess->pool ? sess->pool->params.member_id : 0,
		.map_ver = sess->pool ? sess->pool->map_ver : 0,
		.payload_len = (uint32_t)body_len,
		.status = status,
	};
	struct iovec iov[2] = {
		{ .iov_base = &cm->hdr, .iov_len = HDR_LEN },
		{ .iov_base = &cm->body, .iov_len = body_len },
	};

	if (cm->sending)
		return;
	if (sess->pool) {
		msg.pool_uuid = sess->pool->params.uuid;
		/* Heartbeats too: the client learns when a record empties. */
		if ((type == RMR_MSG_HELLO_RSP || type == RMR_MSG_RECONCILE_RSP ||
		     type == RMR_MSG_HEARTBEAT) && status == 0)
			msg.missed = sess->pool->missed;
		if (type == RMR_MSG_HEARTBEAT && sess->role == RMR_ROLE_CLIENT)
			msg.addr = server_peers_up(sess->pool);
	} else if (sess->auth_pool) {
		/* The CHALLENGE, or a refusal of its AUTH: from the pool the hello asked for. */
		msg.pool_uuid = sess->auth_pool->params.uuid;
		msg.sender_id = sess->auth_pool->params.member_id;
		msg.map_ver = sess->auth_pool->map_ver;
	}
	cm->kind = SEND_CTRL;
	rmr_wire_encode(&cm->hdr, &msg);
	if (sess->srv->tops->send(sess->srv->tp, sess->conn, iov, body_len ? 2 : 1, &cm->kind) == 0) {
		cm->sending = true;
		sess->last_tx = loop_now(sess->srv->loop);
	}
}

uint64_t server_peers_up(const struct srv_pool *p)
{
	uint64_t ids = 0;

	for (const struct srv_session *x = p->srv->sessions; x; x = x->next)
		if (x->pool == p && !x->dead && x->role == RMR_ROLE_PEER)
			ids |= 1ull << x->peer_id;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if (p->peers[id] && peer_is_up(p->peers[id]))
			ids |= 1ull << id;
	return ids;
}

void server_announce_peers(struct srv_pool *p)
{
	for (struct srv_session *x = p->srv->sessions; x; x = x->next)
		if (x->pool == p && !x->dead && x->role == RMR_ROLE_CLIENT)
			server_ctrl_send(x, &x->heartbeat, RMR_MSG_HEARTBEAT, 0, 0);
}

static struct srv_pool *find_pool(struct rmr_server *s, const rmr_uuid *uuid, const char *name)
{
	static const rmr_uuid zero;
	bool by_uuid = memcmp(uuid, &zero, sizeof(zero)) != 0;

	for (unsigned i = 0; i < RMR_SERVER_MAX_POOLS; i++) {
		struct srv_pool *p = s->pools[i];

		if (!p || p->removing)
			continue;
		if (by_uuid ? !memcmp(&p->params.uuid, uuid, sizeof(*uuid)) : !strcmp(p->name, name))
			return p;
	}
	return NULL;
}

static const char *role_name(uint32_t role)
{
	return role == RMR_ROLE_CLIENT ? "client" : "member";
}

void server_auth_refused(struct rmr_server *s, const struct srv_pool *p, const char *role,
			 uint16_t claimed_id, const char *reason)
{
	s->auth_refused++;
	if (p)
		log_warn("pool=%s member=%u: refusing %s claiming id %u: %s", p->name,
			 p->params.member_id, role, claimed_id, reason);
	else
		log_warn("%s: refusing %s claiming id %u: %s", s->name, role, claimed_id, reason);
	if (s->events.auth_refused)
		s->events.auth_refused(s->opts.priv, p ? p->name : NULL, role, claimed_id, reason);
}

/*
 * Refuse a hello (or the AUTH that should complete it) with @status in a
 * HELLO_RSP, then close. @auth: refused for who it claims to be, counted as
 * such (@p may be NULL).
 */
static void hello_refuse(struct srv_session *sess, const struct srv_pool *p, uint32_t role,
			 uint16_t claimed_id, int status, bool auth, const char *why)
{
	struct rmr_server *s = sess->srv;

	s->rejected++;
	if (auth)
		server_auth_refused(s, p, role_name(role), claimed_id, why);
	else
		log_warn("%s: refusing session: %s", s->name, why);
	sess->close_after_send = true;
	server_ctrl_send(sess, &sess->hello_rsp, RMR_MSG_HELLO_RSP, status, 0);
	if (!sess->hello_rsp.sending)
		session_close(sess, why);
}

/*
 * Is member id @id held by a live, admitted session of another process than
 * @incarnation? A member that restarts gets in once its old session is
 * gone: closed by the transport, or failed by the heartbeat timeout.
 */
static bool member_id_held(const struct srv_pool *p, const struct srv_session *sess, uint16_t id,
			   uint64_t incarnation)
{
	for (const struct srv_session *x = p->srv->sessions; x; x = x->next)
		if (x != sess && x->pool == p && !x->dead && x->role == RMR_ROLE_PEER &&
		    x->peer_id == id && x->incarnation != incarnation)
			return true;
	return false;
}

/* Admit the hello @h of @sender to @p: it proved the key, or the pool is open. */
static void hello_admit(struct srv_session *sess, struct srv_pool *p, const struct rmr_hello *hp,
			uint16_t sender)
{
	struct rmr_server *s = sess->srv;
	struct rmr_hello h = *hp;
	struct rmr_hello_rsp rsp;
	uint64_t epoch = 0;
	char why[128];

	if (h.role == RMR_ROLE_PEER && member_id_held(p, sess, sender, h.incarnation)) {
		snprintf(why, sizeof(why), "member id %u is held by a live session of another process",
			 sender);
		hello_refuse(sess, p, h.role, sender, -EADDRINUSE, true, why);
		return;
	}
	sess->incarnation = h.incarnation;
	if (h.role == RMR_ROLE_CLIENT && p->ops.health && p->ops.health(p->store) < 0) {
		hello_refuse(sess, p, h.role, 0, -EIO, false,
			     "its store may have lost acknowledged data (a failed write-back): replace it");
		return;
	}
	if (h.role == RMR_ROLE_CLIENT) {
		int ret = writer_admit(p, &h, &epoch);

		if (ret < 0) {
			snprintf(why, sizeof(why), "%s", ret == -EBUSY ?
				 "another writer holds the pool" : ret == -ESTALE ?
				 "writer fenced by a newer one" : "cannot record the writer epoch");
			hello_refuse(sess, p, h.role, 0, ret, false, why);
			return;
		}
	}
	sess->peer_id = h.role == RMR_ROLE_PEER ? sender : 0;
	sess->qd = RMR_MIN(h.queue_depth, s->opts.queue_depth);
	sess->max_io = RMR_MIN(h.max_io_size, s->opts.max_io_size);
	sess->role = h.role;
	sess->reqs = calloc(sess->qd, sizeof(*sess->reqs));
	sess->map_reqs = calloc(sess->qd, sizeof(*sess->map_reqs));
	sess->n_answers = s->opts.queue_depth * 2 + 8; /* the transport's tx depth */
	sess->answers = calloc(sess->n_answers, sizeof(*sess->answers));
	if (!sess->reqs || !sess->map_reqs || !sess->answers) {
		session_close(sess, "out of memory");
		return;
	}
	for (uint32_t i = 0; i < sess->qd; i++)
		sess->reqs[i].sess = sess->map_reqs[i].sess = sess;
	for (uint32_t i = 0; i < sess->n_answers; i++) {
		sess->answers[i].kind = SEND_ANSWER;
		sess->answers[i].next_free = sess->free_answers;
		sess->free_answers = &sess->answers[i];
	}
	sess->pool = p;
	memset(&rsp, 0, sizeof(rsp));
	rsp.member_id = p->params.member_id;
	rsp.chunk_size = p->params.chunk_size;
	rsp.pool_size = p->params.pool_size;
	rsp.map_ver = p->map_ver;
	rsp.missed = p->missed;
	rsp.members = rmr_membership_ids(&p->membership);
	rsp.membership = p->membership;
	rsp.queue_depth = sess->qd;
	rsp.max_io_size = sess->max_io;
	rsp.incarnation = s->incarnation;
	rsp.boot_id = p->params.boot_id;
	if (h.role == RMR_ROLE_CLIENT && pool_al_stale(p, h.incarnation))
		rsp.flags |= RMR_HELLO_RSP_STALE_AL;
	rsp.writer_epoch = epoch;
	snprintf(rsp.pool_name, sizeof(rsp.pool_name), "%s", p->name);
	sess->hello_rsp.body_len = (uint32_t)rmr_wire_encode_hello_rsp(sess->hello_rsp.body, &rsp);
	/* After a takeover, the old writer's requests still in the store land first. */
	if (h.role == RMR_ROLE_CLIENT && writer_fenced_in_store(p))
		sess->hello_deferred = true;
	else
		server_ctrl_send(sess, &sess->hello_rsp, RMR_MSG_HELLO_RSP, 0,
				 sess->hello_rsp.body_len);
	if (h.role == RMR_ROLE_CLIENT)
		log_info("pool=%s member=%u: client session open (queue depth %u, max io %u%s)",
			 p->name, p->params.member_id, sess->qd, sess->max_io,
			 p->keyed ? ", key proven" : "");
	else
		log_info("pool=%s member=%u: session from member %u open%s", p->name,
			 p->params.member_id, sender, p->keyed ? " (key proven)" : "");
	/*
	 * A peer back from a long absence dials us at once, while our dial to
	 * it may wait seconds more (backoff): without it we can copy nothing
	 * from it, nor tell it what we copied.
	 */
	if (h.role == RMR_ROLE_PEER && sender <= RMR_MAX_MEMBER_ID && p->peers[sender])
		peer_redial_now(p->peers[sender]);
	if (h.role == RMR_ROLE_PEER)
		server_announce_peers(p);
}

/* The AUTH data both proofs of @sess are bound to. */
static void auth_ctx(const struct srv_session *sess, struct rmr_auth_ctx *ctx)
{
	const struct srv_pool *p = sess->auth_pool;

	memset(ctx, 0, sizeof(*ctx));
	memcpy(ctx->initiator_nonce, sess->auth_hello.nonce, RMR_NONCE_LEN);
	memcpy(ctx->member_nonce, sess->auth_nonce, RMR_NONCE_LEN);
	ctx->pool_uuid = p->params.uuid;
	ctx->role = sess->auth_hello.role;
	ctx->initiator_id = sess->auth_sender;
	ctx->member_id = p->params.member_id;
}

/* @hp was decoded from @hmsg; its receive buffer is already released. */
static void on_hello(struct srv_session *sess, const struct rmr_msg *hmsg,
		     const struct rmr_hello *hp)
{
	static const rmr_uuid zero;
	const rmr_uuid *uuid = &hmsg->pool_uuid;
	uint16_t sender = hmsg->sender_id;
	struct rmr_server *s = sess->srv;
	struct rmr_auth_ctx ctx;
	struct rmr_auth a;
	struct srv_pool *p;
	char why[160];

	p = find_pool(s, uuid, hp->pool_name);
	if (!p || strcmp(p->name, hp->pool_name)) {
		/*
		 * A UUID that is not the one of our pool of that name (or a name
		 * that is not the one of the pool with that UUID) is a false
		 * claim, counted. A pool we do not serve at all is not: a member
		 * that listens before it added its pool (at its start) refuses
		 * its peers' first hellos for that reason.
		 */
		bool by_uuid = memcmp(uuid, &zero, sizeof(zero)) != 0;
		bool claim = by_uuid && (p || find_pool(s, &zero, hp->pool_name));

		snprintf(why, sizeof(why), "no pool '%s'%s here%s", hp->pool_name,
			 by_uuid ? " with that UUID" : "", claim ? " (wrong pool UUID)" : "");
		hello_refuse(sess, p, hp->role, sender, -ENOENT, claim, why);
		return;
	}
	if (hp->role == RMR_ROLE_CLIENT && sender != 0) {
		snprintf(why, sizeof(why), "a client claims member id %u", sender);
		hello_refuse(sess, p, hp->role, sender, -EPERM, true, why);
		return;
	}
	if (hp->role == RMR_ROLE_PEER &&
	    (sender == p->params.member_id ||
	     !(p->params.members_mask & (1ull << sender)))) {
		snprintf(why, sizeof(why), "member id %u is not another member of '%s'", sender,
			 p->name);
		hello_refuse(sess, p, hp->role, sender, -EPERM, true, why);
		return;
	}
	if (p->keyed != !!(hp->flags & RMR_HELLO_AUTH)) {
		snprintf(why, sizeof(why), "%s", p->keyed ? "no pool key (no proof offered)"
			 : "it holds a pool key, this member has none (an open pool)");
		hello_refuse(sess, p, hp->role, sender, -EACCES, true, why);
		return;
	}
	if (!p->keyed) {
		hello_admit(sess, p, hp, sender);
		return;
	}
	/* Prove the key first; the hello takes effect once the AUTH proved it back. */
	sess->auth_pool = p;
	sess->auth_hello = *hp;
	sess->auth_sender = sender;
	rmr_auth_nonce(sess->auth_nonce);
	auth_ctx(sess, &ctx);
	memcpy(a.nonce, sess->auth_nonce, RMR_NONCE_LEN);
	rmr_auth_proof(p->key, RMR_AUTH_MEMBER, &ctx, a.proof);
	rmr_wire_encode_auth((struct rmr_wire_auth *)sess->challenge.body, &a);
	server_ctrl_send(sess, &sess->challenge, RMR_MSG_CHALLENGE, 0, sizeof(struct rmr_wire_auth));
	sodium_memzero(&a, sizeof(a));
	if (!sess->challenge.sending)
		session_close(sess, "cannot send the challenge");
}

/* The AUTH of a hello that waits for it. */
/*
 * The AUTH of a hello that waits for it: @a its proof, or NULL when it
 * did not decode (@why says why). Its receive buffer is already released:
 * a refusal may free the session with its connection.
 */
static void on_auth(struct srv_session *sess, const struct rmr_msg *msg, const struct rmr_auth *a,
		    const char *why)
{
	struct srv_pool *p = sess->auth_pool;
	struct rmr_auth_ctx ctx;
	char text[160];

	if (msg->status == -EACCES) {
		hello_refuse(sess, p, sess->auth_hello.role, sess->auth_sender, -EACCES, true,
			     "it holds another pool key: it found this member's proof wrong");
		return;
	}
	if (!a) {
		hello_refuse(sess, p, sess->auth_hello.role, sess->auth_sender, -EACCES, true, why);
		return;
	}
	if (msg->sender_id != sess->auth_sender ||
	    memcmp(&msg->pool_uuid, &p->params.uuid, sizeof(rmr_uuid))) {
		snprintf(text, sizeof(text), "its AUTH claims id %u or another pool", msg->sender_id);
		hello_refuse(sess, p, sess->auth_hello.role, sess->auth_sender, -EACCES, true, text);
		return;
	}
	auth_ctx(sess, &ctx);
	if (!rmr_auth_check(p->key, RMR_AUTH_INITIATOR, &ctx, a->proof)) {
		hello_refuse(sess, p, sess->auth_hello.role, sess->auth_sender, -EACCES, true,
			     "wrong pool key (its proof does not check)");
		return;
	}
	sess->auth_pool = NULL;
	hello_admit(sess, p, &sess->auth_hello, sess->auth_sender);
}

/* --- requests -------------------------------------------------------------- */

static void req_answer(struct srv_req *req, unsigned type, int status, uint32_t payload_len)
{
	struct srv_session *sess = req->sess;
	struct srv_pool *p = sess->pool;
	struct rmr_msg msg = {
		.type = type,
		.pool_uuid = p->params.uuid,
		.sender_id = p->params.member_id,
		.slot = req->slot,
		.seq = req->seq,
		.map_ver = p->map_ver,
		.op = req->io.op,
		.op_flags = req->io.op_flags,
		.addr = req->io.addr,
		.len = req->io.len,
		.payload_len = status == 0 ? payload_len : 0,
		.status = status,
	};
	struct srv_answer *a = sess->free_answers;
	void *rx = req->rx;

	/* The answer takes the receive buffer over; the slot is free again. */
	req->busy = false;
	req->rx = NULL;
	if (!a) {
		/* More answers in flight than the transport may hold: a broken peer. */
		sess->srv->tops->recv_release(sess->srv->tp, sess->conn, rx);
		session_close(sess, "too many answers in flight");
		return;
	}
	sess->free_answers = a->next_free;
	a->rx = rx;
	rmr_wire_encode(req->buf, &msg);
	if (session_send(sess, req->buf, HDR_LEN + msg.payload_len, &a->kind) < 0) {
		a->rx = NULL;
		a->next_free = sess->free_answers;
		sess->free_answers = a;
		sess->srv->tops->recv_release(sess->srv->tp, sess->conn, rx);
		session_close(sess, "send failed");
	}
}

static void req_done(struct srv_req *req)
{
	struct srv_session *sess = req->sess;
	struct srv_pool *p = sess->pool;
	bool read = req->type == RMR_MSG_READ;

	req->in_store = false;
	resync_release(p, req, req->status);
	sess->in_store--;
	if (sess->dead) {
		if (sess->in_store == 0)
			session_free(sess);
		return;
	}
	if (req->status == 0) {
		if (read) {
			p->reads++;
			p->read_bytes += req->read_len;
		} else {
			p->writes++;
			p->write_bytes += req->io.data_len;
		}
	} else {
		p->errors++;
	}
	req_answer(req, read ? RMR_MSG_READ_RSP : RMR_MSG_WRITE_RSP, req->status,
		   read ? req->read_len : 0);
}

/*
 * A write goes on record only once nothing stands between it and the
 * store: the members it missed are marked, and its range joins the activity
 * log (before the data, should the writer crash). Not on arrival: a write
 * that then fails waiting for a chunk copy would leave marks for the others
 * on a chunk none of them lacks (seed 3247), and with every member marked
 * for it, no one would copy it from anyone.
 */
static int write_record(struct srv_req *req)
{
	struct srv_session *sess = req->sess;
	struct srv_pool *p = sess->pool;
	int ret;

	/*
	 * The writer sends a write only to members it holds current: at this
	 * version this one lacks no acknowledged write, as if it had taken the
	 * maps then. A mark for it made until now by a peer names a write that
	 * failed everywhere, or one the peer tells it of (MAP_MARK); counted in
	 * a gather, such marks would leave it lacking chunks that no one else
	 * holds better (seed 10137).
	 */
	if (sess->role == RMR_ROLE_CLIENT && req->map_ver > p->pull_done_ver) {
		bool saved = req->map_ver > p->map_ver;

		p->pull_done_ver = req->map_ver;
		if (!saved && (ret = pool_meta_save(p)) < 0)
			return ret;
	}
	ret = pool_note(p, req->map_ver, req->missed);
	if (ret == 0)
		ret = pool_mark(p, req->missed, req->map_ver, req->io.addr, req->io.len);
	if (ret == 0 && sess->role == RMR_ROLE_CLIENT)
		ret = pool_al_note(p, sess->incarnation, req->slot, req->io.addr, req->io.len);
	return ret;
}

/* Hand a client READ or WRITE to the store, unless it waits for a chunk copy. */
static void req_start(struct srv_req *req)
{
	struct srv_pool *p = req->sess->pool;

	if (resync_hold(p, req))
		return;
	if (req->type == RMR_MSG_WRITE && write_record(req) < 0) {
		req->status = -EIO;
		req_done(req);
		return;
	}
	p->ops.io(p->store, &req->io);
}

void server_req_resume(struct srv_req *req, int status)
{
	if (status < 0 || req->sess->dead) {
		req->status = status < 0 ? status : -ECANCELED;
		req_done(req);
		return;
	}
	req_start(req);
}

RMR_EXPORT void rmr_store_io_done(struct rmr_store_io *io, int status)
{
	struct srv_req *req = rmr_container_of(io, struct srv_req, io);
	struct rmr_server *s = req->sess->srv;

	req->status = status > 0 ? 0 : status;
	/* A read that filled fewer bytes says how many. */
	if (status > 0 && req->io.kind == RMR_IO_READ) {
		if ((uint32_t)status <= req->io.len)
			req->read_len = (uint32_t)status;
		else
			req->status = -EIO; /* more than it was asked for: a store bug */
	}
	if (loop_on_thread(s->loop)) {
		req_done(req);
		return;
	}
	pthread_mutex_lock(&s->done_lock);
	req->done_next = s->done_head;
	s->done_head = req;
	pthread_mutex_unlock(&s->done_lock);
	loop_wake(s->loop);
}

/* Which requests each role may send. */
static bool role_allows(uint32_t role, unsigned type)
{
	if (role == RMR_ROLE_CLIENT)
		return type == RMR_MSG_READ || type == RMR_MSG_WRITE || type == RMR_MSG_MAP_ADD;
	return type == RMR_MSG_MAP_GET || type == RMR_MSG_SYNC_READ || type == RMR_MSG_MAP_CLEAR ||
	       type == RMR_MSG_CHUNK_SUM || type == RMR_MSG_MAP_MARK;
}

/* Check a request against the session and pool; returns a reason or NULL. */
static const char *request_invalid(struct srv_session *sess, const struct rmr_msg *msg)
{
	struct srv_pool *p = sess->pool;

	if (!p)
		return "request before hello";
	if (!role_allows(sess->role, msg->type))
		return sess->role == RMR_ROLE_CLIENT ? "member-to-member request from a client"
						     : "client request from a member";
	if (memcmp(&msg->pool_uuid, &p->params.uuid, sizeof(rmr_uuid)))
		return "request for another pool";
	if (sess->role == RMR_ROLE_PEER && msg->sender_id != sess->peer_id)
		return "sender id differs from the hello's";
	if (msg->slot >= sess->qd)
		return "slot beyond the queue depth";
	if (msg->type == RMR_MSG_MAP_CLEAR)
		return msg->addr >= p->nchunks || msg->len > p->nchunks - msg->addr
			       ? "MAP_CLEAR beyond the pool's chunks" : NULL;
	if (msg->type == RMR_MSG_MAP_MARK)
		return msg->addr >= p->nchunks || msg->len > p->nchunks - msg->addr ||
				       (msg->missed & ~p->params.members_mask)
			       ? "MAP_MARK beyond the pool's chunks or members" : NULL;
	if (msg->type == RMR_MSG_CHUNK_SUM)
		return msg->addr >= p->nchunks || msg->len > p->nchunks - msg->addr ||
				       (uint64_t)msg->len * sizeof(struct rmr_wire_chunk_sum) >
					       sess->max_io
			       ? "CHUNK_SUM beyond the pool's chunks or the session's max io" : NULL;
	if (msg->type == RMR_MSG_MAP_GET)
		return msg->op > RMR_MAX_MEMBER_ID || msg->addr >= p->nchunks
			       ? "MAP_GET cursor beyond the maps" : NULL;
	if (msg->addr > p->params.pool_size || msg->len > p->params.pool_size - msg->addr)
		return "range beyond the pool";
	if (msg->type == RMR_MSG_MAP_ADD)
		return sess->map_reqs[msg->slot].busy ? "MAP_ADD slot already busy" : NULL;
	if (sess->reqs[msg->slot].busy)
		return "slot already busy";
	if ((msg->type == RMR_MSG_READ || msg->type == RMR_MSG_SYNC_READ ||
	     (msg->payload_len && !(msg->flags & RMR_WIRE_WRITE_PATCH))) &&
	    msg->len > sess->max_io)
		return "request larger than the session's max io";
	if (msg->payload_len > sess->max_io)
		return "payload larger than the session's max io";
	if (msg->type == RMR_MSG_READ && (uint64_t)msg->len + msg->payload_len > sess->max_io)
		return "read argument and length together larger than the session's max io";
	if (msg->type == RMR_MSG_SYNC_READ &&
	    pool_first_chunk(p, msg->addr) != pool_last_chunk(p, msg->addr, msg->len))
		return "SYNC_READ across a chunk boundary";
	return NULL;
}

/* A peer copies bytes of a chunk this member holds. */
static void serve_sync_read(struct srv_req *req)
{
	struct srv_pool *p = req->sess->pool;
	uint64_t chunk = pool_first_chunk(p, req->io.addr);
	int ret = -EAGAIN;

	uint8_t own = dirty_map_get(pool_own_map(p), chunk);
	/* Dirty here only in case our host lost power: the copier has nothing surer. */
	bool last_resort = req->io.op == RMR_SYNC_READ_LAST_RESORT &&
			   (own & (DIRTY_BIT | RECORD_BIT)) == (DIRTY_BIT | RECORD_BIT);

	if ((pool_holds(p, p->params.member_id, chunk) || last_resort) &&
	    !sync_index_find(&p->syncing, chunk))
		ret = p->ops.chunk_export(p->store, req->io.addr, req->io.data, req->io.len);
	if (ret == 0)
		p->served_sync_bytes += req->io.len;
	else if (ret != -EAGAIN)
		p->errors++;
	req_answer(req, RMR_MSG_SYNC_READ_RSP, ret, ret == 0 ? req->io.len : 0);
}

static void serve_map_get(struct srv_req *req)
{
	struct srv_session *sess = req->sess;
	uint16_t id = req->io.op ? req->io.op : 1;
	uint64_t chunk = req->io.addr;
	bool last;
	uint32_t n = map_transfer_serve(sess->pool, req->io.data, sess->max_io, &id, &chunk, &last);

	req->io.op = id;
	req->io.addr = chunk;
	req->io.len = 0;
	req->io.op_flags = last ? RMR_MAP_GET_LAST : 0;
	req_answer(req, RMR_MSG_MAP_GET_RSP, 0, n);
}

static void on_request(struct srv_session *sess, const struct rmr_msg *msg, void *buf, void *rx)
{
	struct srv_pool *p = sess->pool;
	const char *bad = request_invalid(sess, msg);
	struct srv_req *req;
	int ret;

	if (bad) {
		sess->srv->tops->recv_release(sess->srv->tp, sess->conn, rx);
		session_reject(sess, bad);
		return;
	}
	req = msg->type == RMR_MSG_MAP_ADD ? &sess->map_reqs[msg->slot] : &sess->reqs[msg->slot];
	req->busy = true;
	req->buf = buf;
	req->rx = rx;
	req->type = msg->type;
	req->slot = msg->slot;
	req->seq = msg->seq;
	req->status = 0;
	req->clears_chunk = false;
	req->io.kind = msg->type == RMR_MSG_READ ? RMR_IO_READ : RMR_IO_WRITE;
	req->io.op = msg->op;
	req->io.op_flags = msg->op_flags;
	req->io.addr = msg->addr;
	req->io.len = msg->len;
	req->io.data = (char *)buf + HDR_LEN;
	req->io.data_len = 0;
	req->io.arg = NULL;
	req->io.arg_len = 0;
	req->io.flags = msg->type == RMR_MSG_WRITE && (msg->flags & RMR_WIRE_WRITE_PATCH) ? RMR_IO_PATCH : 0;
	req->read_len = msg->len;

	/* A writer that lost the epoch touches nothing, not even the maps. */
	if (sess->role == RMR_ROLE_CLIENT && !writer_holds(p, sess)) {
		p->fenced++;
		req_answer(req, msg->type == RMR_MSG_READ ? RMR_MSG_READ_RSP :
			   msg->type == RMR_MSG_MAP_ADD ? RMR_MSG_MAP_ADD_RSP : RMR_MSG_WRITE_RSP,
			   -ESTALE, 0);
		return;
	}

	switch (msg->type) {
	case RMR_MSG_SYNC_READ:
		serve_sync_read(req);
		return;
	case RMR_MSG_MAP_GET:
		serve_map_get(req);
		return;
	case RMR_MSG_MAP_CLEAR:
		resync_peer_clean(p, sess->peer_id, msg->map_ver, msg->addr, msg->len);
		req_answer(req, RMR_MSG_MAP_CLEAR_RSP, 0, 0);
		return;
	case RMR_MSG_CHUNK_SUM:
		ret = verify_serve_sums(p, msg->addr, msg->len, req->io.data);
		if (ret < 0)
			p->errors++;
		req_answer(req, RMR_MSG_CHUNK_SUM_RSP, ret,
			   ret == 0 ? msg->len * (uint32_t)sizeof(struct rmr_wire_chunk_sum) : 0);
		return;
	case RMR_MSG_MAP_MARK:
		ret = verify_apply_marks(p, msg->missed, msg->map_ver, msg->addr, msg->len);
		req_answer(req, RMR_MSG_MAP_MARK_RSP, ret, 0);
		return;
	case RMR_MSG_MAP_ADD:
		ret = pool_note(p, msg->map_ver, msg->missed);
		if (ret == 0 && (msg->flags & RMR_WIRE_MAP_ADD_RECORD))
			ret = pool_record(p, msg->missed, msg->map_ver, msg->addr, msg->len,
					  rmr_wire_decode_record(msg));
		else if (ret == 0)
			ret = pool_mark_held(p, msg->missed, msg->map_ver, msg->addr, msg->len);
		req_answer(req, RMR_MSG_MAP_ADD_RSP, ret, 0);
		return;
	case RMR_MSG_WRITE:
		/*
		 * Refused before anything is marked or logged: marks for the
		 * others on a chunk that only they hold would leave it dirty
		 * everywhere. The client records this member as having missed it.
		 */
		if (!resync_write_possible(p, msg->addr, msg->len, req->io.flags & RMR_IO_PATCH)) {
			req_answer(req, RMR_MSG_WRITE_RSP, -ENODATA, 0);
			return;
		}
		req->map_ver = msg->map_ver;
		req->missed = msg->missed;
		if (msg->payload_len)
			req->io.data_len = msg->payload_len;
		else
			req->io.data = NULL;
		break;
	default: /* READ */
		req->io.data_len = msg->len;
		if (msg->payload_len) {
			/*
			 * The answer is read into the buffer right after the
			 * header: the argument moves to the end, where the
			 * session's bounds keep the two apart.
			 */
			char *arg = (char *)buf + HDR_LEN + sess->max_io - msg->payload_len;

			memmove(arg, req->io.data, msg->payload_len);
			req->io.arg = arg;
			req->io.arg_len = msg->payload_len;
		}
		break;
	}
	/* A client sends I/O only to a member it holds current. */
	p->maps_current = true;
	req->in_store = true;
	sess->in_store++;
	req_start(req);
}

static void on_map_pull(struct srv_session *sess, const struct rmr_msg *msg)
{
	if (sess->role != RMR_ROLE_CLIENT ||
	    memcmp(&msg->pool_uuid, &sess->pool->params.uuid, sizeof(rmr_uuid))) {
		session_reject(sess, "MAP_PULL from a member or for another pool");
		return;
	}
	/*
	 * The map version is taken only with the maps: a member that knew it
	 * before it held them could tell its peers it holds chunks it missed.
	 */
	if (!writer_holds(sess->pool, sess)) {
		server_ctrl_send(sess, &sess->pull_rsp, RMR_MSG_MAP_PULL_RSP, -ESTALE, 0);
		return;
	}
	map_transfer_pull(sess->pool, sess, msg->op, msg->map_ver, msg->op_flags, msg->missed);
}

/*
 * The writer changes the pool's membership, or asks whether it may: @ms as
 * decoded, or NULL when it did not decode (@why says why). Its receive
 * buffer is already released: a rejection frees the session.
 */
static void on_membership(struct srv_session *sess, const struct rmr_msg *msg,
			  const struct rmr_membership *ms, const char *why)
{
	struct srv_pool *p = sess->pool;
	int ret;

	if (sess->role != RMR_ROLE_CLIENT ||
	    memcmp(&msg->pool_uuid, &p->params.uuid, sizeof(rmr_uuid))) {
		session_reject(sess, "MEMBERSHIP from a member or for another pool");
		return;
	}
	if (!ms) {
		session_reject(sess, why);
		return;
	}
	if (!writer_holds(p, sess))
		ret = -ESTALE;
	else
		ret = membership_apply(p, ms, msg->map_ver, msg->op_flags & RMR_MEMBERSHIP_CHECK);
	server_ctrl_send(sess, &sess->membership_rsp, RMR_MSG_MEMBERSHIP_RSP, ret, 0);
}

/*
 * A RECONCILE_OWN whose store check ended: this member becomes the one the
 * others converge on, if it still may (the writer and its own map may
 * have changed while the store was checked).
 */
static void reconcile_own_continue(struct srv_session *sess)
{
	struct srv_pool *p = sess->pool;
	int ret = store_probe_result(p, sess->reconcile_probe);

	if (ret == -EINPROGRESS)
		return;
	sess->reconcile_waiting = false;
	if (ret == 0 && !writer_holds(p, sess))
		ret = -ESTALE;
	else if (ret == 0 && dirty_map_count(pool_own_map(p)))
		ret = -EAGAIN;
	else if (ret == 0 && pool_al_reconcile(p, sess->incarnation, true, sess->reconcile_map_ver) < 0)
		ret = -EIO;
	server_ctrl_send(sess, &sess->reconcile_rsp, RMR_MSG_RECONCILE_RSP, ret, 0);
}

/*
 * The client found that its predecessor exited uncleanly, or that writes of
 * its own may have reached some members only (RMR_RECONCILE_OWN), and chose
 * this member as the source the others converge on.
 */
static void on_reconcile(struct srv_session *sess, const struct rmr_msg *msg)
{
	int ret;

	if (sess->role != RMR_ROLE_CLIENT) {
		session_reject(sess, "RECONCILE from a member");
		return;
	}
	if (!writer_holds(sess->pool, sess)) {
		server_ctrl_send(sess, &sess->reconcile_rsp, RMR_MSG_RECONCILE_RSP, -ESTALE, 0);
		return;
	}
	/*
	 * The source must hold every chunk, not only those of its log: the
	 * others mark the ranges of their own logs dirty and copy them from it,
	 * one of them maybe the only holder of a chunk the source lacks (seed
	 * 3141). Not while it copies one in.
	 */
	if ((msg->op_flags & RMR_RECONCILE_OWN) && dirty_map_count(pool_own_map(sess->pool))) {
		server_ctrl_send(sess, &sess->reconcile_rsp, RMR_MSG_RECONCILE_RSP, -EAGAIN, 0);
		return;
	}
	/* ... and a store that works: the answer waits for its check (store_probe.h). */
	if (msg->op_flags & RMR_RECONCILE_OWN) {
		if (store_probe_begin(sess->pool, &sess->reconcile_probe) < 0) {
			server_ctrl_send(sess, &sess->reconcile_rsp, RMR_MSG_RECONCILE_RSP, -EIO, 0);
			return;
		}
		sess->reconcile_waiting = true;
		sess->reconcile_map_ver = msg->map_ver;
		reconcile_own_continue(sess);
		return;
	}
	ret = pool_al_reconcile(sess->pool, sess->incarnation, false, msg->map_ver);
	server_ctrl_send(sess, &sess->reconcile_rsp, RMR_MSG_RECONCILE_RSP, ret < 0 ? -EIO : 0, 0);
}

/* Is a client session of @writer attached to @p? */
bool server_writer_attached(const struct srv_pool *p, uint64_t writer)
{
	for (const struct srv_session *x = p->srv->sessions; x; x = x->next)
		if (x->pool == p && x->role == RMR_ROLE_CLIENT && !x->dead &&
		    x->incarnation == writer)
			return true;
	return false;
}

/* An orderly close: a writer's last writes finished everywhere. */
static void on_goodbye(struct srv_session *sess, int status)
{
	struct srv_pool *p = sess->pool;

	/* A fenced writer's goodbye leaves its log for the new writer to reconcile. */
	if (sess->role == RMR_ROLE_CLIENT && p && writer_holds(p, sess)) {
		writer_goodbye(p, sess, status);
		if (p->al->writer == sess->incarnation && !sess->in_store)
			pool_al_clear(p);
	}
	session_close(sess, "client said goodbye");
}

/* --- events to the consumer ------------------------------------------------ */

void server_event_dirty(struct srv_pool *p, uint16_t member_id, bool dirty)
{
	struct rmr_server *s = p->srv;

	if (s->events.dirty_tracking)
		s->events.dirty_tracking(s->opts.priv, p->name, member_id, dirty);
}

void server_event_resync(struct srv_pool *p)
{
	struct rmr_server *s = p->srv;
	uint64_t left = dirty_map_count(pool_own_map(p));

	if (s->events.resync_progress)
		s->events.resync_progress(s->opts.priv, p->name, p->resync_done,
					  p->resync_done + left, p->resync_bytes);
}

void server_event_map_update(struct srv_pool *p, uint16_t source, int status)
{
	struct rmr_server *s = p->srv;

	if (s->events.map_update)
		s->events.map_update(s->opts.priv, p->name, source, status);
}

/* --- transport upcalls ------------------------------------------------------ */

static void *ev_accepted(void *ev_ctx, struct rmr_conn *conn)
{
	struct rmr_server *s = ev_ctx;
	struct srv_session *sess = calloc(1, sizeof(*sess));

	if (!sess)
		return NULL;
	sess->conn_kind = CONN_SESSION;
	sess->srv = s;
	sess->conn = conn;
	sess->created = sess->last_rx = sess->last_tx = loop_now(s->loop);
	sess->hello_rsp.kind = sess->heartbeat.kind = sess->pull_rsp.kind = SEND_CTRL;
	sess->reconcile_rsp.kind = sess->membership_rsp.kind = sess->challenge.kind = SEND_CTRL;
	sess->next = s->sessions;
	if (s->sessions)
		s->sessions->prev = sess;
	s->sessions = sess;
	s->nsessions++;
	return sess;
}

/* Connections this server dialed are member-to-member sessions (peer.c). */
static bool is_peer(void *conn_ctx)
{
	return *(uint8_t *)conn_ctx == CONN_PEER;
}

static void ev_connected(void *ev_ctx, void *conn_ctx, int status)
{
	(void)ev_ctx;
	if (is_peer(conn_ctx))
		peer_on_connected(conn_ctx, status);
}

static void ev_recv(void *ev_ctx, void *conn_ctx, void *buf, size_t len, void *rx)
{
	struct rmr_server *s = ev_ctx;
	struct srv_session *sess = conn_ctx;
	struct rmr_msg msg;
	char why[128];
	int ret;

	if (is_peer(conn_ctx)) {
		peer_on_recv(conn_ctx, buf, len, rx);
		return;
	}
	if (sess->dead) {
		s->tops->recv_release(s->tp, sess->conn, rx);
		return;
	}
	sess->last_rx = loop_now(s->loop);
	ret = rmr_wire_decode(buf, len, &msg, why, sizeof(why));
	if (ret == 0 && sess->auth_pool && msg.type != RMR_MSG_AUTH) {
		/* After the CHALLENGE, nothing but the proof of the key. */
		s->tops->recv_release(s->tp, sess->conn, rx);
		snprintf(why, sizeof(why), "%s instead of AUTH: no proof of the pool key",
			 rmr_msg_type_name(msg.type));
		hello_refuse(sess, sess->auth_pool, sess->auth_hello.role, sess->auth_sender,
			     -EACCES, true, why);
		return;
	}
	if (ret == 0 && msg.type == RMR_MSG_AUTH && !sess->auth_pool) {
		snprintf(why, sizeof(why), "AUTH without a challenge");
		ret = -EBADMSG;
	}
	if (ret == 0 && msg.type != RMR_MSG_HELLO && msg.type != RMR_MSG_AUTH && !sess->pool) {
		snprintf(why, sizeof(why), "%s before hello", rmr_msg_type_name(msg.type));
		ret = -EBADMSG;
	}
	if (ret == 0 && msg.type == RMR_MSG_HELLO && sess->pool) {
		snprintf(why, sizeof(why), "second hello");
		ret = -EBADMSG;
	}
	if (ret < 0) {
		s->tops->recv_release(s->tp, sess->conn, rx);
		session_reject(sess, why);
		return;
	}

	switch ((enum rmr_msg_type)msg.type) {
	case RMR_MSG_HELLO: {
		struct rmr_hello h;

		ret = rmr_wire_decode_hello(&msg, &h, why, sizeof(why));
		s->tops->recv_release(s->tp, sess->conn, rx);
		if (ret < 0)
			session_reject(sess, why);
		else
			on_hello(sess, &msg, &h);
		return;
	}
	case RMR_MSG_READ:
	case RMR_MSG_WRITE:
	case RMR_MSG_MAP_ADD:
	case RMR_MSG_MAP_GET:
	case RMR_MSG_SYNC_READ:
	case RMR_MSG_MAP_CLEAR:
	case RMR_MSG_CHUNK_SUM:
	case RMR_MSG_MAP_MARK:
		on_request(sess, &msg, buf, rx);
		return; /* the request owns the buffer now */
	case RMR_MSG_MAP_PULL:
		s->tops->recv_release(s->tp, sess->conn, rx);
		on_map_pull(sess, &msg);
		return;
	case RMR_MSG_HEARTBEAT:
		s->tops->recv_release(s->tp, sess->conn, rx);
		return;
	case RMR_MSG_GOODBYE:
		s->tops->recv_release(s->tp, sess->conn, rx);
		on_goodbye(sess, msg.status);
		return;
	case RMR_MSG_RECONCILE:
		s->tops->recv_release(s->tp, sess->conn, rx);
		on_reconcile(sess, &msg);
		return;
	case RMR_MSG_MEMBERSHIP: {
		struct rmr_membership ms;

		ret = rmr_wire_decode_members(msg.payload, msg.payload_len, &ms, why, sizeof(why));
		s->tops->recv_release(s->tp, sess->conn, rx);
		on_membership(sess, &msg, ret < 0 ? NULL : &ms, why);
		return;
	}
	case RMR_MSG_AUTH: {
		struct rmr_auth a;

		ret = msg.status ? 0 : rmr_wire_decode_auth(&msg, &a, why, sizeof(why));
		s->tops->recv_release(s->tp, sess->conn, rx);
		on_auth(sess, &msg, ret < 0 ? NULL : &a, why);
		sodium_memzero(&a, sizeof(a));
		return;
	}
	case RMR_MSG_CHALLENGE:
	case RMR_MSG_HELLO_RSP:
	case RMR_MSG_READ_RSP:
	case RMR_MSG_WRITE_RSP:
	case RMR_MSG_MAP_ADD_RSP:
	case RMR_MSG_MAP_PULL_RSP:
	case RMR_MSG_MAP_GET_RSP:
	case RMR_MSG_SYNC_READ_RSP:
	case RMR_MSG_MAP_CLEAR_RSP:
	case RMR_MSG_RECONCILE_RSP:
	case RMR_MSG_CHUNK_SUM_RSP:
	case RMR_MSG_MAP_MARK_RSP:
	case RMR_MSG_MEMBERSHIP_RSP:
		s->tops->recv_release(s->tp, sess->conn, rx);
		session_reject(sess, "answer sent to a server");
		return;
	}
}

static void ev_send_done(void *ev_ctx, void *conn_ctx, void *op_ctx, int status)
{
	struct rmr_server *s = ev_ctx;
	struct srv_session *sess = conn_ctx;
	uint8_t kind = *(uint8_t *)op_ctx;

	if (is_peer(conn_ctx)) {
		peer_on_send_done(conn_ctx, op_ctx, status);
		return;
	}
	if (kind == SEND_CTRL) {
		struct srv_ctrl *cm = rmr_container_of(op_ctx, struct srv_ctrl, kind);

		cm->sending = false;
		if (sess->close_after_send && cm == &sess->hello_rsp) {
			session_close(sess, "hello refused");
			return;
		}
	} else {
		struct srv_answer *a = rmr_container_of(op_ctx, struct srv_answer, kind);

		s->tops->recv_release(s->tp, sess->conn, a->rx);
		a->rx = NULL;
		a->next_free = sess->free_answers;
		sess->free_answers = a;
	}
	if (status < 0)
		session_close(sess, "send failed");
}

static void ev_closed(void *ev_ctx, void *conn_ctx, int reason)
{
	struct srv_session *sess = conn_ctx;
	char why[64];

	(void)ev_ctx;
	if (is_peer(conn_ctx)) {
		peer_on_closed(conn_ctx, reason);
		return;
	}
	snprintf(why, sizeof(why), "connection lost: %s", strerror(-reason));
	/*
	 * It left after our challenge without an AUTH: refused, but no proof
	 * of a wrong key (an initiator with another key says so in its AUTH),
	 * as an honest one whose own deadline ran out does the same.
	 */
	if (sess->auth_pool && !sess->dead) {
		sess->srv->rejected++;
		log_warn("pool=%s member=%u: %s claiming id %u hung up after the challenge, before any proof",
			 sess->auth_pool->name, sess->auth_pool->params.member_id,
			 role_name(sess->auth_hello.role), sess->auth_sender);
	}
	session_close(sess, why);
}

static const struct rmr_transport_events server_events = {
	.size = sizeof(struct rmr_transport_events),
	.accepted = ev_accepted,
	.connected = ev_connected,
	.recv = ev_recv,
	.send_done = ev_send_done,
	.closed = ev_closed,
};

/* --- loop ------------------------------------------------------------------- */

static void server_wake(void *ctx)
{
	struct rmr_server *s = ctx;
	struct srv_req *list;

	pthread_mutex_lock(&s->done_lock);
	list = s->done_head;
	s->done_head = NULL;
	pthread_mutex_unlock(&s->done_lock);
	while (list) {
		struct srv_req *next = list->done_next;

		req_done(list);
		list = next;
	}
}

static void server_tick(void *ctx, uint64_t now)
{
	struct rmr_server *s = ctx;
	uint64_t silence = s->opts.failure_timeout_ms * NS_PER_MS;
	uint64_t hb = s->opts.heartbeat_ms * NS_PER_MS;
	struct srv_session *sess, *next;

	for (sess = s->sessions; sess; sess = next) {
		next = sess->next;
		if (sess->dead)
			continue;
		/* Silence is no proof of a wrong key either (see ev_closed). */
		if (now - sess->last_rx > silence && sess->auth_pool) {
			hello_refuse(sess, sess->auth_pool, sess->auth_hello.role, sess->auth_sender,
				     -ETIMEDOUT, false, "no AUTH after the challenge: the pool key unproven");
			continue;
		}
		if (now - sess->last_rx > silence) {
			session_close(sess, sess->pool ? "heartbeat timeout" : "no hello");
			continue;
		}
		if (sess->hello_deferred && !writer_fenced_in_store(sess->pool)) {
			sess->hello_deferred = false;
			server_ctrl_send(sess, &sess->hello_rsp, RMR_MSG_HELLO_RSP, 0,
					 sess->hello_rsp.body_len);
		}
		if (sess->reconcile_waiting && sess->pool && !sess->pool->removing)
			reconcile_own_continue(sess);
		if (sess->pool && now - sess->last_tx >= hb)
			server_ctrl_send(sess, &sess->heartbeat, RMR_MSG_HEARTBEAT, 0, 0);
	}
	for (unsigned i = 0; i < RMR_SERVER_MAX_POOLS; i++) {
		struct srv_pool *p = s->pools[i];

		if (!p || p->removing)
			continue;
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
			if (p->peers[id])
				peer_tick(p->peers[id], now);
		store_probe_tick(p, now);
		map_transfer_tick(p, now);
		resync_tick(p, now);
		verify_tick(p, now);
	}
}

static const struct loop_ops server_loop_ops = {
	.wake = server_wake,
	.tick = server_tick,
};

/* --- public API ------------------------------------------------------------- */

static void server_free(struct rmr_server *s)
{
	if (s->loop)
		loop_destroy(s->loop);
	while (s->sessions)
		session_free(s->sessions);
	if (s->tp)
		s->tops->destroy(s->tp);
	pthread_mutex_destroy(&s->done_lock);
	free(s);
}

RMR_EXPORT int rmr_server_create(const struct rmr_server_opts *opts, struct rmr_server **out)
{
	struct rmr_transport_params tparams = { .size = sizeof(tparams) };
	struct rmr_server *s;
	struct rmr_server_opts *o;
	int ret;

	if (!out)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->done_lock, NULL);
	o = &s->opts;
	if (!rmr_opts_copy(o, sizeof(*o), opts) || !o->listen_addr || !*o->listen_addr ||
	    strlen(o->listen_addr) > RMR_ADDR_MAX) {
		server_free(s);
		return -EINVAL;
	}
	if (!o->transport)
		o->transport = "fabric";
	if (!o->queue_depth)
		o->queue_depth = DEF_QUEUE_DEPTH;
	if (!o->max_io_size)
		o->max_io_size = DEF_MAX_IO;
	if (!o->heartbeat_ms)
		o->heartbeat_ms = DEF_HEARTBEAT_MS;
	if (!o->failure_timeout_ms)
		o->failure_timeout_ms = DEF_FAILURE_MS;
	if (o->queue_depth > MAX_QUEUE_DEPTH || o->max_io_size > RMR_WIRE_MAX_PAYLOAD ||
	    o->max_io_size < 4096 || o->heartbeat_ms * 2 > o->failure_timeout_ms) {
		server_free(s);
		return -EINVAL;
	}
	snprintf(s->listen_addr, sizeof(s->listen_addr), "%s", o->listen_addr);
	snprintf(s->name, sizeof(s->name), "%s", o->name ? o->name : o->listen_addr);
	o->listen_addr = NULL; /* the caller's strings are not ours to keep */
	o->name = NULL;
	if (o->events && !rmr_opts_copy(&s->events, sizeof(s->events), o->events)) {
		server_free(s);
		return -EINVAL;
	}
	o->events = NULL;
	s->tops = rmr_transport_find(o->transport);
	if (!s->tops) {
		server_free(s);
		return -ENOENT;
	}
	o->transport = NULL;
	s->incarnation = loop_random();
	if (rmr_auth_init() < 0) {
		server_free(s);
		return -EIO;
	}

	tparams.provider = o->provider;
	tparams.max_msg = HDR_LEN + o->max_io_size;
	/*
	 * One buffer per request slot, plus room for control messages and for
	 * MAP_ADDs that overtake the completion of their write's answer. A
	 * message that finds no buffer waits in the transport; none is lost.
	 */
	tparams.rx_depth = o->queue_depth + 16;
	tparams.tx_depth = o->queue_depth * 2 + 8;
	tparams.name = s->name;
	ret = loop_create(&server_loop_ops, s, RMR_MIN(o->heartbeat_ms / 2, 50), &s->loop);
	if (ret == 0)
		ret = s->tops->create(&tparams, &server_events, s, &s->tp);
	o->provider = NULL;
	if (ret < 0) {
		s->tp = NULL;
		server_free(s);
		return ret;
	}
	ret = s->tops->listen(s->tp, s->listen_addr);
	if (ret < 0) {
		log_err("%s: cannot listen: %s", s->name, strerror(-ret));
		server_free(s);
		return ret;
	}
	loop_set_transport(s->loop, s->tops, s->tp);
	ret = loop_start(s->loop, "rmr-server");
	if (ret < 0) {
		server_free(s);
		return ret;
	}
	log_info("%s: listening", s->name);
	*out = s;
	return 0;
}

RMR_EXPORT void rmr_server_destroy(struct rmr_server *s)
{
	if (!s)
		return;
	loop_stop(s->loop);
	for (unsigned i = 0; i < RMR_SERVER_MAX_POOLS; i++)
		if (s->pools[i])
			pool_free(s->pools[i]);
	server_free(s);
}

struct pool_call {
	struct rmr_server *s;
	struct srv_pool *p;
	const struct rmr_pool_params *params;
	int ret;
};

static void destroy_peers(struct srv_pool *p)
{
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		peer_destroy(p->peers[id]);
		p->peers[id] = NULL;
	}
}

static void do_add_pool(void *arg)
{
	struct pool_call *pc = arg;
	struct rmr_server *s = pc->s;
	unsigned free_idx = RMR_SERVER_MAX_POOLS;

	for (unsigned i = 0; i < RMR_SERVER_MAX_POOLS; i++) {
		struct srv_pool *p = s->pools[i];

		if (!p) {
			if (free_idx == RMR_SERVER_MAX_POOLS)
				free_idx = i;
			continue;
		}
		if (!memcmp(&p->params.uuid, &pc->p->params.uuid, sizeof(rmr_uuid)) ||
		    !strcmp(p->name, pc->p->name)) {
			pc->ret = -EEXIST;
			return;
		}
	}
	if (free_idx == RMR_SERVER_MAX_POOLS) {
		pc->ret = -ENOSPC;
		return;
	}
	/* The member-to-member sessions follow the membership, the saved one if it changed. */
	pc->ret = membership_sync_peers(pc->p);
	if (pc->ret < 0) {
		destroy_peers(pc->p);
		return;
	}
	s->pools[free_idx] = pc->p;
	pc->ret = 0;
}

RMR_EXPORT int rmr_server_add_pool(struct rmr_server *s, const struct rmr_pool_params *params,
				   const struct rmr_store_ops *ops, void *store,
				   struct rmr_server_pool **out)
{
	struct pool_call pc = { .s = s, .params = params };
	struct srv_pool *p;
	int ret;

	if (!s || !out)
		return -EINVAL;
	ret = pool_new(s, params, ops, store, &p);
	if (ret < 0)
		return ret;
	pc.p = p;
	loop_call(s->loop, do_add_pool, &pc);
	if (pc.ret < 0) {
		pool_free(p);
		return pc.ret;
	}
	log_info("pool=%s member=%u: serving (map version %llu, missed 0x%llx)", p->name,
		 params->member_id, (unsigned long long)p->map_ver, (unsigned long long)p->missed);
	if (!p->keyed)
		log_warn("pool=%s member=%u: no pool key: an open pool, any process that reaches "
			 "%s may join it as a member or a client", p->name, params->member_id,
			 s->listen_addr);
	*out = (struct rmr_server_pool *)p;
	return 0;
}

static void do_remove_pool(void *arg)
{
	struct pool_call *pc = arg;
	struct rmr_server *s = pc->s;
	struct srv_session *sess, *next;

	pc->p->removing = true;
	pc->ret = 0;
	for (sess = s->sessions; sess; sess = next) {
		next = sess->next;
		if ((sess->pool == pc->p || sess->auth_pool == pc->p) && !sess->dead)
			session_close(sess, "pool removed");
	}
	/* Copies end (and the requests waiting for them) before the peers go. */
	resync_stop(pc->p);
	destroy_peers(pc->p);
	for (sess = s->sessions; sess; sess = sess->next)
		pc->ret += sess->pool == pc->p; /* still there: waits for its store requests */
	if (pc->ret == 0) {
		for (unsigned i = 0; i < RMR_SERVER_MAX_POOLS; i++)
			if (s->pools[i] == pc->p)
				s->pools[i] = NULL;
	}
}

RMR_EXPORT void rmr_server_remove_pool(struct rmr_server_pool *handle)
{
	struct srv_pool *p = (struct srv_pool *)handle;
	struct pool_call pc = { .p = p };

	if (!p)
		return;
	pc.s = p->srv;
	for (;;) {
		loop_call(pc.s->loop, do_remove_pool, &pc);
		if (pc.ret == 0)
			break;
		/* Sessions wait for their store requests to come back. */
		if (loop_sim_active())
			loop_sim_run(1000000ull);
		else
			usleep(1000);
	}
	log_info("pool=%s member=%u: no longer served", p->name, p->params.member_id);
	pool_free(p);
}

struct resync_call {
	struct srv_pool *p;
	bool paused;
	uint64_t rate;
	int ret;
};

static void do_resync_pause(void *arg)
{
	struct resync_call *rc = arg;
	struct srv_pool *p = rc->p;

	if (p->resync_paused == rc->paused) {
		rc->ret = -EALREADY;
		return;
	}
	p->resync_paused = rc->paused;
	log_notice("pool=%s member=%u: background resync %s by the operator", p->name,
		   p->params.member_id, rc->paused ? "paused" : "resumed");
	if (!rc->paused)
		resync_kick(p);
}

RMR_EXPORT int rmr_server_resync_pause(struct rmr_server_pool *handle, bool paused)
{
	struct resync_call rc = { .p = (struct srv_pool *)handle, .paused = paused };

	if (!rc.p)
		return -EINVAL;
	loop_call(rc.p->srv->loop, do_resync_pause, &rc);
	return rc.ret;
}

static void do_resync_rate(void *arg)
{
	struct resync_call *rc = arg;
	struct srv_pool *p = rc->p;

	p->params.resync_rate = rc->rate;
	p->rate_tokens = 0;
	p->rate_last_ns = 0;
	log_notice("pool=%s member=%u: resync rate %llu bytes/s%s", p->name, p->params.member_id,
		   (unsigned long long)rc->rate, rc->rate ? "" : " (unlimited)");
	resync_kick(p);
}

RMR_EXPORT int rmr_server_resync_rate(struct rmr_server_pool *handle, uint64_t bytes_per_s)
{
	struct resync_call rc = { .p = (struct srv_pool *)handle, .rate = bytes_per_s };

	if (!rc.p)
		return -EINVAL;
	loop_call(rc.p->srv->loop, do_resync_rate, &rc);
	return 0;
}

struct verify_call {
	struct srv_pool *p;
	const struct rmr_verify_opts *opts;
	int ret;
};

static void do_verify(void *arg)
{
	struct verify_call *vc = arg;

	vc->ret = vc->opts ? verify_start(vc->p, vc->opts) : verify_stop(vc->p);
}

RMR_EXPORT int rmr_server_verify(struct rmr_server_pool *handle, const struct rmr_verify_opts *o)
{
	struct verify_call vc = { .p = (struct srv_pool *)handle };
	struct rmr_verify_opts opts = { .size = sizeof(opts) };

	if (!vc.p || !o || !rmr_opts_copy(&opts, sizeof(opts), o))
		return -EINVAL;
	vc.opts = &opts;
	loop_call(vc.p->srv->loop, do_verify, &vc);
	return vc.ret;
}

RMR_EXPORT int rmr_server_verify_stop(struct rmr_server_pool *handle)
{
	struct verify_call vc = { .p = (struct srv_pool *)handle };

	if (!vc.p)
		return -EINVAL;
	loop_call(vc.p->srv->loop, do_verify, &vc);
	return vc.ret;
}

struct status_call {
	struct rmr_server *s;
	struct rmr_server_status *st;
};

static void fill_status(void *arg)
{
	struct status_call *sc = arg;
	struct rmr_server *s = sc->s;
	struct rmr_server_status *st = sc->st;

	snprintf(st->listen_addr, sizeof(st->listen_addr), "%s", s->listen_addr);
	st->sessions = s->nsessions;
	st->rejected = s->rejected;
	st->auth_refused = s->auth_refused;
	for (unsigned i = 0; i < RMR_SERVER_MAX_POOLS; i++) {
		struct srv_pool *p = s->pools[i];
		struct rmr_server_pool_status *ps;

		if (!p)
			continue;
		ps = &st->pools[st->npools++];
		snprintf(ps->name, sizeof(ps->name), "%s", p->name);
		ps->uuid = p->params.uuid;
		ps->member_id = p->params.member_id;
		ps->pool_size = p->params.pool_size;
		ps->chunk_size = p->params.chunk_size;
		ps->map_ver = p->map_ver;
		ps->missed_mask = p->missed;
		ps->members_mask = rmr_membership_ids(&p->membership);
		ps->membership_ver = p->membership.version;
		for (unsigned k = 0; k < p->membership.n; k++)
			if (p->membership.m[k].detached)
				ps->detached_mask |= 1ull << p->membership.m[k].id;
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
			if (!p->maps[id])
				continue;
			ps->dirty_chunks[id] = dirty_map_count(p->maps[id]);
			ps->record_chunks[id] = dirty_map_records(p->maps[id]);
		}
		ps->reads = p->reads;
		ps->writes = p->writes;
		ps->read_bytes = p->read_bytes;
		ps->write_bytes = p->write_bytes;
		ps->errors = p->errors;
		ps->meta_saves = p->meta_saves;
		ps->map_writes = p->map_writes;
		ps->al_ranges = p->al->n;
		ps->al_chunks = 0;
		for (unsigned k = 0; k < AL_MAX_ENTRIES; k++)
			if (p->al->e[k].used)
				ps->al_chunks += p->al->e[k].count;
		ps->al_writes = p->al->records;
		ps->al_evictions = p->al->evictions;
		ps->al_stale = p->al->n && !server_writer_attached(p, p->al->writer) &&
			       !server_writer_attached(p, p->al_reconciled_for);
		ps->writer_epoch = p->al->writer_epoch;
		ps->fenced_requests = p->fenced;
		ps->map_pulls = p->map_pulls;
		resync_status(p, ps);
		verify_status(p, ps);
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
			if (p->peers[id])
				peer_status(p->peers[id], &ps->peers[ps->npeers++]);
		for (struct srv_session *sess = s->sessions; sess; sess = sess->next)
			ps->sessions += sess->pool == p && !sess->dead;
	}
}

RMR_EXPORT int rmr_server_status(struct rmr_server *s, struct rmr_server_status *st)
{
	struct status_call sc = { s, st };
	size_t size;

	if (!s || !st || st->size < sizeof(*st))
		return -EINVAL;
	size = st->size;
	memset(st, 0, sizeof(*st));
	st->size = size;
	loop_call(s->loop, fill_status, &sc);
	return 0;
}
