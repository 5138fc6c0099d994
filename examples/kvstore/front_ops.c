/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Building the front's requests to the pool (kv_wire.h) and finishing ops:
 * every request about a key is addressed at its bucket's first byte; plain
 * GETs and all writes go through the batcher (front_batch.c).
 */
#include "front.h"
#include "kv_log.h"
#include "kv_wire.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void op_order_start(void *ctx, struct order_item *it)
{
	struct op *op = (struct op *)((char *)it - offsetof(struct op, order));

	(void)ctx;
	op->start(op);
}

static uint64_t bucket_addr(const struct op *op)
{
	return op->order.bucket * op->f->bucket_size;
}

/* The key as a request argument: never NULL, the empty key is a key too. */
static const void *key_ptr(const struct op *op)
{
	return op->key ? (const void *)op->key : "";
}

void op_read_get(struct op *op, bool meta)
{
	if (meta) {
		/* Existence and expiry only: the answer fits the op's own header bytes. */
		op->iov[0] = (struct iovec){ op->hdr, KV_GET_ANSWER_HDR };
		op->io = (struct rmr_io){
			.kind = RMR_IO_READ,
			.op = KV_OP_GET,
			.op_flags = KV_GET_F_META,
			.addr = bucket_addr(op),
			.len = KV_GET_ANSWER_HDR,
			.iov = op->iov,
			.iovcnt = 1,
			.arg = key_ptr(op),
			.arg_len = op->klen,
		};
		front_pool_submit(op);
	} else if (op->alone) {
		op_read_get_alone(op);
	} else {
		batch_read(op);
	}
}

void op_read_get_alone(struct op *op)
{
	struct front *f = op->f;
	uint32_t len;

	op->answer = front_answer_get(f);
	if (!op->answer) {
		front_pool_fail(op, -ENOMEM);
		return;
	}
	/* The key and the answer share a member's buffer of max io bytes. */
	len = f->max_io - op->klen < f->answer_cap ? f->max_io - op->klen : f->answer_cap;
	op->iov[0] = (struct iovec){ op->answer, len };
	op->io = (struct rmr_io){
		.kind = RMR_IO_READ,
		.op = KV_OP_GET,
		.addr = bucket_addr(op),
		.len = len,
		.iov = op->iov,
		.iovcnt = 1,
		.arg = key_ptr(op),
		.arg_len = op->klen,
	};
	front_pool_submit(op);
}

/* The payload [header, key, value] of a single write is ready: to the bucket's batcher. */
static void write_payload(struct op *op, uint16_t opcode, uint8_t hdr_len)
{
	op->wop = opcode;
	op->hdr_len = hdr_len;
	batch_write(op);
}

void op_write_set(struct op *op, const void *value, uint32_t vlen, uint64_t expire_ms)
{
	op->value = value;
	op->vlen = vlen;
	kv_wire_set_hdr(op->hdr, op->klen, vlen, expire_ms);
	write_payload(op, KV_OP_SET, KV_SET_HDR);
}

void op_write_del(struct op *op)
{
	op->vlen = 0;
	kv_wire_del_hdr(op->hdr, op->klen);
	write_payload(op, KV_OP_DEL, KV_DEL_HDR);
}

void op_finish(struct op *op)
{
	struct front *f = op->f;
	struct cmd *cmd = op->cmd;

	if (op->answer) {
		front_answer_put(f, op->answer);
		op->answer = NULL;
	}
	order_done(&f->order, &op->order);
	f->ops_alive--;
	if (!cmd) {
		free(op); /* the front's own request */
		return;
	}
	if (--cmd->pending == 0)
		cmd_finish(cmd);
}

/* --- expiry: a GET found a key past its time --------------------------------- */

static void expire_done(struct op *op)
{
	if (op->status == 0)
		op->f->expired_deleted++;
	else
		kv_log(KV_LOG_DEBUG, "deleting an expired key failed: %s", strerror(-op->status));
	op_finish(op);
}

static void expire_start(struct op *op)
{
	op->vlen = 0;
	kv_wire_del_expired_hdr(op->hdr, op->klen, op->deadline_ms);
	write_payload(op, KV_OP_DEL_EXPIRED, KV_DEL_EXPIRED_HDR);
}

/*
 * Conditional, so that it is right whenever it lands: a SET of the key that
 * was queued after the GET gives it a later expiry (or none), and this
 * delete then leaves it alone, on every member, in whatever order.
 */
void front_expire_key(struct front *f, const uint8_t *key, uint32_t klen, uint64_t deadline_ms)
{
	struct op *op = calloc(1, sizeof(*op) + klen);

	if (!op)
		return; /* it stays expired; the next GET tries again */
	memcpy(op + 1, key, klen);
	op->f = f;
	op->key = (const uint8_t *)(op + 1);
	op->klen = klen;
	op->hash = kv_hash(key_ptr(op), klen);
	op->order.bucket = kv_bucket_of_hash(op->hash, f->nbuckets);
	op->order.cls = ORDER_WRITE;
	op->start = expire_start;
	op->step = expire_done;
	op->deadline_ms = deadline_ms;
	f->ops_alive++;
	order_submit(&f->order, &op->order);
}
