/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A pool's membership on a member; see membership.h. */
#include "membership.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "log.h"
#include "peer.h"
#include "resync.h"
#include "server_internal.h"

void membership_from_params(struct srv_pool *p, const struct rmr_pool_params *params)
{
	struct rmr_membership *ms = &p->membership;

	memset(ms, 0, sizeof(*ms));
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		struct rmr_member_entry *e;

		if (!(params->members_mask & (1ull << id)) || ms->n == RMR_MAX_MEMBERS)
			continue;
		e = &ms->m[ms->n++];
		e->id = (uint16_t)id;
		/* Its own listen address may be a wildcard: the client fills in the one it dials. */
		snprintf(e->addr, sizeof(e->addr), "%s", RMR_ADDR_UNKNOWN);
		for (unsigned i = 0; i < params->npeers; i++)
			if (params->peers[i].member_id == id)
				snprintf(e->addr, sizeof(e->addr), "%s", params->peers[i].addr);
	}
}

const char *membership_invalid(const struct srv_pool *p, const struct rmr_membership *ms)
{
	const struct rmr_member_entry *self = rmr_membership_find(ms, p->params.member_id);

	if (!self)
		return "this member is not in it";
	if (self->detached)
		return "it detaches this member";
	if (ms->n == 0 || ms->n > RMR_MAX_MEMBERS)
		return "no members, or too many";
	return NULL;
}

int membership_sync_peers(struct srv_pool *p)
{
	const struct rmr_membership *ms = &p->membership;

	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		const struct rmr_member_entry *e = rmr_membership_find(ms, (uint16_t)id);
		bool want = e && !e->detached && id != p->params.member_id && rmr_addr_known(e->addr);

		if (p->peers[id] && (!want || strcmp(peer_addr(p->peers[id]), e->addr))) {
			peer_destroy(p->peers[id]);
			p->peers[id] = NULL;
		}
		if (want && !p->peers[id]) {
			struct rmr_peer cfg = { .member_id = (uint16_t)id, .addr = e->addr };
			int ret = peer_create(p, &cfg, &p->peers[id]);

			if (ret < 0)
				return ret;
		}
	}
	return 0;
}

/* Member @id left the pool: forget what it missed and close its sessions. */
static void forget(struct srv_pool *p, unsigned id)
{
	struct srv_session *sess, *next;

	if (p->maps[id]) {
		if (dirty_map_count(p->maps[id]))
			server_event_dirty(p, (uint16_t)id, false);
		dirty_map_destroy(p->maps[id]);
		free(p->maps[id]);
		p->maps[id] = NULL;
	}
	p->mark_ver[id] = p->full_clear_ver[id] = 0;
	for (sess = p->srv->sessions; sess; sess = next) {
		next = sess->next;
		if (sess->pool == p && sess->role == RMR_ROLE_PEER && sess->peer_id == id)
			server_session_close(sess, "the member left the pool");
	}
}

/* The same members, flags and addresses (in any order). */
static bool same_members(const struct rmr_membership *a, const struct rmr_membership *b)
{
	if (a->n != b->n)
		return false;
	for (unsigned i = 0; i < a->n; i++) {
		const struct rmr_member_entry *e = rmr_membership_find(b, a->m[i].id);

		if (!e || e->detached != a->m[i].detached || strcmp(e->addr, a->m[i].addr))
			return false;
	}
	return true;
}

int membership_apply(struct srv_pool *p, const struct rmr_membership *ms, uint64_t map_ver,
		     bool check)
{
	uint64_t before = rmr_membership_ids(&p->membership), after = rmr_membership_ids(ms);
	uint64_t added = after & ~before, removed = before & ~after;
	struct rmr_membership old = p->membership;
	uint64_t old_ver = p->map_ver, old_missed = p->missed;
	const char *bad = membership_invalid(p, ms);
	int ret = 0;

	if (bad) {
		log_err("pool=%s member=%u: refusing membership version %llu: %s", p->name,
			p->params.member_id, (unsigned long long)ms->version, bad);
		return -EINVAL;
	}
	if (check)
		return !p->maps_current || dirty_map_count(pool_own_map(p)) || p->syncing.count
			       ? -EBUSY : 0;
	if (ms->version < p->membership.version)
		return -ERANGE;
	if (ms->version == p->membership.version)
		return same_members(ms, &p->membership) ? 0 : -EEXIST;

	/* The bitmaps of new members first: every chunk dirty, on disk. */
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID && ret == 0; id++) {
		if (!(added & (1ull << id)))
			continue;
		p->maps[id] = calloc(1, sizeof(*p->maps[id]));
		if (!p->maps[id] || dirty_map_init(p->maps[id], p->nchunks) < 0)
			ret = -ENOMEM;
		else
			ret = pool_mark_chunks(p, id, 0, p->nchunks);
	}
	/*
	 * Then the membership itself, under the writer's new map version (the
	 * same on every member, so that a member added takes maps at least
	 * that new from any of them and its clears are accepted): the commit.
	 */
	if (ret == 0) {
		p->membership = *ms;
		p->params.members_mask = after;
		p->map_ver = RMR_MAX(p->map_ver, map_ver);
		p->missed = (p->missed | added) & ~removed;
		ret = pool_meta_save(p);
	}
	if (ret < 0) {
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
			if (!(added & (1ull << id)) || !p->maps[id])
				continue;
			dirty_map_destroy(p->maps[id]);
			free(p->maps[id]);
			p->maps[id] = NULL;
		}
		p->membership = old;
		p->params.members_mask = before;
		p->map_ver = old_ver;
		p->missed = old_missed;
		return ret;
	}
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		if (added & (1ull << id))
			p->mark_ver[id] = RMR_MAX(p->mark_ver[id], p->map_ver);
		if (removed & (1ull << id))
			forget(p, id);
	}
	log_notice("pool=%s member=%u: membership version %llu: members 0x%llx (added 0x%llx, removed 0x%llx)",
		   p->name, p->params.member_id, (unsigned long long)ms->version,
		   (unsigned long long)after, (unsigned long long)added,
		   (unsigned long long)removed);
	/* Committed: a peer session that cannot be set up now is not a refusal. */
	if (membership_sync_peers(p) < 0)
		log_warn("pool=%s member=%u: cannot open every member-to-member session yet",
			 p->name, p->params.member_id);
	resync_kick(p);
	return 0;
}
