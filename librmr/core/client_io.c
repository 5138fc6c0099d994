/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Client requests: write fan-out to every NORMAL member, read round-robin
 * with retry, ordering of overlapping writes, explicit map_add for writes
 * that a member failed while in flight, deadlines and completion.
 *
 * A slot is released only when every leg has been answered (or abandoned
 * with its member) and every send has completed, so neither the header
 * buffers nor the caller's data are referenced after the callback.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "compiler.h"
#include "log.h"

#define NS_PER_MS 1000000ull

static inline uint64_t bit(unsigned n)
{
	return 1ull << n;
}

/* Members to walk; the bound also tells the compiler that legs[] is never overrun. */
static inline unsigned nmem(const struct rmr_client *c)
{
	return c->nmembers < RMR_MAX_MEMBERS ? c->nmembers : RMR_MAX_MEMBERS;
}

static struct slot *leg_slot(struct member *m, struct leg *leg)
{
	return rmr_container_of(leg - m->index, struct slot, legs[0]);
}

static bool overlaps(const struct slot *a, const struct slot *b)
{
	if (!a->io.len || !b->io.len)
		return false;
	return a->io.addr < b->io.addr + b->io.len && b->io.addr < a->io.addr + a->io.len;
}

/*
 * Errors that say the request itself is wrong: every member returns the same
 * one, so they do not make a member diverge and do not fail it.
 */
static bool is_request_error(int status)
{
	return status == -EINVAL || status == -EOPNOTSUPP || status == -ERANGE;
}

static uint64_t normal_ids(struct rmr_client *c)
{
	uint64_t ids = 0;

	for (unsigned i = 0; i < nmem(c); i++)
		if (c->members[i].state == RMR_MEMBER_NORMAL)
			ids |= bit(c->members[i].id);
	return ids;
}

/* --- submission ---------------------------------------------------------- */

/*
 * Give a slot back and let rmr_client_close() know when the last one is
 * home. @return whether it was the last request in flight.
 */
static bool release_slot(struct rmr_client *c, struct slot *s)
{
	s->phase = SLOT_FREE;
	s->seq++;
	if (s->index != c->record_slot)
		slot_pool_put(&c->slot_pool, s->index);
	return client_io_unhold(c);
}

void client_io_hold(struct rmr_client *c)
{
	pthread_mutex_lock(&c->state_lock);
	c->inflight++;
	pthread_mutex_unlock(&c->state_lock);
}

bool client_io_unhold(struct rmr_client *c)
{
	bool idle;

	pthread_mutex_lock(&c->state_lock);
	idle = --c->inflight == 0;
	if (c->closing && idle)
		pthread_cond_broadcast(&c->state_cond);
	pthread_mutex_unlock(&c->state_lock);
	return idle;
}

int client_io_submit(struct rmr_client *c, const struct rmr_io *io, unsigned flags)
{
	uint64_t data_len = 0;
	struct slot *s;
	int idx;

	if ((io->kind != RMR_IO_READ && io->kind != RMR_IO_WRITE) || !io->cb ||
	    io->iovcnt > RMR_MAX_IOV || (io->iovcnt && !io->iov) || (flags & ~RMR_SUBMIT_WAIT))
		return -EINVAL;
	for (unsigned i = 0; i < io->iovcnt; i++) {
		/* Lengths that wrap the sum around would pass every check below. */
		if (io->iov[i].iov_len > UINT32_MAX)
			return -EINVAL;
		data_len += io->iov[i].iov_len;
	}
	if (io->flags & ~(uint32_t)(RMR_IO_PATCH | RMR_IO_FLUSH | RMR_IO_WHOLE))
		return -EINVAL;
	if ((io->flags & RMR_IO_WHOLE) && io->kind != RMR_IO_READ)
		return -EINVAL;
	/* A flush is about what went before it: no data, no range, nothing else. */
	if ((io->flags & RMR_IO_FLUSH) && (io->kind != RMR_IO_WRITE || data_len || io->len ||
					   (io->flags & RMR_IO_PATCH)))
		return -EINVAL;
	/* A patch is a change inside its range: data of its own length, never none. */
	if ((io->flags & RMR_IO_PATCH) && (io->kind != RMR_IO_WRITE || !data_len || !io->len))
		return -EINVAL;
	if (data_len && data_len != io->len && !(io->flags & RMR_IO_PATCH))
		return -EINVAL;
	if (io->kind == RMR_IO_READ && (!io->len || data_len != io->len))
		return -EINVAL;
	if (io->kind == RMR_IO_WRITE && (io->arg_len || io->member_id))
		return -EINVAL;
	if ((io->arg_len && !io->arg) || io->member_id > RMR_MAX_MEMBER_ID)
		return -EINVAL;
	/* The argument and the answer share the member's receive buffer. */
	if (io->kind == RMR_IO_READ && (uint64_t)io->arg_len + io->len > c->max_io_size)
		return -EINVAL;
	if (data_len > c->max_io_size)
		return -EINVAL;
	if (io->addr > c->pool_size || io->len > c->pool_size - io->addr)
		return -EINVAL;

	idx = slot_pool_get(&c->slot_pool, flags & RMR_SUBMIT_WAIT);
	if (idx < 0)
		return idx;
	s = &c->slots[idx];

	pthread_mutex_lock(&c->state_lock);
	if (c->closing) {
		pthread_mutex_unlock(&c->state_lock);
		slot_pool_put(&c->slot_pool, (uint32_t)idx);
		return -ESHUTDOWN;
	}
	c->inflight++;
	pthread_mutex_unlock(&c->state_lock);

	if (io->kind == RMR_IO_WRITE && data_len && io->iovcnt > 3) {
		/* Gather into the slot's bounce buffer, allocated once and kept. */
		if (!s->bounce)
			s->bounce = malloc(c->max_io_size);
		if (!s->bounce) {
			release_slot(c, s);
			return -ENOMEM;
		}
		char *p = s->bounce;
		for (unsigned i = 0; i < io->iovcnt; i++) {
			memcpy(p, io->iov[i].iov_base, io->iov[i].iov_len);
			p += io->iov[i].iov_len;
		}
	}
	s->io = *io;
	if (io->iovcnt)
		memcpy(s->iov, io->iov, io->iovcnt * sizeof(*io->iov));
	s->io.iov = s->iov;
	s->data_len = (uint32_t)data_len;
	s->legs_mask = s->ok_mask = s->failed_mask = s->tried_mask = s->missed_ids = 0;
	s->applied = false;
	s->holder_ids = s->missed_counted = 0;
	s->first_err = 0;
	s->first_answer = 0;
	s->flush_ended = false;
	s->deps = 0;
	s->has_dependents = false;
	s->phase = SLOT_QUEUED;

	pthread_mutex_lock(&c->sub_lock);
	s->next = NULL;
	if (c->sub_tail)
		c->sub_tail->next = s;
	else
		c->sub_head = s;
	c->sub_tail = s;
	pthread_mutex_unlock(&c->sub_lock);
	loop_wake(c->loop);
	return 0;
}

/* --- completion ---------------------------------------------------------- */

/*
 * The last request in flight completed: poll for the next one, if that
 * pays, and in any case no longer for answers (0 ends such a poll).
 */
static void idle_poll_begin(struct rmr_client *c)
{
	loop_poll_until(c->loop, poll_on_idle(&c->poll, loop_now(c->loop)));
}

/* Requests arrived: stop polling for them; poll for their first answer if they end an idle time. */
static void idle_poll_end(struct rmr_client *c)
{
	bool was_idle = c->poll.idle_since != 0;
	uint64_t until = poll_on_busy(&c->poll, loop_now(c->loop), slot_pool_used(&c->slot_pool));

	if (was_idle)
		loop_poll_until(c->loop, until);
}

/* An answer of @s came: poll for the rest of its answers, if that pays. */
static void answers_poll(struct rmr_client *c, struct slot *s)
{
	bool first = c->poll.sent_at != 0; /* the answer a first-answer poll waits for */
	bool more_due = false;
	uint64_t until;

	for (unsigned i = 0; i < nmem(c) && !more_due; i++)
		more_due = (s->legs_mask & bit(i)) && s->legs[i].waiting;
	until = poll_on_answer(&c->poll, &s->first_answer, more_due, loop_now(c->loop));
	/* An answers poll, or none: the first-answer poll, if one runs, is over. */
	if (until || first)
		loop_poll_until(c->loop, until);
}

static struct slot *write_finished(struct rmr_client *c, struct slot *s);
static void dispatch_ready(struct rmr_client *c, struct slot *ready);

/*
 * The slot is free before the callback runs: a consumer that submits from
 * its callback (on this thread, where nothing waits for a slot) finds the
 * one this request held. Writes it held back go out after the callback, so
 * overlapping writes still complete in the order they were submitted.
 */
static void complete(struct rmr_client *c, struct slot *s, int status)
{
	bool was_write = s->io.kind == RMR_IO_WRITE;
	rmr_io_cb cb = s->io.cb;
	void *priv = s->io.priv;
	struct slot *ready = NULL;
	bool idle;

	/*
	 * A flush is told done only once what members that left during it had
	 * not flushed is on the others: acknowledged before, it would promise
	 * writes that a power loss took and nobody recorded.
	 */
	if ((s->io.flags & RMR_IO_FLUSH) && !s->flush_ended) {
		s->flush_ended = true;
		s->flush_status = status;
		if (unflushed_hold_flush(c, s)) {
			s->phase = SLOT_BLOCKED;
			return;
		}
	}
	if (was_write) {
		/*
		 * A write some member applied and failed anyway (fewer than
		 * min_legs did, or its MAP_ADD went nowhere) was missed all
		 * the same by the others: they take the maps before they
		 * serve (and converge as unsettled where nobody recorded it).
		 */
		client_write_missed_done(c, s, status == 0 || s->applied);
		ready = write_finished(c, s);
	}
	idle = release_slot(c, s);
	cb(priv, status);
	if (idle)
		idle_poll_begin(c);
	dispatch_ready(c, ready);
	if (was_write && c->frozen)
		client_try_pulls(c);
	if (was_write && c->mc.phase == MC_DRAIN)
		client_membership_step(c, loop_now(c->loop));
}

/* --- sending ------------------------------------------------------------- */

/* Encode and send one leg of @s to @m; the data iovs follow the header. */
static int send_leg(struct rmr_client *c, struct slot *s, struct member *m, unsigned type,
		    uint64_t missed)
{
	struct leg *leg = &s->legs[m->index];
	bool data = type == RMR_MSG_WRITE && s->data_len;
	bool arg = type == RMR_MSG_READ && s->io.arg_len;
	/* The record slot's MAP_ADD names writes its member may have lost, not missed. */
	bool record = type == RMR_MSG_MAP_ADD && s->index == c->record_slot;
	struct rmr_msg msg = {
		.type = type,
		.pool_uuid = c->uuid,
		.op = s->io.op,
		.op_flags = s->io.op_flags,
		.slot = s->index,
		.seq = s->seq,
		.map_ver = c->map_ver,
		.addr = s->io.addr,
		.len = s->io.len,
		.payload_len = data ? s->data_len : arg ? s->io.arg_len
					  : record ? sizeof(c->record_wire) : 0,
		.missed = missed,
		.flags = type == RMR_MSG_WRITE && (s->io.flags & RMR_IO_PATCH) ? RMR_WIRE_WRITE_PATCH
			 : record ? RMR_WIRE_MAP_ADD_RECORD : 0,
	};
	struct iovec iov[4] = { { .iov_base = &leg->hdr, .iov_len = sizeof(leg->hdr) } };
	int n = 1, ret;

	rmr_wire_encode(&leg->hdr, &msg);
	if (data) {
		/* The transport takes four pieces: the header and at most three of data. */
		if (s->io.iovcnt > 3) {
			iov[n].iov_base = s->bounce;
			iov[n++].iov_len = s->data_len;
		} else {
			for (unsigned i = 0; i < s->io.iovcnt; i++)
				iov[n++] = s->iov[i];
		}
	} else if (arg) {
		iov[n].iov_base = (void *)s->io.arg;
		iov[n++].iov_len = s->io.arg_len;
	} else if (record) {
		iov[n].iov_base = &c->record_wire;
		iov[n++].iov_len = sizeof(c->record_wire);
	}
	ret = member_send(m, iov, n, leg);
	if (ret < 0)
		return ret;
	leg->sending = true;
	leg->waiting = true;
	leg->status = 0;
	leg->deadline = loop_now(c->loop) + c->opts.request_timeout_ms * NS_PER_MS;
	s->legs_mask |= bit(m->index);
	m->inflight++;
	return 0;
}

static void slot_progress(struct rmr_client *c, struct slot *s);

static void dispatch_read(struct rmr_client *c, struct slot *s)
{
	/*
	 * From where the round-robin stands now: it moves on below, and were
	 * the walk to follow it, a member whose send failed would be tried
	 * again and the next one skipped (with two members, a read failed
	 * with EIO while the other one was NORMAL: SIM_MEMBERS=2 seed 97778).
	 */
	unsigned start = c->rr_next;

	if (c->fenced) {
		complete(c, s, -ESTALE);
		return;
	}
	for (unsigned n = 0; n < c->nmembers; n++) {
		unsigned i = (start + n) % c->nmembers;
		struct member *m = &c->members[i];

		if (m->state != RMR_MEMBER_NORMAL || (s->tried_mask & bit(i)))
			continue;
		if (s->io.member_id) {
			if (m->id != s->io.member_id)
				continue;
		} else {
			c->rr_next = (i + 1) % c->nmembers;
		}
		s->tried_mask |= bit(i);
		s->legs_mask = 0;
		if (send_leg(c, s, m, RMR_MSG_READ, 0) == 0) {
			s->phase = SLOT_SENT;
			return;
		}
		member_fail(m, "send failed");
	}
	if (s->io.member_id && !s->tried_mask)
		complete(c, s, -ENXIO);
	else
		complete(c, s, s->first_err ? s->first_err : -EIO);
}

static void dispatch_write(struct rmr_client *c, struct slot *s)
{
	uint64_t normal = normal_ids(c), failed = 0;
	uint32_t seq;

	if (c->fenced) {
		complete(c, s, -ESTALE);
		return;
	}
	/* A flush goes out once what members left unflushed is on record. */
	if (unflushed_hold_flush(c, s)) {
		s->phase = SLOT_BLOCKED;
		return;
	}
	if (client_writes_held(c)) {
		s->phase = SLOT_BLOCKED;
		s->ready_next = NULL;
		if (c->held_tail)
			c->held_tail->ready_next = s;
		else
			c->held_head = s;
		c->held_tail = s;
		return;
	}

	s->phase = SLOT_SENT;
	s->legs_mask = 0;
	/* Every member of the pool that is not NORMAL misses this write. */
	s->missed_ids = c->members_ids & ~normal;
	for (unsigned i = 0; i < nmem(c); i++) {
		struct member *m = &c->members[i];
		int ret;

		if (m->state != RMR_MEMBER_NORMAL)
			continue;
		ret = send_leg(c, s, m, RMR_MSG_WRITE, s->missed_ids);
		if (ret == 0 && (s->io.flags & RMR_IO_FLUSH))
			unflushed_flush_sent(m, s);
		if (ret < 0) {
			/*
			 * A failed leg, not an absent one: the members that apply
			 * the write must record (MAP_ADD) that this one missed it.
			 */
			struct leg *leg = &s->legs[i];

			leg->sending = leg->waiting = false;
			leg->status = -EIO;
			s->legs_mask |= bit(i);
			failed |= bit(i);
		}
	}
	/*
	 * Only a write that some member may apply makes the others miss it: one
	 * that reached nobody must not keep every member out once they return.
	 */
	if (s->legs_mask & ~failed)
		client_write_missed(c, s, s->missed_ids);
	for (unsigned i = 0; i < nmem(c); i++)
		if (s->legs_mask & ~failed & bit(i))
			s->holder_ids |= bit(c->members[i].id);
	seq = s->seq;
	for (unsigned i = 0; i < nmem(c); i++) {
		if (!(failed & bit(i)))
			continue;
		member_fail(&c->members[i], "send failed");
		/*
		 * A failure takes others with it (another write's answer fails
		 * a second member): this write may have ended meanwhile (seed
		 * 95946: it completed twice), its slot maybe already reused.
		 */
		if (s->seq != seq || s->phase != SLOT_SENT)
			return;
	}
	if (!(s->legs_mask & ~failed)) {
		complete(c, s, -EIO);
		return;
	}
	slot_progress(c, s);
}

/* @s joins the end of the list of writes not yet finished. */
static void writes_append(struct rmr_client *c, struct slot *s)
{
	s->next = NULL;
	s->prev = c->writes_tail;
	if (c->writes_tail)
		c->writes_tail->next = s;
	else
		c->writes_head = s;
	c->writes_tail = s;
}

/* Writes are ordered by range: a write waits for every earlier overlapping one. */
static void write_enqueue(struct rmr_client *c, struct slot *s)
{
	s->deps = 0;
	for (struct slot *w = c->writes_head; w; w = w->next) {
		if (overlaps(w, s)) {
			s->deps++;
			w->has_dependents = true;
		}
	}
	writes_append(c, s);
	if (s->deps == 0)
		dispatch_write(c, s);
	else
		s->phase = SLOT_BLOCKED;
}

bool client_io_writes_in_flight(const struct rmr_client *c)
{
	/* Records not yet sent name writes a pull must see (client_unflushed.c). */
	if (unflushed_records_sendable(c))
		return true;
	for (const struct slot *w = c->writes_head; w; w = w->next)
		if (w->phase == SLOT_SENT || w->phase == SLOT_MAP_ADD)
			return true;
	return false;
}

void client_io_thaw(struct rmr_client *c)
{
	struct slot *s = c->held_head;

	c->frozen = false;
	if (client_writes_held(c))
		return; /* a membership change still holds them */
	c->held_head = c->held_tail = NULL;
	while (s) {
		struct slot *next = s->ready_next;

		dispatch_write(c, s);
		s = next;
	}
}

/* @s leaves the list of writes; @return the writes it held back that may go now. */
static struct slot *write_finished(struct rmr_client *c, struct slot *s)
{
	struct slot *ready = NULL, **tail = &ready;

	if (s->prev)
		s->prev->next = s->next;
	else
		c->writes_head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		c->writes_tail = s->prev;

	if (!s->has_dependents)
		return NULL;
	/*
	 * Dependents come after @s in the list. Collect the ones now free
	 * first: dispatching may complete a write and change the list.
	 */
	for (struct slot *w = s->next; w; w = w->next) {
		if (w->phase == SLOT_BLOCKED && overlaps(w, s) && --w->deps == 0) {
			w->ready_next = NULL;
			*tail = w;
			tail = &w->ready_next;
		}
	}
	return ready;
}

static void dispatch_ready(struct rmr_client *c, struct slot *ready)
{
	while (ready) {
		struct slot *w = ready;

		ready = w->ready_next;
		dispatch_write(c, w);
	}
}

void client_io_drain_submissions(struct rmr_client *c)
{
	struct slot *s, *next;

	pthread_mutex_lock(&c->sub_lock);
	s = c->sub_head;
	c->sub_head = c->sub_tail = NULL;
	pthread_mutex_unlock(&c->sub_lock);
	if (s)
		idle_poll_end(c);

	for (; s; s = next) {
		next = s->next;
		if (s->io.kind == RMR_IO_READ)
			dispatch_read(c, s);
		else
			write_enqueue(c, s);
	}
}

/* --- answers -------------------------------------------------------------- */

static void copy_to_iov(struct slot *s, const void *src, uint32_t len)
{
	const char *p = src;

	for (unsigned i = 0; i < s->io.iovcnt && len; i++) {
		size_t n = RMR_MIN(len, s->iov[i].iov_len);

		memcpy(s->iov[i].iov_base, p, n);
		p += n;
		len -= (uint32_t)n;
	}
}

static void note_error(struct slot *s, int status)
{
	if (!s->first_err)
		s->first_err = status;
}

/*
 * Members that applied a write but not its MAP_ADD hold the data and lack
 * the record of who missed it: taken as a pull source, one would leave a
 * member stale for good (seed 6093). They take the maps before they serve
 * again, as if they had missed a write.
 */
static void records_missed(struct rmr_client *c, uint64_t ids)
{
	if (ids)
		client_note_missed(c, ids);
}

/* Ask the members that have the write to record the ones that missed it. */
static void start_map_add(struct rmr_client *c, struct slot *s, uint64_t new_missed)
{
	uint64_t sent = 0, unrecorded = 0;

	s->phase = SLOT_MAP_ADD;
	s->first_answer = 0; /* a new phase: its answers are timed on their own */
	s->missed_ids |= new_missed;
	client_write_missed(c, s, new_missed);
	s->legs_mask = 0;
	for (unsigned i = 0; i < nmem(c); i++) {
		struct member *m = &c->members[i];

		if (!(s->ok_mask & bit(i)))
			continue;
		if (m->state == RMR_MEMBER_NORMAL && send_leg(c, s, m, RMR_MSG_MAP_ADD, s->missed_ids) == 0)
			sent |= bit(i);
		else
			unrecorded |= bit(m->id);
	}
	s->ok_mask = 0;
	if (!sent) {
		/* Nobody holds the record of who missed it: members may differ. */
		client_note_unsettled(c, s->holder_ids);
		complete(c, s, -EIO);
		return;
	}
	records_missed(c, unrecorded);
}

static void finish_write_phase(struct rmr_client *c, struct slot *s)
{
	uint64_t ok = 0, failed_ids = 0, refused_ids = 0;
	unsigned nok = 0;
	int req_err = 0;

	/* Fenced: nothing more goes out, not even a MAP_ADD on our behalf. */
	if (c->fenced) {
		complete(c, s, -ESTALE);
		return;
	}
	for (unsigned i = 0; i < nmem(c); i++) {
		struct leg *leg = &s->legs[i];
		struct member *m = &c->members[i];

		if (!(s->legs_mask & bit(i)))
			continue;
		if (leg->status == 0) {
			ok |= bit(i);
			nok++;
			continue;
		}
		note_error(s, leg->status);
		if (is_request_error(leg->status)) {
			req_err = leg->status;
			continue;
		}
		failed_ids |= bit(m->id);
		/*
		 * -ENODATA: the member lacks a chunk of the range that no peer of
		 * its can give now, and applied nothing. Decided below: it only
		 * misses the write if some other member applied it.
		 */
		if (leg->status == -ENODATA)
			refused_ids |= bit(m->id);
		else if (m->state == RMR_MEMBER_NORMAL)
			member_fail(m, "write failed on member");
	}
	s->ok_mask = ok;
	if (ok && s->phase != SLOT_MAP_ADD)
		s->applied = true;

	if (s->phase == SLOT_MAP_ADD) {
		if (!nok)
			client_note_unsettled(c, s->holder_ids);
		else
			records_missed(c, failed_ids);
		complete(c, s, nok >= c->opts.min_legs ? 0 : -EIO);
		return;
	}
	if (!nok) {
		/* Every copy failed, but a member may have applied it before. */
		if (failed_ids & ~refused_ids)
			client_note_unsettled(c, s->holder_ids & ~refused_ids);
		/* -ENODATA is between the members: "no member could apply it". */
		complete(c, s, req_err ? req_err
			       : s->first_err && s->first_err != -ENODATA ? s->first_err : -EIO);
		return;
	}
	/*
	 * Others applied it: a member that refused now holds older bytes in
	 * chunks it takes as current, and must not serve them. Out it goes,
	 * to take the maps (with this write's marks) before it serves again.
	 */
	for (unsigned i = 0; i < nmem(c); i++)
		if ((refused_ids & bit(c->members[i].id)) && c->members[i].state == RMR_MEMBER_NORMAL)
			member_fail(&c->members[i], "missed a write: lacks a chunk no peer of its could give");
	if (failed_ids) {
		start_map_add(c, s, failed_ids);
		return;
	}
	complete(c, s, nok >= c->opts.min_legs ? 0 : -EIO);
}

/* Called whenever a leg changed; completes the phase once nothing is pending. */
static void slot_progress(struct rmr_client *c, struct slot *s)
{
	for (unsigned i = 0; i < nmem(c); i++)
		if ((s->legs_mask & bit(i)) && (s->legs[i].sending || s->legs[i].waiting))
			return;

	if (s->io.kind == RMR_IO_READ) {
		for (unsigned i = 0; i < nmem(c); i++) {
			if (!(s->legs_mask & bit(i)))
				continue;
			if (s->legs[i].status >= 0) {
				complete(c, s, s->legs[i].status);
				return;
			}
			note_error(s, s->legs[i].status);
			if (is_request_error(s->legs[i].status)) {
				complete(c, s, s->legs[i].status);
				return;
			}
		}
		dispatch_read(c, s); /* retry on another member, or fail */
		return;
	}
	finish_write_phase(c, s);
}

void client_io_on_response(struct rmr_client *c, struct member *m, const struct rmr_msg *msg)
{
	struct slot *s;
	struct leg *leg;
	unsigned want;

	if (msg->slot >= c->qd) {
		member_fail(m, "answer for a slot that does not exist");
		return;
	}
	s = &c->slots[msg->slot];
	leg = &s->legs[m->index];
	want = s->phase == SLOT_MAP_ADD ? RMR_MSG_MAP_ADD_RSP
	       : s->io.kind == RMR_IO_READ ? RMR_MSG_READ_RSP : RMR_MSG_WRITE_RSP;
	if (s->seq != msg->seq || !(s->legs_mask & bit(m->index)) || !leg->waiting ||
	    msg->type != want || (s->phase != SLOT_SENT && s->phase != SLOT_MAP_ADD)) {
		member_fail(m, "answer to no request in flight");
		return;
	}
	if (msg->type == RMR_MSG_READ_RSP && msg->status == 0 &&
	    (msg->len != s->io.len ||
	     ((s->io.flags & RMR_IO_WHOLE) && msg->payload_len != s->io.len))) {
		log_err("pool=%s member=%u addr=%s: read answer of %u bytes (%u carried) for a read of %u",
			c->name, m->id, m->addr, msg->len, msg->payload_len, s->io.len);
		member_fail(m, "read answer of the wrong length");
		return;
	}
	leg->waiting = false;
	answers_poll(c, s);
	/* A read's success says how many bytes it returned. */
	leg->status = msg->type == RMR_MSG_READ_RSP && msg->status == 0 ? (int)msg->payload_len
									 : msg->status;
	m->inflight--;
	if (msg->status == -ESTALE) {
		uint32_t seq = s->seq;

		/* Failing every member may complete this slot already. */
		client_fence(c, "a member refused a request: a newer writer holds the pool");
		if (s->seq == seq && (s->phase == SLOT_SENT || s->phase == SLOT_MAP_ADD))
			slot_progress(c, s);
		return;
	}
	if (msg->status == 0) {
		if (msg->type == RMR_MSG_READ_RSP) {
			copy_to_iov(s, msg->payload, msg->payload_len);
			m->reads++;
			m->read_bytes += msg->payload_len;
		} else if (msg->type == RMR_MSG_WRITE_RSP) {
			m->writes++;
			m->write_bytes += s->data_len;
			unflushed_note_ack(m, s->io.addr, s->io.len);
		}
	} else {
		m->errors++;
		if (msg->type == RMR_MSG_READ_RSP && !is_request_error(msg->status))
			member_fail(m, "read failed on member");
	}
	if (msg->type == RMR_MSG_WRITE_RSP && (s->io.flags & RMR_IO_FLUSH))
		unflushed_flush_answered(m, s, msg->status == 0);
	slot_progress(c, s);
}

void client_io_on_send_done(struct rmr_client *c, struct member *m, struct leg *leg, int status)
{
	struct slot *s = leg_slot(m, leg);

	if (!leg->sending)
		return;
	leg->sending = false;
	if (status < 0 && leg->waiting) {
		leg->waiting = false;
		leg->status = -EIO;
		m->inflight--;
	}
	slot_progress(c, s);
	(void)c;
}

void client_io_member_lost(struct rmr_client *c, struct member *m)
{
	for (uint32_t n = 0; n < c->qd; n++) {
		struct slot *s = &c->slots[n];
		struct leg *leg = &s->legs[m->index];

		if ((s->phase != SLOT_SENT && s->phase != SLOT_MAP_ADD) ||
		    !(s->legs_mask & bit(m->index)) || (!leg->waiting && !leg->sending))
			continue;
		/* The connection is closed: its sends are abandoned, answers will not come. */
		leg->sending = false;
		if (leg->waiting) {
			leg->waiting = false;
			leg->status = -EIO;
		}
		slot_progress(c, s);
	}
	m->inflight = 0;
}

void client_io_check_deadlines(struct rmr_client *c, uint64_t now)
{
	for (uint32_t n = 0; n < c->qd; n++) {
		struct slot *s = &c->slots[n];

		if (s->phase != SLOT_SENT && s->phase != SLOT_MAP_ADD)
			continue;
		for (unsigned i = 0; i < nmem(c); i++) {
			struct leg *leg = &s->legs[i];

			if ((s->legs_mask & bit(i)) && leg->waiting && now > leg->deadline) {
				member_fail(&c->members[i], "request timeout");
				break;
			}
		}
	}
}

void client_io_redispatch(struct rmr_client *c, struct slot *s)
{
	dispatch_write(c, s);
}

void client_io_end_flush(struct rmr_client *c, struct slot *s)
{
	complete(c, s, s->flush_status);
}

static void record_done(void *priv, int status)
{
	unflushed_record_done(priv, status);
}

int client_io_send_record(struct rmr_client *c, const struct unflushed_record *r)
{
	struct slot *s = &c->slots[c->record_slot];
	uint64_t normal = 0;
	bool pulling = false;

	/* A slot of its own: consumer writes held back by a map pull cannot starve it. */
	if (s->phase != SLOT_FREE)
		return -EAGAIN;
	client_io_hold(c);
	c->record_wire.boot = cpu_to_le64(r->boot);
	s->io = (struct rmr_io){ .kind = RMR_IO_WRITE, .addr = r->addr, .len = r->len,
				 .iov = s->iov, .cb = record_done, .priv = c };
	s->data_len = 0;
	s->legs_mask = s->ok_mask = s->failed_mask = s->tried_mask = s->missed_ids = 0;
	s->holder_ids = 0;
	/* The queue's count of the member's pending miss passes to the slot... */
	s->missed_counted = bit(r->id);
	/* ...and stays as a miss: writes some member applied. */
	s->applied = true;
	s->first_err = 0;
	s->first_answer = 0;
	s->deps = 0;
	s->has_dependents = false;
	/* In the list of writes: later overlapping ones, and map pulls, wait for it. */
	writes_append(c, s);
	for (unsigned i = 0; i < nmem(c); i++) {
		if (c->members[i].state == RMR_MEMBER_NORMAL) {
			s->ok_mask |= bit(i);
			normal |= 1ull << c->members[i].id;
		}
		pulling |= c->members[i].pulling && c->gatherer != &c->members[i];
	}
	/*
	 * A member away misses the record as it misses a write: its maps lack
	 * it. Back with no write missed, it would serve at once and could be
	 * the source of the recorded member's maps, which then copies nothing
	 * (SIM_POWER=1 SIM_MEMBERS=8 seed 206): it takes the maps first. (By
	 * id, as writes do: a removed entry may share one with a live member.)
	 * One taking the maps right now may get them without the record: a
	 * new map version makes its pull count as outdated, and it takes them
	 * again.
	 */
	records_missed(c, c->members_ids & ~normal & ~(1ull << r->id));
	if (pulling)
		c->map_ver++;
	start_map_add(c, s, bit(r->id));
	return 0;
}
