/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pool's membership, client side. The members hold it (membership.h);
 * the client learns the newest from their hellos, brings a member that
 * missed a change up to date before admitting it, and carries out the
 * operator's changes:
 *
 *  - add (or attach again): writes are held until none is in flight, the
 *    members that are up take the new membership (each marks every chunk
 *    dirty for a new member, durably), then the client dials the member,
 *    which takes the maps and copies everything it lacks from its peers;
 *  - remove (delete, or detach keeping its tracking): writes are held, the
 *    remaining NORMAL members are asked first whether each holds every
 *    chunk itself (the member leaving may be the only one that holds some
 *    otherwise), then they take the new membership and the client closes
 *    its session.
 *
 * A member that was away during a change learns it at its next hello. The
 * client keeps no membership of its own across restarts: the members'
 * newest is the pool's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client_internal.h"
#include "compiler.h"
#include "log.h"

#define NS_PER_MS 1000000ull

static uint64_t bit(unsigned id)
{
	return 1ull << id;
}

static struct member *by_id(struct rmr_client *c, uint16_t id)
{
	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].id == id && c->members[i].state != RMR_MEMBER_REMOVED)
			return &c->members[i];
	return NULL;
}

/* An entry for a member the client does not know yet: a free one, or a new one. */
static struct member *new_entry(struct rmr_client *c, const struct rmr_member_entry *e)
{
	struct member *m = NULL;

	for (unsigned i = 0; i < c->nmembers && !m; i++)
		if (c->members[i].state == RMR_MEMBER_REMOVED && !c->members[i].inflight)
			m = &c->members[i];
	if (!m) {
		if (c->nmembers == RMR_MAX_MEMBERS)
			return NULL;
		m = &c->members[c->nmembers];
		memset(m, 0, sizeof(*m));
		m->c = c;
		m->index = c->nmembers++;
		m->state = RMR_MEMBER_NEW;
		m->hello.kind = m->heartbeat.kind = m->goodbye.kind = SEND_CTRL;
		m->pull.kind = m->membership.kind = SEND_CTRL;
	}
	m->id = e->id;
	snprintf(m->addr, sizeof(m->addr), "%s", e->addr);
	if (m->state == RMR_MEMBER_REMOVED) {
		m->incarnation = 0;
		m->busy = m->maintenance = m->stale_al = false;
		m->membership_ver = 0;
		member_set_state(m, RMR_MEMBER_NEW, "a new member of the pool");
	}
	m->resolved = !c->opening;
	return m;
}

/* Take @m out of the pool's I/O for good (delete) or while detached. */
static void take_out(struct member *m, enum rmr_member_state to, const char *reason)
{
	bool was_normal = m->state == RMR_MEMBER_NORMAL;

	member_drop_conn(m);
	m->next_connect = 0;
	m->want_pull = m->pulling = m->reconciling = m->pushing = false;
	member_set_state(m, to, reason);
	if (was_normal)
		client_io_member_lost(m->c, m);
}

/* Where the membership does not say how to reach a member, the client knows: it dials it. */
static void fill_addresses(struct rmr_client *c)
{
	for (unsigned i = 0; i < c->membership.n; i++) {
		struct rmr_member_entry *e = &c->membership.m[i];
		const struct member *m = by_id(c, e->id);

		if (!rmr_addr_known(e->addr) && m)
			snprintf(e->addr, sizeof(e->addr), "%s", m->addr);
	}
}

/* Make @ms the client's membership: members join, leave, detach or attach again. */
static void adopt(struct rmr_client *c, const struct rmr_membership *ms)
{
	char why[64];

	snprintf(why, sizeof(why), "membership version %llu", (unsigned long long)ms->version);
	for (unsigned i = 0; i < ms->n; i++) {
		const struct rmr_member_entry *e = &ms->m[i];
		struct member *m = by_id(c, e->id);

		/* A member dialed by address that has not answered yet. */
		for (unsigned k = 0; !m && k < c->nmembers; k++)
			if (!c->members[k].id && c->members[k].state != RMR_MEMBER_REMOVED &&
			    !strcmp(c->members[k].addr, e->addr))
				m = &c->members[k];
		if (!m && !rmr_addr_known(e->addr))
			continue; /* the members' formatted list: the client dials its own */
		if (!m) {
			m = new_entry(c, e);
			if (!m) {
				log_err("pool=%s: no room for member %u (%s) of %s", c->name, e->id,
					e->addr, why);
				continue;
			}
			if (!e->detached)
				member_connect(m);
		}
		if (e->detached && m->state != RMR_MEMBER_DETACHED) {
			take_out(m, RMR_MEMBER_DETACHED, why);
		} else if (!e->detached && m->state == RMR_MEMBER_DETACHED) {
			member_set_state(m, RMR_MEMBER_FAILED, "attached again; reconnecting");
			snprintf(m->addr, sizeof(m->addr), "%s", e->addr);
			member_connect(m);
		} else if (ms->version && m->id && rmr_addr_known(e->addr) &&
			   strcmp(m->addr, e->addr)) {
			/* Version 0 is the formatted list: the address the client dials stays. */
			snprintf(m->addr, sizeof(m->addr), "%s", e->addr);
			member_fail(m, "address changed");
		}
	}
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		if (m->id && m->state != RMR_MEMBER_REMOVED && !rmr_membership_find(ms, m->id))
			take_out(m, RMR_MEMBER_REMOVED, why);
	}
	c->membership = *ms;
	fill_addresses(c);
	c->members_ids = rmr_membership_ids(ms);
	client_missed_recompute(c);
	log_notice("pool=%s: %s: members 0x%llx", c->name, why,
		   (unsigned long long)c->members_ids);
}

bool client_membership_hello(struct member *m, const struct rmr_membership *ms)
{
	struct rmr_client *c = m->c;
	const struct rmr_member_entry *e;
	char why[96];

	m->membership_ver = ms->version;
	if (!c->members_ids || ms->version > c->membership.version)
		adopt(c, ms);
	else
		fill_addresses(c); /* @m has its id now */
	if (!m->conn)
		return false; /* adopt() failed it (its address changed): it is dialed again */
	e = rmr_membership_find(&c->membership, m->id);
	if (e && !e->detached)
		return true;
	snprintf(why, sizeof(why), "%s the pool's membership (version %llu)",
		 e ? "detached in" : "not in", (unsigned long long)c->membership.version);
	log_warn("pool=%s member=%u addr=%s: refused: %s", c->name, m->id, m->addr, why);
	take_out(m, e ? RMR_MEMBER_DETACHED : RMR_MEMBER_REMOVED, why);
	member_fail(m, why); /* resolves it for an open that waits */
	return false;
}

static int send_membership(struct member *m, const struct rmr_membership *ms, uint32_t flags)
{
	struct rmr_client *c = m->c;
	size_t len = rmr_wire_encode_members(m->membership.body.members, ms);
	struct rmr_msg msg = {
		.type = RMR_MSG_MEMBERSHIP,
		.pool_uuid = c->uuid,
		/*
		 * A member that is not NORMAL must not learn the writer's map
		 * version before it holds the maps (its clears would pass for
		 * current): it marks a member added under its own version.
		 */
		.map_ver = m->state == RMR_MEMBER_NORMAL ? c->map_ver : m->map_ver,
		.op_flags = flags,
		.payload_len = (uint32_t)len,
	};

	m->membership.kind = SEND_CTRL;
	rmr_wire_encode(&m->membership.hdr, &msg);
	return member_send_ctrl(m, &m->membership, len);
}

bool client_membership_push(struct member *m)
{
	struct rmr_client *c = m->c;

	if (m->pushing)
		return true;
	if (m->membership_ver >= c->membership.version)
		return false;
	if (send_membership(m, &c->membership, 0) < 0) {
		member_fail(m, "cannot send the membership");
		return true;
	}
	m->pushing = true;
	m->pushed_ver = c->membership.version;
	m->mc_deadline = loop_now(c->loop) + c->opts.request_timeout_ms * NS_PER_MS;
	snprintf(m->reason, sizeof(m->reason), "missed a membership change; taking it");
	return true;
}

static void finish(struct rmr_client *c, int result, const char *why)
{
	struct mchange *mc = &c->mc;

	if (result < 0)
		log_warn("pool=%s: membership change for member %u failed: %s", c->name, mc->id,
			 why);
	pthread_mutex_lock(&c->state_lock);
	mc->result = result;
	mc->phase = MC_IDLE;
	pthread_cond_broadcast(&c->state_cond);
	pthread_mutex_unlock(&c->state_lock);
	if (!c->frozen)
		client_io_thaw(c);
	client_try_pulls(c);
}

/* The change is on the members: take it here too. */
static void committed(struct rmr_client *c)
{
	struct mchange *mc = &c->mc;
	struct member *m;

	if (mc->next.version > c->membership.version)
		adopt(c, &mc->next);
	m = by_id(c, mc->id);
	if (mc->add && m) {
		/* It holds nothing, or what it had before it was detached: it takes the maps. */
		client_note_missed(c, bit(mc->id));
		if (m->state == RMR_MEMBER_NEW && !m->conn)
			member_connect(m);
	}
	log_notice("pool=%s: member %u %s (membership version %llu, taken by %u members)", c->name,
		   mc->id, mc->add ? "added" : mc->detach ? "detached" : "removed",
		   (unsigned long long)mc->next.version, mc->applied);
	finish(c, 0, NULL);
	/* Members that answered their hello meanwhile, or were pushed the old one. */
	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *o = &c->members[i];

		if (o->hello_done && !o->mc_waiting && o->state != RMR_MEMBER_DETACHED &&
		    o->state != RMR_MEMBER_REMOVED)
			client_membership_push(o);
	}
}

/* Send the check or the commit to the members that take part; false if none could. */
static bool send_phase(struct rmr_client *c)
{
	struct mchange *mc = &c->mc;
	bool check = mc->phase == MC_CHECK;
	uint64_t deadline = loop_now(c->loop) + c->opts.request_timeout_ms * NS_PER_MS;
	bool sent = false;

	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		/* The check asks those that must hold every chunk; the commit, everyone up. */
		if (m->id == mc->id && !mc->add)
			continue;
		if (check ? m->state != RMR_MEMBER_NORMAL
			  : !m->hello_done || m->pushing || m->state == RMR_MEMBER_DETACHED ||
				    m->state == RMR_MEMBER_REMOVED)
			continue;
		if (send_membership(m, &mc->next, check ? RMR_MEMBERSHIP_CHECK : 0) < 0) {
			member_fail(m, "cannot send the membership");
			continue;
		}
		m->mc_waiting = true;
		m->mc_deadline = deadline;
		sent = true;
	}
	return sent;
}

/* Every member asked has answered (or failed): the next phase. */
static void phase_done(struct rmr_client *c)
{
	struct mchange *mc = &c->mc;

	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].mc_waiting)
			return;
	if (mc->phase == MC_CHECK) {
		if (mc->refused || !mc->confirmed) {
			finish(c, -EBUSY, "a remaining member does not hold every chunk yet");
			return;
		}
		mc->phase = MC_COMMIT;
		if (!send_phase(c))
			finish(c, -EIO, "no member is up to take it");
		return;
	}
	if (!mc->applied) {
		finish(c, -EIO, "no member took it");
		return;
	}
	committed(c);
}

void client_membership_on_rsp(struct member *m, const struct rmr_msg *msg)
{
	struct rmr_client *c = m->c;
	char why[96];

	if (msg->status == -ESTALE) {
		client_fence(c, "a member refused the membership: a newer writer holds the pool");
		return;
	}
	if (m->pushing) {
		m->pushing = false;
		if (msg->status < 0) {
			snprintf(why, sizeof(why), "membership refused: %s", strerror(-msg->status));
			member_fail(m, why);
			return;
		}
		m->membership_ver = m->pushed_ver;
		/* A change committed meanwhile: that one too, then admission. */
		if (!client_membership_push(m))
			member_admit(m);
		return;
	}
	if (!m->mc_waiting)
		return;
	m->mc_waiting = false;
	if (c->mc.phase == MC_CHECK) {
		if (msg->status < 0)
			c->mc.refused = true; /* -EBUSY: it misses chunks; anything else: unknown */
		else
			c->mc.confirmed++;
	} else if (msg->status < 0) {
		snprintf(why, sizeof(why), "membership change refused: %s", strerror(-msg->status));
		member_fail(m, why);
	} else {
		m->membership_ver = c->mc.next.version;
		c->mc.applied++;
	}
	phase_done(c);
}

void client_membership_member_lost(struct member *m)
{
	m->pushing = false;
	if (!m->mc_waiting)
		return;
	m->mc_waiting = false;
	/* A member that fails during the check may have been the only reference. */
	if (m->c->mc.phase == MC_CHECK)
		m->c->mc.refused = true;
	phase_done(m->c);
}

void client_membership_step(struct rmr_client *c, uint64_t now)
{
	struct mchange *mc = &c->mc;

	for (unsigned i = 0; i < c->nmembers; i++) {
		struct member *m = &c->members[i];

		if ((m->mc_waiting || m->pushing) && now > m->mc_deadline)
			member_fail(m, "membership change timed out");
	}
	if (mc->phase != MC_DRAIN || client_io_writes_in_flight(c))
		return;
	/* A member taking maps must not see the membership change under it. */
	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].pulling || c->members[i].reconciling)
			return;
	/* No write in flight: none can miss a member that the change adds or removes. */
	mc->phase = mc->add ? MC_COMMIT : MC_CHECK;
	if (!send_phase(c))
		finish(c, mc->add ? -EIO : -EBUSY, "no member is up to take it");
}

void client_membership_abort(struct rmr_client *c)
{
	if (c->mc.phase != MC_IDLE)
		finish(c, -ESHUTDOWN, "the client closes");
}

/* --- public API ---------------------------------------------------------- */

struct mc_call {
	struct rmr_client *c;
	uint16_t id;
	const char *addr;
	bool add, detach;
	int ret;
};

/* On the loop: check the request and build the next membership. */
static void mc_start(void *arg)
{
	struct mc_call *call = arg;
	struct rmr_client *c = call->c;
	struct mchange *mc = &c->mc;
	struct rmr_membership next = c->membership;
	struct rmr_member_entry *e = NULL;
	unsigned remaining = 0, attached = 0;

	call->ret = 0;
	if (mc->phase != MC_IDLE || c->fenced || c->closing) {
		call->ret = mc->phase != MC_IDLE ? -EBUSY : -ESHUTDOWN;
		return;
	}
	for (unsigned i = 0; i < next.n; i++)
		if (next.m[i].id == call->id)
			e = &next.m[i];
	if (call->add) {
		if (e && !e->detached) {
			call->ret = -EEXIST;
			return;
		}
		if (!e && next.n == RMR_MAX_MEMBERS) {
			call->ret = -ENOSPC;
			return;
		}
		if (!e && !call->addr) {
			call->ret = -EINVAL; /* a new member needs an address */
			return;
		}
		/* Two members at one address would be one store twice. */
		for (unsigned i = 0; call->addr && i < next.n; i++)
			if (next.m[i].id != call->id && !strcmp(next.m[i].addr, call->addr)) {
				call->ret = -EADDRINUSE;
				return;
			}
		if (!e) {
			e = &next.m[next.n++];
			memset(e, 0, sizeof(*e));
			e->id = call->id;
		}
		if (call->addr)
			snprintf(e->addr, sizeof(e->addr), "%s", call->addr);
		e->detached = false;
	} else {
		if (!e) {
			call->ret = -ENOENT;
			return;
		}
		if (call->detach && e->detached) {
			call->ret = -EALREADY;
			return;
		}
		/* Someone must hold current data, and enough members must remain. */
		for (unsigned i = 0; i < c->nmembers; i++)
			if (c->members[i].state == RMR_MEMBER_NORMAL && c->members[i].id != call->id)
				remaining++;
		if (call->detach)
			e->detached = true;
		else
			*e = next.m[--next.n];
		for (unsigned i = 0; i < next.n; i++)
			attached += !next.m[i].detached;
		if (!remaining || attached < c->opts.min_legs) {
			call->ret = -EBUSY;
			return;
		}
	}
	/* A version once proposed is never proposed again with other contents. */
	next.version = RMR_MAX(c->membership.version, c->mc_version_used) + 1;
	c->mc_version_used = next.version;
	/* The change starts a map version, as a member leaving NORMAL does: members
	 * added are marked under it, so their maps and clears carry at least it. */
	c->map_ver++;
	memset(mc, 0, sizeof(*mc));
	mc->id = call->id;
	mc->add = call->add;
	mc->detach = call->detach;
	mc->next = next;
	mc->phase = MC_DRAIN;
	log_notice("pool=%s: %s member %u%s%s: holding writes until none is in flight", c->name,
		   call->add ? "adding" : call->detach ? "detaching" : "removing", call->id,
		   call->addr ? " at " : "", call->addr ? call->addr : "");
	client_membership_step(c, loop_now(c->loop));
}

static int membership_change(struct mc_call *call)
{
	struct rmr_client *c = call->c;
	int ret;

	/* One call at a time: a second caller waits for the first one's end. */
	pthread_mutex_lock(&c->mc_call_lock);
	loop_call(c->loop, mc_start, call);
	if (call->ret < 0) {
		pthread_mutex_unlock(&c->mc_call_lock);
		return call->ret;
	}
	pthread_mutex_lock(&c->state_lock);
	while (c->mc.phase != MC_IDLE) {
		if (loop_sim_active())
			loop_sim_wait(&c->state_lock);
		else
			pthread_cond_wait(&c->state_cond, &c->state_lock);
	}
	ret = c->mc.result;
	pthread_mutex_unlock(&c->state_lock);
	pthread_mutex_unlock(&c->mc_call_lock);
	return ret;
}

RMR_EXPORT int rmr_client_add_member(struct rmr_client *c, uint16_t member_id, const char *addr)
{
	struct mc_call call = { .c = c, .id = member_id, .addr = addr, .add = true };

	if (!c || !member_id || member_id > RMR_MAX_MEMBER_ID ||
	    (addr && (!rmr_addr_known(addr) || strlen(addr) > RMR_ADDR_MAX ||
		      strpbrk(addr, " \t\n"))))
		return -EINVAL;
	return membership_change(&call);
}

RMR_EXPORT int rmr_client_remove_member(struct rmr_client *c, uint16_t member_id, bool detach)
{
	struct mc_call call = { .c = c, .id = member_id, .detach = detach };

	if (!c || !member_id || member_id > RMR_MAX_MEMBER_ID)
		return -EINVAL;
	return membership_change(&call);
}
