/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The member's store file: created and reopened with its pages; librmr's
 * metadata blob surviving a torn save in either slot; the dirty-map area's
 * bounds; a bad superblock, a short file and a store in use refused with a
 * reason; a torn page kept damaged until a peer's copy replaces it; bucket
 * copies whole and checked; digests that follow the data, not its layout.
 */
#include "../kv_store.h"
#include "../kv_wire.h"
#include "kv_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUCKET 4096u
#define NBUCKETS 16u

static char dir[] = "/tmp/kv-test-store.XXXXXX";
static char path[256];

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/m1.kv", dir);
}

static void teardown(void)
{
	char other[300];

	unlink(path);
	snprintf(other, sizeof(other), "%s/m2.kv", dir);
	unlink(other);
	rmdir(dir);
	strcpy(dir, "/tmp/kv-test-store.XXXXXX");
}

static struct kv_store_params params(uint16_t id)
{
	struct kv_store_params p = { .pool_name = "kv", .member_id = id, .nbuckets = NBUCKETS,
				     .bucket_size = BUCKET };

	memset(p.uuid.b, 0x5a, sizeof(p.uuid.b));
	return p;
}

static struct kv_store *create_open(const char *file, uint16_t id)
{
	struct kv_store_params p = params(id);
	struct kv_store *s;
	char why[256];

	ck_assert_int_eq(kv_store_create(file, &p, true, why, sizeof(why)), 0);
	ck_assert_msg(kv_store_open(file, true, &s, why, sizeof(why)) == 0, "%s", why);
	return s;
}

static void put(struct kv_store *s, const char *k, const char *v)
{
	uint64_t h = kv_hash(k, strlen(k)), b = kv_bucket_of_hash(h, s->nbuckets);
	struct kv_change ch;

	ck_assert_int_eq(kv_bucket_set(kv_store_page(s, b), b, &s->geom, k, (uint32_t)strlen(k), h,
				       v, (uint32_t)strlen(v), 0, &ch), 0);
	ck_assert_int_eq(kv_store_persist(s, b, &ch, 1), 0);
	kv_index_drop(&s->index[b]); /* changed behind the index's back: built again at first use */
}

static bool has(struct kv_store *s, const char *k, const char *v)
{
	uint64_t h = kv_hash(k, strlen(k)), b = kv_bucket_of_hash(h, s->nbuckets);
	struct kv_entry e;

	return kv_bucket_find(kv_store_page(s, b), k, (uint32_t)strlen(k), h, &e) &&
	       e.vlen == strlen(v) && !memcmp(e.value, v, e.vlen);
}

START_TEST(create_reopen_keeps_pages)
{
	struct kv_store *s = create_open(path, 1);
	char why[256];

	ck_assert_str_eq(s->pool_name, "kv");
	ck_assert_uint_eq(s->pool_size, NBUCKETS * BUCKET);
	for (int i = 0; i < 100; i++) {
		char k[16], v[16];

		snprintf(k, sizeof(k), "key%d", i);
		snprintf(v, sizeof(v), "v%d", i * 7);
		put(s, k, v);
	}
	ck_assert_uint_eq(s->ndamaged, 0);
	kv_store_close(s);
	ck_assert_int_eq(kv_store_open(path, true, &s, why, sizeof(why)), 0);
	ck_assert(has(s, "key0", "v0") && has(s, "key99", "v693"));
	ck_assert_uint_eq(s->keys, 100);
	kv_store_close(s);
}
END_TEST

START_TEST(create_refuses_what_exists_or_is_wrong)
{
	struct kv_store_params p = params(1);
	struct kv_store *s = create_open(path, 1), *t;
	char why[256];

	/* In use by a serving process: neither re-created nor opened again. */
	ck_assert_int_eq(kv_store_create(path, &p, true, why, sizeof(why)), -EBUSY);
	ck_assert_int_eq(kv_store_open(path, false, &t, why, sizeof(why)), -EBUSY);
	kv_store_close(s);
	ck_assert_int_eq(kv_store_create(path, &p, false, why, sizeof(why)), -EEXIST);
	ck_assert_ptr_nonnull(strstr(why, "--force"));
	p.bucket_size = 5000;
	ck_assert_int_eq(kv_store_create(path, &p, true, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "power of two"));
	p = params(0);
	ck_assert_int_eq(kv_store_create(path, &p, true, why, sizeof(why)), -EINVAL);
	p = params(1);
	p.pool_name = "bad name";
	ck_assert_int_eq(kv_store_create(path, &p, true, why, sizeof(why)), -EINVAL);
}
END_TEST

static void poke(const char *file, off_t off, uint8_t byte)
{
	int fd = open(file, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, &byte, 1, off), 1);
	close(fd);
}

START_TEST(bad_superblock_or_short_file_is_refused)
{
	struct kv_store *s = create_open(path, 1);
	char why[256];

	kv_store_close(s);
	poke(path, 40, 'X'); /* inside the pool name: the checksum catches it */
	ck_assert_int_eq(kv_store_open(path, true, &s, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "checksum"));
	s = create_open(path, 1);
	kv_store_close(s);
	ck_assert_int_eq(truncate(path, 8192), 0);
	ck_assert_int_eq(kv_store_open(path, true, &s, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "truncated"));
	ck_assert_int_eq(truncate(path, 100), 0);
	ck_assert_int_eq(kv_store_open(path, true, &s, why, sizeof(why)), -EIO);
	ck_assert_int_eq(truncate(path, 0), 0);
	poke(path, 0, 'x');
	ck_assert_int_eq(kv_store_open(path, true, &s, why, sizeof(why)), -EIO);
}
END_TEST

START_TEST(torn_page_is_damaged_until_a_copy_replaces_it)
{
	struct kv_store *s = create_open(path, 1), *peer;
	uint64_t h = kv_hash("key", 3), b = kv_bucket_of_hash(h, NBUCKETS), damaged, keys;
	uint8_t buf[BUCKET], digest[32], peer_digest[32];
	char peer_path[300], why[256];
	uint64_t data_offset = s->data_offset;

	put(s, "key", "value");
	kv_store_close(s);
	/* A header byte that does not match, as a write torn by a crash leaves it. */
	poke(path, (off_t)(data_offset + b * BUCKET), 0);
	ck_assert_int_eq(kv_store_open(path, true, &s, why, sizeof(why)), 0);
	ck_assert_uint_eq(s->ndamaged, 1);
	ck_assert(s->damaged[b]);
	ck_assert_int_eq(kv_store_digest(s, digest, &keys, &damaged), 0);
	ck_assert_uint_eq(damaged, 1);
	/* Never given to a peer. */
	ck_assert_int_eq(kv_store_ops.chunk_export(s, b * BUCKET, buf, BUCKET), -EIO);
	/* A peer's good copy heals it; a bad copy is refused. */
	snprintf(peer_path, sizeof(peer_path), "%s/m2.kv", dir);
	peer = create_open(peer_path, 2);
	put(peer, "key", "value");
	ck_assert_int_eq(kv_store_ops.chunk_export(peer, b * BUCKET, buf, BUCKET), 0);
	buf[100] ^= 1;
	ck_assert_int_eq(kv_store_ops.chunk_import(s, b * BUCKET, buf, BUCKET), -EIO);
	buf[100] ^= 1;
	ck_assert_int_eq(kv_store_ops.chunk_import(s, b * BUCKET, buf, BUCKET), 0);
	ck_assert_uint_eq(s->ndamaged, 0);
	ck_assert(has(s, "key", "value"));
	ck_assert_int_eq(kv_store_digest(s, digest, &keys, &damaged), 0);
	ck_assert_int_eq(kv_store_digest(peer, peer_digest, &keys, &damaged), 0);
	ck_assert(memcmp(digest, peer_digest, 32) == 0);
	/* Copies come whole; a part is only read from the file (librmr's store check). */
	ck_assert_int_eq(kv_store_ops.chunk_import(s, b * BUCKET, buf, 512), -EINVAL);
	ck_assert_int_eq(kv_store_ops.chunk_export(s, b * BUCKET + 1, buf, 512), 0);
	ck_assert_int_eq(kv_store_ops.chunk_export(s, b * BUCKET + 1, buf, BUCKET), -EINVAL);
	kv_store_close(peer);
	kv_store_close(s);
}
END_TEST

START_TEST(meta_blob_survives_a_torn_save)
{
	struct kv_store *s = create_open(path, 1);
	uint64_t slot = s->meta_slot_size, meta = s->meta_offset;
	char blob[64], out[64], why[256];
	size_t len = 1;

	ck_assert_int_eq(kv_store_ops.meta_load(s, out, sizeof(out), &len), 0);
	ck_assert_uint_eq(len, 0); /* never saved */
	/* Saves 1..5 alternate: 5 (the newest) in slot 1, 4 in slot 0. */
	for (int i = 1; i <= 5; i++) {
		memset(blob, 'a' + i, sizeof(blob));
		ck_assert_int_eq(kv_store_ops.meta_save(s, blob, (size_t)(10 + i)), 0);
	}
	ck_assert_int_eq(kv_store_ops.meta_load(s, out, sizeof(out), &len), 0);
	ck_assert(len == 15 && out[0] == 'a' + 5);
	kv_store_close(s);
	/* Save 5 torn: save 4 is what loads. */
	poke(path, (off_t)(meta + slot + 64 + 3), 'z');
	ck_assert_int_eq(kv_store_open(path, true, &s, why, sizeof(why)), 0);
	ck_assert_int_eq(kv_store_ops.meta_load(s, out, sizeof(out), &len), 0);
	ck_assert(len == 14 && out[0] == 'a' + 4);
	ck_assert_int_eq(kv_store_ops.meta_load(s, out, 4, &len), -EOVERFLOW);
	/* Both unreadable: librmr's state is lost, and the member must not start. */
	poke(path, (off_t)(meta + 64 + 3), 'z');
	ck_assert_int_eq(kv_store_ops.meta_load(s, out, sizeof(out), &len), -EBADMSG);
	/* A deliberate save writes over the wreck. */
	ck_assert_int_eq(kv_store_ops.meta_save(s, "new", 3), 0);
	ck_assert_int_eq(kv_store_ops.meta_load(s, out, sizeof(out), &len), 0);
	ck_assert(len == 3 && !memcmp(out, "new", 3));
	kv_store_close(s);
}
END_TEST

START_TEST(map_area_bounds)
{
	struct kv_store *s = create_open(path, 1);
	uint8_t block[4096], back[4096];
	uint64_t size = rmr_server_map_area_size(NBUCKETS * BUCKET, BUCKET);

	ck_assert_uint_eq(s->map_size, size);
	memset(block, 0x77, sizeof(block));
	ck_assert_int_eq(kv_store_ops.map_write(s, size - 4096, block, 4096), 0);
	ck_assert_int_eq(kv_store_ops.map_read(s, size - 4096, back, 4096), 0);
	ck_assert(memcmp(block, back, 4096) == 0);
	ck_assert_int_eq(kv_store_ops.map_read(s, 0, back, 16), 0);
	ck_assert_uint_eq(back[0], 0); /* never written reads as zero */
	ck_assert_int_eq(kv_store_ops.map_write(s, size, block, 4096), -EINVAL);
	ck_assert_int_eq(kv_store_ops.map_write(s, 100, block, 4096), -EINVAL);
	ck_assert_int_eq(kv_store_ops.map_write(s, 0, block, 100), -EINVAL);
	ck_assert_int_eq(kv_store_ops.map_read(s, size - 8, back, 16), -EINVAL);
	ck_assert_int_eq(kv_store_ops.flush(s), 0);
	kv_store_close(s);
}
END_TEST

/* The same keys put in a different order: the same digest. One value differs: another. */
START_TEST(digest_follows_the_data)
{
	char other[300];
	struct kv_store *a, *b;
	uint8_t da[32], db[32];
	uint64_t ka, kb, dmg;

	snprintf(other, sizeof(other), "%s/m2.kv", dir);
	a = create_open(path, 1);
	b = create_open(other, 2);
	for (int i = 0; i < 200; i++) {
		char k[16];

		snprintf(k, sizeof(k), "k%d", i);
		put(a, k, "v");
		snprintf(k, sizeof(k), "k%d", 199 - i);
		put(b, k, "v");
	}
	ck_assert_int_eq(kv_store_digest(a, da, &ka, &dmg), 0);
	ck_assert_int_eq(kv_store_digest(b, db, &kb, &dmg), 0);
	ck_assert_uint_eq(ka, 200);
	ck_assert_uint_eq(kb, 200);
	ck_assert(memcmp(da, db, 32) == 0);
	put(b, "k7", "w");
	ck_assert_int_eq(kv_store_digest(b, db, &kb, &dmg), 0);
	ck_assert(memcmp(da, db, 32) != 0);
	kv_store_close(a);
	kv_store_close(b);
}
END_TEST

/* A key of bucket @b: "<prefix><n>" for the first n that hashes there (16 kept at once). */
static const char *key_in(uint64_t b, const char *prefix)
{
	static char k[16][32];
	static unsigned next;
	char *out = k[next++ % 16];

	for (int n = 0;; n++) {
		snprintf(out, 32, "%s%d", prefix, n);
		if (kv_bucket_of_hash(kv_hash(out, strlen(out)), NBUCKETS) == b)
			return out;
	}
}

/* Append a batch record (SET of @v, or DEL if @v is NULL) to @p at *@len. */
static void rec(uint8_t *p, uint32_t *len, const char *k, const char *v)
{
	uint32_t klen = (uint32_t)strlen(k), vlen = v ? (uint32_t)strlen(v) : 0;
	uint32_t hdr = v ? KV_SET_HDR : KV_DEL_HDR;
	uint8_t *r = p + *len;

	kv_wire_batch_rec_hdr(r, v ? KV_OP_SET : KV_OP_DEL, hdr + klen + vlen);
	if (v)
		kv_wire_set_hdr(r + KV_BATCH_REC_HDR, klen, vlen, 0);
	else
		kv_wire_del_hdr(r + KV_BATCH_REC_HDR, klen);
	memcpy(r + KV_BATCH_REC_HDR + hdr, k, klen);
	if (v)
		memcpy(r + KV_BATCH_REC_HDR + hdr + klen, v, vlen);
	*len += KV_BATCH_REC_HDR + hdr + klen + vlen;
}

static int batch(struct kv_store *s, uint64_t first, uint64_t nb, bool patch, uint8_t *p,
		 uint32_t len)
{
	struct rmr_store_io io = {
		.kind = RMR_IO_WRITE, .op = KV_OP_BATCH, .addr = first * BUCKET,
		.len = patch ? (uint32_t)(nb * BUCKET) : len, .data = p, .data_len = len,
		.flags = patch ? RMR_IO_PATCH : 0,
	};

	return kv_store_apply(s, &io);
}

/* A KV_OP_MGET of @n keys @keys[] from the first key's bucket, answered into @out (@len bytes). */
static int mget(struct kv_store *s, const char *const *keys, unsigned n, uint8_t *out,
		uint32_t len)
{
	static uint8_t arg[64 * 1024];
	uint32_t pos = 4;
	uint64_t b = kv_bucket_of_hash(kv_hash(keys[0], strlen(keys[0])), NBUCKETS);

	kv_put_le32(arg, n);
	for (unsigned i = 0; i < n; i++) {
		uint32_t klen = (uint32_t)strlen(keys[i]);

		kv_put_le32(arg + pos, klen);
		memcpy(arg + pos + 4, keys[i], klen);
		pos += 4 + klen;
	}
	struct rmr_store_io io = { .kind = RMR_IO_READ, .op = KV_OP_MGET, .addr = b * BUCKET,
				   .len = len, .data = out, .arg = arg, .arg_len = pos };
	return kv_store_apply(s, &io);
}

/*
 * An MGET answers its keys in the order asked, found or not, from every
 * bucket (it looks several keys up at once: their answers must not mix),
 * and stops at a key boundary when the buffer is full.
 */
START_TEST(mget_answers_every_key_in_order_until_the_buffer_is_full)
{
	struct kv_store *s = create_open(path, 1);
	static char names[100][16], values[100][40];
	const char *keys[100];
	static uint8_t out[64 * 1024];
	uint32_t pos = KV_MGET_ANSWER_HDR, full = 0;
	int rc;

	for (unsigned i = 0; i < 100; i++) {
		snprintf(names[i], sizeof(names[i]), "key%u", i);
		snprintf(values[i], sizeof(values[i]), "value-%u-%.*s", i, (int)(i % 23), "xxxxxxxxxxxxxxxxxxxxxxx");
		keys[i] = names[i];
		if (i % 3) /* every third one is missing */
			put(s, names[i], values[i]);
	}
	/* Until librmr says it misses nothing, a member answers key by key: none here. */
	ck_assert_int_eq(mget(s, keys, 100, out, sizeof(out)), KV_MGET_ANSWER_HDR);
	ck_assert_uint_eq(kv_get_le32(out), 0);
	atomic_store(&s->own_dirty, false);
	rc = mget(s, keys, 100, out, sizeof(out));
	ck_assert_int_gt(rc, 0);
	ck_assert_uint_eq(kv_get_le32(out), 100);
	ck_assert_uint_eq(kv_get_le32(out + 4), 0); /* state: clean */
	for (unsigned i = 0; i < 100; i++) {
		bool found = i % 3 != 0;
		uint32_t vlen = kv_get_le32(out + pos + 4);

		ck_assert_uint_eq(kv_get_le32(out + pos), found);
		ck_assert_uint_eq(vlen, found ? strlen(values[i]) : 0);
		ck_assert(!memcmp(out + pos + KV_GET_ANSWER_HDR, values[i], vlen));
		pos += KV_GET_ANSWER_HDR + vlen;
		if (i == 40)
			full = pos;
	}
	ck_assert_int_eq(rc, (int)pos);

	/* Room for 41 answers and a little: 41 come back, whole. */
	rc = mget(s, keys, 100, out, full + KV_GET_ANSWER_HDR - 1);
	ck_assert_int_eq(rc, (int)full);
	ck_assert_uint_eq(kv_get_le32(out), 41);
	kv_store_close(s);
}
END_TEST

/*
 * A batch over several buckets (RMR_IO_PATCH over their whole range): its
 * records grouped by bucket in ascending order, each key inside the range,
 * all applied and persisted, or none (a bucket too full refuses the whole
 * batch before anything changes).
 */
START_TEST(batch_of_many_buckets_applies_whole_or_not_at_all)
{
	struct kv_store *s = create_open(path, 1);
	const char *k2 = key_in(2, "a"), *k5 = key_in(5, "b"), *k5b = key_in(5, "c");
	const char *k9 = key_in(9, "d"), *k12 = key_in(12, "e"), *big = key_in(5, "f");
	static uint8_t p[8192];
	char v[1024];
	uint32_t n = 0;
	uint64_t keys;

	put(s, k9, "old");
	keys = s->keys;

	/* Refused, nothing changed: out of the range, out of order, not whole buckets, not a patch. */
	rec(p, &n, k2, "two");
	rec(p, &n, k12, "twelve");
	ck_assert_int_eq(batch(s, 2, 8, true, p, n), -EINVAL);
	n = 0;
	rec(p, &n, k5, "five");
	rec(p, &n, k2, "two");
	ck_assert_int_eq(batch(s, 2, 8, true, p, n), -EINVAL);
	n = 0;
	rec(p, &n, k2, "two");
	rec(p, &n, k5, "five");
	rec(p, &n, k5b, "five-b");
	rec(p, &n, k9, NULL);
	{
		struct rmr_store_io io = { .kind = RMR_IO_WRITE, .op = KV_OP_BATCH,
					   .addr = 2 * BUCKET, .len = 3 * BUCKET + 1, .data = p,
					   .data_len = n, .flags = RMR_IO_PATCH };

		ck_assert_int_eq(kv_store_apply(s, &io), -EINVAL);
	}
	ck_assert_int_eq(batch(s, 2, 1, false, p, n), -EINVAL);
	ck_assert(!has(s, k2, "two") && has(s, k9, "old"));
	ck_assert_uint_eq(s->keys, keys);

	/* Buckets 2, 5 and 9 in one request over buckets 2..9. */
	ck_assert_int_eq(batch(s, 2, 8, true, p, n), 0);
	ck_assert(has(s, k2, "two") && has(s, k5, "five") && has(s, k5b, "five-b"));
	ck_assert(!has(s, k9, "old"));
	ck_assert_uint_eq(s->keys, keys + 2);

	/* Bucket 5 nearly full: a batch that might not fit there changes no bucket. */
	memset(v, 'v', sizeof(v) - 1);
	v[sizeof(v) - 1] = 0;
	const char *g = key_in(5, "g");

	put(s, g, v);
	put(s, key_in(5, "h"), v);
	put(s, key_in(5, "i"), v);
	keys = s->keys;
	n = 0;
	rec(p, &n, k2, "two-again");
	rec(p, &n, big, v);
	ck_assert_int_eq(batch(s, 2, 8, true, p, n), -ERANGE);
	ck_assert(has(s, k2, "two") && !has(s, big, v));
	ck_assert_uint_eq(s->keys, keys);
	/* Bucket 5's record alone: tried, undone. */
	n = 0;
	rec(p, &n, big, v);
	ck_assert_int_eq(batch(s, 5, 1, false, p, n), -ERANGE);
	ck_assert(!has(s, big, v) && has(s, k5, "five"));
	ck_assert_uint_eq(s->keys, keys);
	/* Might not fit (counted as new), but does: a value rewritten in place. */
	v[0] = 'w';
	n = 0;
	rec(p, &n, g, v);
	ck_assert_int_eq(batch(s, 5, 1, false, p, n), 0);
	ck_assert(has(s, g, v));
	ck_assert_uint_eq(s->keys, keys);

	/* What applied is in the file. */
	kv_store_close(s);
	{
		char why[256];

		ck_assert_msg(kv_store_open(path, true, &s, why, sizeof(why)) == 0, "%s", why);
	}
	ck_assert(has(s, k2, "two") && has(s, k5, "five") && has(s, k5b, "five-b"));
	ck_assert(!has(s, k9, "old") && !has(s, big, v) && has(s, g, v));
	ck_assert_uint_eq(s->ndamaged, 0);
	kv_store_close(s);
}
END_TEST

/*
 * A change is in the file as soon as it is made: a member killed right
 * after a batch (no close, no flush) has it when it opens again.
 */
START_TEST(a_batch_survives_the_process_killed_after_it)
{
	struct kv_store *s = create_open(path, 1);
	static uint8_t p[1024];
	uint32_t n = 0;
	char why[256];
	int status;
	pid_t pid;

	rec(p, &n, key_in(3, "x"), "three");
	rec(p, &n, key_in(7, "y"), "seven");
	kv_store_close(s);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (kv_store_open(path, true, &s, why, sizeof(why)) < 0 ||
		    batch(s, 0, NBUCKETS, true, p, n) < 0)
			_exit(1);
		kill(getpid(), SIGKILL);
		_exit(2);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_msg(kv_store_open(path, true, &s, why, sizeof(why)) == 0, "%s", why);
	ck_assert(has(s, key_in(3, "x"), "three") && has(s, key_in(7, "y"), "seven"));
	ck_assert_uint_eq(s->keys, 2);
	ck_assert_uint_eq(s->ndamaged, 0);
	kv_store_close(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("file");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, create_reopen_keeps_pages);
	tcase_add_test(tc, create_refuses_what_exists_or_is_wrong);
	tcase_add_test(tc, bad_superblock_or_short_file_is_refused);
	tcase_add_test(tc, torn_page_is_damaged_until_a_copy_replaces_it);
	tcase_add_test(tc, meta_blob_survives_a_torn_save);
	tcase_add_test(tc, map_area_bounds);
	tcase_add_test(tc, digest_follows_the_data);
	tcase_add_test(tc, mget_answers_every_key_in_order_until_the_buffer_is_full);
	tcase_add_test(tc, batch_of_many_buckets_applies_whole_or_not_at_all);
	tcase_add_test(tc, a_batch_survives_the_process_killed_after_it);
	suite_add_tcase(s, tc);
	return test_run(s);
}
