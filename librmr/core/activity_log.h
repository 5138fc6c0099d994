/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Activity log: the chunk ranges a member wrote for the current writer
 * recently, kept durable so that a writer's crash (and a member crash on top
 * of it) still shows where the members may differ.
 *
 * A write the member got may be missing on another member only while the
 * writer has not seen it finish everywhere. The writer reuses a request slot
 * only after its previous write finished everywhere, so "the last write of
 * each slot" (last_io) covers every such write. Those entries are pinned; a
 * few hundred more stay as a cache, so that a hot working set costs no record
 * write at all. A record is written only when a range enters the log, before
 * the data write it covers goes to the store.
 *
 * Ranges are whole extents (DRBD's al-extents, 4 MiB by default): a write
 * brings the aligned extents around it into the log, so a random-write
 * workload over AL_CACHE_ENTRIES extents (4 GiB) writes no records once
 * warm. The price is paid only after a writer's crash: every chunk of the
 * logged extents is copied from the source, at most about 4 GiB plus the
 * pinned extents.
 *
 * Pure logic and codec; server_pool.c does the I/O. On disk: two records of
 * AL_RECORD_BYTES after the dirty-map bitmaps, written in turn; the valid one
 * with the higher sequence counts (docs/disk-format.md).
 */
#ifndef RMR_CORE_ACTIVITY_LOG_H
#define RMR_CORE_ACTIVITY_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AL_RECORD_BYTES (32u * 1024)
#define AL_HEADER_BYTES 64u
#define AL_ENTRY_BYTES 16u
#define AL_MAX_ENTRIES ((AL_RECORD_BYTES - AL_HEADER_BYTES) / AL_ENTRY_BYTES) /* 2044 */
/* Unpinned entries beyond this many are evicted (oldest use first). */
#define AL_CACHE_ENTRIES 1024u
/* Default bytes of an extent (rmr_pool_params.al_extent_size). */
#define AL_EXTENT_BYTES (4u * 1024 * 1024)
#define AL_EXTENT_MAX (1u << 30)
/* Request slots tracked: a session's queue depth is at most this. */
#define AL_SLOTS 1024u
#define AL_BUCKETS 1024u
#define AL_NONE UINT16_MAX

struct al_entry {
	uint64_t first;              /* first chunk */
	uint32_t count;              /* chunks, >= 1 */
	uint16_t pins;               /* slots whose last write this is */
	uint16_t next;               /* hash chain */
	bool used, referenced;
};

struct activity_log {
	struct al_entry e[AL_MAX_ENTRIES];
	uint16_t bucket[AL_BUCKETS];
	uint16_t slot_entry[AL_SLOTS]; /* last_io: entry of each slot's last write */
	uint16_t free_head;          /* unused entries, chained through next */
	uint32_t n;                  /* entries in use */
	uint32_t hand;               /* clock hand for eviction */
	uint64_t seq;                /* sequence of the newest record on disk */
	uint64_t writer;             /* incarnation of the writer the entries belong to (0: none) */
	/* Writer fencing (writer.c), kept in the same record. */
	uint64_t writer_epoch;       /* the writer epoch this member granted last */
	uint64_t holder;             /* incarnation of the writer holding it (0: none) */
	uint64_t evictions, records;  /* counters */
};

/* A record as read from disk, for al_load(). */
struct al_record {
	uint64_t seq, writer, writer_epoch, holder;
	uint32_t count;
};

/* Empty, for no writer. */
void al_init(struct activity_log *al);
/*
 * A write in request slot @slot covers chunks [first, first+count). Returns
 * 1 if the log changed (a record must be written before the write goes to
 * the store), 0 if the range was in it already, -ENOSPC if every entry is
 * pinned (cannot happen with at most AL_SLOTS slots) or -EINVAL.
 */
int al_note(struct activity_log *al, uint32_t slot, uint64_t first, uint32_t count);
/*
 * The range the log keeps for a write to chunks [first, last] of a pool of
 * @nchunks chunks: whole extents of @extent_chunks chunks, cut at the pool's
 * end. Returns the chunk count and sets @efirst.
 */
uint64_t al_extent_cover(uint64_t first, uint64_t last, uint32_t extent_chunks,
			 uint64_t nchunks, uint64_t *efirst);
/* Forget every entry; the log now belongs to @writer. */
void al_reset(struct activity_log *al, uint64_t writer);
/* Call @fn for every range in the log. */
void al_for_each(const struct activity_log *al, void (*fn)(void *ctx, uint64_t first,
							   uint32_t count), void *ctx);

/*
 * Encode the next record (sequence al->seq + 1) into @buf (AL_RECORD_BYTES).
 * Returns the bytes to write: the used part, rounded up to 4 KiB.
 */
size_t al_encode(const struct activity_log *al, void *buf);
/*
 * Check a record read from disk (@len bytes, at least the header). Returns 0
 * and fills @r, or -EBADMSG (torn, corrupt or never written) with a reason.
 * @nchunks bounds the ranges.
 */
int al_decode(const void *buf, size_t len, uint64_t nchunks, struct al_record *r, char *why,
	      size_t whylen);
/* Bytes of a record with @count entries, rounded up to 4 KiB. */
size_t al_record_len(uint32_t count);
/* Replace the log by a record al_decode() accepted (its entries unpinned). */
void al_load(struct activity_log *al, const void *buf, const struct al_record *r);

#endif
