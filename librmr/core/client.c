/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Client pool: member sessions (connect, hello, heartbeats, failure,
 * reconnect with backoff, admission to I/O) and the public client API.
 * Request handling is in client_io.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "auth.h"
#include "compiler.h"
#include "log.h"
#include "member_state.h"

#define DEF_QUEUE_DEPTH 128
#define MAX_QUEUE_DEPTH 1024
#define DEF_MAX_IO (128u * 1024)
#define DEF_HEARTBEAT_MS 250
#define DEF_FAILURE_MS 2000
#define DEF_REQUEST_MS 10000
#define DEF_OPEN_MS 10000
#define DEF_RECONNECT_MIN_MS 200
#define DEF_RECONNECT_MAX_MS 5000
#define DEF_POLL_US 100
#define MAX_POLL_US 1000
#define NS_PER_MS 1000000ull

unsigned client_normal_count(struct rmr_client *c)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->nmembers; i++)
		n += c->members[i].state == RMR_MEMBER_NORMAL;
	return n;
}

/* The one door through which a member session changes state. */
void member_set_state(struct member *m, enum rmr_member_state to, const char *reason)
{
	struct rmr_client *c = m->c;
	enum rmr_member_state from = m->state;

	if (from == to)
		return;
	if (!member_state_can_move(from, to)) {
		log_err("pool=%s member=%u addr=%s: illegal transition %s -> %s (%s) refused",
			c->name, m->id, m->addr, rmr_member_state_name(from),
			rmr_member_state_name(to), reason);
		return;
	}
	m->state = to;
	snprintf(m->reason, sizeof(m->reason), "%s", reason);
	/* A member leaving NORMAL starts a new map version: writes from now on miss it. */
	if (from == RMR_MEMBER_NORMAL)
		c->map_ver++;
	log_notice("pool=%s member=%u addr=%s: %s -> %s (%s)", c->name, m->id, m->addr,
		   rmr_member_state_name(from), rmr_member_state_name(to), reason);
	if (c->ops.member_state)
		c->ops.member_state(c->opts.priv, m->index, m->id, m->addr, from, to, reason);
	if (from == RMR_MEMBER_NORMAL)
		unflushed_member_left(m, to);
}

static void admit_waiting(struct rmr_client *c);

void client_missed_recompute(struct rmr_client *c)
{
	uint64_t ids = c->missed_live, added, removed;

	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if (c->missed_inflight[id])
			ids |= 1ull << id;
	for (unsigned i = 0; i < c->nmembers; i++)
		ids |= c->members[i].reported_missed;
	ids &= c->members_ids;
	added = ids & ~c->missed_ids;
	removed = c->missed_ids & ~ids;
	c->missed_ids = ids;
	for (unsigned id = 1; (added | removed) && id <= RMR_MAX_MEMBER_ID; id++)
		if (((added | removed) & (1ull << id)) && c->ops.dirty_tracking)
			c->ops.dirty_tracking(c->opts.priv, (uint16_t)id,
					      (added & (1ull << id)) != 0);
	/* A member held out only by a record that emptied may return now. */
	if (removed)
		admit_waiting(c);
}

void client_note_missed(struct rmr_client *c, uint64_t ids)
{
	c->missed_live |= ids;
	client_missed_recompute(c);
}

void client_write_missed(struct rmr_client *c, struct slot *s, uint64_t ids)
{
	uint64_t add = ids & ~s->missed_counted;

	if (!add)
		return;
	s->missed_counted |= add;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if (add & (1ull << id))
			c->missed_inflight[id]++;
	client_missed_recompute(c);
}

void client_write_missed_done(struct rmr_client *c, struct slot *s, bool applied)
{
	if (!s->missed_counted)
		return;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if (s->missed_counted & (1ull << id))
			c->missed_inflight[id]--;
	if (applied)
		c->missed_live |= s->missed_counted;
	s->missed_counted = 0;
	client_missed_recompute(c);
}

void client_note_reported(struct member *m, uint64_t ids)
{
	m->reported_missed = ids;
	client_missed_recompute(m->c);
}

void client_forget_missed(struct rmr_client *c, unsigned id)
{
	c->missed_live &= ~(1ull << id);
	for (unsigned i = 0; i < c->nmembers; i++)
		c->members[i].reported_missed &= ~(1ull << id);
	client_missed_recompute(c);
}

void client_note_unsettled(struct rmr_client *c, uint64_t ids)
{
	if (!(ids & ~c->unsettled_ids))
		return;
	c->unsettled_ids |= ids;
	log_warn("pool=%s: a write failed everywhere after it was sent: members 0x%llx converge on one of them before they serve again",
		 c->name, (unsigned long long)c->unsettled_ids);
}

int member_send(struct member *m, const struct iovec *iov, int iovcnt, void *op_ctx)
{
	struct rmr_client *c = m->c;
	int ret;

	if (!m->conn || !m->connected)
		return -ENOTCONN;
	ret = c->tops->send(c->tp, m->conn, iov, iovcnt, op_ctx);
	if (ret == 0) {
		m->tx_inflight++;
		m->last_tx = loop_now(c->loop);
		for (int i = 0; i < iovcnt; i++)
			m->tx_bytes += iov[i].iov_len;
	}
	return ret;
}

/* Fill a header with the fields every message of this client carries. */
static void ctrl_encode(struct rmr_client *c, struct ctrl_msg *cm, unsigned type,
			uint32_t payload_len, int status)
{
	struct rmr_msg msg = {
		.type = type,
		.pool_uuid = c->uuid,
		.map_ver = c->map_ver,
		.payload_len = payload_len,
		.status = status,
	};

	cm->kind = SEND_CTRL;
	rmr_wire_encode(&cm->hdr, &msg);
}

int member_send_ctrl(struct member *m, struct ctrl_msg *cm, size_t body_len)
{
	struct iovec iov[2] = {
		{ .iov_base = &cm->hdr, .iov_len = sizeof(cm->hdr) },
		{ .iov_base = &cm->body, .iov_len = body_len },
	};
	int ret;

	if (cm->sending)
		return -EBUSY;
	ret = member_send(m, iov, body_len ? 2 : 1, cm);
	if (ret == 0)
		cm->sending = true;
	return ret;
}

static void schedule_reconnect(struct member *m)
{
	struct rmr_client *c = m->c;

	m->next_connect = loop_now(c->loop) + loop_backoff_ns(&m->backoff_ms,
							      c->opts.reconnect_min_ms,
							      c->opts.reconnect_max_ms);
}

/*
 * @m holds sessions with the members @ids. One that just came back (it was
 * not in @m's last report) and that this client waits to reconnect to gets
 * tried now rather than when its backoff runs out: a member the client lost
 * for a while returns to I/O, and starts its resync, as soon as it is up.
 */
static void note_peers_up(struct member *m, uint64_t ids)
{
	struct rmr_client *c = m->c;
	uint64_t back = ids & ~m->peers_up;

	m->peers_up = ids;
	for (unsigned i = 0; back && i < c->nmembers; i++) {
		struct member *x = &c->members[i];

		if (x->id && (back & (1ull << x->id)) && !x->conn && x->next_connect) {
			log_info("pool=%s: member %u reports member %u up; reconnecting now",
				 c->name, m->id, x->id);
			x->next_connect = loop_now(c->loop);
		}
	}
}

void member_drop_conn(struct member *m)
{
	struct rmr_client *c = m->c;

	if (m->conn) {
		/* The transport wants its buffers back before the close. */
		if (m->rx_lent)
			c->tops->recv_release(c->tp, m->conn, m->rx_lent);
		m->rx_lent = NULL;
		c->tops->close(c->tp, m->conn);
		m->conn = NULL;
	}
	/* Sends in flight are abandoned with the connection. */
	m->peers_up = 0;
	m->connected = false;
	m->hello_done = false;
	m->tx_inflight = 0;
	m->hello.sending = m->heartbeat.sending = m->goodbye.sending = m->pull.sending = false;
	m->membership.sending = false;
	m->auth.sending = false;
	m->authed = m->auth_refusing = false;
}

static void check_open_done(struct rmr_client *c);
static void finish_open(struct rmr_client *c);

void member_fail(struct member *m, const char *reason)
{
	struct rmr_client *c = m->c;
	bool settle_lost;

	member_drop_conn(m);
	client_membership_member_lost(m);
	/* Out of the pool, or held out of it by the operator: not dialed again. */
	if (m->state == RMR_MEMBER_DETACHED || m->state == RMR_MEMBER_REMOVED) {
		m->resolved = true;
		m->want_pull = m->pulling = m->reconciling = false;
		check_open_done(c);
		return;
	}
	m->resolved = true;
	/*
	 * A pull given up on may still finish on the member: writes from now
	 * on must carry a newer map version than the one it will take.
	 */
	if (m->pulling)
		c->map_ver++;
	m->want_pull = m->pulling = m->settle_blocked = m->gathered = false; /* writes thaw on the next tick */
	if (c->gatherer == m)
		c->gatherer = NULL; /* chosen again, from the start, once all are back */
	/* The open, or a settling, picks another source. */
	settle_lost = m->reconciling && c->settling;
	if (settle_lost)
		c->settling = false;
	m->reconciling = false;
	if (m->state != RMR_MEMBER_FAILED) {
		if (m->state == RMR_MEMBER_NORMAL)
			m->errors++;
		member_set_state(m, RMR_MEMBER_FAILED, reason);
		client_io_member_lost(c, m);
	} else {
		snprintf(m->reason, sizeof(m->reason), "%s", reason);
	}
	if (!c->closing && !c->fenced && !m->next_connect)
		schedule_reconnect(m);
	if (settle_lost)
		admit_waiting(c);
	/* A refusal by a live writer is retried until the open deadline: it may
	 * be a crashed one whose session the member has not seen die yet. */
	if (m->busy && c->opening)
		m->resolved = false;
	check_open_done(c);
}

void member_connect(struct member *m)
{
	struct rmr_client *c = m->c;
	int ret;

	m->next_connect = 0;
	ret = c->tops->connect(c->tp, m->addr, m, &m->conn);
	if (ret < 0) {
		char why[64];

		m->conn = NULL;
		snprintf(why, sizeof(why), "connect: %s", strerror(-ret));
		member_fail(m, why);
		return;
	}
	m->hello_deadline = loop_now(c->loop) + c->opts.failure_timeout_ms * NS_PER_MS;
}

/* --- admission --------------------------------------------------------- */

/*
 * Send @msg, a MAP_PULL or RECONCILE, as @m's one outstanding map request
 * (it uses @m->pull), due within the request timeout but at least 30 s: a
 * pull copies every map and saves them. Fails @m if it cannot go.
 */
static bool send_map_request(struct member *m, const struct rmr_msg *msg)
{
	struct rmr_client *c = m->c;
	uint64_t timeout = RMR_MAX((uint64_t)c->opts.request_timeout_ms, 30000);

	m->pull.kind = SEND_CTRL;
	rmr_wire_encode(&m->pull.hdr, msg);
	if (member_send_ctrl(m, &m->pull, 0) < 0) {
		member_fail(m, msg->type == RMR_MSG_MAP_PULL ? "cannot send map pull"
							     : "cannot send reconcile");
		return false;
	}
	m->pull_deadline = loop_now(c->loop) + timeout * NS_PER_MS;
	m->pull_ver = msg->map_ver;
	return true;
}

/*
 * Decide again on the members that wait to be admitted: a source settled, or
 * a record that held one out emptied (one that still waits for the maps and
 * still needs them is marked again by member_admit).
 */
static void admit_waiting(struct rmr_client *c)
{
	for (unsigned i = 0; i < c->nmembers && !c->settling; i++) {
		struct member *m = &c->members[i];

		if (m->state == RMR_MEMBER_RECONNECTING && m->hello_done && !m->pulling &&
		    !m->reconciling && !c->opening) {
			m->want_pull = false;
			member_admit(m);
		}
	}
}

/*
 * Writes of ours of unknown outcome may be on some members only, and no
 * member is NORMAL to converge on: @m, back first, becomes the source. It
 * marks the ranges of its activity log dirty for every other member, which
 * then take its maps before they serve again.
 */
static void settle_from(struct member *m)
{
	struct rmr_client *c = m->c;
	struct rmr_msg msg = {
		.type = RMR_MSG_RECONCILE,
		.pool_uuid = c->uuid,
		.map_ver = c->map_ver,
		.op_flags = RMR_RECONCILE_OWN,
	};

	if (!send_map_request(m, &msg))
		return;
	m->reconciling = true;
	c->settling = true;
	/* Retried every 100 ms while it still copies chunks in: said once. */
	if (m->settle_blocked)
		log_debug("pool=%s member=%u addr=%s: asked again to be the source", c->name, m->id,
			  m->addr);
	else
		log_notice("pool=%s member=%u addr=%s: writes of unknown outcome; members converge on this one",
			   c->name, m->id, m->addr);
}

static void settle_done(struct member *m, const struct rmr_msg *msg)
{
	struct rmr_client *c = m->c;

	c->settling = false;
	if (msg->status == -EAGAIN) {
		/* Still copying chunks in: another member, or it again later. */
		if (!m->settle_blocked)
			log_notice("pool=%s member=%u addr=%s: cannot be the source yet: it still copies in chunks of its activity log (asked again every 100 ms)",
				   c->name, m->id, m->addr);
		snprintf(m->reason, sizeof(m->reason),
			 "unknown writes; waits for a member holding every chunk");
		m->settle_retry = loop_now(c->loop) + 100 * NS_PER_MS;
		m->settle_blocked = true;
		admit_waiting(c);
		client_try_pulls(c);
		return;
	}
	if (msg->status < 0) {
		member_fail(m, "reconcile failed");
		admit_waiting(c); /* another member may be the source */
		return;
	}
	c->unsettled_ids &= ~(1ull << m->id);
	m->settle_blocked = false;
	m->map_ver = msg->map_ver;
	c->map_ver = RMR_MAX(c->map_ver, msg->map_ver);
	client_note_reported(m, msg->missed);
	m->backoff_ms = 0;
	member_set_state(m, RMR_MEMBER_NORMAL, "the source the others converge on");
	admit_waiting(c);
}

/*
 * A member is admitted to I/O only if nobody knows it missed a write, or
 * once it took the dirty maps from a current member: it then copies what it
 * missed from its peers by itself, and never serves a stale chunk.
 */
void member_admit(struct member *m)
{
	struct rmr_client *c = m->c;

	if (m->state != RMR_MEMBER_RECONNECTING || m->want_pull)
		return;
	/* A member that missed a membership change learns it first. */
	if (client_membership_push(m))
		return;
	if (m->maintenance) {
		member_set_state(m, RMR_MEMBER_MAINTENANCE, "reconnected; held out by the operator");
		return;
	}
	if (c->settling)
		return; /* admitted once the member chosen as source settled */
	if ((c->unsettled_ids & (1ull << m->id)) && !(c->missed_ids & (1ull << m->id))) {
		if (!client_normal_count(c)) {
			if (loop_now(c->loop) >= m->settle_retry)
				settle_from(m);
			return;
		}
		m->want_pull = true;
		snprintf(m->reason, sizeof(m->reason), "writes of unknown outcome; taking the dirty maps");
		client_try_pulls(c);
		return;
	}
	if ((c->missed_ids & (1ull << m->id)) || m->stale_al) {
		m->want_pull = true;
		snprintf(m->reason, sizeof(m->reason), "%s; taking the dirty maps",
			 m->stale_al ? "crashed writer's activity log" : "missed writes");
		client_try_pulls(c);
		return;
	}
	m->backoff_ms = 0;
	member_set_state(m, RMR_MEMBER_NORMAL, "hello done, holds every acknowledged write");
}

static void send_pull(struct member *m, const struct member *src, uint32_t flags)
{
	struct rmr_client *c = m->c;
	struct rmr_msg msg = {
		.type = RMR_MSG_MAP_PULL,
		.pool_uuid = c->uuid,
		.map_ver = c->map_ver,
		.op = src->id,
		.op_flags = flags,
		.missed = c->unsettled_ids & ~(1ull << m->id),
	};

	if (!send_map_request(m, &msg))
		return;
	m->pulling = true;
	m->pull_source = src->id;
	log_notice("pool=%s member=%u addr=%s: taking the dirty maps from member %u", c->name,
		   m->id, m->addr, src->id);
}

/*
 * No member is NORMAL, and every member missed writes: none holds every
 * acknowledged write, yet together they do (seed 3247: one crashed holding
 * the chunks another had still to copy in, which then took writes alone).
 * One of them (gather_rank) takes the maps of every other
 * member, added up (RMR_MAP_PULL_ALL): it then knows every chunk it missed
 * and which peer lacks what, copies them from its peers, and the others
 * take the maps from it as usual. Only with every member back, each
 * waiting for the maps (or unsettled and unable to be the source: it lacks
 * chunks of its log, and copies nothing before it took maps; seed 648):
 * the record of one that is down may be the only one naming a chunk that
 * was missed.
 */
/*
 * The gatherer: a member not on record as maybe lost to a power loss
 * before one that is (the others would converge on what its host may have
 * lost: gather_done forgets those records), then the highest map version.
 */
static uint64_t gather_rank(const struct member *m)
{
	return (unflushed_pending(m->c, m->id) ? 0 : 1ull << 63) | (m->map_ver & ~(1ull << 63));
}

static void gather_start(struct rmr_client *c)
{
	struct member *lead = NULL;
	struct rmr_msg msg = {
		.type = RMR_MSG_MAP_PULL,
		.pool_uuid = c->uuid,
		.map_ver = c->map_ver,
		.op_flags = RMR_MAP_PULL_ALL,
	};

	if (c->gatherer || c->settling || c->closing || c->fenced)
		return;
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		if (m->state == RMR_MEMBER_DETACHED || m->state == RMR_MEMBER_REMOVED)
			continue;
		if (m->state != RMR_MEMBER_RECONNECTING || !m->hello_done ||
		    !(m->want_pull || m->settle_blocked) || m->pulling || m->reconciling)
			return;
		if (!lead || gather_rank(m) > gather_rank(lead))
			lead = m;
	}
	/* It has them all, and copies what it lacks before it can settle. */
	if (!lead || lead->gathered)
		return;
	/*
	 * No `missed` (unsettled peers not to copy from): it is the one the
	 * others converge on, whatever bytes of unknown outcome it copies in.
	 */
	if (!send_map_request(lead, &msg))
		return;
	lead->pulling = true;
	lead->pull_source = 0;
	c->gatherer = lead;
	log_notice("pool=%s member=%u addr=%s: no member holds every write: this one takes the maps of every other",
		   c->name, lead->id, lead->addr);
}

/* The gatherer took every member's maps: it serves, or first settles. */
static void gather_done(struct member *lead)
{
	struct rmr_client *c = lead->c;

	lead->backoff_ms = 0;
	lead->gathered = true;
	/*
	 * What it may have lost itself nobody holds better: the others
	 * converge on it. Not flushed on it yet, though: at risk as before.
	 */
	unflushed_kept(lead);
	if (!(c->unsettled_ids & (1ull << lead->id)))
		member_set_state(lead, RMR_MEMBER_NORMAL,
				 "took the maps of every member; resyncs from its peers");
	/*
	 * The others are decided again (they take the maps from it), or, with
	 * writes of unknown outcome, it becomes their source (member_admit).
	 * Still the gatherer meanwhile: none of them may start a gather.
	 */
	client_forget_missed(c, lead->id);
	if (lead->state == RMR_MEMBER_RECONNECTING && !lead->reconciling && !c->settling)
		member_admit(lead);
	c->gatherer = NULL;
}

void client_try_pulls(struct rmr_client *c)
{
	struct member *src = NULL;
	bool want = false;

	for (unsigned i = 0; i < c->nmembers; i++)
		want |= c->members[i].want_pull;
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		if (m->state == RMR_MEMBER_NORMAL && (!src || m->map_ver > src->map_ver))
			src = m;
	}
	/* A membership change holds the maps still: pulls wait for its end. */
	if (c->mc.phase != MC_IDLE)
		return;
	if (!want || !src || c->closing) {
		for (unsigned i = 0; want && !src && i < c->nmembers; i++)
			if (c->members[i].want_pull && !c->members[i].pulling)
				snprintf(c->members[i].reason, sizeof(c->members[i].reason),
					 "missed writes; no current member to take maps from");
		if (c->frozen)
			client_io_thaw(c);
		if (want && !src)
			gather_start(c);
		return;
	}
	c->frozen = true;
	if (client_io_writes_in_flight(c))
		return;
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		if (m->want_pull && !m->pulling)
			send_pull(m, src, (c->unsettled_ids & (1ull << m->id)) ? RMR_MAP_PULL_ABSORB : 0);
	}
}

static void on_pull_rsp(struct member *m, const struct rmr_msg *msg)
{
	struct rmr_client *c = m->c;
	char why[64];

	if (!m->pulling)
		return;
	m->pulling = m->want_pull = false;
	if (c->ops.map_update)
		c->ops.map_update(c->opts.priv, m->id, m->pull_source, msg->status);
	/*
	 * A member left NORMAL while the pull ran (its source, say, or a settle
	 * followed): the maps taken may lack marks made since (seed 25781: a
	 * pull that waited for its session took the maps of a source that had
	 * failed meanwhile, without the marks of the settle that followed).
	 */
	if (msg->status == 0 && c->gatherer != m && c->map_ver > m->pull_ver) {
		c->map_ver++;
		member_fail(m, "map update outdated: the pool changed while it ran");
	} else if (msg->status < 0) {
		/* -EBUSY: an older pull still runs there; it must not pass for current. */
		c->map_ver++;
		snprintf(why, sizeof(why), "map update failed: %s", strerror(-msg->status));
		member_fail(m, why);
	} else {
		/* A gatherer that may hold writes of unknown outcome is their source. */
		if (c->gatherer != m)
			c->unsettled_ids &= ~(1ull << m->id);
		m->stale_al = false;
		m->settle_blocked = false;
		c->map_ver = RMR_MAX(c->map_ver, msg->map_ver);
		m->map_ver = msg->map_ver;
		m->map_updates++;
		m->backoff_ms = 0;
		if (c->gatherer == m) {
			gather_done(m);
		} else {
			member_set_state(m, RMR_MEMBER_NORMAL,
					 "took the dirty maps; resyncs from its peers");
			/* Last: the members this one held out are decided again. */
			client_forget_missed(c, m->id);
		}
	}
	client_try_pulls(c);
}

/*
 * The previous writer exited uncleanly if a member reports a stale activity
 * log: its last writes may have reached some members only. Before any I/O,
 * the member chosen as source (current, highest map version) marks the
 * ranges of its log dirty for every other member; the others then take its
 * maps and add the ranges of their own logs (map_transfer.c), so that every
 * chunk that may differ is copied from the source. Returns true while the
 * open waits for that.
 */
static bool open_reconcile(struct rmr_client *c)
{
	struct member *src = NULL;
	struct rmr_msg msg = { .type = RMR_MSG_RECONCILE };

	if (c->reconciled)
		return false;
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		if (m->reconciling)
			return true;
		if (m->hello_done && m->state == RMR_MEMBER_RECONNECTING && !m->maintenance &&
		    !(c->missed_ids & (1ull << m->id)) && (!src || m->map_ver > src->map_ver))
			src = m;
	}
	if (!src || !src->stale_al) {
		c->reconciled = true;
		return false;
	}
	msg.pool_uuid = c->uuid;
	msg.map_ver = c->map_ver;
	if (!send_map_request(src, &msg))
		return true;
	src->reconciling = true;
	log_notice("pool=%s member=%u addr=%s: the last writer exited uncleanly; members converge on this one",
		   c->name, src->id, src->addr);
	return true;
}

static void on_reconcile_rsp(struct member *m, const struct rmr_msg *msg)
{
	struct rmr_client *c = m->c;

	if (!m->reconciling)
		return;
	m->reconciling = false;
	if (c->settling) {
		settle_done(m, msg);
		return;
	}
	if (msg->status < 0) {
		member_fail(m, "reconcile failed");
		return;
	}
	m->stale_al = false;
	m->map_ver = msg->map_ver;
	c->map_ver = RMR_MAX(c->map_ver, msg->map_ver);
	client_note_reported(m, msg->missed);
	c->reconciled = true;
	if (c->opening)
		finish_open(c);
}

/*
 * Whether the members heard from together hold every acknowledged write:
 * only when every attached member answered. A member cannot tell by itself
 * that it missed writes (only the others record it), and a record of the
 * others proves nothing either: it may be one they emptied while this
 * member was away, after which they took writes it lacks. Opened with such
 * a member while they are away, a writer would serve its old bytes and make
 * it the source they converge on, overwriting their newer ones. Members in
 * opts.open_without are given up by the operator. @p absent: the attached
 * members neither heard from nor given up.
 */
/* Members as "member 3" or "members 1, 3". */
static void ids_text(uint64_t ids, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "member%s ", ids & (ids - 1) ? "s" : "");
	bool first = true;

	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID && n < len; id++) {
		if (ids & (1ull << id)) {
			n += (size_t)snprintf(buf + n, len - n, "%s%u", first ? "" : ", ", id);
			first = false;
		}
	}
}

/*
 * The writer's last clean close (opts.last_close) proves that the members
 * current then hold every acknowledged write, if nobody wrote since: each
 * of them answered and granted the epoch after the record's. What the
 * others missed until then is on their record.
 */
static bool last_close_proves(const struct rmr_client *c)
{
	const struct rmr_close_record *r = &c->last_close;
	uint64_t ids = 0;

	if (!c->has_last_close || !r->writer_epoch || !r->current_ids ||
	    memcmp(&r->pool_uuid, &c->uuid, sizeof(c->uuid)))
		return false;
	for (unsigned i = 0; i < c->nmembers; i++) {
		const struct member *m = &c->members[i];

		if (m->hello_done && m->id && (r->current_ids & (1ull << m->id)) &&
		    m->granted_epoch == r->writer_epoch + 1)
			ids |= 1ull << m->id;
	}
	return ids == r->current_ids;
}

static bool open_proven(struct rmr_client *c, uint64_t *absent)
{
	uint64_t attached = 0;

	*absent = 0;
	if (c->proven)
		return true;
	if (!c->heard_ids)
		return false;
	for (unsigned i = 0; i < c->membership.n && i < RMR_MAX_MEMBERS; i++)
		if (!c->membership.m[i].detached)
			attached |= 1ull << c->membership.m[i].id;
	*absent = attached & ~c->heard_ids & ~c->opts.open_without;
	if (*absent && last_close_proves(c)) {
		char ids[192];

		ids_text(*absent, ids, sizeof(ids));
		log_notice("pool=%s: opening without %s: behind at this writer's last clean close (epoch %llu), and no writer came since; back, they take the maps",
			   c->name, ids, (unsigned long long)c->last_close.writer_epoch);
		*absent = 0;
	}
	if (*absent)
		return false;
	if (c->opts.open_without & attached & ~c->heard_ids)
		log_warn("pool=%s: opening without members 0x%llx, given up: writes only they held are lost",
			 c->name, (unsigned long long)(c->opts.open_without & attached & ~c->heard_ids));
	return c->proven = true;
}

/* Members are on their way to NORMAL: a gather, a settling or map pulls run. */
static bool open_converging(const struct rmr_client *c)
{
	if (c->gatherer || c->settling)
		return true;
	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].want_pull || c->members[i].pulling || c->members[i].reconciling)
			return true;
	return false;
}

/* The open is over: rmr_client_open() returns @p status. */
static void open_end(struct rmr_client *c, int status)
{
	pthread_mutex_lock(&c->state_lock);
	c->opening = false;
	c->open_done = true;
	c->open_status = status;
	pthread_cond_broadcast(&c->state_cond);
	pthread_mutex_unlock(&c->state_lock);
}

static bool any_busy(const struct rmr_client *c)
{
	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].busy)
			return true;
	return false;
}

/* Members that answered cannot show they hold every write: no open. */
static void open_refuse_unproven(struct rmr_client *c, uint64_t absent)
{
	const char *them = absent & (absent - 1) ? "them" : "it";
	char ids[192];

	ids_text(absent, ids, sizeof(ids));
	log_err("pool=%s: not opened: no answer from %s, which may hold writes the others lack (a member cannot tell by itself that it missed any). Start %s, or give %s up (rmr_client_opts.open_without, nbd-brmr --open-without)",
		c->name, ids, them, them);
	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].hello_done)
			snprintf(c->members[i].reason, sizeof(c->members[i].reason),
				 "may lack writes of %.40s", ids);
	open_end(c, -EHOSTUNREACH);
}

static void finish_open(struct rmr_client *c)
{
	uint64_t absent;
	bool busy;

	/* (Nobody heard from, or another writer: told below, as before.) */
	if (!c->fenced && !any_busy(c) && c->heard_ids && !open_proven(c, &absent)) {
		open_refuse_unproven(c, absent);
		return;
	}
	if (!c->fenced && open_reconcile(c))
		return;
	for (unsigned i = 0; i < c->nmembers; i++)
		member_admit(&c->members[i]);
	busy = any_busy(c);
	/*
	 * Every member missed something: one takes the others' maps first (a
	 * gather), or one settles. The open waits for it, up to its deadline
	 * (client_tick looks again), rather than fail a pool that converges.
	 */
	if (!c->fenced && !busy && !client_normal_count(c) && open_converging(c) &&
	    loop_now(c->loop) < c->open_deadline) {
		c->open_admitted = true;
		return;
	}
	if (c->fenced)
		open_end(c, -ESTALE);
	else if (busy)
		open_end(c, -EBUSY); /* a second writer, even where members granted it */
	else if (client_normal_count(c) > 0)
		open_end(c, 0);
	else if (c->geometry_known)
		open_end(c, -EIO); /* members answered, none holds current data */
	else
		open_end(c, -ETIMEDOUT);
}

/* While opening, wait until every member answered or failed once. */
static void check_open_done(struct rmr_client *c)
{
	bool answered = false;
	uint64_t absent;

	if (!c->opening || c->open_admitted)
		return; /* (admitted: client_tick ends the open once one is NORMAL) */

	for (unsigned i = 0; i < c->nmembers; i++) {
		if (!c->members[i].resolved)
			return;
		answered |= c->members[i].hello_done;
	}
	/*
	 * Every member failed once, none answered: members that are still
	 * starting (or a loaded host) fail a first connect, so keep dialing
	 * them until the open deadline rather than giving up now. The same
	 * while those that answered cannot show they hold every write.
	 */
	if ((!answered || !open_proven(c, &absent)) && !c->fenced)
		return;
	finish_open(c);
}

/* --- messages from members ---------------------------------------------- */

static bool hello_matches_pool(struct member *m, const struct rmr_msg *msg,
			       const struct rmr_hello_rsp *h, char *why, size_t whylen)
{
	struct rmr_client *c = m->c;

	if (strcmp(h->pool_name, c->name)) {
		snprintf(why, whylen, "serves pool '%s', not '%s'", h->pool_name, c->name);
		return false;
	}
	/* A member added at run time is dialed as the id the membership gives it. */
	if (m->id && m->id != h->member_id) {
		snprintf(why, whylen, "answers as member %u, not %u", h->member_id, m->id);
		return false;
	}
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *o = &c->members[i];

		if (o != m && o->id == h->member_id && o->state != RMR_MEMBER_REMOVED) {
			snprintf(why, whylen, "member id %u already used by %s", h->member_id, o->addr);
			return false;
		}
	}
	if (!c->geometry_known) {
		if (c->opts.pool_uuid && memcmp(c->opts.pool_uuid, &msg->pool_uuid, sizeof(rmr_uuid))) {
			snprintf(why, whylen, "pool UUID differs from the one requested");
			return false;
		}
		return true;
	}
	if (memcmp(&c->uuid, &msg->pool_uuid, sizeof(rmr_uuid))) {
		snprintf(why, whylen, "pool UUID differs from the other members'");
		return false;
	}
	/* Memberships may differ in version: client_membership_hello() sorts that out. */
	if (h->pool_size != c->pool_size || h->chunk_size != c->chunk_size) {
		snprintf(why, whylen, "pool geometry differs from the other members'");
		return false;
	}
	return true;
}

/* A member failed authentication (either way): count it, say why, fail it. */
static void auth_fail(struct member *m, uint16_t id, const char *why)
{
	struct rmr_client *c = m->c;

	c->auth_refused++;
	log_err("pool=%s addr=%s: refusing member %u: %s", c->name, m->addr, id, why);
	member_fail(m, "authentication failed");
}

/*
 * A member's CHALLENGE that does not prove the key (or names another member
 * or pool): count it and say why, then tell the member so (AUTH with
 * -EACCES, no proof) rather than hang up, so that it counts this client as
 * holding another key and not as a hang-up; its refusal ends the session.
 */
/*
 * Answer @challenge with an AUTH: @a's proof (@status 0), or a refusal of
 * the member's proof (@status -EACCES, no proof). @return 0 or -errno.
 */
static int send_auth(struct member *m, const struct rmr_msg *challenge, const struct rmr_auth *a,
		     int status)
{
	struct rmr_msg am = {
		.type = RMR_MSG_AUTH,
		.pool_uuid = challenge->pool_uuid,
		.map_ver = m->c->map_ver,
		.payload_len = sizeof(struct rmr_wire_auth),
		.status = status,
	};

	m->auth.kind = SEND_CTRL;
	rmr_wire_encode(&m->auth.hdr, &am);
	rmr_wire_encode_auth(&m->auth.body.auth, a);
	return member_send_ctrl(m, &m->auth, sizeof(struct rmr_wire_auth));
}

static void auth_refuse(struct member *m, const struct rmr_msg *msg, const char *why)
{
	struct rmr_client *c = m->c;
	static const struct rmr_auth none;

	c->auth_refused++;
	log_err("pool=%s addr=%s: refusing member %u: %s", c->name, m->addr, msg->sender_id, why);
	if (send_auth(m, msg, &none, -EACCES) < 0) {
		member_fail(m, "authentication failed");
		return;
	}
	m->auth_refusing = true;
}

/* A keyed pool's member proves the key: check it, then prove it back. */
static void on_challenge(struct member *m, const struct rmr_msg *msg)
{
	struct rmr_client *c = m->c;
	struct rmr_auth_ctx ctx;
	struct rmr_auth a;
	static const rmr_uuid zero;
	char why[160];

	if (!c->keyed) {
		auth_fail(m, msg->sender_id, "its pool has a key, this client none");
		return;
	}
	if (rmr_wire_decode_auth(msg, &a, why, sizeof(why)) < 0) {
		auth_fail(m, msg->sender_id, why);
		return;
	}
	if (msg->sender_id == 0 || (m->id && msg->sender_id != m->id)) {
		snprintf(why, sizeof(why), "its challenge claims id %u, not %u", msg->sender_id, m->id);
		auth_refuse(m, msg, why);
		return;
	}
	if (memcmp(&c->uuid, &zero, sizeof(zero)) &&
	    memcmp(&c->uuid, &msg->pool_uuid, sizeof(rmr_uuid))) {
		auth_refuse(m, msg, "its challenge is for another pool UUID");
		return;
	}
	memset(&ctx, 0, sizeof(ctx));
	memcpy(ctx.initiator_nonce, m->nonce, RMR_NONCE_LEN);
	memcpy(ctx.member_nonce, a.nonce, RMR_NONCE_LEN);
	ctx.pool_uuid = msg->pool_uuid;
	ctx.role = RMR_ROLE_CLIENT;
	ctx.initiator_id = 0;
	ctx.member_id = msg->sender_id;
	if (!rmr_auth_check(c->key, RMR_AUTH_MEMBER, &ctx, a.proof)) {
		auth_refuse(m, msg, "it did not prove the pool key (wrong key)");
		return;
	}
	memset(a.nonce, 0, sizeof(a.nonce));
	rmr_auth_proof(c->key, RMR_AUTH_INITIATOR, &ctx, a.proof);
	if (send_auth(m, msg, &a, 0) < 0) {
		member_fail(m, "cannot send auth");
		return;
	}
	m->authed = true;
	m->auth_id = msg->sender_id;
}

static void on_hello_rsp(struct member *m, const struct rmr_msg *msg)
{
	struct rmr_client *c = m->c;
	struct rmr_hello_rsp h;
	char why[192];

	if (msg->status == -ESTALE) {
		client_fence(c, "a member refused the hello: a newer writer holds the pool");
		return;
	}
	if (msg->status == -EACCES) {
		c->auth_refused++;
		log_err("pool=%s addr=%s: the member refused this client's %s", c->name, m->addr,
			c->keyed ? "proof of the pool key (another key?)"
				 : "hello: it wants a pool key, this client has none");
		member_fail(m, "refused: wrong or missing pool key");
		return;
	}
	m->busy = msg->status == -EBUSY;
	if (msg->status < 0) {
		snprintf(why, sizeof(why), "refused: %s",
			 m->busy ? "another writer holds the pool"
			 : msg->status == -EIO ? "its store may have lost data; replace it"
			 : strerror(-msg->status));
		member_fail(m, why);
		return;
	}
	if (c->keyed && !m->authed) {
		auth_fail(m, msg->sender_id, "it answered without proving the pool key (no key?)");
		return;
	}
	if (rmr_wire_decode_hello_rsp(msg, &h, why, sizeof(why)) < 0 ||
	    !hello_matches_pool(m, msg, &h, why, sizeof(why))) {
		log_err("pool=%s addr=%s: hello answer refused: %s", c->name, m->addr, why);
		member_fail(m, "bad hello answer");
		return;
	}
	if (c->keyed && (h.member_id != m->auth_id || msg->sender_id != m->auth_id)) {
		auth_fail(m, h.member_id, "it answers as another member than it proved the key for");
		return;
	}
	if (!c->geometry_known) {
		c->geometry_known = true;
		c->uuid = msg->pool_uuid;
		c->pool_size = h.pool_size;
		c->chunk_size = h.chunk_size;
		c->max_io_size = RMR_MIN(c->opts.max_io_size, h.max_io_size);
	}
	if (h.max_io_size < c->max_io_size) {
		/* Requests already sized for the pool must fit every member. */
		member_fail(m, "member accepts smaller requests than the pool");
		return;
	}
	if (h.queue_depth < c->qd) {
		/* A slot beyond its queue depth would end the session mid-request. */
		member_fail(m, "member accepts fewer requests in flight than the client's queue depth");
		return;
	}
	if (m->incarnation && m->incarnation != h.incarnation)
		log_info("pool=%s member=%u: member process restarted", c->name, h.member_id);
	/*
	 * The same process as before it left, or the same boot of its host:
	 * its page cache kept every write it acknowledged, whatever no flush
	 * covered. What is still queued to record as maybe lost is not lost
	 * (SIM_POWER=1 SIM_MEMBERS=2 seed 11908: those records made it look
	 * no surer a holder than a member whose host did lose power), but
	 * still at risk until its next flush (seed 34921: dropped, a power
	 * loss later lost them unrecorded).
	 */
	if (h.member_id == m->id &&
	    ((m->left_incarnation && m->left_incarnation == h.incarnation) ||
	     (h.boot_id && h.boot_id == m->left_boot))) {
		/* The process or boot it left from, not merely its last hello's. */
		if (unflushed_kept(m))
			log_notice("pool=%s member=%u: back %s: it lost none of the writes no flush covered on it",
				   c->name, m->id,
				   m->left_incarnation == h.incarnation ? "without a restart"
									: "in the same boot of its host");
	} else if (h.member_id == m->id && !unflushed_none(m)) {
		/* What it kept the last time is at risk again: it restarted since. */
		unflushed_member_left(m, RMR_MEMBER_FAILED);
	}
	m->boot_id = h.boot_id;
	m->id = h.member_id;
	if (!client_membership_hello(m, &h.membership))
		return;
	m->map_ver = h.map_ver;
	m->incarnation = h.incarnation;
	m->stale_al = (h.flags & RMR_HELLO_RSP_STALE_AL) != 0;
	c->writer_epoch = RMR_MAX(c->writer_epoch, h.writer_epoch);
	m->granted_epoch = h.writer_epoch;
	m->hello_done = true;
	m->resolved = true;
	c->heard_ids |= 1ull << m->id;
	c->map_ver = RMR_MAX(c->map_ver, h.map_ver);
	/* Every member's record of who missed writes counts, while it lasts. */
	client_note_reported(m, h.missed);
	member_set_state(m, RMR_MEMBER_RECONNECTING, "hello answered");
	if (c->opening)
		check_open_done(c);
	else
		member_admit(m);
}

void client_fence(struct rmr_client *c, const char *why)
{
	if (c->fenced)
		return;
	c->fenced = true;
	log_err("pool=%s: fenced: %s; every request fails from now on", c->name, why);
	for (unsigned i = 0; i < c->nmembers; i++)
		member_fail(&c->members[i], "fenced: another writer took the pool over");
	check_open_done(c);
}

/* Give back the buffer being handled, unless closing the session already did. */
static void release_rx(struct member *m)
{
	struct rmr_client *c = m->c;

	if (m->rx_lent && m->conn)
		c->tops->recv_release(c->tp, m->conn, m->rx_lent);
	m->rx_lent = NULL;
}

static void ev_recv(void *ev_ctx, void *conn_ctx, void *buf, size_t len, void *rx)
{
	struct rmr_client *c = ev_ctx;
	struct member *m = conn_ctx;
	struct rmr_msg msg;
	char why[128];
	int ret;

	m->rx_lent = rx;
	m->last_rx = loop_now(c->loop);
	m->rx_bytes += len;
	ret = rmr_wire_decode(buf, len, &msg, why, sizeof(why));
	if (ret == 0 && msg.sender_id != m->id && m->hello_done) {
		snprintf(why, sizeof(why), "sender id %u on the session of member %u",
			 msg.sender_id, m->id);
		ret = -EBADMSG;
	}
	if (ret < 0) {
		log_err("pool=%s member=%u addr=%s: malformed message: %s", c->name, m->id,
			m->addr, why);
		member_fail(m, "malformed message");
		release_rx(m);
		return;
	}

	/* We refused its proof: only its refusal, which ends the session, is awaited. */
	if (m->auth_refusing) {
		if (msg.type == RMR_MSG_HELLO_RSP)
			member_fail(m, "authentication failed");
		release_rx(m);
		return;
	}
	switch ((enum rmr_msg_type)msg.type) {
	case RMR_MSG_HELLO_RSP:
		if (!m->hello_done)
			on_hello_rsp(m, &msg);
		break;
	case RMR_MSG_CHALLENGE:
		if (m->hello_done || m->authed) {
			log_err("pool=%s member=%u: a second CHALLENGE", c->name, m->id);
			member_fail(m, "protocol violation");
			break;
		}
		on_challenge(m, &msg);
		break;
	case RMR_MSG_HEARTBEAT:
		/*
		 * A record emptied by copies lets a member it held out return.
		 * Only to forget: what a member newly records, this client
		 * caused and knows, and a member that took the maps stays out
		 * of the records that it is copying in.
		 */
		if (m->hello_done && (m->reported_missed & ~msg.missed))
			client_note_reported(m, m->reported_missed & msg.missed);
		if (m->hello_done)
			note_peers_up(m, msg.addr);
		break;
	case RMR_MSG_READ_RSP:
	case RMR_MSG_WRITE_RSP:
	case RMR_MSG_MAP_ADD_RSP:
		if (m->hello_done)
			client_io_on_response(c, m, &msg);
		break;
	case RMR_MSG_MAP_PULL_RSP:
		if (m->hello_done)
			on_pull_rsp(m, &msg);
		break;
	case RMR_MSG_RECONCILE_RSP:
		if (m->hello_done)
			on_reconcile_rsp(m, &msg);
		break;
	case RMR_MSG_MEMBERSHIP_RSP:
		if (m->hello_done)
			client_membership_on_rsp(m, &msg);
		break;
	case RMR_MSG_GOODBYE:
		member_fail(m, "member said goodbye");
		break;
	case RMR_MSG_HELLO:
	case RMR_MSG_READ:
	case RMR_MSG_WRITE:
	case RMR_MSG_MAP_ADD:
	case RMR_MSG_MAP_PULL:
	case RMR_MSG_MAP_GET:
	case RMR_MSG_MAP_GET_RSP:
	case RMR_MSG_SYNC_READ:
	case RMR_MSG_SYNC_READ_RSP:
	case RMR_MSG_MAP_CLEAR:
	case RMR_MSG_MAP_CLEAR_RSP:
	case RMR_MSG_RECONCILE:
	case RMR_MSG_CHUNK_SUM:
	case RMR_MSG_CHUNK_SUM_RSP:
	case RMR_MSG_MAP_MARK:
	case RMR_MSG_MAP_MARK_RSP:
	case RMR_MSG_MEMBERSHIP:
	case RMR_MSG_AUTH:
		log_err("pool=%s member=%u: unexpected %s from a member", c->name, m->id,
			rmr_msg_type_name(msg.type));
		member_fail(m, "protocol violation");
		break;
	}
	release_rx(m);
}

static void ev_connected(void *ev_ctx, void *conn_ctx, int status)
{
	struct rmr_client *c = ev_ctx;
	struct member *m = conn_ctx;
	struct rmr_hello h = {
		.role = RMR_ROLE_CLIENT,
		.queue_depth = c->qd,
		.max_io_size = c->opts.max_io_size,
		.heartbeat_ms = c->opts.heartbeat_ms,
		.incarnation = c->incarnation,
		/* A takeover is asked for while opening; afterwards the epoch says it. */
		.flags = c->opts.takeover && c->opening ? RMR_HELLO_TAKEOVER : 0,
		.writer_epoch = c->writer_epoch,
	};
	int ret;

	if (status < 0) {
		char why[64];

		snprintf(why, sizeof(why), "connect: %s", strerror(-status));
		member_fail(m, why);
		return;
	}
	m->connected = true;
	m->last_rx = loop_now(c->loop);
	if (m->state == RMR_MEMBER_FAILED)
		m->reconnects++;
	snprintf(h.pool_name, sizeof(h.pool_name), "%s", c->name);
	if (c->keyed) {
		h.flags |= RMR_HELLO_AUTH;
		rmr_auth_nonce(m->nonce);
		memcpy(h.nonce, m->nonce, RMR_NONCE_LEN);
	}
	ctrl_encode(c, &m->hello, RMR_MSG_HELLO, sizeof(struct rmr_wire_hello), 0);
	rmr_wire_encode_hello(&m->hello.body.hello, &h);
	ret = member_send_ctrl(m, &m->hello, sizeof(struct rmr_wire_hello));
	if (ret < 0)
		member_fail(m, "cannot send hello");
}

static void ev_send_done(void *ev_ctx, void *conn_ctx, void *op_ctx, int status)
{
	struct rmr_client *c = ev_ctx;
	struct member *m = conn_ctx;
	uint8_t kind = *(uint8_t *)op_ctx;

	if (m->tx_inflight)
		m->tx_inflight--;
	if (kind == SEND_CTRL)
		((struct ctrl_msg *)op_ctx)->sending = false;
	else
		client_io_on_send_done(c, m, op_ctx, status);
	if (status < 0 && m->conn)
		member_fail(m, "send failed");
}

static void ev_closed(void *ev_ctx, void *conn_ctx, int reason)
{
	struct rmr_client *c = ev_ctx;
	struct member *m = conn_ctx;
	char why[64];

	(void)c;
	snprintf(why, sizeof(why), "connection lost: %s", strerror(-reason));
	member_fail(m, why);
}

static void *ev_accepted(void *ev_ctx, struct rmr_conn *conn)
{
	(void)ev_ctx;
	(void)conn;
	return NULL; /* a client does not listen */
}

static const struct rmr_transport_events client_events = {
	.size = sizeof(struct rmr_transport_events),
	.accepted = ev_accepted,
	.connected = ev_connected,
	.recv = ev_recv,
	.send_done = ev_send_done,
	.closed = ev_closed,
};

/* --- loop callbacks ------------------------------------------------------ */

static void client_wake(void *ctx)
{
	client_io_drain_submissions(ctx);
}

static void client_tick(void *ctx, uint64_t now)
{
	struct rmr_client *c = ctx;
	uint64_t hb = c->opts.heartbeat_ms * NS_PER_MS;
	uint64_t silence = c->opts.failure_timeout_ms * NS_PER_MS;
	bool want_pull, settle_due = false;

	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		if (m->conn && !m->hello_done && now > m->hello_deadline) {
			member_fail(m, m->connected ? "no hello answer" : "connect timeout");
			continue;
		}
		if (m->conn && m->connected && now - m->last_rx > silence) {
			member_fail(m, "heartbeat timeout");
			continue;
		}
		if (m->conn && m->hello_done && now - m->last_tx >= hb) {
			ctrl_encode(c, &m->heartbeat, RMR_MSG_HEARTBEAT, 0, 0);
			member_send_ctrl(m, &m->heartbeat, 0);
		}
		if (!m->conn && m->next_connect && now >= m->next_connect && !c->closing)
			member_connect(m);
	}
	client_io_check_deadlines(c, now);
	want_pull = c->frozen;
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		if (m->reconciling && now > m->pull_deadline)
			member_fail(m, "reconcile timed out");
		if (m->pulling && now > m->pull_deadline) {
			if (c->ops.map_update)
				c->ops.map_update(c->opts.priv, m->id, m->pull_source, -ETIMEDOUT);
			member_fail(m, "map update timed out");
		}
		want_pull |= m->want_pull;
		if (m->settle_retry && now >= m->settle_retry) {
			m->settle_retry = 0;
			settle_due = true;
		}
	}
	if (want_pull)
		client_try_pulls(c);
	if (settle_due && !c->settling)
		admit_waiting(c);
	client_membership_step(c, now);
	unflushed_send_records(c);
	if (c->opening && (now >= c->open_deadline ||
			   (c->open_admitted && (client_normal_count(c) || !open_converging(c)))))
		finish_open(c);
}

static const struct loop_ops client_loop_ops = {
	.wake = client_wake,
	.tick = client_tick,
};

/* --- public API ---------------------------------------------------------- */

static int check_opts(struct rmr_client_opts *o)
{
	if (!o->pool_name || !*o->pool_name || strlen(o->pool_name) > RMR_NAME_MAX)
		return -EINVAL;
	if (o->nmembers == 0 || o->nmembers > RMR_MAX_MEMBERS || !o->members)
		return -EINVAL;
	for (unsigned i = 0; i < o->nmembers; i++)
		if (!o->members[i] || !*o->members[i] || strlen(o->members[i]) > RMR_ADDR_MAX)
			return -EINVAL;
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
	if (!o->request_timeout_ms)
		o->request_timeout_ms = DEF_REQUEST_MS;
	if (!o->open_timeout_ms)
		o->open_timeout_ms = DEF_OPEN_MS;
	if (!o->reconnect_min_ms)
		o->reconnect_min_ms = DEF_RECONNECT_MIN_MS;
	if (!o->reconnect_max_ms)
		o->reconnect_max_ms = DEF_RECONNECT_MAX_MS;
	if (!o->min_legs)
		o->min_legs = 1;
	if (!o->poll_us)
		o->poll_us = DEF_POLL_US;
	if (o->poll_us > MAX_POLL_US && o->poll_us != RMR_POLL_OFF)
		return -EINVAL;
	if (o->queue_depth > MAX_QUEUE_DEPTH || o->max_io_size > RMR_WIRE_MAX_PAYLOAD ||
	    o->max_io_size < 4096 || o->heartbeat_ms * 2 > o->failure_timeout_ms ||
	    o->reconnect_min_ms > o->reconnect_max_ms || o->min_legs > o->nmembers ||
	    (o->volatile_writes && o->queue_depth < 2))
		return -EINVAL;
	return 0;
}

static void client_free(struct rmr_client *c)
{
	if (c->loop)
		loop_destroy(c->loop);
	if (c->tp)
		c->tops->destroy(c->tp);
	if (c->slots) {
		slot_pool_destroy(&c->slot_pool);
		for (uint32_t i = 0; i < c->qd; i++)
			free(c->slots[i].bounce);
	}
	free(c->slots);
	unflushed_free(c);
	pthread_mutex_destroy(&c->sub_lock);
	pthread_mutex_destroy(&c->state_lock);
	pthread_mutex_destroy(&c->mc_call_lock);
	pthread_cond_destroy(&c->state_cond);
	explicit_bzero(c->key, sizeof(c->key));
	free(c);
}

static void start_connect_all(void *arg)
{
	struct rmr_client *c = arg;

	c->open_deadline = loop_now(c->loop) + c->opts.open_timeout_ms * NS_PER_MS;
	for (unsigned i = 0; i < c->nmembers; i++)
		member_connect(&c->members[i]);
}

RMR_EXPORT int rmr_client_open(const struct rmr_client_opts *opts, struct rmr_client **out)
{
	struct rmr_client *c;
	struct rmr_transport_params tparams = { .size = sizeof(tparams) };
	int ret;

	if (!out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->sub_lock, NULL);
	pthread_mutex_init(&c->state_lock, NULL);
	pthread_mutex_init(&c->mc_call_lock, NULL);
	pthread_cond_init(&c->state_cond, NULL);
	if (!rmr_opts_copy(&c->opts, sizeof(c->opts), opts)) {
		client_free(c);
		return -EINVAL;
	}
	ret = check_opts(&c->opts);
	if (ret < 0) {
		client_free(c);
		return ret;
	}
	if (c->opts.ops)
		rmr_opts_copy(&c->ops, sizeof(c->ops), c->opts.ops);
	snprintf(c->name, sizeof(c->name), "%s", c->opts.pool_name);
	if (rmr_auth_init() < 0) {
		client_free(c);
		return -EIO;
	}
	if (c->opts.key) {
		memcpy(c->key, c->opts.key, RMR_KEY_LEN);
		c->keyed = true;
	} else {
		log_warn("pool=%s: no pool key: sessions are not authenticated (an open pool)",
			 c->name);
	}
	c->opts.key = NULL; /* the caller's bytes are not ours to keep */
	if (c->opts.last_close) {
		c->last_close = *c->opts.last_close;
		c->has_last_close = true;
		c->opts.last_close = NULL;
	}
	c->tops = rmr_transport_find(c->opts.transport);
	if (!c->tops) {
		client_free(c);
		return -ENOENT;
	}
	c->incarnation = loop_random();
	c->map_ver = 1;
	c->qd = c->opts.queue_depth;
	/* The last slot records what members left unflushed: never short of one. */
	c->record_slot = c->opts.volatile_writes ? c->qd - 1 : UINT32_MAX;
	c->max_io_size = c->opts.max_io_size;
	if (c->opts.pool_uuid)
		c->uuid = *c->opts.pool_uuid;
	c->nmembers = c->opts.nmembers;
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		m->c = c;
		m->index = i;
		m->state = RMR_MEMBER_NEW;
		snprintf(m->addr, sizeof(m->addr), "%s", c->opts.members[i]);
		snprintf(m->reason, sizeof(m->reason), "not connected yet");
		m->hello.kind = m->heartbeat.kind = m->goodbye.kind = SEND_CTRL;
	}
	c->opts.members = NULL; /* the caller's array is not ours to keep */

	c->slots = calloc(c->qd, sizeof(*c->slots));
	if (!c->slots ||
	    slot_pool_init(&c->slot_pool, c->opts.volatile_writes ? c->qd - 1 : c->qd) < 0) {
		free(c->slots);
		c->slots = NULL;
		client_free(c);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < c->qd; i++) {
		c->slots[i].index = i;
		for (unsigned j = 0; j < RMR_MAX_MEMBERS; j++)
			c->slots[i].legs[j].kind = SEND_LEG;
	}

	tparams.provider = c->opts.provider;
	tparams.max_msg = sizeof(struct rmr_wire_hdr) + c->opts.max_io_size;
	/* Every slot may await one answer per member, plus control messages. */
	tparams.rx_depth = c->qd + 8;
	tparams.tx_depth = c->qd + 8;
	tparams.name = c->name;
	poll_policy_init(&c->poll, c->opts.poll_us == RMR_POLL_OFF ? 0 : c->opts.poll_us * 1000ull);
	ret = loop_create(&client_loop_ops, c, RMR_MIN(c->opts.heartbeat_ms / 2, 50), &c->loop);
	if (ret == 0)
		ret = c->tops->create(&tparams, &client_events, c, &c->tp);
	if (ret < 0) {
		c->tp = NULL;
		client_free(c);
		return ret;
	}
	loop_set_transport(c->loop, c->tops, c->tp);
	c->opening = true;
	ret = loop_start(c->loop, "rmr-client");
	if (ret < 0) {
		client_free(c);
		return ret;
	}
	loop_call(c->loop, start_connect_all, c);

	pthread_mutex_lock(&c->state_lock);
	while (!c->open_done) {
		if (loop_sim_active())
			loop_sim_wait(&c->state_lock);
		else
			pthread_cond_wait(&c->state_cond, &c->state_lock);
	}
	ret = c->open_status;
	pthread_mutex_unlock(&c->state_lock);
	if (ret < 0) {
		log_err("pool=%s: open failed: %s", c->name,
			ret == -EIO ? "no member holds the current data" : strerror(-ret));
		rmr_client_close(c);
		return ret;
	}
	log_info("pool=%s: open, %u of %u members normal", c->name, client_normal_count(c),
		 c->nmembers);
	*out = c;
	return 0;
}

/*
 * What this close proves (rmr_client_close_and_record): the members that
 * hold every write acknowledged to us, none of it only in a page cache.
 * Nothing while the pool is in doubt: fenced, never opened, a membership
 * change or a record of unflushed writes unfinished.
 */
static void fill_close_record(struct rmr_client *c, struct rmr_close_record *rec)
{
	uint64_t ids = 0;

	memset(rec, 0, sizeof(*rec));
	if (c->fenced || !c->proven || !c->geometry_known || c->mc.phase != MC_IDLE ||
	    c->nrecords || c->records_inflight)
		return;
	for (unsigned i = 0; i < c->nmembers; i++) {
		const struct member *m = &c->members[i];
		uint64_t bit = 1ull << m->id;

		if (m->state == RMR_MEMBER_NORMAL && m->hello_done &&
		    !((c->missed_ids | c->unsettled_ids) & bit) &&
		    (!c->opts.volatile_writes || unflushed_none(m)))
			ids |= bit;
	}
	if (!ids)
		return;
	rec->pool_uuid = c->uuid;
	rec->writer_epoch = c->writer_epoch;
	rec->current_ids = ids;
}

static void say_goodbye(void *arg)
{
	struct rmr_client *c = arg;

	c->said_goodbye = true;
	if (c->close_record)
		fill_close_record(c, c->close_record);
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		if (m->hello_done) {
			/* A failed open says so: only then a member gives the epoch back. */
			ctrl_encode(c, &m->goodbye, RMR_MSG_GOODBYE, 0,
				    c->open_status < 0 ? c->open_status : 0);
			member_send_ctrl(m, &m->goodbye, 0);
		}
	}
}

static void close_sessions(void *arg)
{
	struct rmr_client *c = arg;

	for (unsigned i = 0; i < c->nmembers; i++)
		member_drop_conn(&c->members[i]);
	client_membership_abort(c);
}

RMR_EXPORT void rmr_client_close(struct rmr_client *c)
{
	rmr_client_close_and_record(c, NULL);
}

RMR_EXPORT void rmr_client_close_and_record(struct rmr_client *c, struct rmr_close_record *rec)
{
	if (rec)
		memset(rec, 0, sizeof(*rec));
	if (!c)
		return;
	c->close_record = rec;
	pthread_mutex_lock(&c->state_lock);
	c->closing = true;
	while (c->inflight) {
		if (loop_sim_active())
			loop_sim_wait(&c->state_lock);
		else
			pthread_cond_wait(&c->state_cond, &c->state_lock);
	}
	pthread_mutex_unlock(&c->state_lock);
	slot_pool_shutdown(&c->slot_pool);
	loop_call(c->loop, say_goodbye, c);
	loop_call(c->loop, close_sessions, c);
	loop_stop(c->loop);
	client_free(c);
}

RMR_EXPORT int rmr_client_submit(struct rmr_client *c, const struct rmr_io *io, unsigned flags)
{
	if (!c || !io)
		return -EINVAL;
	/* Only the loop thread frees slots: it must never wait for one. */
	if (loop_on_thread(c->loop))
		flags &= ~(unsigned)RMR_SUBMIT_WAIT;
	return client_io_submit(c, io, flags);
}

RMR_EXPORT int rmr_client_watch_fd(struct rmr_client *c, int fd, void (*fn)(void *priv),
				   void *priv)
{
	if (!c)
		return -EINVAL;
	return loop_watch(c->loop, fd, fn, priv);
}

RMR_EXPORT int rmr_client_kick_fd(struct rmr_client *c, int fd)
{
	if (!c)
		return -EINVAL;
	return loop_kick(c->loop, fd);
}

RMR_EXPORT bool rmr_client_on_loop_thread(struct rmr_client *c)
{
	return c && loop_on_thread(c->loop);
}

RMR_EXPORT int rmr_client_unwatch_fd(struct rmr_client *c, int fd)
{
	if (!c)
		return -EINVAL;
	if (loop_on_thread(c->loop))
		return -EDEADLK;
	return loop_unwatch(c->loop, fd);
}

struct info_call {
	struct rmr_client *c;
	struct rmr_pool_info *info;
};

static void fill_info(void *arg)
{
	struct info_call *ic = arg;
	struct rmr_client *c = ic->c;

	snprintf(ic->info->name, sizeof(ic->info->name), "%s", c->name);
	ic->info->uuid = c->uuid;
	ic->info->pool_size = c->pool_size;
	ic->info->chunk_size = c->chunk_size;
	ic->info->max_io_size = c->max_io_size;
	ic->info->queue_depth = c->opts.volatile_writes ? c->qd - 1 : c->qd;
}

RMR_EXPORT int rmr_client_info(struct rmr_client *c, struct rmr_pool_info *info)
{
	struct info_call ic = { c, info };

	if (!c || !info || info->size < sizeof(*info))
		return -EINVAL;
	loop_call(c->loop, fill_info, &ic);
	return 0;
}

struct maintenance_call {
	struct rmr_client *c;
	uint16_t id;
	bool on;
	int ret;
};

static void do_maintenance(void *arg)
{
	struct maintenance_call *mc = arg;
	struct rmr_client *c = mc->c;
	struct member *m = NULL;

	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].id && c->members[i].id == mc->id)
			m = &c->members[i];
	if (!m) {
		mc->ret = -ENOENT;
		return;
	}
	if (mc->on == m->maintenance) {
		mc->ret = -EALREADY;
		return;
	}
	if (mc->on && (m->state != RMR_MEMBER_NORMAL || client_normal_count(c) < 2)) {
		mc->ret = -EBUSY;
		return;
	}
	mc->ret = 0;
	m->maintenance = mc->on;
	if (mc->on) {
		member_set_state(m, RMR_MEMBER_MAINTENANCE, "maintenance on (operator)");
		return;
	}
	if (m->state == RMR_MEMBER_MAINTENANCE)
		member_set_state(m, RMR_MEMBER_RECONNECTING, "maintenance off (operator)");
	member_admit(m);
}

RMR_EXPORT int rmr_client_set_maintenance(struct rmr_client *c, uint16_t member_id, bool on)
{
	struct maintenance_call mc = { .c = c, .id = member_id, .on = on };

	if (!c || !member_id)
		return -EINVAL;
	loop_call(c->loop, do_maintenance, &mc);
	return mc.ret;
}

struct status_call {
	struct rmr_client *c;
	struct rmr_pool_status *st;
};

static void fill_status(void *arg)
{
	struct status_call *sc = arg;
	struct rmr_client *c = sc->c;
	struct rmr_pool_status *st = sc->st;

	snprintf(st->name, sizeof(st->name), "%s", c->name);
	st->uuid = c->uuid;
	st->pool_size = c->pool_size;
	st->chunk_size = c->chunk_size;
	st->map_ver = c->map_ver;
	st->missed_mask = c->missed_ids;
	st->queue_depth = c->qd;
	st->inflight = slot_pool_used(&c->slot_pool);
	st->normal_members = client_normal_count(c);
	st->writer_epoch = c->writer_epoch;
	st->fenced = c->fenced;
	st->auth_refused = c->auth_refused;
	st->loop_sleeps = loop_sleeps(c->loop);
	st->loop_polls = loop_polls(c->loop);
	st->membership_ver = c->membership.version;
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];
		struct rmr_member_status *ms;

		/* Members deleted from the pool are not part of its state any more. */
		if (m->state == RMR_MEMBER_REMOVED)
			continue;
		ms = &st->members[st->nmembers++];
		ms->member_id = m->id;
		ms->state = m->state;
		snprintf(ms->addr, sizeof(ms->addr), "%s", m->addr);
		snprintf(ms->reason, sizeof(ms->reason), "%s", m->reason);
		ms->map_ver = m->map_ver;
		ms->reads = m->reads;
		ms->writes = m->writes;
		ms->read_bytes = m->read_bytes;
		ms->write_bytes = m->write_bytes;
		ms->errors = m->errors;
		ms->reconnects = m->reconnects;
		ms->inflight = m->inflight;
		ms->tx_bytes = m->tx_bytes;
		ms->rx_bytes = m->rx_bytes;
		ms->map_updates = m->map_updates;
		ms->unflushed_chunks = unflushed_chunks(m);
		ms->record_chunks_queued = unflushed_queued_chunks(c, m->id);
	}
}

RMR_EXPORT int rmr_client_status(struct rmr_client *c, struct rmr_pool_status *st)
{
	struct status_call sc = { c, st };
	size_t size;

	if (!c || !st || st->size < sizeof(*st))
		return -EINVAL;
	size = st->size;
	memset(st, 0, sizeof(*st));
	st->size = size;
	loop_call(c->loop, fill_status, &sc);
	return 0;
}
