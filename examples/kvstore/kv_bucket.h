/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kv_bucket.h: the bucket page, a member's image of one bucket (one librmr
 * chunk), exactly bucket_size bytes, the same in memory, on disk and in a
 * resync copy. Pure functions on a page buffer: no I/O, no allocation.
 *
 * Layout (little-endian):
 *   header, 64 bytes: le32 magic "KBK1", le32 crc32c of the header (this
 *     field zero), le32 version 1, le32 reserved 0, le64 bucket index,
 *     le32 entries, le32 used (bytes of entries after the header, a
 *     multiple of 8), 16 bytes pool UUID, 16 reserved zero bytes;
 *   entries, back to back from byte 64: le32 crc32c (of the entry from the
 *     next field to the end of the value), le32 tag (high half of the key
 *     hash), le32 klen, le32 vlen, le64 expire_ms (absolute Unix ms, 0 =
 *     never), key, value, zero padding to a multiple of 8;
 *   zeroes up to the end of the page.
 * An empty bucket is all zeroes, header included. Every key in a bucket
 * hashes to it and appears once.
 *
 * A checksum per entry (and one for the header) keeps a write's checksum
 * work proportional to what it changed, whatever the bucket holds, and
 * still finds a page that was torn (a process killed between the writes of
 * one change, a partial write-back at a power cut): an entry or header
 * whose bytes do not match, or bytes past the end that are not zero.
 */
#ifndef KVSTORE_BUCKET_H
#define KVSTORE_BUCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_BUCKET_MAGIC 0x314b424bu /* "KBK1" */
#define KV_BUCKET_VERSION 1u
#define KV_BUCKET_HDR 64u
#define KV_ENTRY_HDR 24u
#define KV_UUID_LEN 16u

/* Where a page belongs: checked on load and on every copy in from a peer. */
struct kv_bucket_geom {
	uint32_t size;                 /* bucket_size: a power of two, >= 4096 */
	uint64_t nbuckets;
	uint8_t uuid[KV_UUID_LEN];     /* the pool's */
};

/* One entry, pointing into the page. */
struct kv_entry {
	uint32_t off;                  /* offset of the entry in the page */
	uint32_t size;                 /* bytes it takes, padding included */
	uint32_t tag;
	const uint8_t *key;
	uint32_t klen;
	const uint8_t *value;
	uint32_t vlen;
	uint64_t expire_ms;
};

/* The bytes a change touched, so that the store writes just those. */
struct kv_change {
	uint32_t lo, hi;               /* entry bytes [lo, hi) of the page changed (lo == hi: none) */
	bool hdr;                      /* the header changed */
};

/* Bytes an entry of this key and value takes. */
static inline uint64_t kv_entry_size(uint64_t klen, uint64_t vlen)
{
	return (KV_ENTRY_HDR + klen + vlen + 7) & ~7ull;
}

/* Largest klen + vlen that fits in an empty bucket of @size bytes. */
static inline uint32_t kv_bucket_max_kv(uint32_t size)
{
	return size - KV_BUCKET_HDR - KV_ENTRY_HDR;
}

/*
 * Check page @page of bucket @index. @return 0 (good; maybe empty) or
 * -EBADMSG with the first problem found in @why ("entry at byte 200: checksum
 * mismatch").
 */
int kv_bucket_check(const uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
		    char *why, size_t whylen);

bool kv_bucket_is_empty(const uint8_t *page);
/* Entries in a good page. */
uint32_t kv_bucket_count(const uint8_t *page);
/* Bytes of entries in a good page. */
uint32_t kv_bucket_used(const uint8_t *page);

/*
 * Walk a good page: start with *@off = 0; each call fills @e and returns
 * true, or returns false after the last entry.
 */
bool kv_bucket_next(const uint8_t *page, uint32_t *off, struct kv_entry *e);

/* Find @key (hash @hash) in a good page. @return true and @e if present. */
bool kv_bucket_entry_at(const uint8_t *page, uint32_t off, struct kv_entry *e);
bool kv_bucket_find(const uint8_t *page, const void *key, uint32_t klen, uint64_t hash,
		    struct kv_entry *e);

/*
 * Set @key to @value expiring at @expire_ms in good page @page of bucket
 * @index. @return 0 and what changed in @ch, or -ENOSPC (the bucket cannot
 * hold it; the page is unchanged).
 */
int kv_bucket_set(uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
		  const void *key, uint32_t klen, uint64_t hash, const void *value,
		  uint32_t vlen, uint64_t expire_ms, struct kv_change *ch);

/*
 * The same, with the lookup done by the caller (an index): @old is the
 * key's entry, or NULL if the key is not there. *@at gets the offset the
 * entry has now.
 */
int kv_bucket_set_found(uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
			const void *key, uint32_t klen, uint64_t hash, const void *value,
			uint32_t vlen, uint64_t expire_ms, const struct kv_entry *old,
			struct kv_change *ch, uint32_t *at);

/* Delete entry @e (found in good page @page of bucket @index). */
void kv_bucket_del_found(uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
			 const struct kv_entry *e, struct kv_change *ch);

/*
 * Delete @key from good page @page of bucket @index; with @deadline_ms non
 * zero only if it expires at or before then. @return 1 (deleted) or 0 (not
 * there, or not expired: the page is unchanged).
 */
int kv_bucket_del(uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
		  const void *key, uint32_t klen, uint64_t hash, uint64_t deadline_ms,
		  struct kv_change *ch);

/* Empty the page (all zeroes again); @ch says which bytes were not zero. */
void kv_bucket_clear(uint8_t *page, struct kv_change *ch);

#endif
