/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The front's request gathering (front_batch.c) against stubs of the pool:
 * writes of several buckets of a region go as one patch over the region,
 * records grouped in bucket order; one request per region at a time; a
 * batch refused as too full comes back bucket by bucket, then write by
 * write; a lone write always goes as itself; at most READS_INFLIGHT read
 * batches are out.
 */
#include "../front.h"
#include "../kv_wire.h"
#include "kv_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 16u /* 4 regions of 4 */
#define BUCKET 4096u

/* What the stubs saw. */
static struct op *sent[64];
static unsigned nsent, nalone, nfailed;
static struct front f;

void front_pool_submit(struct op *op)
{
	ck_assert_uint_lt(nsent, 64);
	sent[nsent++] = op;
	f.inflight++;
}

void front_pool_fail(struct op *op, int err)
{
	(void)op;
	(void)err;
	nfailed++;
}

void op_read_get_alone(struct op *op)
{
	(void)op;
	nalone++;
}

/* A test op: a SET of key @name to bucket @b; its step records the status. */
struct top {
	struct op op;
	char key[16];
	int status;
	unsigned steps;
};

static void top_step(struct op *op)
{
	struct top *t = (struct top *)op;

	t->status = op->status;
	t->steps++;
}

static struct top *set_op(uint64_t b, const char *name)
{
	struct top *t = calloc(1, sizeof(*t));

	ck_assert_ptr_nonnull(t);
	snprintf(t->key, sizeof(t->key), "%s", name);
	t->op.f = &f;
	t->op.order.bucket = b;
	t->op.step = top_step;
	t->op.key = (const uint8_t *)t->key;
	t->op.klen = (uint32_t)strlen(t->key);
	t->op.value = (const uint8_t *)"v";
	t->op.vlen = 1;
	t->op.wop = KV_OP_SET;
	t->op.hdr_len = KV_SET_HDR;
	kv_wire_set_hdr(t->op.hdr, t->op.klen, t->op.vlen, 0);
	return t;
}

/* Complete sent request @i with @status. */
static void complete(unsigned i, int status)
{
	struct op *carrier = sent[i];

	f.inflight--;
	carrier->status = status;
	carrier->step(carrier);
}

/* The keys of a batch payload in order, as "key@bucket,..." (bucket from the op). */
static void batch_keys(const struct rmr_io *io, char *out, size_t cap)
{
	uint32_t off = 0;
	struct kv_write w;
	const char *why = "";
	size_t n = 0;

	ck_assert_uint_eq(io->iovcnt, 1);
	out[0] = 0;
	while (kv_wire_batch_next(io->iov[0].iov_base, (uint32_t)io->iov[0].iov_len, &off, &w,
				  &why) == 1)
		n += (size_t)snprintf(out + n, cap - n, "%s%.*s", n ? "," : "", (int)w.klen,
				      (const char *)w.key);
	ck_assert_str_eq(why, "");
}

static void setup(void)
{
	memset(&f, 0, sizeof(f));
	f.nbuckets = NBUCKETS;
	f.bucket_size = BUCKET;
	f.max_io = 65536;
	f.qd = 64;
	ck_assert_int_eq(front_batch_init(&f), 0);
	nsent = nalone = nfailed = 0;
}

static void teardown(void)
{
	front_batch_destroy(&f);
}

START_TEST(buckets_of_a_region_go_as_one_patch_in_bucket_order)
{
	struct top *a = set_op(3, "a"), *b = set_op(1, "b"), *c = set_op(3, "c");
	struct top *d = set_op(6, "d"), *e = set_op(1, "e");
	char keys[128];

	batch_write(&a->op);
	batch_write(&b->op);
	batch_write(&c->op);
	batch_write(&d->op);
	front_batch_flush(&f);
	/* Region 0 (buckets 0..3): one patch; region 1: d alone, as itself. */
	ck_assert_uint_eq(nsent, 2);
	ck_assert_uint_eq(sent[0]->io.op, KV_OP_BATCH);
	ck_assert_uint_eq(sent[0]->io.flags, RMR_IO_PATCH);
	ck_assert_uint_eq(sent[0]->io.addr, 0);
	ck_assert_uint_eq(sent[0]->io.len, 4 * BUCKET);
	batch_keys(&sent[0]->io, keys, sizeof(keys));
	ck_assert_str_eq(keys, "b,a,c"); /* bucket 1, then bucket 3 in arrival order */
	ck_assert_uint_eq(sent[1]->io.op, KV_OP_SET);
	ck_assert_uint_eq(sent[1]->io.flags, 0);
	ck_assert_uint_eq(sent[1]->io.addr, 6 * BUCKET);

	/* Region 0 has a request out: e waits, then goes as itself. */
	batch_write(&e->op);
	front_batch_flush(&f);
	ck_assert_uint_eq(nsent, 2);
	complete(0, 0);
	ck_assert(a->steps == 1 && b->steps == 1 && c->steps == 1 && a->status == 0);
	front_batch_flush(&f);
	ck_assert_uint_eq(nsent, 3);
	ck_assert_uint_eq(sent[2]->io.op, KV_OP_SET);
	ck_assert_uint_eq(sent[2]->io.addr, 1 * BUCKET);
	complete(1, 0);
	complete(2, 0);
	ck_assert(d->steps == 1 && e->steps == 1);
	free(a), free(b), free(c), free(d), free(e);
}
END_TEST

/*
 * A patch refused as too full (-ERANGE) comes back with each bucket's
 * writes on their own, and those refused again write by write; a fresh
 * write that meets them in the region still goes, as itself.
 */
START_TEST(a_batch_too_full_comes_back_bucket_by_bucket_then_write_by_write)
{
	struct top *a = set_op(1, "a"), *b = set_op(1, "b"), *c = set_op(2, "c");
	struct top *d = set_op(3, "d");
	char keys[128];

	batch_write(&a->op);
	batch_write(&b->op);
	batch_write(&c->op);
	front_batch_flush(&f);
	ck_assert_uint_eq(nsent, 1);
	ck_assert_uint_eq(sent[0]->io.flags, RMR_IO_PATCH);
	/* d arrives while the patch is out; then the patch is refused. */
	batch_write(&d->op);
	front_batch_flush(&f);
	complete(0, -ERANGE);
	ck_assert(a->steps == 0 && b->steps == 0 && c->steps == 0);
	/* d's bucket came first: d goes alone, as itself (a, b, c go with their bucket only). */
	front_batch_flush(&f);
	ck_assert_uint_eq(nsent, 2);
	ck_assert_uint_eq(sent[1]->io.op, KV_OP_SET);
	ck_assert_uint_eq(sent[1]->io.flags, 0);
	ck_assert_uint_eq(sent[1]->io.addr, 3 * BUCKET);
	ck_assert_ptr_nonnull(sent[1]->io.iov[0].iov_base);
	complete(1, 0);
	ck_assert_int_eq(d->steps, 1);
	/* Bucket 1's two writes, as a plain batch inside the bucket. */
	front_batch_flush(&f);
	ck_assert_uint_eq(nsent, 3);
	ck_assert_uint_eq(sent[2]->io.op, KV_OP_BATCH);
	ck_assert_uint_eq(sent[2]->io.flags, 0);
	ck_assert_uint_eq(sent[2]->io.addr, 1 * BUCKET);
	ck_assert_uint_lt(sent[2]->io.len, BUCKET);
	batch_keys(&sent[2]->io, keys, sizeof(keys));
	ck_assert_str_eq(keys, "a,b");
	complete(2, -ERANGE);
	/* Refused again: one by one now (c of bucket 2 too), each with its own answer. */
	for (unsigned i = 3; i < 6; i++) {
		const char *key;

		front_batch_flush(&f);
		ck_assert_uint_eq(nsent, i + 1);
		ck_assert_uint_eq(sent[i]->io.op, KV_OP_SET);
		ck_assert_uint_eq(sent[i]->io.flags, 0);
		key = (const char *)sent[i]->io.iov[1].iov_base;
		complete(i, key[0] == 'a' ? -ERANGE : 0);
	}
	ck_assert(a->steps == 1 && a->status == -ERANGE);
	ck_assert(b->steps == 1 && b->status == 0);
	ck_assert(c->steps == 1 && c->status == 0);
	front_batch_flush(&f);
	ck_assert_uint_eq(nsent, 6);
	ck_assert_uint_eq(nfailed, 0);
	free(a), free(b), free(c), free(d);
}
END_TEST

START_TEST(at_most_four_read_batches_are_out)
{
	struct top *r[6];

	for (unsigned i = 0; i < 6; i++) {
		char name[8];

		snprintf(name, sizeof(name), "r%u", i);
		r[i] = set_op(i, name);
		batch_read(&r[i]->op);
		front_batch_flush(&f);
	}
	/* Four went one by one; the last two wait, then go together. */
	ck_assert_uint_eq(nsent, 4);
	for (unsigned i = 0; i < 4; i++)
		ck_assert_uint_eq(sent[i]->io.op, KV_OP_MGET);
	ck_assert_uint_eq(kv_get_le32(sent[0]->io.arg), 1);
	complete(0, -EIO);
	ck_assert(r[0]->steps == 1 && r[0]->status == -EIO);
	front_batch_flush(&f);
	ck_assert_uint_eq(nsent, 5);
	ck_assert_uint_eq(kv_get_le32(sent[4]->io.arg), 2);
	for (unsigned i = 1; i < 5; i++)
		complete(i, -EIO);
	for (unsigned i = 0; i < 6; i++) {
		ck_assert_int_eq(r[i]->steps, 1);
		free(r[i]);
	}
	ck_assert_uint_eq(nalone, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("batch");
	TCase *tc = tcase_create("front");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, buckets_of_a_region_go_as_one_patch_in_bucket_order);
	tcase_add_test(tc, a_batch_too_full_comes_back_bucket_by_bucket_then_write_by_write);
	tcase_add_test(tc, at_most_four_read_batches_are_out);
	suite_add_tcase(s, tc);
	return test_run(s);
}
