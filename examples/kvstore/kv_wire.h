/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kv_wire.h: what the front sends its members through librmr, and how a key
 * finds its bucket. The front and every member must agree on all of it.
 *
 * A bucket is one librmr chunk: bucket b is the pool's bytes
 * [b * bucket_size, (b + 1) * bucket_size). Every request about a key is
 * addressed at its bucket's first byte, so librmr orders every write to a
 * bucket (they overlap), syncs a bucket a member missed before that member
 * serves it, and records a missed write against exactly that bucket.
 *
 * Write-like requests set state and are idempotent (a resync may copy a
 * bucket that holds a write and then apply the write again):
 *   KV_OP_SET          payload: le32 klen, le32 vlen, le64 expire_ms, key, value
 *   KV_OP_DEL          payload: le32 klen, le32 0, key
 *   KV_OP_DEL_EXPIRED  payload: le32 klen, le32 0, le64 deadline_ms, key
 *                      (delete the key only if it expires at or before the deadline)
 *   KV_OP_FLUSHALL     no payload; empties every bucket of the range (whole
 *                      buckets; the front sends the whole pool in one, or
 *                      in pieces below 4 GiB)
 *   KV_OP_BATCH        records, applied in order, all or none: each le16 op
 *                      (SET, DEL, DEL_EXPIRED), le16 0, le32 len, then that
 *                      op's payload of len bytes. Of one bucket, as a plain
 *                      write inside it; or, as an RMR_IO_PATCH over whole
 *                      buckets, of any buckets of the range, grouped by
 *                      bucket in ascending order (refused whole, -ERANGE,
 *                      if any bucket might not hold its records)
 * A plain write payload is always shorter than a bucket and a batch over
 * several buckets is a patch, so no write ever covers a whole bucket:
 * librmr must sync a missed bucket before applying it.
 *
 * Read-like requests; the store answers fewer bytes than asked:
 *   KV_OP_GET          arg: the key.  answer: le32 found, le32 vlen,
 *                      le64 expire_ms, then the value unless KV_GET_F_META
 *   KV_OP_DBSIZE       arg: le64 now_ms.  answer: le64 keys (not expired
 *                      at now_ms), le32 flags (KV_STATE_*), le32 0
 *   KV_OP_DIGEST       answer: 32-byte digest, le64 keys, le32 flags, le32 0
 *   KV_OP_MGET         arg: le32 count, then per key le32 klen, key (keys of
 *                      any bucket).  answer: le32 answered, le32 flags, then
 *                      one GET answer per key, in order, as many as fit.
 *                      A member answers none (flags KV_STATE_RESYNCING) while
 *                      it still copies buckets it missed: librmr syncs only
 *                      the bucket the range names, so then each key must go
 *                      in a GET of its own.
 *
 * expire_ms is an absolute Unix time in milliseconds, 0 for "never": the
 * front decides it, so every member holds the same bytes.
 */
#ifndef KVSTORE_WIRE_H
#define KVSTORE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum kv_op {
	KV_OP_GET = 1,
	KV_OP_DBSIZE = 2,
	KV_OP_DIGEST = 3,
	KV_OP_MGET = 4,
	KV_OP_SET = 16,
	KV_OP_DEL = 17,
	KV_OP_DEL_EXPIRED = 18,
	KV_OP_FLUSHALL = 19,
	KV_OP_BATCH = 20,
};

/* op_flags of KV_OP_GET: answer the header only (existence and expiry). */
#define KV_GET_F_META 1u

/* Flags in the DBSIZE and DIGEST answers. */
#define KV_STATE_RESYNCING 1u /* the member still copies buckets it missed: counts may be stale */
#define KV_STATE_DAMAGED 2u   /* some bucket failed its checksum and waits for a copy from a peer */

#define KV_SET_HDR 16u
#define KV_DEL_HDR 8u
#define KV_DEL_EXPIRED_HDR 16u
#define KV_GET_ANSWER_HDR 16u
#define KV_DBSIZE_ARG 8u
#define KV_DBSIZE_ANSWER 16u
#define KV_DIGEST_ANSWER 48u
#define KV_MGET_ANSWER_HDR 8u
#define KV_BATCH_REC_HDR 8u

/* Longest key; keys travel as a read argument and sit in bucket entries. */
#define KV_KEY_MAX 4096u

static inline void kv_put_le32(void *p, uint32_t v)
{
	uint8_t *b = p;

	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static inline void kv_put_le64(void *p, uint64_t v)
{
	uint8_t *b = p;

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t kv_get_le32(const void *p)
{
	const uint8_t *b = p;

	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t kv_get_le64(const void *p)
{
	const uint8_t *b = p;

	return (uint64_t)kv_get_le32(b) | (uint64_t)kv_get_le32(b + 4) << 32;
}

/*
 * The key hash: FNV-1a over the bytes, then a 64-bit finaliser (MurmurHash3
 * fmix64) so that the low bits spread. Part of the on-disk format: the
 * bucket of a key and the hash kept in its entry come from it.
 */
static inline uint64_t kv_hash(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

static inline uint64_t kv_bucket_of_hash(uint64_t hash, uint64_t nbuckets)
{
	return hash % nbuckets;
}

/* The 32 bits of the hash an entry keeps to skip non-matching keys fast. */
static inline uint32_t kv_entry_tag(uint64_t hash)
{
	return (uint32_t)(hash >> 32);
}

/* A decoded write payload; pointers into the payload. */
struct kv_write {
	enum kv_op op;
	const uint8_t *key;
	uint32_t klen;
	const uint8_t *value;     /* SET */
	uint32_t vlen;
	uint64_t expire_ms;       /* SET: when it expires (0 never); DEL_EXPIRED: the deadline */
};

/*
 * Decode the payload of write op @op. @return 0, or -EINVAL with a reason in
 * @why when the payload is malformed (lengths that do not add up, a key
 * longer than KV_KEY_MAX, reserved bytes not zero).
 */
int kv_wire_decode_write(uint16_t op, const void *payload, uint32_t len, struct kv_write *out,
			 const char **why);

/* Encode the fixed header of a SET (KV_SET_HDR bytes); key and value follow it. */
void kv_wire_set_hdr(uint8_t hdr[KV_SET_HDR], uint32_t klen, uint32_t vlen, uint64_t expire_ms);
/* Encode the fixed header of a DEL (KV_DEL_HDR bytes); the key follows it. */
void kv_wire_del_hdr(uint8_t hdr[KV_DEL_HDR], uint32_t klen);
/* Encode the fixed header of a DEL_EXPIRED (KV_DEL_EXPIRED_HDR bytes). */
void kv_wire_del_expired_hdr(uint8_t hdr[KV_DEL_EXPIRED_HDR], uint32_t klen, uint64_t deadline);

/*
 * Walk the records of a KV_OP_BATCH payload: start with *@off = 0; each call
 * decodes the next record into @w and returns 1, returns 0 after the last,
 * or -EINVAL (with @why) for a malformed one.
 */
int kv_wire_batch_next(const void *payload, uint32_t len, uint32_t *off, struct kv_write *w,
		       const char **why);
/* Encode a batch record header (KV_BATCH_REC_HDR bytes) for a payload of @len bytes. */
void kv_wire_batch_rec_hdr(uint8_t hdr[KV_BATCH_REC_HDR], uint16_t op, uint32_t len);

/* A decoded GET answer. */
struct kv_get_answer {
	bool found;
	uint32_t vlen;            /* the value's length, even under KV_GET_F_META */
	uint64_t expire_ms;
	const uint8_t *value;     /* NULL under KV_GET_F_META */
};

/*
 * Decode a GET answer of @len bytes (@meta: asked with KV_GET_F_META).
 * @return 0 or -EPROTO when it does not add up.
 */
int kv_wire_decode_get(const void *answer, uint32_t len, bool meta, struct kv_get_answer *out);

#endif
