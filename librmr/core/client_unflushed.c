/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Writes a member may lose to a power loss of its host
 * (rmr_client_opts.volatile_writes).
 *
 * A member acknowledges a write once its store applied it, which for a
 * store with a page cache is not yet durable. If its host loses power, the
 * writes no flush covered on it are gone, and it cannot tell: it comes back
 * with older bytes and takes itself as current. Nobody else can tell
 * either, unless the client keeps track: per member, the chunks of the
 * writes it acknowledged since its last successful flush. When the member
 * leaves NORMAL (its session died, it failed a request, the operator held
 * it out), the client has the members still NORMAL record those chunks as
 * ones it may have lost (MAP_ADD with RMR_WIRE_MAP_ADD_RECORD: records,
 * kept apart from misses), so that it copies them back from a peer before
 * it serves them again. Its process may only have crashed and its page
 * cache kept everything; the copy is then redundant, and costs the chunks
 * written since the last flush. Where nobody holds a chunk for sure, a
 * member with only a record of it is the holder of last resort (resync.c).
 *
 * A flush covers what the member acknowledged before the flush went out to
 * it: that is moved to @flushing, dropped when the flush succeeds there.
 * While one flush is out, a second one takes no snapshot (it covers more,
 * but its success clears nothing: counted once more until the next flush).
 *
 * The record must land before anything relies on it: the member's next
 * admission takes the maps, and a pull waits for records like for writes in
 * flight (client_io_writes_in_flight); and a flush the consumer sends
 * waits until they are on the others, so that a flush acknowledged to it
 * never leaves a lost write unrecorded should the others then go down too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "compiler.h"
#include "log.h"

/* Ranges one departure is recorded in at most: more chunks beat more messages. */
#define RECORD_RANGES 32

static uint64_t pool_chunks(const struct rmr_client *c)
{
	return (c->pool_size + c->chunk_size - 1) / c->chunk_size;
}

static struct dirty_map *map_new(uint64_t nchunks)
{
	struct dirty_map *m = calloc(1, sizeof(*m));

	if (m && dirty_map_init(m, nchunks) < 0) {
		free(m);
		return NULL;
	}
	return m;
}

static void map_free(struct dirty_map *m)
{
	if (m) {
		dirty_map_destroy(m);
		free(m);
	}
}

/* @m's two maps, both or neither (a half pair would be used as whole). */
static bool maps_ready(struct member *m)
{
	if (m->unflushed && m->flushing)
		return true;
	if (m->unflushed || m->flushing)
		m->unflushed_unknown = true; /* never so here; if it were, marks would be lost */
	map_free(m->unflushed);
	map_free(m->flushing);
	m->unflushed = map_new(pool_chunks(m->c));
	m->flushing = map_new(pool_chunks(m->c));
	if (m->unflushed && m->flushing)
		return true;
	map_free(m->unflushed);
	map_free(m->flushing);
	m->unflushed = m->flushing = NULL;
	return false;
}

static bool tracking(const struct member *m)
{
	return m->c->opts.volatile_writes && m->c->geometry_known && !m->unflushed_unknown;
}

static bool queue_range(struct rmr_client *c, uint16_t id, uint64_t first, uint64_t count,
			uint64_t boot);
static void records_hold_update(struct rmr_client *c);

void unflushed_note_ack(struct member *m, uint64_t addr, uint32_t len)
{
	struct rmr_client *c = m->c;
	uint64_t first, last;

	if (!len || !tracking(m))
		return;
	first = addr / c->chunk_size;
	last = (addr + len - 1) / c->chunk_size;
	/*
	 * An answer to a write sent before it left NORMAL, its session still up
	 * (maintenance): its departure's record is made, this one goes at once.
	 */
	if (m->state != RMR_MEMBER_NORMAL) {
		if (!c->said_goodbye && m->state != RMR_MEMBER_REMOVED &&
		    !queue_range(c, m->id, first, last - first + 1, m->left_boot))
			client_note_missed(c, 1ull << m->id);
		records_hold_update(c);
		client_missed_recompute(c);
		return;
	}
	if (!maps_ready(m) || dirty_map_mark(m->unflushed, first, last - first + 1) < 0) {
		log_warn("pool=%s member=%u: no memory to track its unflushed writes: all of the pool counts as unflushed until it leaves",
			 c->name, m->id);
		m->unflushed_unknown = true;
	}
}

void unflushed_flush_sent(struct member *m, const struct slot *s)
{
	struct dirty_map *t;

	if (!tracking(m) || !m->unflushed || m->flush_out)
		return;
	/* @flushing is empty while no flush is out: a swap is the snapshot. */
	t = m->flushing;
	m->flushing = m->unflushed;
	m->unflushed = t;
	m->flush_out = true;
	m->flush_slot = s->index;
	m->flush_seq = s->seq;
}

void unflushed_flush_answered(struct member *m, const struct slot *s, bool ok)
{
	if (!m->flush_out || m->flush_slot != s->index || m->flush_seq != s->seq)
		return;
	m->flush_out = false;
	if (!ok && dirty_map_merge(m->unflushed, m->flushing) < 0)
		m->unflushed_unknown = true;
	dirty_map_clear_all(m->flushing);
}

/*
 * Append [@first, @first + @count) chunks that @id may have lost, acknowledged
 * in @boot of its host, in MAP_ADD-sized pieces.
 */
static bool queue_range(struct rmr_client *c, uint16_t id, uint64_t first, uint64_t count,
			uint64_t boot)
{
	uint64_t per = UINT32_MAX / c->chunk_size; /* chunks one MAP_ADD range holds */

	while (count) {
		uint64_t n = RMR_MIN(count, per);

		if (c->nrecords == c->records_cap) {
			unsigned cap = c->records_cap ? 2 * c->records_cap : RECORD_RANGES;
			struct unflushed_record *r = realloc(c->records, cap * sizeof(*r));

			if (!r)
				return false;
			c->records = r;
			c->records_cap = cap;
		}
		c->records[c->nrecords++] = (struct unflushed_record){
			.id = id,
			.addr = first * c->chunk_size,
			.len = (uint32_t)RMR_MIN(n * c->chunk_size, c->pool_size - first * c->chunk_size),
			.boot = boot,
		};
		/* Until it is recorded, the member must take the maps before it serves. */
		c->missed_inflight[id]++;
		first += n;
		count -= n;
	}
	return true;
}

void unflushed_member_left(struct member *m, enum rmr_member_state to)
{
	struct rmr_client *c = m->c;
	struct dirty_range ranges[RECORD_RANGES];
	unsigned n = 0;
	uint64_t chunks = 0;
	bool unknown = m->unflushed_unknown, queued = true;

	if (m->unflushed && m->flushing) {
		if (dirty_map_merge(m->unflushed, m->flushing) < 0)
			unknown = true;
		if (!unknown)
			n = dirty_map_cover(m->unflushed, RECORD_RANGES, ranges);
		chunks = dirty_map_count(m->unflushed);
		dirty_map_clear_all(m->unflushed);
		dirty_map_clear_all(m->flushing);
	}
	m->flush_out = false;
	m->unflushed_unknown = false;
	/* Whose page cache holds them: the process and boot it leaves from. */
	m->left_boot = m->boot_id;
	m->left_incarnation = m->incarnation;
	if (unknown) {
		ranges[0] = (struct dirty_range){ 0, pool_chunks(c) };
		chunks = ranges[0].count;
		n = 1;
	}
	/* Out of the pool for good, nothing of it is read again; or our sessions end. */
	if (!n || to == RMR_MEMBER_REMOVED || c->said_goodbye)
		return;
	for (unsigned i = 0; i < n && queued; i++)
		queued = queue_range(c, m->id, ranges[i].first, ranges[i].count, m->left_boot);
	if (!queued) {
		log_err("pool=%s member=%u: no memory to record its unflushed writes as missed: it takes the maps before it serves, but may lack some of them",
			c->name, m->id);
		client_note_missed(c, 1ull << m->id);
	}
	log_notice("pool=%s member=%u: left with %llu chunks of writes no flush covered on it: the others record that it may have lost them, in case its host lost power",
		   c->name, m->id, (unsigned long long)chunks);
	records_hold_update(c);
	client_missed_recompute(c);
}

/* The oldest queued record leaves the queue (sent, or given up). */
static void record_pop(struct rmr_client *c)
{
	memmove(&c->records[0], &c->records[1], --c->nrecords * sizeof(c->records[0]));
}

/*
 * Close waits for records that a member is up to take (it counts them as
 * a request in flight), not for those nobody can take: it would never end.
 */
static void records_hold_update(struct rmr_client *c)
{
	bool want = unflushed_records_sendable(c);

	if (want == c->records_held)
		return;
	c->records_held = want;
	if (want)
		client_io_hold(c);
	else
		client_io_unhold(c);
}

/*
 * Records are on their way to the others. (Queued ones that nobody is up
 * to take hold no flush: it would wait for a member to return, while
 * writes fail at once; they go before their member serves again.)
 */
static bool holder_up(const struct rmr_client *c, uint16_t id);

static bool recording(const struct rmr_client *c)
{
	return c->records_inflight || unflushed_records_sendable(c);
}

/* Records are on the others: the flushes that waited go out, or end. */
static void release_flushes(struct rmr_client *c)
{
	struct slot *s = c->flush_wait_head;

	if (recording(c))
		return;
	c->flush_wait_head = c->flush_wait_tail = NULL;
	while (s) {
		struct slot *next = s->ready_next;

		if (s->flush_ended)
			client_io_end_flush(c, s);
		else
			client_io_redispatch(c, s);
		s = next;
	}
}

/* Whether a member other than @id is NORMAL: one that can hold a record about @id. */
static bool holder_up(const struct rmr_client *c, uint16_t id)
{
	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].state == RMR_MEMBER_NORMAL && c->members[i].id != id)
			return true;
	return false;
}

/* Member @id if it is NORMAL, else NULL. */
static struct member *member_normal(struct rmr_client *c, uint16_t id)
{
	for (unsigned i = 0; i < c->nmembers; i++)
		if (c->members[i].id == id)
			return c->members[i].state == RMR_MEMBER_NORMAL ? &c->members[i] : NULL;
	return NULL;
}

/* Give the oldest queued record up. */
static void record_drop(struct rmr_client *c)
{
	c->missed_inflight[c->records[0].id]--;
	record_pop(c);
	client_missed_recompute(c);
}

bool unflushed_records_sendable(const struct rmr_client *c)
{
	return c->nrecords && holder_up(c, c->records[0].id);
}

void unflushed_send_records(struct rmr_client *c)
{
	/* A record that ends at once brings us back here: the outer call goes on. */
	if (c->records_sending)
		return;
	c->records_sending = true;
	while (c->nrecords) {
		struct member *back = member_normal(c, c->records[0].id);

		/* Fenced: nothing goes out any more. */
		if (c->fenced) {
			record_drop(c);
			continue;
		}
		/*
		 * NORMAL again: its member became the one the others converge
		 * on (nobody else held every write), and what it may have lost
		 * nobody else holds. Not flushed on it yet: at risk as before.
		 */
		if (back) {
			unflushed_kept(back);
			continue;
		}
		/*
		 * Nobody up to hold it: it waits, and so does the member (it
		 * counts as missing writes). Those that come back converge
		 * first (a gather), then take it.
		 */
		/* One at a time, in the record slot: its end brings us back. */
		if (!holder_up(c, c->records[0].id) || c->records_inflight)
			break;
		c->records_inflight++;
		c->record_out = c->records[0];
		c->record_failed_at_once = false;
		if (client_io_send_record(c, &c->record_out) == -EAGAIN) {
			c->records_inflight--;
			break;
		}
		/* Nobody took it (a send failed at once): it stays first, for the next tick. */
		if (c->record_failed_at_once)
			break;
		record_pop(c);
	}
	c->records_sending = false;
	records_hold_update(c);
	release_flushes(c);
}

void unflushed_record_done(struct rmr_client *c, int status)
{
	c->records_inflight--;
	if (status < 0 && c->records_sending) {
		/*
		 * Still first in the queue, which counts it again: its slot's end
		 * gave back the count the queue had passed to it (seed 33796: the
		 * count ran below zero, and the member it names stayed "missed"
		 * for good after a gather).
		 */
		c->record_failed_at_once = true;
		c->missed_inflight[c->record_out.id]++;
		return;
	}
	/*
	 * Not on every member that was to take it (gone meanwhile): again,
	 * first in line. Those that did take it twice mark the same chunks.
	 */
	if (status < 0 && !c->fenced) {
		if (queue_range(c, c->record_out.id, c->record_out.addr / c->chunk_size,
				(c->record_out.len + c->chunk_size - 1) / c->chunk_size,
				c->record_out.boot)) {
			struct unflushed_record r = c->records[c->nrecords - 1];

			memmove(&c->records[1], &c->records[0], (c->nrecords - 1) * sizeof(r));
			c->records[0] = r;
		} else {
			client_note_missed(c, 1ull << c->record_out.id);
		}
		client_missed_recompute(c);
	}
	unflushed_send_records(c);
}

bool unflushed_hold_flush(struct rmr_client *c, struct slot *s)
{
	if (!(s->io.flags & RMR_IO_FLUSH) || !recording(c))
		return false;
	s->ready_next = NULL;
	if (c->flush_wait_tail)
		c->flush_wait_tail->ready_next = s;
	else
		c->flush_wait_head = s;
	c->flush_wait_tail = s;
	return true;
}

bool unflushed_kept(struct member *m)
{
	struct rmr_client *c = m->c;
	unsigned kept = 0, back = 0;

	for (unsigned i = 0; i < c->nrecords; i++) {
		const struct unflushed_record *r = &c->records[i];
		uint64_t first = r->addr / c->chunk_size;
		uint64_t count = (r->len + c->chunk_size - 1) / c->chunk_size;

		if (r->id != m->id) {
			c->records[kept++] = *r;
			continue;
		}
		c->missed_inflight[m->id]--;
		back++;
		if (!maps_ready(m) || dirty_map_mark(m->unflushed, first, count) < 0)
			m->unflushed_unknown = true; /* all of the pool at risk, as when tracking fails */
	}
	if (!back)
		return false;
	c->nrecords = kept;
	records_hold_update(c);
	client_missed_recompute(c);
	return true;
}

uint64_t unflushed_chunks(const struct member *m)
{
	uint64_t n;

	if (m->unflushed_unknown)
		return pool_chunks(m->c);
	if (!m->unflushed || !m->flushing)
		return 0;
	/* A chunk may be in both: acknowledged again after a flush went out. */
	n = dirty_map_count(m->unflushed);
	for (uint64_t c = dirty_map_next(m->flushing, 0, DIRTY_BIT); c != UINT64_MAX;
	     c = dirty_map_next(m->flushing, c + 1, DIRTY_BIT))
		n += !(dirty_map_get(m->unflushed, c) & DIRTY_BIT);
	return n;
}

uint64_t unflushed_queued_chunks(const struct rmr_client *c, uint16_t id)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < c->nrecords; i++)
		if (c->records[i].id == id)
			n += (c->records[i].len + c->chunk_size - 1) / c->chunk_size;
	return n;
}

bool unflushed_pending(const struct rmr_client *c, uint16_t id)
{
	if (c->records_inflight && c->record_out.id == id)
		return true;
	for (unsigned i = 0; i < c->nrecords; i++)
		if (c->records[i].id == id)
			return true;
	return false;
}

bool unflushed_none(const struct member *m)
{
	return !m->unflushed_unknown && !m->flush_out &&
	       (!m->unflushed || !dirty_map_count(m->unflushed)) &&
	       (!m->flushing || !dirty_map_count(m->flushing));
}

void unflushed_free(struct rmr_client *c)
{
	for (unsigned i = 0; i < c->nmembers; i++) {
		map_free(c->members[i].unflushed);
		map_free(c->members[i].flushing);
		c->members[i].unflushed = c->members[i].flushing = NULL;
	}
	free(c->records);
	c->records = NULL;
}
