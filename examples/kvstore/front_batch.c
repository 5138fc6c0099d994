/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Gathering requests: each librmr request costs a send and a receive on the
 * front, on every member it goes to, and a wake-up of two event loops, far
 * more than the command it carries. So:
 *
 *  - reads: at most READS_INFLIGHT read requests are out at once; the
 *    plain GETs whose turn comes meanwhile wait and then go together, as
 *    one KV_OP_MGET. A member that still copies buckets it missed answers
 *    none of them; they then go one by one, each with its own bucket in
 *    the range, so that librmr syncs it.
 *  - writes: one request at a time per region (a quarter of the buckets).
 *    Writes whose turn comes while their region has one in flight wait for
 *    it and then go together, as one KV_OP_BATCH (group commit): the
 *    writes of one bucket inside it, those of several as an RMR_IO_PATCH
 *    over the region's whole buckets (librmr then syncs every bucket of it
 *    a member missed first, and marks them all for a member that misses
 *    it). A batch is all or nothing on a member; one a bucket might not
 *    hold (-ERANGE) is tried again with each bucket's writes on their own,
 *    and then write by write, so that each command gets its own answer.
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
/* Read batches out at once: the GETs that arrive meanwhile wait and go together. */
#define READS_INFLIGHT 4u

/*
 * Writes go out per region, a run of 1/WRITE_REGIONS of the buckets: one
 * request at a time each, so that a region's writes that wait meanwhile go
 * together. Several buckets' writes go as one patch over the whole region
 * (a range librmr's activity log keeps, however the buckets vary). 4
 * measured best once the members stopped paying a system call per change
 * (docs/kvstore.md).
 */
#define WRITE_REGIONS 4u

/* One bucket's writes. */
struct wq {
	struct op *head, *tail;      /* waiting, in order */
	bool queued;                 /* on its region's list */
	struct wq *next;             /* in that list */
};

/* A region's buckets with writes, and its request. */
struct wregion {
	struct wq *head, *tail;      /* buckets with writes waiting, in the order they got them */
	bool inflight;               /* a request of this region is out */
	bool ready;                  /* on the ready list */
	struct wregion *next_ready;
};

/* A bucket's writes taken into a batch. */
struct pick {
	uint64_t bucket;
	struct op *first, *last;
};

struct front_batches {
	struct op *rhead, *rtail;    /* reads gathered, not sent yet */
	unsigned reads_inflight;     /* read batches out */
	struct wq *wq;               /* per bucket */
	struct wregion *regions;
	uint64_t region_buckets;     /* buckets per region */
	struct wregion *ready, *ready_tail; /* regions with writes to send, none in flight, in order */
	struct pick *picks;          /* region_buckets of them, for the batch being cut */
	struct batch *spare;         /* finished batches kept, with their buffers */
	unsigned nspare;
};

/* Finished batches kept for reuse. */
#define BATCH_KEEP 16u

/* A request carrying one or more ops. */
struct batch {
	struct op carrier;           /* goes through front_pool like an op */
	struct op *ops;              /* linked by batch_next */
	unsigned n;
	unsigned buckets;            /* writes: buckets they are of */
	bool patch;                  /* writes: a patch over their region */
	uint64_t bucket;             /* the first op's */
	uint8_t *buf;                /* max io bytes, if any; read: argument and answer; write: payload */
	struct batch *next_spare;    /* kept for reuse */
};

int front_batch_init(struct front *f)
{
	struct front_batches *fb = calloc(1, sizeof(*fb));
	uint64_t nregions;

	if (!fb)
		return -ENOMEM;
	f->batches = fb;
	fb->region_buckets = (f->nbuckets + WRITE_REGIONS - 1) / WRITE_REGIONS;
	nregions = (f->nbuckets + fb->region_buckets - 1) / fb->region_buckets;
	fb->wq = calloc(f->nbuckets, sizeof(*fb->wq));
	fb->regions = calloc(nregions, sizeof(*fb->regions));
	fb->picks = calloc(fb->region_buckets, sizeof(*fb->picks));
	return fb->wq && fb->regions && fb->picks ? 0 : -ENOMEM;
}

void front_batch_destroy(struct front *f)
{
	if (f->batches) {
		while (f->batches->spare) {
			struct batch *b = f->batches->spare;

			f->batches->spare = b->next_spare;
			free(b->buf);
			free(b);
		}
		free(f->batches->wq);
		free(f->batches->regions);
		free(f->batches->picks);
	}
	free(f->batches);
	f->batches = NULL;
}

/*
 * A batch, with a buffer of max io bytes if @buf. Finished batches are kept
 * (BATCH_KEEP of them) with their buffers: a buffer of max io bytes is
 * above malloc's mmap threshold, so each new one cost an mmap, page faults
 * and an munmap.
 */
static struct batch *batch_new(struct front *f, uint64_t bucket, op_step_fn step, bool buf)
{
	struct front_batches *fb = f->batches;
	struct batch *b = fb->spare;
	uint8_t *keep;

	if (b) {
		fb->spare = b->next_spare;
		fb->nspare--;
	} else {
		b = calloc(1, sizeof(*b));
		if (!b)
			return NULL;
	}
	keep = b->buf;
	memset(b, 0, sizeof(*b));
	b->buf = keep;
	if (buf && !b->buf) {
		b->buf = malloc(f->max_io);
		if (!b->buf) {
			free(b);
			return NULL;
		}
	}
	b->carrier.f = f;
	b->carrier.step = step;
	b->bucket = bucket;
	return b;
}

static void batch_free(struct batch *b)
{
	struct front_batches *fb = b->carrier.f->batches;

	if (fb->nspare < BATCH_KEEP) {
		b->next_spare = fb->spare;
		fb->spare = b;
		fb->nspare++;
		return;
	}
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

	carrier->f->batches->reads_inflight--;
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

	b = batch_new(f, list->order.bucket, step_read_batch, true);
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
	f->batches->reads_inflight++;
	front_pool_submit(&b->carrier);
}

static void flush_reads(struct front *f)
{
	struct front_batches *fb = f->batches;
	/* Keys take at most a quarter of a request: the answers get the rest. */
	uint32_t arg_max = f->max_io / 4;

	while (fb->rhead && fb->reads_inflight < READS_INFLIGHT) {
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
	if (!fb->rhead)
		fb->rtail = NULL;
}

/* --- writes --------------------------------------------------------------------- */

static uint32_t write_len(const struct op *op)
{
	return op->hdr_len + op->klen + op->vlen;
}

static struct wregion *region_of(struct front_batches *fb, uint64_t bucket)
{
	return &fb->regions[bucket / fb->region_buckets];
}

static void mark_ready(struct front_batches *fb, struct wregion *r)
{
	if (r->ready || r->inflight || !r->head)
		return;
	r->ready = true;
	r->next_ready = NULL;
	if (fb->ready_tail)
		fb->ready_tail->next_ready = r;
	else
		fb->ready = r;
	fb->ready_tail = r;
}

/* Bucket queue @q has writes again: its region sends them in turn. */
static void queue_bucket(struct front_batches *fb, struct wq *q)
{
	struct wregion *r = region_of(fb, (uint64_t)(q - fb->wq));

	if (!q->queued) {
		q->queued = true;
		q->next = NULL;
		if (r->tail)
			r->tail->next = q;
		else
			r->head = q;
		r->tail = q;
	}
	mark_ready(fb, r);
}

/* Take the buckets whose queues are empty off region @r's list. */
static void unqueue_empty(struct wregion *r)
{
	struct wq **pp = &r->head;

	r->tail = NULL;
	while (*pp) {
		struct wq *q = *pp;

		if (!q->head) {
			q->queued = false;
			*pp = q->next;
		} else {
			r->tail = q;
			pp = &q->next;
		}
	}
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
	queue_bucket(fb, q);
}

/* Put @ops (a list in order) back at the head of their buckets' queues. */
static void requeue(struct front_batches *fb, struct op *ops)
{
	while (ops) {
		struct wq *q = &fb->wq[ops->order.bucket];
		struct op *first = ops, *last = ops;

		while (last->batch_next && last->batch_next->order.bucket == first->order.bucket)
			last = last->batch_next;
		ops = last->batch_next;
		last->batch_next = q->head;
		q->head = first;
		if (!q->tail)
			q->tail = last;
		queue_bucket(fb, q);
	}
}

static void step_write_batch(struct op *carrier)
{
	struct batch *b = batch_of(carrier);
	struct front_batches *fb = carrier->f->batches;
	struct wregion *r = region_of(fb, b->bucket);
	int status = carrier->status;
	struct op *op, *next;

	r->inflight = false;
	if (status == -ERANGE && b->n > 1) {
		/*
		 * Too much for a bucket together: again with the writes of its own
		 * bucket only, and if that was the batch, one by one, each with
		 * its own answer.
		 */
		struct op *ops = batch_take_ops(b);

		for (op = ops; op; op = op->batch_next) {
			if (b->buckets == 1)
				op->alone = true;
			op->bucket_only = true;
		}
		requeue(fb, ops);
	} else {
		for (op = batch_take_ops(b); op; op = next) {
			next = op->batch_next;
			op->status = status;
			op->step(op);
		}
	}
	mark_ready(fb, r);
	batch_free(b);
}

/* Encode the records of @list (linked by batch_next) into @p. */
static void encode_records(uint8_t *p, const struct op *list)
{
	for (const struct op *op = list; op; op = op->batch_next) {
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
}

/* Send @b, its ops gathered, as one request. */
static void send_batch(struct front *f, struct batch *b, uint32_t total)
{
	struct op *list = b->ops;

	b->carrier.iov[0] = (struct iovec){ b->buf, total };
	if (b->patch) {
		/* The region's whole buckets, as a patch: librmr syncs each one a member missed. */
		struct front_batches *fb = f->batches;
		uint64_t first = b->bucket / fb->region_buckets * fb->region_buckets;
		uint64_t n = f->nbuckets - first < fb->region_buckets ? f->nbuckets - first
									: fb->region_buckets;

		b->carrier.io = (struct rmr_io){
			.kind = RMR_IO_WRITE,
			.op = KV_OP_BATCH,
			.addr = first * f->bucket_size,
			.len = (uint32_t)(n * f->bucket_size),
			.iov = b->carrier.iov,
			.iovcnt = 1,
			.flags = RMR_IO_PATCH,
		};
	} else if (b->n > 1) {
		b->carrier.io = (struct rmr_io){
			.kind = RMR_IO_WRITE,
			.op = KV_OP_BATCH,
			.addr = b->bucket * f->bucket_size,
			.len = total,
			.iov = b->carrier.iov,
			.iovcnt = 1,
		};
	} else {
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
			.addr = b->bucket * f->bucket_size,
			.len = write_len(list),
			.iov = b->carrier.iov,
			.iovcnt = k,
		};
	}
	front_pool_submit(&b->carrier);
}

/*
 * Take the writes of bucket queue @q that may join a batch with @total
 * bytes so far, up to @max: its first ones, in order, up to the first that
 * must go alone (or, with @others, with its bucket only). Without @others
 * the first one is always taken. @return how many; they are linked from
 * *@first to *@last and gone from @q.
 */
static unsigned take(struct wq *q, bool others, uint32_t max, uint32_t *total, struct op **first,
		     struct op **last)
{
	struct op *op = q->head, *end = NULL;
	unsigned n = 0;

	while (op && !op->alone && !(others && op->bucket_only) &&
	       (*total + KV_BATCH_REC_HDR + write_len(op) <= max || (!others && !n))) {
		*total += KV_BATCH_REC_HDR + write_len(op);
		end = op;
		op = op->batch_next;
		n++;
	}
	if (!n)
		return 0;
	*first = q->head;
	*last = end;
	q->head = end->batch_next;
	if (!q->head)
		q->tail = NULL;
	end->batch_next = NULL;
	return n;
}

static int pick_order(const void *a, const void *b)
{
	const struct pick *x = a, *y = b;

	return x->bucket < y->bucket ? -1 : x->bucket > y->bucket;
}

/*
 * Send region @r's next request: the writes waiting for its buckets, as
 * many as one request takes. Several buckets go as one patch over the
 * region (records grouped by bucket, in bucket order); one bucket's go as
 * a batch inside it, as a lone write if one.
 */
static void send_region(struct front *f, struct wregion *r)
{
	struct front_batches *fb = f->batches;
	/* One bucket's batch stays shorter than a bucket: never a whole-bucket write. */
	uint32_t one_max = f->bucket_size - 1 < f->max_io ? f->bucket_size - 1 : f->max_io;
	struct wq *q0 = r->head;
	struct op *h = q0->head, *list = NULL, **tail = &list;
	/* The first bucket in line decides: it goes first, with others if its first write may. */
	bool patch = q0->next && !h->alone && !h->bucket_only &&
		     KV_BATCH_REC_HDR + write_len(h) <= f->max_io;
	uint32_t total = 0;
	unsigned n = 0, npicks = 0;
	struct batch *b;

	if (h->alone) {
		/* It goes as itself. */
		q0->head = h->batch_next;
		if (!q0->head)
			q0->tail = NULL;
		h->batch_next = NULL;
		fb->picks[0] = (struct pick){ .bucket = h->order.bucket, .first = h, .last = h };
		npicks = n = 1;
	} else {
		for (struct wq *q = q0; q; q = patch ? q->next : NULL) {
			struct pick *pk = &fb->picks[npicks];
			unsigned got = take(q, patch, patch ? f->max_io : one_max, &total, &pk->first,
					    &pk->last);

			if (got) {
				pk->bucket = (uint64_t)(q - fb->wq);
				npicks++;
				n += got;
			}
		}
	}
	qsort(fb->picks, npicks, sizeof(*fb->picks), pick_order);
	for (unsigned i = 0; i < npicks; i++) {
		*tail = fb->picks[i].first;
		tail = &fb->picks[i].last->batch_next;
	}
	unqueue_empty(r);

	b = batch_new(f, fb->picks[0].bucket, step_write_batch, n > 1);
	if (!b) {
		for (struct op *op = list; op; op = list) {
			list = op->batch_next;
			front_pool_fail(op, -ENOMEM);
		}
		mark_ready(fb, r);
		return;
	}
	b->ops = list;
	b->n = n;
	b->buckets = npicks;
	b->patch = patch && n > 1; /* a lone write goes as itself, whatever else waited */
	if (n > 1)
		encode_records(b->buf, list);
	r->inflight = true;
	send_batch(f, b, total);
}

/*
 * A batch is cut only when a librmr slot is free for it: until then more
 * writes of its region can join. Regions take turns in the order they
 * became ready.
 */
static void flush_writes(struct front *f)
{
	struct front_batches *fb = f->batches;

	while (fb->ready && f->inflight < f->qd) {
		struct wregion *r = fb->ready;

		fb->ready = r->next_ready;
		if (!fb->ready)
			fb->ready_tail = NULL;
		r->ready = false;
		if (!r->inflight && r->head)
			send_region(f, r);
	}
}

void front_batch_flush(struct front *f)
{
	flush_reads(f);
	flush_writes(f);
}
