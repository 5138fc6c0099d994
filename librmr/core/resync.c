/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Copying the chunks this member missed from its peers; see resync.h. */
#include "resync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "log.h"
#include "peer.h"
#include "server_internal.h"

#define NS_PER_S 1000000000ull
#define RATE_WINDOW_NS (2 * NS_PER_S)

/* One chunk being copied in, piece by piece, from one peer at a time. */
struct copy {
	struct srv_pool *p;
	uint64_t chunk;
	uint64_t addr, end;          /* next byte to copy, end of the chunk */
	uint64_t tried;              /* peer ids that could not provide it */
	struct peer *pe;             /* the peer it copies from now */
	bool last_resort;            /* ... which holds it unless it lost it (a record) */
	uint64_t epoch;              /* p->resync_epoch when it started */
	bool background;
	struct copy *next;           /* copy_queue */
};

/* After a chunk no peer could give, the background walk waits this long. */
#define RESYNC_RETRY_NS (500ull * 1000000ull)

static void pump(struct srv_pool *p);
static void copy_send(struct copy *cp);

static bool own_dirty(const struct srv_pool *p, uint64_t chunk)
{
	return dirty_map_get(pool_own_map(p), chunk) & DIRTY_BIT;
}

static uint8_t entry_of(const struct srv_pool *p, unsigned id, uint64_t chunk)
{
	return p->maps[id] ? dirty_map_get(p->maps[id], chunk) : 0;
}

static bool all_up(const struct srv_pool *p)
{
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if ((p->params.members_mask & (1ull << id)) && id != p->params.member_id &&
		    !peer_is_up(p->peers[id]))
			return false;
	return true;
}

/* A peer up that holds @chunk for sure, tried or not (it may only be busy with it). */
static bool sure_holder_up(const struct srv_pool *p, uint64_t chunk)
{
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if (id != p->params.member_id && peer_is_up(p->peers[id]) &&
		    !(p->uncertain_peers & (1ull << id)) && pool_holds(p, id, chunk))
			return true;
	return false;
}

/*
 * No member holds @chunk for sure: the one whose copy the pool takes, of
 * those that hold it unless their host lost power since (a record; our own
 * entry may be one too, if we may have lost it ourselves). Only with every
 * member up: one that holds it for sure may be among those away. The lowest
 * id, so that two such members do not copy each other's at once; one that
 * may have lost it itself takes only a lower one's.
 */
static struct peer *last_resort_peer(struct srv_pool *p, uint64_t chunk, uint64_t tried)
{
	unsigned self = p->params.member_id;
	bool own_record = entry_of(p, self, chunk) & RECORD_BIT;

	if (!all_up(p) || sure_holder_up(p, chunk))
		return NULL;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID && (!own_record || id < self); id++) {
		if (id == self || !peer_is_up(p->peers[id]) || (tried & (1ull << id)) ||
		    (p->uncertain_peers & (1ull << id)))
			continue;
		if ((entry_of(p, id, chunk) & (DIRTY_BIT | RECORD_BIT)) == RECORD_BIT)
			return p->peers[id];
	}
	return NULL;
}

/*
 * No peer gives @chunk, for sure or as a last resort, and we may have lost
 * it only to a power loss ourselves: of the last resorts we are the one,
 * and our copy becomes the pool's.
 */
static bool keeps_own(struct srv_pool *p, uint64_t chunk, uint64_t tried)
{
	return (entry_of(p, p->params.member_id, chunk) & RECORD_BIT) && all_up(p) &&
	       !sure_holder_up(p, chunk) && !last_resort_peer(p, chunk, tried);
}

/*
 * A peer that is up and holds @chunk (as far as this member knows),
 * round-robin; else one of last resort (*@last_resort set).
 */
static struct peer *pick_peer(struct srv_pool *p, uint64_t chunk, uint64_t tried,
			      bool *last_resort)
{
	*last_resort = false;
	for (unsigned i = 0; i < RMR_MAX_MEMBER_ID; i++) {
		unsigned id = 1 + (p->rr_peer + i) % RMR_MAX_MEMBER_ID;
		struct peer *pe = p->peers[id];

		if (!peer_is_up(pe) || (tried & (1ull << id)) || (p->uncertain_peers & (1ull << id)))
			continue;
		if (!pool_holds(p, id, chunk))
			continue;
		p->rr_peer = id;
		return pe;
	}
	*last_resort = true;
	return last_resort_peer(p, chunk, tried);
}

static bool any_peer_up(const struct srv_pool *p)
{
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if (peer_is_up(p->peers[id]))
			return true;
	return false;
}

/*
 * Is some peer up that holds @chunk, or do we after all (copy_send)?
 * (Leaves the round-robin where it is.)
 */
static bool peer_holds(struct srv_pool *p, uint64_t chunk)
{
	unsigned rr = p->rr_peer;
	bool last_resort;
	bool found = pool_holds(p, p->params.member_id, chunk) ||
		     pick_peer(p, chunk, 0, &last_resort) != NULL || keeps_own(p, chunk, 0);

	p->rr_peer = rr;
	return found;
}

static void note_clean(struct srv_pool *p, uint64_t chunk)
{
	if (pool_clear_chunk(p, p->params.member_id, chunk) < 0)
		return; /* still dirty: copied again later */
	p->resync_done++;
	if (p->nclean_pending == p->clean_cap) {
		uint64_t cap = p->clean_cap ? p->clean_cap * 2 : 256;
		uint64_t *n = realloc(p->clean_pending, cap * sizeof(*n));

		if (n) {
			p->clean_pending = n;
			p->clean_cap = cap;
		}
	}
	/* Without room the peers keep a stale dirty bit: one redundant copy later. */
	if (p->nclean_pending < p->clean_cap)
		p->clean_pending[p->nclean_pending++] = chunk;
	if (dirty_map_count(pool_own_map(p)) == 0) {
		/* Peers that were away missed some MAP_CLEARs: tell them all is held. */
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
			if (p->peers[id])
				p->full_clear_due |= 1ull << id;
		log_notice("pool=%s member=%u: resync complete, %llu chunks copied or overwritten",
			   p->name, p->params.member_id, (unsigned long long)p->resync_done);
		server_event_resync(p);
	}
}

static void resume_all(struct sync_waiter *w, int status)
{
	while (w) {
		struct sync_waiter *next = w->next;

		server_req_resume(rmr_container_of(w, struct srv_req, waiter), status);
		w = next;
	}
}

/* Room appeared in the sync index: let the requests that found none try again. */
static void retry_overflow(struct srv_pool *p)
{
	struct sync_waiter *w = p->overflow;

	p->overflow = NULL;
	resume_all(w, 0);
}

/* Stop tracking @chunk and let its waiters go on (@status < 0: they fail). */
static void chunk_release(struct srv_pool *p, uint64_t chunk, int status)
{
	struct sync_entry *e = sync_index_find(&p->syncing, chunk);

	if (e)
		resume_all(sync_index_remove(&p->syncing, e), status);
	retry_overflow(p);
}

static void copy_finish(struct copy *cp, int status)
{
	struct srv_pool *p = cp->p;
	uint64_t chunk = cp->chunk;
	bool current = cp->epoch == p->resync_epoch;

	p->copies--;
	if (cp->background)
		p->background_copies--;
	/*
	 * No peer gave it: their records or ours are behind. Wait before the
	 * background walk tries again, or it would spin on the same chunks.
	 */
	if (cp->background && status < 0 && status != -ECANCELED)
		p->resync_retry_ns = loop_now(p->srv->loop) + RESYNC_RETRY_NS;
	free(cp);
	/* Copied before the maps were taken again: copy it anew if still dirty. */
	if (status == 0 && current && own_dirty(p, chunk))
		note_clean(p, chunk);
	else if (status < 0 && status != -ECANCELED)
		log_warn("pool=%s member=%u: cannot copy chunk %llu from any peer: %s", p->name,
			 p->params.member_id, (unsigned long long)chunk, strerror(-status));
	chunk_release(p, chunk, status < 0 ? -EIO : 0);
	if (status != -ECANCELED)
		pump(p);
}

static void copy_done(void *ctx, struct peer *pe, const struct rmr_msg *rsp, int status)
{
	struct copy *cp = ctx;
	struct srv_pool *p = cp->p;
	uint32_t len = (uint32_t)RMR_MIN(cp->end - cp->addr, (uint64_t)peer_max_io(pe));
	int ret;

	if (p->removing) {
		copy_finish(cp, -ECANCELED);
		return;
	}
	if (status == 0 && (rsp->addr != cp->addr || rsp->len != len))
		status = -EPROTO;
	if (status < 0) {
		/* -EAGAIN: the peer misses that chunk too. Any other: it is gone. */
		cp->tried |= 1ull << peer_id(pe);
		cp->pe = NULL;
		copy_send(cp);
		return;
	}
	ret = p->ops.chunk_import(p->store, cp->addr, rsp->payload, len);
	if (ret < 0) {
		log_err("pool=%s member=%u: store refuses resync data at %llu: %s", p->name,
			p->params.member_id, (unsigned long long)cp->addr, strerror(-ret));
		p->errors++;
		copy_finish(cp, -EIO);
		return;
	}
	peer_count_sync_bytes(pe, len);
	p->resync_bytes += len;
	p->window_bytes += len;
	cp->addr += len;
	if (cp->addr == cp->end)
		copy_finish(cp, 0);
	else
		copy_send(cp);
}

static void copy_send(struct copy *cp)
{
	struct srv_pool *p = cp->p;

	for (;;) {
		uint32_t len;
		int ret;

		/*
		 * Dirty here only by records made in the boot our host runs in
		 * still: our copy is whole, it only needs its records cleared.
		 */
		if (!cp->pe && cp->addr == cp->chunk << p->chunk_shift &&
		    pool_holds(p, p->params.member_id, cp->chunk)) {
			log_debug("pool=%s member=%u: chunk %llu: what we were recorded as maybe having lost, this host kept",
				  p->name, p->params.member_id, (unsigned long long)cp->chunk);
			copy_finish(cp, 0);
			return;
		}
		if (!cp->pe) {
			cp->pe = pick_peer(p, cp->chunk, cp->tried, &cp->last_resort);
			/* One copy, whole: no piece of a surer one under it. */
			if (cp->pe && cp->last_resort) {
				cp->addr = cp->chunk << p->chunk_shift;
				log_warn("pool=%s member=%u: no member holds chunk %llu for sure: copying it from member %u, which holds it unless its host lost power since",
					 p->name, p->params.member_id, (unsigned long long)cp->chunk,
					 peer_id(cp->pe));
			}
		}
		if (!cp->pe && cp->addr == cp->chunk << p->chunk_shift &&
		    keeps_own(p, cp->chunk, cp->tried)) {
			log_warn("pool=%s member=%u: no member holds chunk %llu for sure: keeping this member's copy, which it holds unless its host lost power since",
				 p->name, p->params.member_id, (unsigned long long)cp->chunk);
			copy_finish(cp, 0);
			return;
		}
		if (!cp->pe) {
			copy_finish(cp, -ENODATA);
			return;
		}
		len = (uint32_t)RMR_MIN(cp->end - cp->addr, (uint64_t)peer_max_io(cp->pe));
		ret = peer_send(cp->pe, RMR_MSG_SYNC_READ,
				cp->last_resort ? RMR_SYNC_READ_LAST_RESORT : 0, cp->addr, len,
				copy_done, cp);
		if (ret == 0)
			return;
		if (ret == -EBUSY) {
			/* Every request slot to that peer is taken: go on when one frees. */
			cp->next = p->copy_queue;
			p->copy_queue = cp;
			return;
		}
		cp->tried |= 1ull << peer_id(cp->pe);
		cp->pe = NULL;
	}
}

/* Start copying @chunk, already tracked in the sync index. */
static void copy_start(struct srv_pool *p, uint64_t chunk, bool background)
{
	struct copy *cp = calloc(1, sizeof(*cp));

	if (!cp) {
		chunk_release(p, chunk, -ENOMEM);
		return;
	}
	cp->p = p;
	cp->chunk = chunk;
	cp->addr = chunk << p->chunk_shift;
	cp->end = cp->addr + pool_chunk_len(p, chunk);
	cp->epoch = p->resync_epoch;
	cp->background = background;
	p->copies++;
	if (background && ++p->background_copies > p->background_peak)
		p->background_peak = p->background_copies;
	copy_send(cp);
}

/*
 * No room in the sync index: @req gives back the whole-chunk claims it made
 * in [first, upto) and waits for room holding none, so that requests parked
 * here can never hold the whole index between them. Whoever waited on those
 * claims tries again.
 */
static void park_overflow(struct srv_pool *p, struct srv_req *req, uint64_t first, uint64_t upto)
{
	struct sync_waiter *again = NULL;

	for (uint64_t c = first; req->clears_chunk && c < upto; c++) {
		struct sync_entry *e = sync_index_find(&p->syncing, c);
		struct sync_waiter *w, *tail;

		if (!e || e->owner != req)
			continue;
		w = sync_index_remove(&p->syncing, e);
		for (tail = w; tail && tail->next; tail = tail->next)
			;
		if (tail) {
			tail->next = again;
			again = w;
		}
	}
	req->clears_chunk = false;
	req->waiter.next = p->overflow;
	p->overflow = &req->waiter;
	resume_all(again, 0);
}

bool resync_hold(struct srv_pool *p, struct srv_req *req)
{
	uint64_t addr = req->io.addr, end = req->io.addr + req->io.len;
	/* Only a write of the chunk's bytes may overwrite it whole; a patch changes it. */
	bool write = req->type == RMR_MSG_WRITE && !(req->io.flags & RMR_IO_PATCH);
	uint64_t first = pool_first_chunk(p, addr);

	if (req->io.len == 0 || (!dirty_map_count(pool_own_map(p)) && !p->syncing.count))
		return false;
	for (uint64_t c = first; c <= pool_last_chunk(p, addr, req->io.len); c++) {
		struct sync_entry *e = sync_index_find(&p->syncing, c);
		uint64_t start = c << p->chunk_shift;

		if (e) {
			if (e->owner == req)
				continue;
			sync_index_wait(e, &req->waiter);
			return true;
		}
		if (!own_dirty(p, c))
			continue;
		e = sync_index_add(&p->syncing, c, 1);
		if (!e) {
			park_overflow(p, req, first, c);
			return true;
		}
		if (write && addr <= start && end >= start + pool_chunk_len(p, c)) {
			/* Overwritten whole: clean once the write is done, no copy. */
			e->owner = req;
			if (!req->clears_chunk)
				req->clear_epoch = p->resync_epoch;
			req->clears_chunk = true;
			continue;
		}
		sync_index_wait(e, &req->waiter);
		copy_start(p, c, false);
		return true;
	}
	return false;
}

bool resync_write_possible(struct srv_pool *p, uint64_t addr, uint64_t len, bool patch)
{
	uint64_t end = addr + len;

	if (!len || !dirty_map_count(pool_own_map(p)))
		return true;
	for (uint64_t c = pool_first_chunk(p, addr); c <= pool_last_chunk(p, addr, len); c++) {
		uint64_t start = c << p->chunk_shift;

		if (!own_dirty(p, c) || sync_index_find(&p->syncing, c) ||
		    (!patch && addr <= start && end >= start + pool_chunk_len(p, c)))
			continue;
		if (!peer_holds(p, c))
			return false;
	}
	return true;
}

void resync_release(struct srv_pool *p, struct srv_req *req, int status)
{
	uint64_t addr = req->io.addr;
	bool current = req->clear_epoch == p->resync_epoch;

	if (!req->clears_chunk)
		return;
	req->clears_chunk = false;
	for (uint64_t c = pool_first_chunk(p, addr); c <= pool_last_chunk(p, addr, req->io.len); c++) {
		struct sync_entry *e = sync_index_find(&p->syncing, c);

		if (!e || e->owner != req)
			continue;
		if (status == 0 && current && own_dirty(p, c))
			note_clean(p, c);
		chunk_release(p, c, 0);
	}
}

/* Refill the rate limit's bucket: at most one second's worth, at least one chunk. */
static void refill(struct srv_pool *p, uint64_t now)
{
	uint64_t rate = p->params.resync_rate;
	uint64_t cap = RMR_MAX(rate, (uint64_t)p->params.chunk_size);

	if (!rate)
		return;
	if (p->rate_last_ns && now > p->rate_last_ns) {
		/* The bucket holds a second at most: a longer idle time adds no more (nor overflows). */
		uint64_t us = RMR_MIN(now - p->rate_last_ns, NS_PER_S) / 1000;
		uint64_t add = us * rate / 1000000;

		p->rate_tokens = RMR_MIN(cap, p->rate_tokens + add);
	}
	p->rate_last_ns = now;
}

static void pump_once(struct srv_pool *p)
{
	struct dirty_map *own = pool_own_map(p);
	bool wrapped = false;

	while (p->copy_queue) {
		struct copy *cp = p->copy_queue;

		p->copy_queue = cp->next;
		copy_send(cp);
		if (p->copy_queue == cp)
			break; /* still no free slot */
	}
	if (!p->maps_current || !dirty_map_count(own) || p->resync_paused ||
	    loop_now(p->srv->loop) < p->resync_retry_ns)
		return;
	refill(p, loop_now(p->srv->loop));
	while (p->background_copies < p->params.sync_queue_depth) {
		uint64_t c = dirty_map_next(own, p->resync_cursor, DIRTY_BIT);
		uint32_t len;

		if (c == UINT64_MAX) {
			if (wrapped || p->resync_cursor == 0)
				break;
			wrapped = true;
			p->resync_cursor = 0;
			continue;
		}
		p->resync_cursor = c + 1;
		if (sync_index_find(&p->syncing, c))
			continue;
		if (!peer_holds(p, c)) {
			if (!any_peer_up(p))
				break;
			continue; /* every peer that is up misses it too */
		}
		len = pool_chunk_len(p, c);
		if (p->params.resync_rate && p->rate_tokens < len) {
			p->resync_cursor = c;
			break;
		}
		if (!sync_index_add(&p->syncing, c, 1)) {
			p->resync_cursor = c;
			break;
		}
		if (p->params.resync_rate)
			p->rate_tokens -= len;
		copy_start(p, c, true);
	}
}

/*
 * Start what copies there is room for. A copy may end inside its start (a
 * chunk we keep, one no peer has) and call us again: that call only asks
 * the running one for another pass, so that a pool of such chunks is
 * walked in a loop, not in a recursion as deep as the chunks are many.
 */
static void pump(struct srv_pool *p)
{
	if (p->pumping) {
		p->pump_again = true;
		return;
	}
	p->pumping = true;
	do {
		p->pump_again = false;
		if (!p->removing)
			pump_once(p);
	} while (p->pump_again && !p->removing);
	p->pumping = false;
}

void resync_kick(struct srv_pool *p)
{
	pump(p);
}

void resync_peer_up(struct srv_pool *p, uint16_t id)
{
	p->full_clear_due |= 1ull << id;
	pump(p);
}

static void full_clear_done(void *ctx, struct peer *pe, const struct rmr_msg *rsp, int status)
{
	struct srv_pool *p = ctx;

	(void)rsp;
	if (status < 0 && !p->removing)
		p->full_clear_due |= 1ull << peer_id(pe); /* again next tick */
}

/*
 * Once this member holds every chunk (its map is complete and empty, and
 * durable), tell the peers that are due: a peer that missed MAP_CLEARs while
 * it was cut off would otherwise keep stale dirty bits for us forever.
 */
static void tell_full_clear(struct srv_pool *p)
{
	if (!p->full_clear_due || !p->maps_current || p->clears_pending ||
	    dirty_map_count(pool_own_map(p)) || p->syncing.count)
		return;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		struct peer *pe = p->peers[id];

		if (!(p->full_clear_due & (1ull << id)) || !peer_is_up(pe))
			continue;
		if (peer_send(pe, RMR_MSG_MAP_CLEAR, 0, 0, (uint32_t)p->nchunks, full_clear_done,
			      p) == 0)
			p->full_clear_due &= ~(1ull << id);
	}
}

static void clear_done(void *ctx, struct peer *pe, const struct rmr_msg *rsp, int status)
{
	(void)ctx;
	(void)rsp;
	if (status < 0)
		log_debug("pool=? member %u did not take a MAP_CLEAR: %s", peer_id(pe),
			  strerror(-status));
}

void resync_drop_redirtied(struct srv_pool *p)
{
	uint64_t kept = 0, flushing = 0, covered = 0, durable = 0;

	for (uint64_t i = 0; i < p->nclean_pending; i++) {
		uint64_t c = p->clean_pending[i];

		/*
		 * A later entry stands for a copy made after the flush that
		 * covers this one began: since the one under way began
		 * (own_cleared), or, for one a finished flush covered, since
		 * that one began (own_flushing: the next one took it over).
		 */
		if (own_dirty(p, c) ||
		    (i < p->nclean_flushing && (dirty_map_get(p->own_cleared, c) & DIRTY_BIT)) ||
		    (i < p->nclean_covered && (dirty_map_get(p->own_flushing, c) & DIRTY_BIT)))
			continue;
		flushing += i < p->nclean_flushing;
		covered += i < p->nclean_covered;
		durable += i < p->nclean_durable;
		p->clean_pending[kept++] = p->clean_pending[i];
	}
	p->nclean_pending = kept;
	p->nclean_flushing = flushing;
	p->nclean_covered = covered;
	p->nclean_durable = durable;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Tell every peer that is up which of the first @n pending chunks this member
 * holds again (they are durable by now: @n is nclean_durable). Peers that are
 * down learn it when they take the maps again. Keeps what could not be sent
 * everywhere, still durable, in front of the rest.
 */
static void tell_peers(struct srv_pool *p, uint64_t n)
{
	struct range { uint64_t first, count; } *r;
	uint64_t *c = p->clean_pending, m = 0, nranges = 0, sent_all = UINT64_MAX, kept = 0;
	uint64_t tail;

	/* A chunk marked dirty again since (a verify): not held any more. */
	resync_drop_redirtied(p);
	n = RMR_MIN(n, p->nclean_durable);
	if (!n)
		return;
	tail = p->nclean_pending - n;
	r = malloc(n * sizeof(*r));
	if (!r)
		return; /* try again next tick */
	qsort(c, n, sizeof(*c), cmp_u64);
	for (uint64_t i = 0; i < n; i++)
		if (m == 0 || c[i] != c[m - 1])
			c[m++] = c[i];
	for (uint64_t i = 0; i < m; i += r[nranges++].count) {
		r[nranges].first = c[i];
		r[nranges].count = 1;
		while (i + r[nranges].count < m && r[nranges].count < UINT32_MAX &&
		       c[i + r[nranges].count] == c[i] + r[nranges].count)
			r[nranges].count++;
	}
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		struct peer *pe = p->peers[id];
		uint64_t sent = 0;

		if (!peer_is_up(pe))
			continue;
		while (sent < nranges && peer_send(pe, RMR_MSG_MAP_CLEAR, 0, r[sent].first,
						   (uint32_t)r[sent].count, clear_done, NULL) == 0)
			sent++;
		sent_all = RMR_MIN(sent_all, sent);
	}
	if (sent_all == UINT64_MAX)
		sent_all = nranges;
	for (uint64_t i = sent_all; i < nranges; i++)
		kept += r[i].count;
	memmove(c + kept, c + n, tail * sizeof(*c));
	kept = 0;
	for (uint64_t i = sent_all; i < nranges; i++)
		for (uint64_t k = 0; k < r[i].count; k++)
			c[kept++] = r[i].first + k;
	p->nclean_pending = kept + tail;
	p->nclean_flushing = kept + (p->nclean_flushing - n);
	p->nclean_covered = kept + (p->nclean_covered - n);
	p->nclean_durable = kept;
	free(r);
}

void resync_tick(struct srv_pool *p, uint64_t now)
{
	if (p->removing)
		return;
	if (p->copies && now - p->progress_ns >= NS_PER_S) {
		p->progress_ns = now;
		server_event_resync(p);
	}
	if (now - p->window_start_ns >= RATE_WINDOW_NS) {
		if (p->window_start_ns)
			p->resync_bps = p->window_bytes * NS_PER_S / (now - p->window_start_ns);
		p->window_start_ns = now;
		p->window_bytes = 0;
	}
	if (p->clears_pending || p->nclean_pending) {
		int ret = pool_flush_clears(p);

		if (ret < 0)
			log_err("pool=%s member=%u: cannot record clean chunks: %s", p->name,
				p->params.member_id, strerror(-ret));
		else if (p->nclean_durable)
			tell_peers(p, p->nclean_durable);
	}
	tell_full_clear(p);
	if (p->overflow && p->syncing.count < p->syncing.max)
		retry_overflow(p);
	pump(p);
}

void resync_peer_clean(struct srv_pool *p, uint16_t id, uint64_t map_ver, uint64_t first,
		       uint64_t count)
{
	struct dirty_map *m = p->maps[id];

	/* A mark newer than what the peer knew: it missed writes after it copied. */
	if (!m || map_ver < p->mark_ver[id])
		return;
	/* Kept for a map pull that may bring back marks this clear covers. */
	if (first == 0 && count >= p->nchunks) {
		p->full_clear_ver[id] = RMR_MAX(p->full_clear_ver[id], map_ver);
		p->uncertain_peers &= ~(1ull << id); /* it converged */
	}
	for (uint64_t c = dirty_map_next(m, first, DIRTY_BIT | RECORD_BIT); c < first + count;
	     c = dirty_map_next(m, c + 1, DIRTY_BIT | RECORD_BIT))
		pool_clear_chunk(p, id, c);
}

void resync_stop(struct srv_pool *p)
{
	while (p->copy_queue) {
		struct copy *cp = p->copy_queue;

		p->copy_queue = cp->next;
		copy_finish(cp, -ECANCELED);
	}
	resume_all(p->overflow, -ECANCELED);
	p->overflow = NULL;
}

void resync_status(const struct srv_pool *p, struct rmr_server_pool_status *ps)
{
	uint64_t left = dirty_map_count(pool_own_map(p));

	ps->sync_queue_depth = p->params.sync_queue_depth;
	ps->resync_rate_limit = p->params.resync_rate;
	/* Running: it copies, or would but for the rate limit. */
	ps->resync_running = p->copies > 0 ||
			     (left > 0 && p->maps_current && any_peer_up(p) && !p->resync_paused);
	ps->resync_paused = p->resync_paused;
	ps->resync_waiting = left > 0 && !ps->resync_running;
	ps->resync_done = p->resync_done;
	ps->resync_total = p->resync_done + left;
	ps->resync_bytes = p->resync_bytes;
	ps->resync_bps = p->resync_bps;
	ps->resync_eta_s = p->resync_bps && left ? left * p->params.chunk_size / p->resync_bps : 0;
	ps->served_sync_bytes = p->served_sync_bytes;
	ps->resync_inflight = p->background_copies;
	ps->resync_inflight_peak = p->background_peak;
}
