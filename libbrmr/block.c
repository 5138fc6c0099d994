/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Block device on an rmr pool (client side). A block request is split into
 * pieces that never cross a chunk boundary nor exceed the pool's largest
 * request, each submitted as one rmr request; the caller's callback runs
 * once, when the last piece completed, with the first error seen.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <rmr/brmr.h>
#include <rmr/client.h>

#define BRMR_EXPORT __attribute__((visibility("default")))

struct parent {
	struct brmr_dev *dev;
	brmr_cb cb;
	void *priv;
	atomic_uint remaining; /* pieces in flight, plus one while submitting */
	atomic_int err;
	struct parent *next_free;
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
};

BRMR_EXPORT int brmr_open(const struct rmr_client_opts *opts, struct brmr_dev **out)
{
	struct rmr_pool_info info = { .size = sizeof(info) };
	struct brmr_dev *d;
	int ret;

	if (!opts || !out)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	ret = rmr_client_open(opts, &d->client);
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
		d->parents[i].next_free = d->free_list;
		d->free_list = &d->parents[i];
	}
	*out = d;
	return 0;
}

BRMR_EXPORT void brmr_close(struct brmr_dev *d)
{
	if (!d)
		return;
	rmr_client_close(d->client); /* waits for every piece in flight */
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

static struct parent *parent_get(struct brmr_dev *d)
{
	struct parent *p;

	pthread_mutex_lock(&d->lock);
	while (!d->free_list)
		pthread_cond_wait(&d->freed, &d->lock);
	p = d->free_list;
	d->free_list = p->next_free;
	pthread_mutex_unlock(&d->lock);
	return p;
}

static void parent_put(struct parent *p)
{
	struct brmr_dev *d = p->dev;

	pthread_mutex_lock(&d->lock);
	p->next_free = d->free_list;
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

static void piece_done(void *priv, int status)
{
	struct parent *p = priv;
	int zero = 0;

	if (status < 0)
		atomic_compare_exchange_strong(&p->err, &zero, status);
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

BRMR_EXPORT int brmr_submit(struct brmr_dev *d, enum brmr_op op, unsigned flags,
			    uint64_t offset, uint64_t len, const struct iovec *iov,
			    unsigned iovcnt, brmr_cb cb, void *priv)
{
	bool data = op == BRMR_OP_READ || op == BRMR_OP_WRITE;
	struct parent *p;
	uint64_t done = 0;
	int ret = 0;

	if (!d || !valid_request(d, op, flags, offset, len, iov, iovcnt, cb))
		return -EINVAL;
	p = parent_get(d);
	p->cb = cb;
	p->priv = priv;
	atomic_store(&p->err, 0);
	atomic_store(&p->remaining, 1);

	do {
		uint64_t addr = offset + done;
		uint64_t chunk_end = (addr | (d->chunk_size - 1)) + 1;
		uint64_t piece = len - done;
		struct iovec slice[RMR_MAX_IOV];
		struct rmr_io io = {
			.kind = op == BRMR_OP_READ ? RMR_IO_READ : RMR_IO_WRITE,
			.op = (uint16_t)op,
			.op_flags = flags,
			.addr = addr,
			.cb = piece_done,
			.priv = p,
		};

		if (len && piece > chunk_end - addr)
			piece = chunk_end - addr;
		if (data && piece > d->max_io)
			piece = d->max_io;
		io.len = (uint32_t)piece;
		if (data) {
			io.iov = slice;
			io.iovcnt = iov_slice(iov, iovcnt, done, piece, slice);
		}
		atomic_fetch_add(&p->remaining, 1);
		ret = rmr_client_submit(d->client, &io, RMR_SUBMIT_WAIT);
		if (ret < 0) {
			atomic_fetch_sub(&p->remaining, 1);
			break;
		}
		done += piece;
	} while (done < len);

	if (ret < 0 && done == 0) {
		/* Nothing went out: the callback must not run. */
		parent_put(p);
		return ret;
	}
	if (ret < 0) {
		int zero = 0;

		atomic_compare_exchange_strong(&p->err, &zero, ret);
	}
	parent_drop(p);
	return 0;
}
