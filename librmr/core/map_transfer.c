/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Map transfer: a returning member takes the dirty maps from a healthy peer
 * (chosen by the client, the one with the highest map version) over the
 * member-to-member session, page by page (MAP_GET), while the client holds
 * writes back. Its own map becomes the union of what it had on record and
 * what the peer knows it missed; the other members' maps become the peer's
 * view. Everything is saved before the client hears that the pull is done.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "log.h"
#include "peer.h"
#include "resync.h"
#include "store_probe.h"
#include "server_internal.h"

/* How long a pull waits for the session to its source to come up. */
#define PULL_WAIT_NS (5000ull * 1000000ull)
/*
 * How long a pull waits for the store check. The client holds the pool's
 * writes back while a pull runs: past this, the pull is refused (-EAGAIN),
 * the client lets the writes go and asks again later. The check goes on
 * meanwhile; pulls that come while it runs are refused at once, and the
 * first one after it takes its result if it ended at most
 * PULL_PROBE_FRESH_NS before (a check that always outlasts the wait would
 * keep the member out for good), else starts a new one. A pull of every
 * member's maps (RMR_MAP_PULL_ALL: no member is NORMAL, nothing is held
 * back) waits for the check as long as it takes.
 */
#define PULL_PROBE_WAIT_NS (1000ull * 1000000ull)
#define PULL_PROBE_FRESH_NS (30000ull * 1000000ull)

static void gather_free(struct srv_pool *p);
static bool gather_outdated(const struct srv_pool *p, unsigned id, uint64_t mark_ver);

/* The range flags an entry travels with: a record (of an older boot), or a miss. */
static uint16_t range_kind(uint8_t entry)
{
	if (!(entry & RECORD_BIT))
		return 0;
	return RMR_MAP_RANGE_RECORD | ((entry & RECORD_OLD_BIT) ? RMR_MAP_RANGE_RECORD_OLD : 0);
}

/* A range of records (@r's flags say of which boot) into @m. */
static int take_records(struct dirty_map *m, const struct rmr_map_range *r)
{
	int ret = dirty_map_record(m, r->first, r->count);

	if (ret == 0 && (r->flags & RMR_MAP_RANGE_RECORD_OLD))
		ret = dirty_map_age(m, r->first, r->count);
	return ret;
}

uint32_t map_transfer_serve(const struct srv_pool *p, void *buf, uint32_t cap, uint16_t *id,
			    uint64_t *chunk, bool *last)
{
	struct rmr_wire_map_range *w = buf;
	uint32_t n = 0, max = cap / sizeof(*w);

	*last = false;
	for (; *id <= RMR_MAX_MEMBER_ID; (*id)++, *chunk = 0) {
		const struct dirty_map *m = p->maps[*id];

		if (!m)
			continue;
		/*
		 * Each member's map starts with the version of its newest mark;
		 * our own also with the version up to which it is complete; a
		 * map with records with the boot they were made in.
		 */
		if (*chunk == 0) {
			struct rmr_map_range v = { .member_id = *id, .flags = RMR_MAP_RANGE_MARK_VER,
						   .first = p->mark_ver[*id] };
			bool self = *id == p->params.member_id;
			bool boot = dirty_map_records(m) && p->record_boot[*id];

			if (n + 1 + self + boot > max)
				return n * sizeof(*w);
			rmr_wire_encode_map_range(&w[n++], &v);
			if (self) {
				v.flags = RMR_MAP_RANGE_PULLED_VER;
				v.first = p->pull_done_ver;
				rmr_wire_encode_map_range(&w[n++], &v);
			}
			if (boot) {
				v.flags = RMR_MAP_RANGE_RECORD_BOOT;
				v.first = p->record_boot[*id];
				rmr_wire_encode_map_range(&w[n++], &v);
			}
		}
		for (uint64_t c = dirty_map_next(m, *chunk, DIRTY_BIT | RECORD_BIT); c != UINT64_MAX;
		     c = dirty_map_next(m, c, DIRTY_BIT | RECORD_BIT)) {
			/* A run of misses, or of records (our own may be dirty by a record). */
			uint16_t kind = range_kind(dirty_map_get(m, c));
			struct rmr_map_range r = { .member_id = *id, .flags = kind, .first = c };

			if (n == max) {
				*chunk = c;
				return n * sizeof(*w);
			}
			while (c < m->nchunks && r.count < UINT32_MAX &&
			       (dirty_map_get(m, c) & (DIRTY_BIT | RECORD_BIT)) &&
			       range_kind(dirty_map_get(m, c)) == kind) {
				c++;
				r.count++;
			}
			rmr_wire_encode_map_range(&w[n++], &r);
			if (c >= m->nchunks)
				break;
		}
	}
	*last = true;
	return n * sizeof(*w);
}

static void pull_free_maps(struct srv_pool *p)
{
	for (unsigned id = 0; id <= RMR_MAX_MEMBER_ID; id++) {
		if (p->pull_maps[id])
			dirty_map_destroy(p->pull_maps[id]);
		free(p->pull_maps[id]);
		p->pull_maps[id] = NULL;
	}
}

static void pull_answer(struct srv_pool *p, int status)
{
	struct srv_session *sess = p->pull_sess;

	p->pull_running = false;
	p->pull_probing = false;
	p->pull_sess = NULL;
	pull_free_maps(p);
	gather_free(p);
	server_event_map_update(p, p->pull_source, status);
	/* (A refusal for the store check says so itself.) */
	if (status < 0 && status != -EAGAIN)
		log_warn("pool=%s member=%u: taking the maps from member %u failed: %s", p->name,
			 p->params.member_id, p->pull_source, strerror(-status));
	if (sess)
		server_ctrl_send(sess, &sess->pull_rsp, RMR_MSG_MAP_PULL_RSP, status, 0);
}

/* Add @m, a map of member @id whose records were made in @boot, to the pulled one. */
static int pull_add(struct srv_pool *p, unsigned id, const struct dirty_map *m, uint64_t boot)
{
	return pool_records_add(p->pull_maps[id], &p->pull_record_boot[id], m, boot,
				pool_member_boot(p, id), false);
}

/* Every page arrived: make the pulled maps ours, durably. */
static int pull_apply(struct srv_pool *p)
{
	unsigned self = p->params.member_id;
	struct dirty_map *own = pool_own_map(p);
	uint64_t before = dirty_map_count(own);
	int ret;

	/* Before anything changes: a refusal leaves the member as it was. */
	if (!p->gather && p->pull_maps[p->pull_source] &&
	    pool_al_absorb_lacked(p, p->pull_writer, p->pull_flags & RMR_MAP_PULL_ABSORB,
				  p->pull_maps[p->pull_source])) {
		log_notice("pool=%s member=%u: member %u still copies in chunks of our activity log: "
			   "taking its maps later", p->name, self, p->pull_source);
		return -EAGAIN;
	}
	/*
	 * What others recorded we may have lost, we copy in like what we
	 * missed; unless they were made in the boot we run in (pool_holds):
	 * then we keep our copy (resync.c) and they are cleared everywhere.
	 */
	ret = pool_records_add(own, &p->record_boot[self], p->pull_maps[self],
			       p->pull_record_boot[self], p->params.boot_id, true);
	if (ret < 0)
		return ret;
	/* Writes of a writer that crashed may have reached only this member. */
	ret = pool_al_absorb(p, p->pull_writer, p->pull_flags & RMR_MAP_PULL_ABSORB);
	if (ret < 0)
		return ret;
	if (before == 0 && dirty_map_count(own))
		server_event_dirty(p, (uint16_t)self, true);
	resync_drop_redirtied(p);
	p->resync_epoch++;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		struct dirty_map *old = p->maps[id];

		/* A member added while the pull ran has no pulled map: it keeps its own. */
		if (id == self || !old || !p->pull_maps[id])
			continue;
		/*
		 * The source may not have heard yet what this member told us:
		 * that it held every chunk, after all the marks sent for it.
		 */
		if (!p->gather && p->full_clear_ver[id] &&
		    p->pull_mark_ver[id] <= p->full_clear_ver[id])
			dirty_map_clear_all(p->pull_maps[id]);
		/* Gathered from every member: our record counts as one of theirs. */
		if (p->gather && !gather_outdated(p, id, p->mark_ver[id])) {
			ret = pull_add(p, id, old, p->record_boot[id]);
			if (ret < 0)
				return ret;
		}
		p->maps[id] = p->pull_maps[id];
		p->pull_maps[id] = old;
		p->record_boot[id] = p->pull_record_boot[id];
		if (!dirty_map_count(old) != !dirty_map_count(p->maps[id]))
			server_event_dirty(p, (uint16_t)id, dirty_map_count(p->maps[id]) != 0);
	}
	/*
	 * The client's version at the MAP_PULL: every write that missed this
	 * member before it is in the pulled maps (writes were frozen). A newer
	 * version of the source could let a stale MAP_CLEAR pass, except the
	 * one of its newest mark for this member, pulled with the rest: a
	 * settle on the source while the pull waited makes one (seed 4555).
	 * Below it, our MAP_CLEARs would be refused by every peer for good.
	 */
	p->map_ver = RMR_MAX(p->map_ver, RMR_MAX(p->pull_map_ver, p->pull_mark_ver[self]));
	/*
	 * The pulled marks of a member are no newer than the version the source
	 * sent for them: that member may clear them from that version on. Our
	 * own, newer version would refuse its MAP_CLEARs forever when versions
	 * ran ahead without marks for it (a failed pull, marks for another).
	 */
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		p->mark_ver[id] = RMR_MAX(p->mark_ver[id], p->pull_mark_ver[id]);
	if (before == 0)
		p->resync_done = 0; /* a new episode of resync starts */
	p->pull_done_ver = p->pull_map_ver;
	ret = pool_save_all_maps(p);
	if (ret == 0 && pool_al_stale(p, p->pull_writer))
		ret = pool_al_clear(p); /* its ranges are dirty bits on disk now */
	if (ret < 0)
		return ret;
	p->maps_current = true;
	p->uncertain_peers = p->pull_uncertain;
	p->map_pulls++;
	if (p->pull_flags & RMR_MAP_PULL_ALL)
		log_notice("pool=%s member=%u: took the dirty maps of every member (map version %llu): "
			   "%llu chunks to copy in",
			   p->name, self, (unsigned long long)p->map_ver,
			   (unsigned long long)dirty_map_count(own));
	else
		log_notice("pool=%s member=%u: took the dirty maps from member %u (map version %llu): "
			   "%llu chunks to copy in",
			   p->name, self, p->pull_source, (unsigned long long)p->map_ver,
			   (unsigned long long)dirty_map_count(own));
	return 0;
}

/* The next member to take the maps from, of those left. */
static void next_source(struct srv_pool *p)
{
	unsigned id = 1;

	while (!(p->pull_left & (1ull << id)))
		id++;
	p->pull_left &= ~(1ull << id);
	p->pull_source = (uint16_t)id;
	p->pull_started = false;
	/* A member that just started may not have its session to the source yet. */
	p->pull_wait_until = loop_now(p->srv->loop) + PULL_WAIT_NS;
}

static void get_done(void *ctx, struct peer *pe, const struct rmr_msg *rsp, int status);

/*
 * Taking the maps of every member (RMR_MAP_PULL_ALL), each source's record
 * of each member is kept apart until all are in: a record can be older
 * than what is known of that member, and added up with the rest its marks
 * would name chunks nobody lacks, maybe dirty for every member. A record
 * of member X is left out if its newest mark is no newer than the version
 * up to which X's own map is complete (X's last pull, or X becoming the
 * source of writes of unknown outcome: seeds 3247, 6380, 5661), as X says
 * itself, or we say for ourselves; or no newer than X's last full clear
 * to us. X's own map always counts.
 */
struct gather {
	struct dirty_map *maps[RMR_MAX_MEMBER_ID + 1][RMR_MAX_MEMBER_ID + 1]; /* [source][member] */
	uint64_t mark_ver[RMR_MAX_MEMBER_ID + 1][RMR_MAX_MEMBER_ID + 1];
	uint64_t pulled_ver[RMR_MAX_MEMBER_ID + 1]; /* as each member said of itself */
	uint64_t record_boot[RMR_MAX_MEMBER_ID + 1][RMR_MAX_MEMBER_ID + 1];
};

static void gather_free(struct srv_pool *p)
{
	struct gather *g = p->gather;

	if (!g)
		return;
	for (unsigned s = 0; s <= RMR_MAX_MEMBER_ID; s++)
		for (unsigned id = 0; id <= RMR_MAX_MEMBER_ID; id++)
			if (g->maps[s][id]) {
				dirty_map_destroy(g->maps[s][id]);
				free(g->maps[s][id]);
			}
	free(g);
	p->gather = NULL;
}

/* One entry of source @src's MAP_GET_RSP. */
static int gather_take(struct srv_pool *p, unsigned src, const struct rmr_map_range *r)
{
	struct gather *g = p->gather;
	struct dirty_map **m = &g->maps[src][r->member_id];

	if (r->flags & RMR_MAP_RANGE_MARK_VER) {
		g->mark_ver[src][r->member_id] = r->first;
		p->pull_mark_ver[r->member_id] = RMR_MAX(p->pull_mark_ver[r->member_id], r->first);
		return 0;
	}
	if (r->flags & RMR_MAP_RANGE_PULLED_VER) {
		if (r->member_id == src)
			g->pulled_ver[src] = r->first;
		return 0;
	}
	if (r->flags & RMR_MAP_RANGE_RECORD_BOOT) {
		g->record_boot[src][r->member_id] = r->first;
		return 0;
	}
	if (!*m) {
		*m = calloc(1, sizeof(**m));
		if (!*m || dirty_map_init(*m, p->nchunks) < 0) {
			free(*m);
			*m = NULL;
			return -ENOMEM;
		}
	}
	if (r->flags & RMR_MAP_RANGE_RECORD)
		return take_records(*m, r);
	return dirty_map_mark(*m, r->first, r->count);
}

/* Is a record of member @id whose newest mark is @mark_ver older than what is known? */
static bool gather_outdated(const struct srv_pool *p, unsigned id, uint64_t mark_ver)
{
	const struct gather *g = p->gather;
	uint64_t complete = id == p->params.member_id ? p->pull_done_ver : g->pulled_ver[id];

	return (complete && mark_ver <= complete) ||
	       (p->full_clear_ver[id] && mark_ver <= p->full_clear_ver[id]);
}

/* Every source answered: add up the records that count into pull_maps. */
static int gather_sum(struct srv_pool *p)
{
	struct gather *g = p->gather;

	for (unsigned src = 1; src <= RMR_MAX_MEMBER_ID; src++)
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
			int ret;

			if (!g->maps[src][id] || !p->pull_maps[id] ||
			    (src != id && gather_outdated(p, id, g->mark_ver[src][id])))
				continue;
			ret = pull_add(p, id, g->maps[src][id], g->record_boot[src][id]);
			if (ret < 0)
				return ret;
		}
	return 0;
}

static int get_next(struct srv_pool *p, uint16_t id, uint64_t chunk)
{
	struct peer *pe = p->peers[p->pull_source];

	return peer_send(pe, RMR_MSG_MAP_GET, id, chunk, 0, get_done, p);
}

static void get_done(void *ctx, struct peer *pe, const struct rmr_msg *rsp, int status)
{
	struct srv_pool *p = ctx;
	size_t n;
	char why[128];

	if (status == 0 && !p->removing) {
		n = rsp->payload_len / sizeof(struct rmr_wire_map_range);
		peer_count_map_bytes(pe, rsp->payload_len);
		for (size_t i = 0; i < n && status == 0; i++) {
			struct rmr_map_range r;

			if (rmr_wire_decode_map_range(rsp, i, &r, why, sizeof(why)) < 0 ||
			    !p->pull_maps[r.member_id] ||
			    (!(r.flags & RMR_MAP_RANGE_VALUES) &&
			     (r.first >= p->nchunks || r.count > p->nchunks - r.first))) {
				log_err("pool=%s member=%u: bad map range from member %u", p->name,
					p->params.member_id, peer_id(pe));
				status = -EPROTO;
				break;
			}
			if (p->gather)
				status = gather_take(p, peer_id(pe), &r);
			else if (r.flags & RMR_MAP_RANGE_MARK_VER)
				p->pull_mark_ver[r.member_id] =
					RMR_MAX(p->pull_mark_ver[r.member_id], r.first);
			else if (r.flags & RMR_MAP_RANGE_RECORD_BOOT)
				p->pull_record_boot[r.member_id] = r.first;
			else if (r.flags & RMR_MAP_RANGE_RECORD)
				status = take_records(p->pull_maps[r.member_id], &r);
			else if (!r.flags)
				status = dirty_map_mark(p->pull_maps[r.member_id], r.first,
							r.count);
		}
	}
	if (status == 0 && (p->removing || !p->pull_sess))
		status = -ECANCELED; /* the client gave up: writes may have missed us since */
	if (status == 0 && !(rsp->op_flags & RMR_MAP_GET_LAST)) {
		status = get_next(p, rsp->op, rsp->addr);
		if (status == 0)
			return;
	}
	/* Taking them from every member: the pages of the next add up with these. */
	if (status == 0 && p->pull_left) {
		next_source(p);
		map_transfer_tick(p, loop_now(p->srv->loop));
		return;
	}
	if (status == 0 && p->gather)
		status = gather_sum(p);
	if (status == 0)
		status = pull_apply(p);
	pull_answer(p, status);
	if (status == 0)
		resync_kick(p);
}

void map_transfer_pull(struct srv_pool *p, struct srv_session *sess, uint16_t source,
		       uint64_t map_ver, uint32_t flags, uint64_t uncertain)
{
	uint64_t from = 1ull << source;
	int ret = 0;

	if (p->pull_running) {
		server_ctrl_send(sess, &sess->pull_rsp, RMR_MSG_MAP_PULL_RSP, -EBUSY, 0);
		return;
	}
	if (flags & RMR_MAP_PULL_ALL) {
		from = 0;
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
			if (p->peers[id])
				from |= 1ull << id;
	}
	from &= p->params.members_mask & ~(1ull << p->params.member_id);
	if (!from || (!(flags & RMR_MAP_PULL_ALL) && !p->peers[source]))
		ret = -EINVAL;
	else if (!(flags & RMR_MAP_PULL_ALL) && store_probe_running(p))
		ret = -EAGAIN;
	else
		ret = store_probe_recent(p, p->pull_refused_probe, loop_now(p->srv->loop),
					 PULL_PROBE_FRESH_NS);
	/* Taken, told or too old: a later pull starts afresh. */
	if (ret != -EAGAIN)
		p->pull_refused_probe = 0;
	if (ret == -ENOENT)
		ret = store_probe_begin(p, &p->pull_probe);
	else if (ret == 0)
		p->pull_probe = p->probe_ended; /* passed: nothing to wait for */
	else if (ret == -EAGAIN) {
		p->pull_refused_probe = p->probe_begun;
		log_info("pool=%s member=%u: store check still running: not taking the maps yet",
			 p->name, p->params.member_id);
	}
	for (unsigned id = 1; ret == 0 && id <= RMR_MAX_MEMBER_ID; id++) {
		if (!p->maps[id])
			continue;
		p->pull_maps[id] = calloc(1, sizeof(*p->pull_maps[id]));
		if (!p->pull_maps[id] || dirty_map_init(p->pull_maps[id], p->nchunks) < 0)
			ret = -ENOMEM;
	}
	/* The client says this member missed writes: its own map is incomplete. */
	p->maps_current = false;
	p->resync_epoch++;
	p->pull_sess = sess;
	p->pull_left = from;
	if (from)
		next_source(p);
	p->pull_map_ver = map_ver;
	p->pull_writer = sess->incarnation;
	p->pull_flags = flags;
	if ((flags & RMR_MAP_PULL_ALL) && ret == 0) {
		p->gather = calloc(1, sizeof(*p->gather));
		if (!p->gather)
			ret = -ENOMEM;
	}
	p->pull_uncertain = uncertain & ~(1ull << p->params.member_id);
	memset(p->pull_mark_ver, 0, sizeof(p->pull_mark_ver));
	memset(p->pull_record_boot, 0, sizeof(p->pull_record_boot));
	p->pull_running = true;
	p->pull_probing = ret == 0;
	p->pull_probe_until = loop_now(p->srv->loop) + PULL_PROBE_WAIT_NS;
	if (ret < 0)
		pull_answer(p, ret);
	else
		map_transfer_tick(p, loop_now(p->srv->loop));
}

void map_transfer_tick(struct srv_pool *p, uint64_t now)
{
	int ret;

	if (!p->pull_running || p->pull_started)
		return;
	if (p->pull_probing) {
		ret = store_probe_result(p, p->pull_probe);
		if (ret == -EINPROGRESS && !(p->pull_flags & RMR_MAP_PULL_ALL) &&
		    now > p->pull_probe_until) {
			p->pull_refused_probe = p->pull_probe;
			log_notice("pool=%s member=%u: store check still running after %llu ms: "
				   "not taking the maps yet", p->name, p->params.member_id,
				   PULL_PROBE_WAIT_NS / 1000000ull);
			pull_answer(p, -EAGAIN);
			return;
		}
		if (ret == -EINPROGRESS)
			return;
		p->pull_probing = false;
		if (ret < 0) {
			pull_answer(p, ret);
			return;
		}
		/* The wait for the source's session starts now. */
		p->pull_wait_until = now + PULL_WAIT_NS;
	}
	if (!peer_is_up(p->peers[p->pull_source])) {
		if (now > p->pull_wait_until)
			pull_answer(p, -ENOTCONN);
		return;
	}
	p->pull_started = true;
	log_info("pool=%s member=%u: taking the dirty maps from member %u", p->name,
		 p->params.member_id, p->pull_source);
	ret = get_next(p, 1, 0);
	if (ret < 0)
		pull_answer(p, ret);
}

void map_transfer_forget(struct srv_pool *p, struct srv_session *sess)
{
	if (p && p->pull_sess == sess)
		p->pull_sess = NULL;
}

void map_transfer_free(struct srv_pool *p)
{
	gather_free(p);
}
