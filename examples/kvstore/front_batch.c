/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Gathering requests: each librmr request costs a send and a receive on the
 * front, on every member it goes to, and a wake-up of two event loops, far
 * more than the command it carries. So:
 *
 *  - reads: the plain GETs whose turn came during one loop turn go out
 *    together, as one KV_OP_MGET (a lone one as a plain GET). A member that
 *    still copies buckets it missed answers none of them; they then go one
 *    by one, each with its own bucket in the range, so that librmr syncs it.
 *  - writes: one request at a time per bucket. Writes whose turn comes while
 *    their bucket has one in flight wait for it and then go together, as one
 *    KV_OP_BATCH (group commit). librmr would hold them back anyway: writes
 *    to a bucket overlap. A batch is all or nothing on a member; one the
 *    bucket cannot hold (-ERANGE) is tried again write by write, so that
 *    each command gets its own answer.
 *
 * Neither changes what a client sees: a batch only joins requests that the
 * bucket order (front_order.h) already let run.
 */
#include "front.h"
#include "kv_log.h"
#include "kv_wire.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Keys in one KV_OP_MGET: their answer headers must fit with room to spare. */
#define READ_BATCH_MAX_KEYS 256u

/* One bucket's writes. */
struct wq {
	struct op *head, *tail;      /* waiting, in order */
	bool inflight;               /* a request of this bucket is out */
	bool ready;                  /* on the ready list */
	struct wq *next_ready;
};

struct front_batches {
	struct op *rhead, *rtail;    /* reads gathered this turn */
	struct wq *wq;               /* per bucket */
	struct wq *ready, *ready_tail; /* buckets with writes to send, none in flight, in order */
};

/* A request carrying one or more ops. */
struct batch {
	struct op carrier;           /* goes through front_pool like an op */
	struct op *ops;              /* linked by batch_next */
	unsigned n;
	uint64_t bucket;
	uint8_t *buf;                /* read: argument and answer; write: payload */
};

int front_batch_init(struct front *f)
{
	f->batches = calloc(1, sizeof(*f->batches));
	if (!f->batches)
		return -ENOMEM;
	f->batches->wq = calloc(f->nbuckets, sizeof(*f->batches->wq));
	return f->batches->wq ? 0 : -ENOMEM;
}

void front_batch_destroy(struct front *f)
{
	if (f->batches)
		free(f->batches->wq);
	free(f->batches);
	f->batches = NULL;
}

static struct batch *batch_new(struct front *f, uint64_t bucket, op_step_fn step, size_t bufsize)
{
	struct batch *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->buf = bufsize ? malloc(bufsize) : NULL;
	if (bufsize && !b->buf) {
		free(b);
		return NULL;
	}
	b->carrier.f = f;
	b->carrier.step = step;
	b->bucket = bucket;
	return b;
}

static void batch_free(struct batch *b)
{
	free(b->buf);
	free(b);
}

static struct batch *batch_of(struct op *carrier)
{
	return (struct batch *)((char *)carrier - offsetof(struct batch, carrier));
}

/* Detach the ops of @b: the list, to run their steps after @b is gone. */
static struct op *batch_take_ops(struct batch *b)
{
	struct op *ops = b->ops;

	b->ops = NULL;
	return ops;
}

/* --- reads ---------------------------------------------------------------------- */

void batch_read(struct op *op)
{
	struct front_batches *fb = op->f->batches;

	op->batch_next = NULL;
	if (fb->rtail)
		fb->rtail->batch_next = op;
	else
		fb->rhead = op;
	fb->rtail = op;
}

/* The answer of a KV_OP_MGET: each op gets its record; the unanswered go alone. */
static void step_read_batch(struct op *carrier)
{
	struct batch *b = batch_of(carrier);
	int status = carrier->status;
	const uint8_t *p = b->buf + (b->carrier.io.arg_len), *end = p + (status > 0 ? status : 0);
	uint32_t answered = 0, i = 0;
	struct op *op, *next;

	if (status >= (int)KV_MGET_ANSWER_HDR) {
		answered = kv_get_le32(p);
		p += KV_MGET_ANSWER_HDR;
		if (answered > b->n)
			status = -EPROTO;
	} else if (status >= 0) {
		status = -EPROTO;
	}
	for (op = batch_take_ops(b); op; op = next, i++) {
		next = op->batch_next;
		if (status < 0) {
			op->status = status;
			op->step(op);
		} else if (i < answered) {
			uint32_t len = end - p >= KV_GET_ANSWER_HDR
					       ? KV_GET_ANSWER_HDR + (kv_get_le32(p) ? kv_get_le32(p + 4) : 0)
					       : UINT32_MAX;

			if (len > (size_t)(end - p)) {
				kv_log(KV_LOG_ERR, "a member's multi-key answer does not add up");
				status = -EPROTO;
				op->status = status;
			} else {
				op->ans = p;
				op->status = (int)len;
				p += len;
			}
			op->step(op); /* may free the op */
		} else {
			/* Not answered: the member resyncs, or the answers filled its buffer. */
			op->alone = true;
			op_read_get_alone(op);
		}
	}
	batch_free(b);
}

/* Send the reads in @list (n ops, argument bytes @arg_len) as one request. */
static void send_reads(struct front *f, struct op *list, unsigned n, uint32_t arg_len)
{
	struct batch *b;
	uint32_t ans;
	uint8_t *a;

	if (n == 1) {
		op_read_get_alone(list);
		return;
	}
	b = batch_new(f, list->order.bucket, step_read_batch, f->max_io);
	if (!b) {
		for (struct op *op = list, *next; op; op = next) {
			next = op->batch_next;
			front_pool_fail(op, -ENOMEM);
		}
		return;
	}
	b->ops = list;
	b->n = n;
	kv_put_le32(b->buf, n);
	a = b->buf + 4;
	for (struct op *op = list; op; op = op->batch_next) {
		kv_put_le32(a, op->klen);
		if (op->klen)
			memcpy(a + 4, op->key, op->klen);
		a += 4 + op->klen;
	}
	/*
	 * The answer after the argument, in the rest of one max-io buffer, and
	 * no longer than a bucket: the range stays inside the first key's.
	 */
	ans = f->max_io - arg_len < f->bucket_size ? f->max_io - arg_len : f->bucket_size;
	b->carrier.iov[0] = (struct iovec){ b->buf + arg_len, ans };
	b->carrier.io = (struct rmr_io){
		.kind = RMR_IO_READ,
		.op = KV_OP_MGET,
		.addr = list->order.bucket * f->bucket_size,
		.len = ans,
		.iov = b->carrier.iov,
		.iovcnt = 1,
		.arg = b->buf,
		.arg_len = arg_len,
	};
	front_pool_submit(&b->carrier);
}

static void flush_reads(struct front *f)
{
	struct front_batches *fb = f->batches;
	/* Keys take at most a quarter of a request: the answers get the rest. */
	uint32_t arg_max = f->max_io / 4;

	while (fb->rhead) {
		struct op *list = fb->rhead, *last = list;
		uint32_t arg_len = 4 + 4 + list->klen;
		unsigned n = 1;

		while (last->batch_next && n < READ_BATCH_MAX_KEYS &&
		       arg_len + 4 + last->batch_next->klen <= arg_max) {
			last = last->batch_next;
			arg_len += 4 + last->klen;
			n++;
		}
		fb->rhead = last->batch_next;
		last->batch_next = NULL;
		send_reads(f, list, n, arg_len);
	}
	fb->rtail = NULL;
}

/* --- writes --------------------------------------------------------------------- */

static uint32_t write_len(const struct op *op)
{
	return op->hdr_len + op->klen + op->vlen;
}

static void mark_ready(struct front_batches *fb, struct wq *q)
{
	if (q->ready || q->inflight || !q->head)
		return;
	q->ready = true;
	q->next_ready = NULL;
	if (fb->ready_tail)
		fb->ready_tail->next_ready = q;
	else
		fb->ready = q;
	fb->ready_tail = q;
}

void batch_write(struct op *op)
{
	struct front_batches *fb = op->f->batches;
	struct wq *q = &fb->wq[op->order.bucket];

	op->batch_next = NULL;
	if (q->tail)
		q->tail->batch_next = op;
	else
		q->head = op;
	q->tail = op;
	mark_ready(fb, q);
}

static void step_write_batch(struct op *carrier)
{
	struct batch *b = batch_of(carrier);
	struct front_batches *fb = carrier->f->batches;
	struct wq *q = &fb->wq[b->bucket];
	int status = carrier->status;
	struct op *op, *next;

	q->inflight = false;
	if (status == -ERANGE && b->n > 1) {
		/* Too much for the bucket together: again one by one, each with its own answer. */
		struct op *ops = batch_take_ops(b), *last = ops;

		for (op = ops; op; op = op->batch_next) {
			op->alone = true;
			last = op;
		}
		last->batch_next = q->head;
		q->head = ops;
		if (!q->tail)
			q->tail = last;
	} else {
		for (op = batch_take_ops(b); op; op = next) {
			next = op->batch_next;
			op->status = status;
			op->step(op);
		}
	}
	mark_ready(fb, q);
	batch_free(b);
}

/* Send the first writes waiting for bucket queue @q, as many as one request takes. */
static void send_writes(struct front *f, struct wq *q, uint64_t bucket)
{
	/* Shorter than a bucket (never a whole-bucket write), and one request. */
	uint32_t max = f->bucket_size - 1 < f->max_io ? f->bucket_size - 1 : f->max_io;
	struct op *list = q->head, *last = list, *op;
	uint32_t total = KV_BATCH_REC_HDR + write_len(list);
	unsigned n = 1;
	struct batch *b;
	uint8_t *p;

	while (!list->alone && last->batch_next && !last->batch_next->alone &&
	       total + KV_BATCH_REC_HDR + write_len(last->batch_next) <= max) {
		last = last->batch_next;
		total += KV_BATCH_REC_HDR + write_len(last);
		n++;
	}
	q->head = last->batch_next;
	if (!q->head)
		q->tail = NULL;
	last->batch_next = NULL;

	b = batch_new(f, bucket, step_write_batch, n > 1 ? total : 0);
	if (!b) {
		for (op = list; op; op = list) {
			list = op->batch_next;
			front_pool_fail(op, -ENOMEM);
		}
		return;
	}
	b->ops = list;
	b->n = n;
	q->inflight = true;
	if (n == 1) {
		/* A lone write goes as itself, straight from its parts. */
		unsigned k = 0;

		b->carrier.iov[k++] = (struct iovec){ list->hdr, list->hdr_len };
		if (list->klen)
			b->carrier.iov[k++] = (struct iovec){ (void *)list->key, list->klen };
		if (list->vlen)
			b->carrier.iov[k++] = (struct iovec){ (void *)list->value, list->vlen };
		b->carrier.io = (struct rmr_io){
			.kind = RMR_IO_WRITE,
			.op = list->wop,
			.addr = bucket * f->bucket_size,
			.len = write_len(list),
			.iov = b->carrier.iov,
			.iovcnt = k,
		};
	} else {
		p = b->buf;
		for (op = list; op; op = op->batch_next) {
			kv_wire_batch_rec_hdr(p, op->wop, write_len(op));
			memcpy(p + KV_BATCH_REC_HDR, op->hdr, op->hdr_len);
			p += KV_BATCH_REC_HDR + op->hdr_len;
			if (op->klen)
				memcpy(p, op->key, op->klen);
			p += op->klen;
			if (op->vlen)
				memcpy(p, op->value, op->vlen);
			p += op->vlen;
		}
		b->carrier.iov[0] = (struct iovec){ b->buf, total };
		b->carrier.io = (struct rmr_io){
			.kind = RMR_IO_WRITE,
			.op = KV_OP_BATCH,
			.addr = bucket * f->bucket_size,
			.len = total,
			.iov = b->carrier.iov,
			.iovcnt = 1,
		};
	}
	front_pool_submit(&b->carrier);
}

/*
 * A batch is cut only when a librmr slot is free for it: until then more
 * writes of its bucket can join. Buckets take turns in the order they
 * became ready.
 */
static void flush_writes(struct front *f)
{
	struct front_batches *fb = f->batches;

	while (fb->ready && f->inflight < f->qd) {
		struct wq *q = fb->ready;

		fb->ready = q->next_ready;
		if (!fb->ready)
			fb->ready_tail = NULL;
		q->ready = false;
		if (!q->inflight && q->head)
			send_writes(f, q, (uint64_t)(q - fb->wq));
	}
}

void front_batch_flush(struct front *f)
{
	flush_reads(f);
	flush_writes(f);
}
