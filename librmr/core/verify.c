/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Online verify: checksums compared storage to storage; see verify.h. */
#include "verify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "crc32c.h"
#include "log.h"
#include "peer.h"
#include "resync.h"
#include "server_internal.h"

#define NS_PER_MS 1000000ull
/* Bytes of chunks one CHUNK_SUM covers: the answering member reads them at once. */
#define BATCH_BYTES (2u << 20)
#define BATCH_MAX_CHUNKS 16u
/* A mismatch is asked again this many times, this far apart, before it counts. */
#define ATTEMPTS 3
#define RETRY_NS (200 * NS_PER_MS)
#define RETRIES_MAX 256

/* A chunk that differed on some peers, to be asked again. */
struct retry {
	uint64_t chunk;
	uint64_t ids;                /* peers it differed on */
	unsigned attempts;
	uint64_t due;
};

struct verify {
	void *buf;                   /* one read of a chunk piece */
	uint32_t buf_len;
	bool running, repair;
	uint64_t first, end, cursor; /* chunks [first, end); the next one to ask */
	uint64_t done, mismatches, repaired, skipped;
	uint32_t nfound;
	uint64_t found[RMR_VERIFY_FOUND_MAX], found_ids[RMR_VERIFY_FOUND_MAX];
	uint64_t progress_ns;
	uint64_t started_ns;

	/* The batch in flight: chunks [b_first, b_first + b_count) asked of b_asked. */
	bool b_busy;
	uint64_t b_first;
	uint32_t b_count;
	struct retry *b_retry;       /* the batch re-asks this chunk (count 1) */
	uint64_t b_asked, b_answered;
	uint32_t b_crc[RMR_MAX_MEMBER_ID + 1][BATCH_MAX_CHUNKS];
	uint64_t b_dirty[RMR_MAX_MEMBER_ID + 1]; /* bit i: the peer misses chunk i */

	struct retry retries[RETRIES_MAX];
	unsigned nretries;
};

static void next_batch(struct srv_pool *p);

static bool own_dirty(struct srv_pool *p, uint64_t c)
{
	return (dirty_map_get(pool_own_map(p), c) & DIRTY_BIT) || sync_index_find(&p->syncing, c);
}

/* CRC-32C of chunk @c as this member holds it. */
static int chunk_crc(struct srv_pool *p, uint64_t c, uint32_t *crc)
{
	struct verify *v = p->verify;
	uint64_t addr = c << p->chunk_shift, end = addr + pool_chunk_len(p, c);

	*crc = 0;
	while (addr < end) {
		uint32_t n = (uint32_t)RMR_MIN(end - addr, (uint64_t)v->buf_len);
		int ret = p->ops.chunk_export(p->store, addr, v->buf, n);

		if (ret < 0)
			return ret;
		*crc = crc32c(*crc, v->buf, n);
		addr += n;
	}
	return 0;
}

/* Scratch space for chunk reads, also for serving a peer's CHUNK_SUM without a verify. */
static struct verify *verify_get(struct srv_pool *p)
{
	struct verify *v = p->verify;

	if (v)
		return v;
	v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	v->buf_len = RMR_MIN(p->params.chunk_size, p->srv->opts.max_io_size);
	v->buf = malloc(v->buf_len);
	if (!v->buf) {
		free(v);
		return NULL;
	}
	p->verify = v;
	return v;
}

void verify_free(struct srv_pool *p)
{
	if (p->verify)
		free(p->verify->buf);
	free(p->verify);
	p->verify = NULL;
}

int verify_serve_sums(struct srv_pool *p, uint64_t first, uint32_t count, void *out)
{
	struct rmr_wire_chunk_sum *w = out;

	if (!verify_get(p))
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t crc = 0;

		if (own_dirty(p, first + i)) {
			rmr_wire_encode_chunk_sum(&w[i], 0, RMR_SUM_DIRTY);
			continue;
		}
		int ret = chunk_crc(p, first + i, &crc);

		if (ret < 0)
			return ret;
		rmr_wire_encode_chunk_sum(&w[i], crc, 0);
	}
	return 0;
}

int verify_apply_marks(struct srv_pool *p, uint64_t ids, uint64_t map_ver, uint64_t first,
		       uint64_t count)
{
	uint16_t self = p->params.member_id;
	int ret;

	ids &= p->params.members_mask;
	ret = pool_note(p, map_ver, ids);
	for (unsigned id = 1; ret == 0 && id <= RMR_MAX_MEMBER_ID; id++) {
		if (!(ids & (1ull << id)))
			continue;
		p->mark_ver[id] = RMR_MAX(p->mark_ver[id], map_ver);
		ret = pool_mark_chunks(p, id, first, count);
	}
	if (ret == 0 && (ids & (1ull << self))) {
		log_notice("pool=%s member=%u: a verify found chunks %llu..%llu differ here: they are copied in again",
			   p->name, self, (unsigned long long)first,
			   (unsigned long long)(first + count - 1));
		resync_kick(p);
	}
	return ret;
}

/* --- the verify this member runs ------------------------------------------------- */

static void event(struct srv_pool *p)
{
	struct verify *v = p->verify;
	struct rmr_server *s = p->srv;

	if (s->events.verify_progress)
		s->events.verify_progress(s->opts.priv, p->name, v->done, v->end - v->first,
					  v->mismatches);
}

static void finish(struct srv_pool *p, const char *how)
{
	struct verify *v = p->verify;

	v->running = false;
	v->nretries = 0;
	log_notice("pool=%s member=%u: verify %s: %llu of %llu chunks compared, %llu differ, %llu repaired, %llu comparisons skipped",
		   p->name, p->params.member_id, how, (unsigned long long)v->done,
		   (unsigned long long)(v->end - v->first), (unsigned long long)v->mismatches,
		   (unsigned long long)v->repaired, (unsigned long long)v->skipped);
	event(p);
}

static void mark_done(void *ctx, struct peer *pe, const struct rmr_msg *rsp, int status)
{
	struct srv_pool *p = ctx;

	(void)rsp;
	if (status < 0)
		log_warn("pool=%s member=%u: member %u did not take a verify repair: %s", p->name,
			 p->params.member_id, peer_id(pe), strerror(-status));
}

/* Chunk @c differs on the members in @ids: make them copy it from here. */
static void repair(struct srv_pool *p, uint64_t c, uint64_t ids)
{
	struct verify *v = p->verify;
	uint64_t ver = p->map_ver + 1;

	if (verify_apply_marks(p, ids, ver, c, 1) < 0) {
		log_err("pool=%s member=%u: cannot record chunk %llu as differing", p->name,
			p->params.member_id, (unsigned long long)c);
		return;
	}
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		struct peer *pe = p->peers[id];

		if (peer_is_up(pe) &&
		    peer_send_mark(pe, ids, c, 1, mark_done, p) < 0 && (ids & (1ull << id)))
			log_warn("pool=%s member=%u: member %u not told that chunk %llu differs; it learns when it takes the maps",
				 p->name, p->params.member_id, id, (unsigned long long)c);
	}
	v->repaired++;
}

static void found(struct srv_pool *p, uint64_t c, uint64_t ids)
{
	struct verify *v = p->verify;

	v->mismatches++;
	/* The first ones found, in chunk order (a retried chunk may count late). */
	if (v->nfound < RMR_VERIFY_FOUND_MAX) {
		uint32_t i = v->nfound++;

		for (; i > 0 && v->found[i - 1] > c; i--) {
			v->found[i] = v->found[i - 1];
			v->found_ids[i] = v->found_ids[i - 1];
		}
		v->found[i] = c;
		v->found_ids[i] = ids;
	}
	log_warn("pool=%s member=%u: verify: chunk %llu differs on members 0x%llx", p->name,
		 p->params.member_id, (unsigned long long)c, (unsigned long long)ids);
	if (v->repair)
		repair(p, c, ids);
}

/* Every answer of the batch is in: compare with what this member holds now. */
static void compare_batch(struct srv_pool *p)
{
	struct verify *v = p->verify;
	uint64_t now = loop_now(p->srv->loop);

	for (uint32_t i = 0; i < v->b_count; i++) {
		uint64_t c = v->b_first + i, differ = 0;
		uint32_t crc;

		if (own_dirty(p, c)) {
			v->skipped++;
			continue;
		}
		if (chunk_crc(p, c, &crc) < 0) {
			finish(p, "stopped: the store cannot read a chunk");
			return;
		}
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
			if (!(v->b_answered & (1ull << id)))
				continue;
			/* Known missing on that side: the resync has it in hand. */
			if ((v->b_dirty[id] & (1ull << i)) ||
			    (p->maps[id] && (dirty_map_get(p->maps[id], c) & DIRTY_BIT))) {
				v->skipped++;
				continue;
			}
			if (v->b_crc[id][i] != crc)
				differ |= 1ull << id;
		}
		if (v->b_retry) {
			struct retry *r = v->b_retry;

			r->ids &= differ;
			if (!r->ids || r->attempts >= ATTEMPTS) {
				if (r->ids)
					found(p, r->chunk, r->ids);
				*r = v->retries[--v->nretries];
			} else {
				r->attempts++;
				r->due = now + RETRY_NS;
			}
			continue;
		}
		v->done++;
		if (differ && v->nretries < RETRIES_MAX)
			v->retries[v->nretries++] = (struct retry){
				.chunk = c, .ids = differ, .attempts = 1, .due = now + RETRY_NS,
			};
		else if (differ)
			found(p, c, differ); /* no room to ask again: it counts as it is */
	}
}

static void sum_done(void *ctx, struct peer *pe, const struct rmr_msg *rsp, int status)
{
	struct srv_pool *p = ctx;
	struct verify *v = p->verify;
	uint16_t id = peer_id(pe);

	if (!v || !v->b_busy)
		return;
	v->b_asked &= ~(1ull << id);
	if (status == 0 && rsp->addr == v->b_first && rsp->len == v->b_count) {
		char why[128];

		v->b_dirty[id] = 0;
		for (uint32_t i = 0; i < v->b_count && status == 0; i++) {
			uint32_t flags;

			status = rmr_wire_decode_chunk_sum(rsp, i, &v->b_crc[id][i], &flags, why,
							   sizeof(why));
			if (flags & RMR_SUM_DIRTY)
				v->b_dirty[id] |= 1ull << i;
		}
		if (status == 0)
			v->b_answered |= 1ull << id;
	}
	/* A peer that cannot answer (gone, store error) is not compared this time. */
	if (v->b_asked)
		return;
	v->b_busy = false;
	if (v->running) {
		compare_batch(p);
		if (v->running)
			next_batch(p);
	}
}

/* Ask every peer that is up (@ids: only those) for chunks [first, first+count). */
static bool ask(struct srv_pool *p, uint64_t first, uint32_t count, uint64_t ids,
		struct retry *r)
{
	struct verify *v = p->verify;

	v->b_first = first;
	v->b_count = count;
	v->b_retry = r;
	v->b_asked = v->b_answered = 0;
	v->b_busy = true;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		struct peer *pe = p->peers[id];

		if (!(ids & (1ull << id)) || !peer_is_up(pe) ||
		    (uint64_t)count * sizeof(struct rmr_wire_chunk_sum) > peer_max_io(pe))
			continue;
		v->b_asked |= 1ull << id;
		if (peer_send(pe, RMR_MSG_CHUNK_SUM, 0, first, count, sum_done, p) < 0)
			v->b_asked &= ~(1ull << id);
	}
	if (!v->b_asked)
		v->b_busy = false;
	return v->b_busy;
}

static void next_batch(struct srv_pool *p)
{
	struct verify *v = p->verify;
	uint64_t now = loop_now(p->srv->loop);
	uint32_t count;

	if (!v->running || v->b_busy)
		return;
	for (unsigned i = 0; i < v->nretries;) {
		struct retry *r = &v->retries[i];

		if (now < r->due) {
			i++;
			continue;
		}
		if (ask(p, r->chunk, 1, r->ids, r))
			return;
		/* The peers it differed on are gone: not compared after all. */
		v->skipped++;
		*r = v->retries[--v->nretries];
	}
	if (v->cursor == v->end) {
		if (!v->nretries)
			finish(p, "done");
		return;
	}
	count = (uint32_t)RMR_MIN(v->end - v->cursor,
				  (uint64_t)RMR_MAX(1u, BATCH_BYTES / p->params.chunk_size));
	count = RMR_MIN(count, BATCH_MAX_CHUNKS);
	if (ask(p, v->cursor, count, UINT64_MAX, NULL))
		v->cursor += count;
	else
		finish(p, "stopped: no peer is up to compare with");
}

int verify_start(struct srv_pool *p, const struct rmr_verify_opts *o)
{
	struct verify *v;
	uint64_t count = o->chunks ? o->chunks : p->nchunks - RMR_MIN(o->first_chunk, p->nchunks);

	if (p->verify && p->verify->running)
		return -EBUSY;
	if (o->first_chunk >= p->nchunks || count > p->nchunks - o->first_chunk)
		return -EINVAL;
	if (!p->maps_current || dirty_map_count(pool_own_map(p)) || p->syncing.count)
		return -EAGAIN;
	v = verify_get(p);
	if (!v)
		return -ENOMEM;
	if (v->b_busy)
		return -EBUSY; /* the last one's batch is still out */
	/* A new run: everything but the scratch buffer starts over. */
	memset(&v->running, 0, sizeof(*v) - offsetof(struct verify, running));
	v->running = true;
	v->repair = o->repair;
	v->first = v->cursor = o->first_chunk;
	v->end = o->first_chunk + count;
	v->progress_ns = v->started_ns = loop_now(p->srv->loop);
	log_notice("pool=%s member=%u: verify of chunks %llu..%llu started%s", p->name,
		   p->params.member_id, (unsigned long long)v->first,
		   (unsigned long long)(v->end - 1), v->repair ? ", repairing what differs" : "");
	next_batch(p);
	return 0;
}

int verify_stop(struct srv_pool *p)
{
	if (!p->verify || !p->verify->running)
		return -EALREADY;
	finish(p, "stopped by the operator");
	return 0;
}

void verify_tick(struct srv_pool *p, uint64_t now)
{
	struct verify *v = p->verify;

	if (!v || !v->running)
		return;
	if (now - v->progress_ns >= 1000 * NS_PER_MS) {
		v->progress_ns = now;
		event(p);
	}
	next_batch(p);
}

void verify_status(const struct srv_pool *p, struct rmr_server_pool_status *ps)
{
	const struct verify *v = p->verify;

	if (!v || v->end == v->first)
		return;
	ps->verify_running = v->running;
	ps->verify_repair = v->repair;
	ps->verify_total = v->end - v->first;
	ps->verify_done = v->done;
	ps->verify_mismatches = v->mismatches;
	ps->verify_repaired = v->repaired;
	ps->verify_skipped = v->skipped;
	ps->verify_nfound = v->nfound;
	if (v->running && v->done) {
		uint64_t elapsed = loop_now(p->srv->loop) - v->started_ns;

		ps->verify_eta_s = (uint64_t)((double)elapsed * (double)(ps->verify_total - v->done) /
					      (double)v->done / 1e9);
	}
	memcpy(ps->verify_found, v->found, sizeof(v->found));
	memcpy(ps->verify_found_ids, v->found_ids, sizeof(v->found_ids));
}
