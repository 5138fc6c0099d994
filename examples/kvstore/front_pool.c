/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The front's side of librmr: opening the pool, submitting requests and
 * taking their completions back to the main thread.
 *
 * Completion callbacks run on librmr's event-loop thread: they queue the op
 * and poke an eventfd, nothing more (one eventfd write per batch). The main
 * thread counts requests in flight and keeps them at most the pool's queue
 * depth; the rest wait in a submit queue, in order.
 */
#include "front.h"
#include "kv_bucket.h"
#include "kv_log.h"
#include "kv_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Recovery as the front sees it (librmr's thread; librmr logs state changes itself). */
static void on_dirty_tracking(void *priv, uint16_t member_id, bool tracking)
{
	(void)priv;
	kv_log(KV_LOG_NOTICE, "member %u %s", member_id,
	       tracking ? "misses writes: the others record its buckets dirty"
			: "took the dirty maps and resyncs its buckets from its peers");
}

static void on_map_update(void *priv, uint16_t member_id, uint16_t source_id, int status)
{
	(void)priv;
	kv_log(status ? KV_LOG_WARN : KV_LOG_NOTICE, "member %u: dirty maps from member %u %s%s",
	       member_id, source_id, status ? "failed: " : "taken", status ? strerror(-status) : "");
}

static const struct rmr_client_ops client_ops = {
	.size = sizeof(client_ops),
	.dirty_tracking = on_dirty_tracking,
	.map_update = on_map_update,
};

static void post_done(struct front *f, struct op *op)
{
	/* On librmr's loop thread while the front runs there, a kick of the
	 * eventfd's watch brings its turn after this callback; elsewhere, a
	 * write to the eventfd. */
	bool kicked = rmr_client_kick_fd(f->client, f->evfd) == 0, wake;

	pthread_mutex_lock(&f->done_lock);
	op->next = NULL;
	if (f->done_tail)
		f->done_tail->next = op;
	else
		f->done_head = op;
	f->done_tail = op;
	wake = !kicked && !f->done_signalled;
	if (wake)
		f->done_signalled = f->done_evfd = true;
	pthread_mutex_unlock(&f->done_lock);
	if (wake) {
		uint64_t one = 1;

		/* Cannot fail short of a bug: the counter never nears its limit. */
		if (write(f->evfd, &one, sizeof(one)) != sizeof(one))
			kv_log(KV_LOG_ERR, "eventfd write: %s", strerror(errno));
	}
}

/* librmr's loop thread: the front's own, until the stop. */
static void on_request_done(void *priv, int status)
{
	struct op *op = priv;

	op->status = status;
	post_done(op->f, op);
}

void front_pool_fail(struct op *op, int err)
{
	op->status = err;
	post_done(op->f, op);
}

static void submit_now(struct front *f, struct op *op)
{
	int ret;

	if (!f->client) {
		front_pool_fail(op, -ESHUTDOWN);
		return;
	}
	op->io.cb = on_request_done;
	op->io.priv = op;
	op->submitted = true;
	f->inflight++;
	f->rmr_requests++;
	/*
	 * Below the queue depth a slot is free: librmr released it before the
	 * callback that brought the last completion here. (On librmr's
	 * loop thread, where the front runs, the submit never waits; during
	 * the stop, on the main thread, it may.)
	 */
	ret = rmr_client_submit(f->client, &op->io, RMR_SUBMIT_WAIT);
	if (ret < 0) {
		op->submitted = false;
		f->inflight--;
		front_pool_fail(op, ret);
	}
}

void front_pool_submit(struct op *op)
{
	struct front *f = op->f;

	if (f->inflight < f->qd && !f->sub_head) {
		submit_now(f, op);
		return;
	}
	op->next = NULL;
	if (f->sub_tail)
		f->sub_tail->next = op;
	else
		f->sub_head = op;
	f->sub_tail = op;
}

void front_pool_completions(struct front *f)
{
	struct op *list, *op;
	bool evfd;
	uint64_t n;

	front_clock(f);
	/* The eventfd first, then the list: a completion posted in between
	 * finds done_signalled still set and is taken below. */
	pthread_mutex_lock(&f->done_lock);
	evfd = f->done_evfd;
	f->done_evfd = false;
	pthread_mutex_unlock(&f->done_lock);
	if (evfd && read(f->evfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		kv_log(KV_LOG_ERR, "eventfd read: %s", strerror(errno));
	pthread_mutex_lock(&f->done_lock);
	list = f->done_head;
	f->done_head = f->done_tail = NULL;
	f->done_signalled = false;
	pthread_mutex_unlock(&f->done_lock);

	for (op = list; op; op = op->next)
		if (op->submitted) {
			op->submitted = false;
			f->inflight--;
		}
	while (f->sub_head && f->inflight < f->qd) {
		op = f->sub_head;
		f->sub_head = op->next;
		if (!f->sub_head)
			f->sub_tail = NULL;
		submit_now(f, op);
	}
	while (list) {
		op = list;
		list = op->next;
		if (op->status < 0)
			f->rmr_errors++;
		op->step(op);
	}
}

uint8_t *front_answer_get(struct front *f)
{
	if (f->nanswers)
		return f->answers[--f->nanswers];
	return malloc(f->answer_cap);
}

void front_answer_put(struct front *f, uint8_t *buf)
{
	if (f->nanswers < f->qd)
		f->answers[f->nanswers++] = buf;
	else
		free(buf);
}

int front_pool_open(struct front *f)
{
	struct rmr_client_opts o = { .size = sizeof(o) };
	struct rmr_pool_info info = { .size = sizeof(info) };
	int ret;

	o.pool_name = f->cfg.pool;
	o.transport = f->cfg.transport;
	o.provider = f->cfg.provider;
	o.nmembers = f->cfg.nmembers;
	o.members = f->cfg.members;
	o.queue_depth = f->cfg.queue_depth;
	o.max_io_size = f->cfg.max_io;
	o.min_legs = f->cfg.min_legs;
	o.takeover = f->cfg.takeover;
	o.key = f->cfg.keyed ? f->cfg.key : NULL;
	o.ops = &client_ops;
	o.priv = f;
	ret = rmr_client_open(&o, &f->client);
	if (ret < 0) {
		kv_log(KV_LOG_ERR, "cannot open the pool: %s",
		       ret == -EBUSY ? "another front holds it (stop it, or take over with --takeover)"
		       : ret == -ESTALE ? "a newer front fenced this one"
		       : ret == -ETIMEDOUT ? "no member answered in time (or none accepted this front's pool key: see their logs)"
					   : strerror(-ret));
		return ret;
	}
	rmr_client_info(f->client, &info);
	if (info.chunk_size < 4096 || info.pool_size % info.chunk_size) {
		kv_log(KV_LOG_ERR, "the pool's geometry (%" PRIu64 " bytes in chunks of %" PRIu32 ") is not a kvstore's",
		       info.pool_size, info.chunk_size);
		ret = -EINVAL;
		goto err;
	}
	/* A peer copies a bucket in one request: one consistent snapshot. */
	if (info.chunk_size > info.max_io_size) {
		kv_log(KV_LOG_ERR, "buckets of %" PRIu32 " bytes exceed the pool's max io size of %" PRIu32 " bytes: start the front (and the members) with --max-io %" PRIu32 " or more",
		       info.chunk_size, info.max_io_size, info.chunk_size);
		ret = -EINVAL;
		goto err;
	}
	f->nbuckets = info.pool_size / info.chunk_size;
	f->bucket_size = info.chunk_size;
	f->max_io = info.max_io_size;
	f->qd = info.queue_depth;
	f->max_kv = kv_bucket_max_kv(f->bucket_size);
	/* A GET answer: the answer header and the largest value a bucket holds. */
	f->answer_cap = f->bucket_size;
	f->answers = calloc(f->qd, sizeof(*f->answers));
	f->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!f->answers || f->evfd < 0 || pthread_mutex_init(&f->done_lock, NULL)) {
		kv_log(KV_LOG_ERR, "out of resources");
		ret = -ENOMEM;
		goto err;
	}
	ret = order_init(&f->order, f->nbuckets, op_order_start, f);
	if (ret == 0)
		ret = front_batch_init(f);
	if (ret < 0) {
		kv_log(KV_LOG_ERR, "out of memory");
		goto err;
	}
	return 0;
err:
	rmr_client_close(f->client);
	f->client = NULL;
	return ret;
}

void front_pool_close(struct front *f)
{
	if (f->client)
		rmr_client_close(f->client);
	f->client = NULL;
	/* Completions of the last requests: their commands have no client any more. */
	if (f->done_head)
		front_pool_completions(f);
	while (f->nanswers)
		free(f->answers[--f->nanswers]);
	free(f->answers);
	order_destroy(&f->order);
	front_batch_destroy(f);
	if (f->evfd >= 0)
		close(f->evfd);
	pthread_mutex_destroy(&f->done_lock);
}
