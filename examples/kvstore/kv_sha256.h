/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* SHA-256 (FIPS 180-4), for the members' data digests. */
#ifndef KVSTORE_SHA256_H
#define KVSTORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define KV_SHA256_LEN 32

struct kv_sha256 {
	uint32_t h[8];
	uint64_t total;     /* bytes hashed */
	uint8_t block[64];
	size_t fill;        /* bytes in @block */
};

void kv_sha256_init(struct kv_sha256 *s);
void kv_sha256_update(struct kv_sha256 *s, const void *data, size_t len);
void kv_sha256_final(struct kv_sha256 *s, uint8_t out[KV_SHA256_LEN]);
/* Lower-case hex of @d into @hex (65 bytes with the NUL). */
void kv_sha256_hex(const uint8_t d[KV_SHA256_LEN], char hex[2 * KV_SHA256_LEN + 1]);

#endif
