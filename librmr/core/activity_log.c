/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "activity_log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "crc32c.h"
#include "wire.h"

#define AL_MAGIC 0x4c414d52u /* "RMAL" */
#define AL_VERSION 1
#define AL_BLOCK 4096u

struct al_wire_header {
	rmr_le32 magic;
	rmr_le32 version;
	rmr_le64 seq;            /* higher wins between the two records */
	rmr_le64 writer;         /* incarnation of the writer the entries belong to */
	rmr_le64 writer_epoch;   /* writer epoch granted last */
	rmr_le32 count;          /* entries that follow */
	rmr_le32 crc;            /* CRC-32C of header (this field zero) and entries */
	rmr_le64 holder;         /* incarnation of the writer holding the epoch */
	uint8_t reserved[16];    /* zero */
};
_Static_assert(sizeof(struct al_wire_header) == AL_HEADER_BYTES, "al header size");

struct al_wire_entry {
	rmr_le64 first;
	rmr_le32 count;
	rmr_le32 reserved;       /* zero */
};
_Static_assert(sizeof(struct al_wire_entry) == AL_ENTRY_BYTES, "al entry size");

static unsigned bucket_of(uint64_t first)
{
	return (unsigned)((first * 0x9e3779b97f4a7c15ull) >> 54) % AL_BUCKETS;
}

void al_reset(struct activity_log *al, uint64_t writer)
{
	memset(al->e, 0, sizeof(al->e));
	for (unsigned i = 0; i < AL_BUCKETS; i++)
		al->bucket[i] = AL_NONE;
	for (unsigned i = 0; i < AL_SLOTS; i++)
		al->slot_entry[i] = AL_NONE;
	for (unsigned i = 0; i < AL_MAX_ENTRIES; i++)
		al->e[i].next = i + 1 < AL_MAX_ENTRIES ? (uint16_t)(i + 1) : AL_NONE;
	al->free_head = 0;
	al->n = 0;
	al->hand = 0;
	al->writer = writer;
}

void al_init(struct activity_log *al)
{
	al->seq = 0;
	al->writer_epoch = 0;
	al->holder = 0;
	al->evictions = al->records = 0;
	al_reset(al, 0);
}

static uint16_t find(const struct activity_log *al, uint64_t first, uint32_t count)
{
	for (uint16_t i = al->bucket[bucket_of(first)]; i != AL_NONE; i = al->e[i].next)
		if (al->e[i].first == first && al->e[i].count == count)
			return i;
	return AL_NONE;
}

static void unlink_entry(struct activity_log *al, uint16_t idx)
{
	uint16_t *link = &al->bucket[bucket_of(al->e[idx].first)];

	while (*link != idx)
		link = &al->e[*link].next;
	*link = al->e[idx].next;
	memset(&al->e[idx], 0, sizeof(al->e[idx]));
	al->e[idx].next = al->free_head;
	al->free_head = idx;
	al->n--;
}

/* Evict one unpinned entry, giving recently used ones a second chance. */
static bool evict_one(struct activity_log *al)
{
	for (unsigned step = 0; step < 2 * AL_MAX_ENTRIES; step++) {
		struct al_entry *e = &al->e[al->hand];
		uint16_t idx = (uint16_t)al->hand;

		al->hand = (al->hand + 1) % AL_MAX_ENTRIES;
		if (!e->used || e->pins)
			continue;
		if (e->referenced) {
			e->referenced = false;
			continue;
		}
		unlink_entry(al, idx);
		al->evictions++;
		return true;
	}
	return false;
}

static uint16_t insert(struct activity_log *al, uint64_t first, uint32_t count)
{
	unsigned b = bucket_of(first);
	uint16_t idx = al->free_head;

	al->free_head = al->e[idx].next;
	al->e[idx] = (struct al_entry){
		.first = first, .count = count, .used = true, .referenced = true,
		.next = al->bucket[b],
	};
	al->bucket[b] = idx;
	al->n++;
	return idx;
}

int al_note(struct activity_log *al, uint32_t slot, uint64_t first, uint32_t count)
{
	uint16_t idx, old;
	int changed = 0;

	if (slot >= AL_SLOTS || count == 0)
		return -EINVAL;
	idx = find(al, first, count);
	if (idx == AL_NONE) {
		/* Make room first: the slot's old entry may be the one to go. */
		old = al->slot_entry[slot];
		if (old != AL_NONE) {
			al->e[old].pins--;
			al->slot_entry[slot] = AL_NONE;
		}
		while (al->n >= AL_CACHE_ENTRIES && evict_one(al))
			;
		if (al->n == AL_MAX_ENTRIES)
			return -ENOSPC;
		idx = insert(al, first, count);
		changed = 1;
	} else {
		old = al->slot_entry[slot];
		if (old != AL_NONE)
			al->e[old].pins--;
		al->e[idx].referenced = true;
	}
	al->e[idx].pins++;
	al->slot_entry[slot] = idx;
	return changed;
}

uint64_t al_extent_cover(uint64_t first, uint64_t last, uint32_t extent_chunks,
			 uint64_t nchunks, uint64_t *efirst)
{
	uint64_t per = extent_chunks ? extent_chunks : 1;
	uint64_t end = (last / per + 1) * per; /* one past the last extent's chunks */

	*efirst = first / per * per;
	return (end < nchunks ? end : nchunks) - *efirst;
}

void al_for_each(const struct activity_log *al, void (*fn)(void *ctx, uint64_t first,
							   uint32_t count), void *ctx)
{
	for (unsigned i = 0; i < AL_MAX_ENTRIES; i++)
		if (al->e[i].used)
			fn(ctx, al->e[i].first, al->e[i].count);
}

size_t al_record_len(uint32_t count)
{
	size_t used = AL_HEADER_BYTES + (size_t)count * AL_ENTRY_BYTES;

	return (used + AL_BLOCK - 1) / AL_BLOCK * AL_BLOCK;
}

size_t al_encode(const struct activity_log *al, void *buf)
{
	struct al_wire_header *h = buf;
	struct al_wire_entry *w = (struct al_wire_entry *)(h + 1);
	uint32_t n = 0;
	size_t len = al_record_len(al->n);

	memset(buf, 0, len);
	for (unsigned i = 0; i < AL_MAX_ENTRIES; i++) {
		if (!al->e[i].used)
			continue;
		w[n].first = cpu_to_le64(al->e[i].first);
		w[n].count = cpu_to_le32(al->e[i].count);
		n++;
	}
	h->magic = cpu_to_le32(AL_MAGIC);
	h->version = cpu_to_le32(AL_VERSION);
	h->seq = cpu_to_le64(al->seq + 1);
	h->writer = cpu_to_le64(al->writer);
	h->writer_epoch = cpu_to_le64(al->writer_epoch);
	h->holder = cpu_to_le64(al->holder);
	h->count = cpu_to_le32(n);
	h->crc = cpu_to_le32(crc32c(0, buf, AL_HEADER_BYTES + (size_t)n * AL_ENTRY_BYTES));
	return len;
}

int al_decode(const void *buf, size_t len, uint64_t nchunks, struct al_record *r, char *why,
	      size_t whylen)
{
	struct al_wire_header h;
	const struct al_wire_entry *w = (const struct al_wire_entry *)((const char *)buf +
								       AL_HEADER_BYTES);
	static const uint8_t zero[16];
	uint32_t crc;
	size_t body;

	if (len < AL_HEADER_BYTES) {
		snprintf(why, whylen, "record shorter than its header");
		return -EBADMSG;
	}
	memcpy(&h, buf, sizeof(h));
	if (le32_to_cpu(h.magic) != AL_MAGIC) {
		snprintf(why, whylen, "no record (magic 0x%08x)", le32_to_cpu(h.magic));
		return -EBADMSG;
	}
	if (le32_to_cpu(h.version) != AL_VERSION || memcmp(h.reserved, zero, sizeof(zero))) {
		snprintf(why, whylen, "unknown record version %u", le32_to_cpu(h.version));
		return -EBADMSG;
	}
	r->count = le32_to_cpu(h.count);
	if (r->count > AL_MAX_ENTRIES) {
		snprintf(why, whylen, "%u entries, more than %u", r->count, AL_MAX_ENTRIES);
		return -EBADMSG;
	}
	body = AL_HEADER_BYTES + (size_t)r->count * AL_ENTRY_BYTES;
	if (len < body) {
		snprintf(why, whylen, "record of %u entries cut at %zu bytes", r->count, len);
		return -EBADMSG;
	}
	crc = le32_to_cpu(h.crc);
	h.crc = cpu_to_le32(0);
	if (crc32c(crc32c(0, &h, sizeof(h)), w, body - AL_HEADER_BYTES) != crc) {
		snprintf(why, whylen, "checksum mismatch (torn or corrupt)");
		return -EBADMSG;
	}
	for (uint32_t i = 0; i < r->count; i++) {
		uint64_t first = le64_to_cpu(w[i].first);
		uint32_t count = le32_to_cpu(w[i].count);

		if (count == 0 || first >= nchunks || count > nchunks - first ||
		    le32_to_cpu(w[i].reserved)) {
			snprintf(why, whylen, "entry %u (chunks %llu+%u) outside the pool", i,
				 (unsigned long long)first, count);
			return -EBADMSG;
		}
	}
	r->seq = le64_to_cpu(h.seq);
	r->writer = le64_to_cpu(h.writer);
	r->writer_epoch = le64_to_cpu(h.writer_epoch);
	r->holder = le64_to_cpu(h.holder);
	return 0;
}

void al_load(struct activity_log *al, const void *buf, const struct al_record *r)
{
	const struct al_wire_entry *w = (const struct al_wire_entry *)((const char *)buf +
								       AL_HEADER_BYTES);

	al_reset(al, r->writer);
	al->seq = r->seq;
	al->writer_epoch = r->writer_epoch;
	al->holder = r->holder;
	for (uint32_t i = 0; i < r->count; i++) {
		uint64_t first = le64_to_cpu(w[i].first);
		uint32_t count = le32_to_cpu(w[i].count);

		if (find(al, first, count) == AL_NONE)
			al->e[insert(al, first, count)].referenced = false;
	}
}
