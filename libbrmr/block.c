/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Block device on an rmr pool (client side). A block request is split into
 * pieces that never cross a chunk boundary nor exceed the pool's largest
 * request, each submitted as one rmr request; the caller's callback runs
 * once, when the last piece completed, with the first error seen.
 *
 * On librmr's event-loop thread nothing may wait: a request that finds no
 * free slot for its first piece is refused with -EAGAIN, and one that ran
 * out of slots part-way keeps the rest in a queue that each completing
 * piece (whose slot librmr frees before the callback) moves on.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <rmr/brmr.h>
#include <rmr/client.h>

#include "compiler.h"

#define BRMR_EXPORT __attribute__((visibility("default")))

struct parent {
	struct brmr_dev *dev;
	brmr_cb cb;
	void *priv;
	atomic_uint remaining; /* pieces in flight, plus one while submitting */
	atomic_int err;
	struct parent *next;   /* in the free list, or the queue of unsent rests */

	/* The request, and how much of it went out. */
	enum brmr_op op;
	unsigned flags;
	uint64_t offset, len, done;
	struct iovec iov[BRMR_MAX_IOV];
	unsigned iovcnt;
};

struct brmr_dev {
	struct rmr_client *client;
	uint64_t size;
	uint32_t chunk_size;
	uint32_t max_io;
	struct parent *parents;
	pthread_mutex_t lock;
	pthread_cond_t freed;
	struct parent *free_list;
	/* Loop thread only: requests whose rest waits for slots, oldest first. */
	struct parent *unsent_head, *unsent_tail;
};

BRMR_EXPORT int brmr_open(const struct rmr_client_opts *opts, struct brmr_dev **out)
{
	struct rmr_pool_info info = { .size = sizeof(info) };
	struct rmr_client_opts o;
	struct brmr_dev *d;
	int ret;

	if (!opts || !out || !rmr_opts_copy(&o, sizeof(o), opts))
		return -EINVAL;
	/* Our stores write to the page cache: what a flush did not cover is at risk. */
	o.volatile_writes = true;
	if (o.queue_depth == 1)
		o.queue_depth = 2; /* one slot for requests, one for the client's records */
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	ret = rmr_client_open(&o, &d->client);
	if (ret < 0) {
		free(d);
		return ret;
	}
	rmr_client_info(d->client, &info);
	d->size = info.pool_size;
	d->chunk_size = info.chunk_size;
	d->max_io = info.max_io_size;
	/* One parent per slot: a parent holds at least one slot while it lives. */
	d->parents = calloc(info.queue_depth, sizeof(*d->parents));
	if (!d->parents) {
		rmr_client_close(d->client);
		free(d);
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->freed, NULL);
	for (uint32_t i = 0; i < info.queue_depth; i++) {
		d->parents[i].dev = d;
		d->parents[i].next = d->free_list;
		d->free_list = &d->parents[i];
	}
	*out = d;
	return 0;
}

struct close_flush {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void close_flush_done(void *priv, int status)
{
	struct close_flush *cf = priv;

	(void)status; /* a member that failed it left NORMAL: its writes are on record */
	pthread_mutex_lock(&cf->lock);
	cf->done = true;
	pthread_cond_signal(&cf->cond);
	pthread_mutex_unlock(&cf->lock);
}

/*
 * What the members acknowledged from their page caches goes to their disks
 * before the sessions end: once closed, nobody counts it as at risk any
 * more (rmr_client_opts.volatile_writes), so a host that lost power later
 * would lose it unseen.
 */
static void flush_before_close(struct brmr_dev *d)
{
	struct close_flush cf = { .lock = PTHREAD_MUTEX_INITIALIZER,
				  .cond = PTHREAD_COND_INITIALIZER };

	if (brmr_submit(d, BRMR_OP_FLUSH, 0, 0, 0, NULL, 0, close_flush_done, &cf) < 0)
		return;
	pthread_mutex_lock(&cf.lock);
	while (!cf.done)
		pthread_cond_wait(&cf.cond, &cf.lock);
	pthread_mutex_unlock(&cf.lock);
}

BRMR_EXPORT void brmr_close(struct brmr_dev *d)
{
	brmr_close_and_record(d, NULL);
}

BRMR_EXPORT void brmr_close_and_record(struct brmr_dev *d, struct rmr_close_record *rec)
{
	if (!d) {
		if (rec)
			memset(rec, 0, sizeof(*rec));
		return;
	}
	flush_before_close(d);
	/* Waits for every piece in flight. */
	rmr_client_close_and_record(d->client, rec);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->freed);
	free(d->parents);
	free(d);
}

BRMR_EXPORT struct rmr_client *brmr_client(struct brmr_dev *d)
{
	return d->client;
}

BRMR_EXPORT uint64_t brmr_size(struct brmr_dev *d)
{
	return d->size;
}

BRMR_EXPORT uint32_t brmr_chunk_size(struct brmr_dev *d)
{
	return d->chunk_size;
}

/* A free parent; NULL if none and @p wait is false. */
static struct parent *parent_get(struct brmr_dev *d, bool wait)
{
	struct parent *p;

	pthread_mutex_lock(&d->lock);
	while (!d->free_list && wait)
		pthread_cond_wait(&d->freed, &d->lock);
	p = d->free_list;
	if (p)
		d->free_list = p->next;
	pthread_mutex_unlock(&d->lock);
	return p;
}

static void parent_put(struct parent *p)
{
	struct brmr_dev *d = p->dev;

	pthread_mutex_lock(&d->lock);
	p->next = d->free_list;
	d->free_list = p;
	pthread_cond_signal(&d->freed);
	pthread_mutex_unlock(&d->lock);
}

static void parent_drop(struct parent *p)
{
	if (atomic_fetch_sub(&p->remaining, 1) != 1)
		return;
	brmr_cb cb = p->cb;
	void *priv = p->priv;
	int err = atomic_load(&p->err);

	parent_put(p);
	cb(priv, err);
}

static void parent_fail(struct parent *p, int err)
{
	int zero = 0;

	atomic_compare_exchange_strong(&p->err, &zero, err);
}

static int submit_pieces(struct parent *p, unsigned flags);
static void send_unsent(struct brmr_dev *d);

static void piece_done(void *priv, int status)
{
	struct parent *p = priv;
	struct brmr_dev *d = p->dev;

	if (status < 0)
		parent_fail(p, status);
	/* This piece's slot is free again (librmr frees it before the
	 * callback), unless a thread waiting in rmr_client_submit() took it:
	 * then that request's completion comes back here. Rests are queued
	 * only on the loop thread, where this runs. */
	if (d->unsent_head)
		send_unsent(d);
	parent_drop(p);
}

/* Describe bytes [off, off+len) of @iov in @out; returns the entry count. */
static unsigned iov_slice(const struct iovec *iov, unsigned iovcnt, uint64_t off, uint64_t len,
			  struct iovec *out)
{
	unsigned n = 0;

	for (unsigned i = 0; i < iovcnt && len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t take = iov[i].iov_len - off;

		if (take > len)
			take = len;
		out[n].iov_base = (char *)iov[i].iov_base + off;
		out[n].iov_len = take;
		n++;
		len -= take;
		off = 0;
	}
	return n;
}

static bool valid_request(struct brmr_dev *d, enum brmr_op op, unsigned flags, uint64_t offset,
			  uint64_t len, const struct iovec *iov, unsigned iovcnt, brmr_cb cb)
{
	uint64_t data = 0;

	if (!cb || (flags & ~BRMR_F_FUA) || iovcnt > BRMR_MAX_IOV || (iovcnt && !iov))
		return false;
	for (unsigned i = 0; i < iovcnt; i++)
		data += iov[i].iov_len;
	switch (op) {
	case BRMR_OP_READ:
	case BRMR_OP_WRITE:
		if (!len || data != len)
			return false;
		break;
	case BRMR_OP_FLUSH:
		return offset == 0 && len == 0 && iovcnt == 0;
	case BRMR_OP_TRIM:
	case BRMR_OP_WRITE_ZEROES:
		if (!len || iovcnt)
			return false;
		break;
	default:
		return false;
	}
	return offset <= d->size && len <= d->size - offset;
}

/*
 * Submit @p's pieces from p->done on. @return 0 once all are out; -EAGAIN
 * when librmr had no free slot (on the loop thread); another -errno.
 */
static int submit_pieces(struct parent *p, unsigned flags)
{
	struct brmr_dev *d = p->dev;
	bool data = p->op == BRMR_OP_READ || p->op == BRMR_OP_WRITE;

	do {
		uint64_t addr = p->offset + p->done;
		uint64_t chunk_end = (addr | (d->chunk_size - 1)) + 1;
		uint64_t piece = p->len - p->done;
		struct iovec slice[RMR_MAX_IOV];
		struct rmr_io io = {
			.kind = p->op == BRMR_OP_READ ? RMR_IO_READ : RMR_IO_WRITE,
			.op = (uint16_t)p->op,
			.op_flags = p->flags,
			.addr = addr,
			.cb = piece_done,
			.priv = p,
			.flags = p->op == BRMR_OP_FLUSH ? RMR_IO_FLUSH
				 : p->op == BRMR_OP_READ ? RMR_IO_WHOLE : 0,
		};
		int ret;

		if (p->len && piece > chunk_end - addr)
			piece = chunk_end - addr;
		if (data && piece > d->max_io)
			piece = d->max_io;
		io.len = (uint32_t)piece;
		if (data) {
			io.iov = slice;
			io.iovcnt = iov_slice(p->iov, p->iovcnt, p->done, piece, slice);
		}
		atomic_fetch_add(&p->remaining, 1);
		ret = rmr_client_submit(d->client, &io, flags);
		if (ret < 0) {
			atomic_fetch_sub(&p->remaining, 1);
			return ret;
		}
		p->done += piece;
	} while (p->done < p->len);
	return 0;
}

/* Loop thread: move the queued rests on, oldest first, while slots last. */
static void send_unsent(struct brmr_dev *d)
{
	struct parent *p;

	while ((p = d->unsent_head)) {
		int ret = submit_pieces(p, 0);

		if (ret == -EAGAIN)
			return; /* a completing piece brings us back */
		d->unsent_head = p->next;
		if (!d->unsent_head)
			d->unsent_tail = NULL;
		if (ret < 0)
			parent_fail(p, ret);
		parent_drop(p); /* the reference submitting held */
	}
}

BRMR_EXPORT int brmr_submit(struct brmr_dev *d, enum brmr_op op, unsigned flags,
			    uint64_t offset, uint64_t len, const struct iovec *iov,
			    unsigned iovcnt, brmr_cb cb, void *priv)
{
	struct parent *p;
	bool on_loop;
	int ret;

	if (!d || !valid_request(d, op, flags, offset, len, iov, iovcnt, cb))
		return -EINVAL;
	on_loop = rmr_client_on_loop_thread(d->client);
	/* Queued rests go first: a new request must not take their slots. */
	if (on_loop && d->unsent_head)
		return -EAGAIN;
	p = parent_get(d, !on_loop);
	if (!p)
		return -EAGAIN;
	p->cb = cb;
	p->priv = priv;
	p->op = op;
	p->flags = flags;
	p->offset = offset;
	p->len = len;
	p->done = 0;
	p->iovcnt = iovcnt;
	if (iovcnt)
		memcpy(p->iov, iov, iovcnt * sizeof(*iov));
	atomic_store(&p->err, 0);
	atomic_store(&p->remaining, 1);

	ret = submit_pieces(p, RMR_SUBMIT_WAIT);
	if (ret < 0 && p->done == 0) {
		/* Nothing went out: the callback must not run. */
		parent_put(p);
		return ret;
	}
	if (ret == -EAGAIN) {
		/* Part-way, on the loop thread: the rest follows as slots free. */
		p->next = NULL;
		if (d->unsent_tail)
			d->unsent_tail->next = p;
		else
			d->unsent_head = p;
		d->unsent_tail = p;
		return 0;
	}
	if (ret < 0)
		parent_fail(p, ret);
	parent_drop(p);
	return 0;
}
