/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The bucket page: checks, lookups and changes; see kv_bucket.h. */
#include "kv_bucket.h"
#include "kv_crc32c.h"
#include "kv_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Header field offsets. */
#define H_MAGIC 0
#define H_CRC 4
#define H_VERSION 8
#define H_RESERVED 12
#define H_INDEX 16
#define H_ENTRIES 24
#define H_USED 28
#define H_UUID 32
#define H_PAD 48

/* Entry field offsets. */
#define E_CRC 0
#define E_TAG 4
#define E_KLEN 8
#define E_VLEN 12
#define E_EXPIRE 16

static uint32_t header_crc(const uint8_t *page)
{
	uint8_t h[KV_BUCKET_HDR];

	memcpy(h, page, sizeof(h));
	kv_put_le32(h + H_CRC, 0);
	return kv_crc32c(0, h, sizeof(h));
}

static void header_write(uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
			 uint32_t entries, uint32_t used)
{
	memset(page, 0, KV_BUCKET_HDR);
	if (!entries)
		return; /* an empty bucket is all zeroes */
	kv_put_le32(page + H_MAGIC, KV_BUCKET_MAGIC);
	kv_put_le32(page + H_VERSION, KV_BUCKET_VERSION);
	kv_put_le64(page + H_INDEX, index);
	kv_put_le32(page + H_ENTRIES, entries);
	kv_put_le32(page + H_USED, used);
	memcpy(page + H_UUID, g->uuid, KV_UUID_LEN);
	kv_put_le32(page + H_CRC, header_crc(page));
}

static bool all_zero(const uint8_t *p, size_t len)
{
	/* Word at a time: an empty bucket is checked whole at every load. */
	while (len && ((uintptr_t)p & 7)) {
		if (*p++)
			return false;
		len--;
	}
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		if (v)
			return false;
	}
	while (len--)
		if (*p++)
			return false;
	return true;
}

bool kv_bucket_is_empty(const uint8_t *page)
{
	return kv_get_le32(page + H_MAGIC) == 0;
}

uint32_t kv_bucket_count(const uint8_t *page)
{
	return kv_bucket_is_empty(page) ? 0 : kv_get_le32(page + H_ENTRIES);
}

uint32_t kv_bucket_used(const uint8_t *page)
{
	return kv_bucket_is_empty(page) ? 0 : kv_get_le32(page + H_USED);
}

static void entry_view(const uint8_t *page, uint32_t off, struct kv_entry *e)
{
	const uint8_t *p = page + off;

	e->off = off;
	e->tag = kv_get_le32(p + E_TAG);
	e->klen = kv_get_le32(p + E_KLEN);
	e->vlen = kv_get_le32(p + E_VLEN);
	e->expire_ms = kv_get_le64(p + E_EXPIRE);
	e->key = p + KV_ENTRY_HDR;
	e->value = e->key + e->klen;
	e->size = (uint32_t)kv_entry_size(e->klen, e->vlen);
}

static uint32_t entry_crc(const uint8_t *entry, uint32_t klen, uint32_t vlen)
{
	return kv_crc32c(0, entry + E_TAG, KV_ENTRY_HDR - E_TAG + (size_t)klen + vlen);
}

static int __attribute__((format(printf, 3, 4))) fail(char *why, size_t whylen,
						      const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

int kv_bucket_check(const uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
		    char *why, size_t whylen)
{
	uint32_t entries, used, n = 0, off = KV_BUCKET_HDR, end;

	if (kv_get_le32(page + H_MAGIC) == 0)
		return all_zero(page, g->size) ? 0
		       : fail(why, whylen, "no header, but the page holds data (a torn first write?)");
	if (kv_get_le32(page + H_MAGIC) != KV_BUCKET_MAGIC)
		return fail(why, whylen, "bad magic 0x%08" PRIx32, kv_get_le32(page + H_MAGIC));
	if (kv_get_le32(page + H_CRC) != header_crc(page))
		return fail(why, whylen, "header checksum mismatch");
	if (kv_get_le32(page + H_VERSION) != KV_BUCKET_VERSION)
		return fail(why, whylen, "unknown page version %" PRIu32,
			    kv_get_le32(page + H_VERSION));
	if (kv_get_le32(page + H_RESERVED) || !all_zero(page + H_PAD, KV_BUCKET_HDR - H_PAD))
		return fail(why, whylen, "reserved header bytes are not zero");
	if (kv_get_le64(page + H_INDEX) != index)
		return fail(why, whylen, "page of bucket %" PRIu64 " found in the place of bucket %" PRIu64,
			    kv_get_le64(page + H_INDEX), index);
	if (memcmp(page + H_UUID, g->uuid, KV_UUID_LEN))
		return fail(why, whylen, "page of another pool (UUID differs)");
	entries = kv_get_le32(page + H_ENTRIES);
	used = kv_get_le32(page + H_USED);
	if (!entries || used % 8 || used > g->size - KV_BUCKET_HDR)
		return fail(why, whylen, "header says %" PRIu32 " entries in %" PRIu32 " bytes",
			    entries, used);
	end = KV_BUCKET_HDR + used;
	while (off < end) {
		const uint8_t *p = page + off;
		struct kv_entry e;
		uint64_t hash;

		if (end - off < KV_ENTRY_HDR)
			return fail(why, whylen, "entry at byte %" PRIu32 ": cut off", off);
		if (kv_get_le32(p + E_KLEN) > KV_KEY_MAX ||
		    kv_entry_size(kv_get_le32(p + E_KLEN), kv_get_le32(p + E_VLEN)) > end - off)
			return fail(why, whylen, "entry at byte %" PRIu32 ": lengths run past the end",
				    off);
		entry_view(page, off, &e);
		if (kv_get_le32(p + E_CRC) != entry_crc(p, e.klen, e.vlen))
			return fail(why, whylen, "entry at byte %" PRIu32 ": checksum mismatch", off);
		if (!all_zero(e.value + e.vlen, e.size - (KV_ENTRY_HDR + e.klen + e.vlen)))
			return fail(why, whylen, "entry at byte %" PRIu32 ": padding not zero", off);
		hash = kv_hash(e.key, e.klen);
		if (e.tag != kv_entry_tag(hash) || kv_bucket_of_hash(hash, g->nbuckets) != index)
			return fail(why, whylen, "entry at byte %" PRIu32 ": key does not hash to this bucket",
				    off);
		n++;
		off += e.size;
	}
	if (n != entries)
		return fail(why, whylen, "header says %" PRIu32 " entries, the page holds %" PRIu32,
			    entries, n);
	if (!all_zero(page + end, g->size - end))
		return fail(why, whylen, "bytes past the last entry are not zero (a torn write?)");
	return 0;
}

bool kv_bucket_next(const uint8_t *page, uint32_t *off, struct kv_entry *e)
{
	uint32_t end = KV_BUCKET_HDR + kv_bucket_used(page);

	if (*off < KV_BUCKET_HDR)
		*off = KV_BUCKET_HDR;
	if (*off >= end)
		return false;
	entry_view(page, *off, e);
	*off += e->size;
	return true;
}

bool kv_bucket_entry_at(const uint8_t *page, uint32_t off, struct kv_entry *e)
{
	if (off < KV_BUCKET_HDR || off >= KV_BUCKET_HDR + kv_bucket_used(page))
		return false;
	entry_view(page, off, e);
	return true;
}

bool kv_bucket_find(const uint8_t *page, const void *key, uint32_t klen, uint64_t hash,
		    struct kv_entry *e)
{
	uint32_t tag = kv_entry_tag(hash), off = KV_BUCKET_HDR;
	uint32_t end = KV_BUCKET_HDR + kv_bucket_used(page);

	while (off < end) {
		const uint8_t *p = page + off;
		uint32_t kl = kv_get_le32(p + E_KLEN);

		if (kv_get_le32(p + E_TAG) == tag && kl == klen &&
		    !memcmp(p + KV_ENTRY_HDR, key, klen)) {
			entry_view(page, off, e);
			return true;
		}
		off += (uint32_t)kv_entry_size(kl, kv_get_le32(p + E_VLEN));
	}
	return false;
}

static void entry_write(uint8_t *p, const void *key, uint32_t klen, uint64_t hash,
			const void *value, uint32_t vlen, uint64_t expire_ms)
{
	uint32_t size = (uint32_t)kv_entry_size(klen, vlen);

	kv_put_le32(p + E_TAG, kv_entry_tag(hash));
	kv_put_le32(p + E_KLEN, klen);
	kv_put_le32(p + E_VLEN, vlen);
	kv_put_le64(p + E_EXPIRE, expire_ms);
	memcpy(p + KV_ENTRY_HDR, key, klen);
	if (vlen)
		memcpy(p + KV_ENTRY_HDR + klen, value, vlen);
	memset(p + KV_ENTRY_HDR + klen + vlen, 0, size - (KV_ENTRY_HDR + klen + vlen));
	kv_put_le32(p + E_CRC, entry_crc(p, klen, vlen));
}

/* Remove the entry at [off, off + size): the rest moves down, the freed tail is zeroed. */
static void entry_remove(uint8_t *page, uint32_t off, uint32_t size, uint32_t end)
{
	memmove(page + off, page + off + size, end - off - size);
	memset(page + end - size, 0, size);
}

int kv_bucket_set_found(uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
			const void *key, uint32_t klen, uint64_t hash, const void *value,
			uint32_t vlen, uint64_t expire_ms, const struct kv_entry *old,
			struct kv_change *ch, uint32_t *at)
{
	uint64_t size = kv_entry_size(klen, vlen);
	uint32_t used = kv_bucket_used(page), entries = kv_bucket_count(page);
	uint32_t end = KV_BUCKET_HDR + used, new_end;

	if (old && old->size == size) {
		/* Same size: rewritten in place; the header stays as it is. */
		entry_write(page + old->off, key, klen, hash, value, vlen, expire_ms);
		*ch = (struct kv_change){ .lo = old->off, .hi = old->off + old->size, .hdr = false };
		*at = old->off;
		return 0;
	}
	if (KV_BUCKET_HDR + (uint64_t)used - (old ? old->size : 0) + size > g->size)
		return -ENOSPC;
	/* Otherwise the old entry goes and the new one is appended. */
	ch->lo = old ? old->off : end;
	if (old) {
		entry_remove(page, old->off, old->size, end);
		used -= old->size;
		entries--;
	}
	new_end = KV_BUCKET_HDR + used + (uint32_t)size;
	*at = KV_BUCKET_HDR + used;
	entry_write(page + *at, key, klen, hash, value, vlen, expire_ms);
	ch->hi = new_end > end ? new_end : end;
	ch->hdr = true;
	header_write(page, index, g, entries + 1, used + (uint32_t)size);
	return 0;
}

int kv_bucket_set(uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
		  const void *key, uint32_t klen, uint64_t hash, const void *value,
		  uint32_t vlen, uint64_t expire_ms, struct kv_change *ch)
{
	struct kv_entry old;
	uint32_t at;
	bool present = kv_bucket_find(page, key, klen, hash, &old);

	return kv_bucket_set_found(page, index, g, key, klen, hash, value, vlen, expire_ms,
				   present ? &old : NULL, ch, &at);
}

void kv_bucket_del_found(uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
			 const struct kv_entry *e, struct kv_change *ch)
{
	uint32_t used = kv_bucket_used(page), entries = kv_bucket_count(page);

	entry_remove(page, e->off, e->size, KV_BUCKET_HDR + used);
	*ch = (struct kv_change){ .lo = e->off, .hi = KV_BUCKET_HDR + used, .hdr = true };
	header_write(page, index, g, entries - 1, used - e->size);
}

int kv_bucket_del(uint8_t *page, uint64_t index, const struct kv_bucket_geom *g,
		  const void *key, uint32_t klen, uint64_t hash, uint64_t deadline_ms,
		  struct kv_change *ch)
{
	struct kv_entry e;

	*ch = (struct kv_change){ 0 };
	if (!kv_bucket_find(page, key, klen, hash, &e))
		return 0;
	if (deadline_ms && (!e.expire_ms || e.expire_ms > deadline_ms))
		return 0;
	kv_bucket_del_found(page, index, g, &e, ch);
	return 1;
}

void kv_bucket_clear(uint8_t *page, struct kv_change *ch)
{
	uint32_t end = KV_BUCKET_HDR + kv_bucket_used(page);

	*ch = (struct kv_change){ .lo = KV_BUCKET_HDR, .hi = end, .hdr = !kv_bucket_is_empty(page) };
	memset(page, 0, end);
}
