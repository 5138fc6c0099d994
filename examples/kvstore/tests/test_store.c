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
#include <string.h>
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
	suite_add_tcase(s, tc);
	return test_run(s);
}
