/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Checksums and parsers with published answers: CRC-32C and SHA-256 test
 * vectors (both CRC paths, at every alignment and split), the key hash's
 * stability (it is part of the on-disk format), Redis-style integers, sizes
 * and the front's write payloads, malformed ones refused.
 */
#include "../kv_crc32c.h"
#include "../kv_sha256.h"
#include "../kv_util.h"
#include "../kv_wire.h"
#include "kv_test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

START_TEST(crc32c_vectors)
{
	uint8_t buf[300], zeros[32] = { 0 }, ones[32];
	uint64_t rnd = 1;

	memset(ones, 0xff, sizeof(ones));
	ck_assert_uint_eq(kv_crc32c(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(kv_crc32c_portable(0, "123456789", 9), 0xE3069283u);
	/* RFC 3720, B.4. */
	ck_assert_uint_eq(kv_crc32c(0, zeros, 32), 0x8A9136AAu);
	ck_assert_uint_eq(kv_crc32c(0, ones, 32), 0x62A8AB43u);
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)test_rand(&rnd);
	for (unsigned off = 0; off < 16; off++)
		for (unsigned len = 0; len + off <= sizeof(buf); len += 7) {
			uint32_t whole = kv_crc32c_portable(0, buf + off, len);

			expect(kv_crc32c(0, buf + off, len) == whole);
			expect(kv_crc32c(kv_crc32c(0, buf + off, len / 3), buf + off + len / 3,
					 len - len / 3) == whole);
		}
}
END_TEST

static void sha_hex(const void *data, size_t len, char hex[65])
{
	struct kv_sha256 s;
	uint8_t d[32];

	kv_sha256_init(&s);
	kv_sha256_update(&s, data, len);
	kv_sha256_final(&s, d);
	kv_sha256_hex(d, hex);
}

START_TEST(sha256_vectors)
{
	char hex[65], *million = malloc(1000000);
	struct kv_sha256 s;
	uint8_t d[32];

	sha_hex("", 0, hex);
	ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sha_hex("abc", 3, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
	ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	memset(million, 'a', 1000000);
	/* In uneven pieces, to cross every block boundary differently. */
	kv_sha256_init(&s);
	for (size_t done = 0, n = 1; done < 1000000; done += n, n = n % 97 + 1)
		kv_sha256_update(&s, million + done, n < 1000000 - done ? n : 1000000 - done);
	kv_sha256_final(&s, d);
	kv_sha256_hex(d, hex);
	ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(million);
}
END_TEST

/* The hash decides where keys live on disk: it must never change. */
START_TEST(key_hash_is_stable)
{
	/* FNV-1a 64, then MurmurHash3's fmix64; values computed independently. */
	ck_assert_uint_eq(kv_hash("", 0), 0xefd01f60ba992926ull);
	ck_assert_uint_eq(kv_hash("foo", 3), 0xaf85ea5569581d4cull);
	ck_assert_uint_eq(kv_hash("key:000000000001", 16), 0xcd7e69033de0f3f9ull);
}
END_TEST

START_TEST(integers_and_sizes)
{
	int64_t v;
	uint64_t u;

	ck_assert(kv_parse_i64("0", 1, &v) && v == 0);
	ck_assert(kv_parse_i64("-12", 3, &v) && v == -12);
	ck_assert(kv_parse_i64("9223372036854775807", 19, &v) && v == INT64_MAX);
	ck_assert(kv_parse_i64("-9223372036854775808", 20, &v) && v == INT64_MIN);
	ck_assert(!kv_parse_i64("9223372036854775808", 19, &v));
	ck_assert(!kv_parse_i64("-9223372036854775809", 20, &v));
	ck_assert(!kv_parse_i64("", 0, &v));
	ck_assert(!kv_parse_i64("-", 1, &v));
	ck_assert(!kv_parse_i64("-0", 2, &v));
	ck_assert(!kv_parse_i64("01", 2, &v));
	ck_assert(!kv_parse_i64("+1", 2, &v));
	ck_assert(!kv_parse_i64(" 1", 2, &v));
	ck_assert(!kv_parse_i64("1a", 2, &v));
	ck_assert_int_eq(kv_parse_size("64K", &u), 0);
	ck_assert_uint_eq(u, 65536);
	ck_assert_int_eq(kv_parse_size("2MiB", &u), 0);
	ck_assert_uint_eq(u, 2u << 20);
	ck_assert_int_eq(kv_parse_size("1G", &u), 0);
	ck_assert_int_eq(kv_parse_size("12", &u), 0);
	ck_assert_int_eq(kv_parse_size("1X", &u), -EINVAL);
	ck_assert_int_eq(kv_parse_size("K", &u), -EINVAL);
	ck_assert_int_eq(kv_parse_size("-1", &u), -EINVAL);
	ck_assert_int_eq(kv_parse_size("99999999999999999999G", &u), -EINVAL);
	ck_assert_int_eq(kv_parse_u64("7", 1, 9, &u), 0);
	ck_assert_int_eq(kv_parse_u64("10", 1, 9, &u), -EINVAL);
	ck_assert_int_eq(kv_parse_u64("1 ", 1, 9, &u), -EINVAL);
}
END_TEST

START_TEST(write_payloads)
{
	uint8_t p[64];
	struct kv_write w;
	const char *why;

	kv_wire_set_hdr(p, 3, 2, 99);
	memcpy(p + KV_SET_HDR, "keyvl", 5);
	ck_assert_int_eq(kv_wire_decode_write(KV_OP_SET, p, KV_SET_HDR + 5, &w, &why), 0);
	ck_assert(w.klen == 3 && w.vlen == 2 && w.expire_ms == 99 && !memcmp(w.value, "vl", 2));
	ck_assert_int_eq(kv_wire_decode_write(KV_OP_SET, p, KV_SET_HDR + 4, &w, &why), -EINVAL);
	ck_assert_int_eq(kv_wire_decode_write(KV_OP_SET, p, 8, &w, &why), -EINVAL);
	kv_wire_del_hdr(p, 3);
	memcpy(p + KV_DEL_HDR, "key", 3);
	ck_assert_int_eq(kv_wire_decode_write(KV_OP_DEL, p, KV_DEL_HDR + 3, &w, &why), 0);
	p[5] = 1;
	ck_assert_int_eq(kv_wire_decode_write(KV_OP_DEL, p, KV_DEL_HDR + 3, &w, &why), -EINVAL);
	ck_assert_int_eq(kv_wire_decode_write(KV_OP_FLUSHALL, NULL, 0, &w, &why), 0);
	ck_assert_int_eq(kv_wire_decode_write(KV_OP_FLUSHALL, p, 3, &w, &why), -EINVAL);
	ck_assert_int_eq(kv_wire_decode_write(99, p, 3, &w, &why), -EINVAL);
	kv_put_le32(p, KV_KEY_MAX + 1);
	ck_assert_int_eq(kv_wire_decode_write(KV_OP_DEL, p, 64, &w, &why), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("checksums");
	TCase *tc = tcase_create("vectors");

	tcase_add_test(tc, crc32c_vectors);
	tcase_add_test(tc, sha256_vectors);
	tcase_add_test(tc, key_hash_is_stable);
	tcase_add_test(tc, integers_and_sizes);
	tcase_add_test(tc, write_payloads);
	suite_add_tcase(s, tc);
	return test_run(s);
}
