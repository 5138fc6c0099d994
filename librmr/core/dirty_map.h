/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Dirty map: for one member of a pool, which chunks it has missed.
 *
 * Each chunk has a one-byte entry (bit 0 dirty, bit 1 syncing, bit 2
 * record, bit 3 a record of an older boot, the rest reserved). A record says less than dirty: the member
 * acknowledged the chunk's last writes, but no flush covered them on it, so
 * it may have lost them to a power loss of its host (a client's record,
 * client_unflushed.c). Marking a chunk dirty drops its record; recording a
 * dirty chunk leaves it dirty. Entries live in a two-level table: a fixed root of pointers to
 * first-level pages (FLP) of pointers to second-level pages (SLP) of 4096
 * entries. Pages are allocated on first touch and freed when their last
 * non-zero entry is cleared, so memory follows the dirty spread, not the pool
 * size. An SLP starts sparse (a sorted list of its non-zero entries) and
 * turns into a dense array of 4096 bytes only when it fills up: a pool with a
 * few dirty chunks spread evenly costs a few bytes per dirty chunk, a fully
 * dirty one one byte per chunk.
 *
 * Capacity: 2^29 chunks (512 TiB at 1 MiB chunks, 64 TiB at 128 KiB).
 * Not thread-safe: owned by one event loop.
 */
#ifndef RMR_CORE_DIRTY_MAP_H
#define RMR_CORE_DIRTY_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DIRTY_BIT 0x01u
#define SYNCING_BIT 0x02u
#define RECORD_BIT 0x04u
/*
 * With RECORD_BIT only: a record made in another boot of the member's host
 * than the map's record boot (server_pool.h, record_boot): never void.
 */
#define RECORD_OLD_BIT 0x08u
#define DIRTY_MAP_MAX_CHUNKS (1ull << 29)

#define DIRTY_SLP_SHIFT 12 /* 4096 entries per second-level page */
#define DIRTY_FLP_SHIFT 9  /* 512 SLP pointers per first-level page */
#define DIRTY_ROOT_SIZE (DIRTY_MAP_MAX_CHUNKS >> (DIRTY_SLP_SHIFT + DIRTY_FLP_SHIFT))

struct dirty_slp;
struct dirty_flp;

struct dirty_map {
	uint64_t nchunks;
	uint64_t dirty;       /* entries with DIRTY_BIT or RECORD_BIT */
	uint64_t records;     /* entries with RECORD_BIT */
	size_t bytes;         /* memory held by pages */
	struct dirty_flp *root[DIRTY_ROOT_SIZE];
};

/* @nchunks: 1..DIRTY_MAP_MAX_CHUNKS. Returns 0 or -EINVAL. */
int dirty_map_init(struct dirty_map *m, uint64_t nchunks);
void dirty_map_destroy(struct dirty_map *m);

/* Entry of @chunk (0 when never touched); @chunk must be < nchunks. */
uint8_t dirty_map_get(const struct dirty_map *m, uint64_t chunk);
/*
 * Set the entry of @chunk to @value. Returns 0, -ERANGE for a chunk beyond
 * the map, or -ENOMEM (the entry is then unchanged).
 */
int dirty_map_set(struct dirty_map *m, uint64_t chunk, uint8_t value);
/* Set DIRTY_BIT on [first, first+count), dropping records. Returns 0, -ERANGE or -ENOMEM. */
int dirty_map_mark(struct dirty_map *m, uint64_t first, uint64_t count);
/* Set RECORD_BIT on the chunks of [first, first+count) not dirty. Returns 0, -ERANGE or -ENOMEM. */
int dirty_map_record(struct dirty_map *m, uint64_t first, uint64_t count);
/*
 * Mark the records of [first, first+count) as of another boot than the
 * map's (RECORD_OLD_BIT). Returns 0, -ERANGE or -ENOMEM.
 */
int dirty_map_age(struct dirty_map *m, uint64_t first, uint64_t count);
/* Clear every entry. */
void dirty_map_clear_all(struct dirty_map *m);

/*
 * First chunk >= @from whose entry has any of @bits, or UINT64_MAX if none.
 * Skips untouched pages without looking at them.
 */
uint64_t dirty_map_next(const struct dirty_map *m, uint64_t from, uint8_t bits);

/* A run of chunks, [first, first + count). */
struct dirty_range {
	uint64_t first, count;
};

/*
 * Cover every DIRTY_BIT entry of @m with at most @max (>= 1) ranges, written
 * to @out: runs of aligned blocks of the smallest power-of-two size that
 * needs no more than @max of them (a range may hold clean chunks; none past
 * the map's end). Returns the number of ranges, 0 for an empty map.
 */
unsigned dirty_map_cover(const struct dirty_map *m, unsigned max, struct dirty_range *out);
/* The same for the entries with any of @bits. */
unsigned dirty_map_cover_bits(const struct dirty_map *m, uint8_t bits, unsigned max,
			      struct dirty_range *out);
/*
 * Add @src to @dst: dirty where @src is dirty, a record where @src has one
 * and @dst is clean, of an older boot where either's is. Returns 0 or -ENOMEM.
 */
int dirty_map_merge(struct dirty_map *dst, const struct dirty_map *src);
/* The same, @src's records (or, @absorb, as in dirty_map_absorb) of an older boot if @age. */
int dirty_map_merge_records(struct dirty_map *dst, const struct dirty_map *src, bool absorb,
			    bool age);
/*
 * The same, except that @src's records become dirty in @dst, which keeps
 * RECORD_BIT with them (a member's own map: what it may have lost itself it
 * copies in, yet may serve as a last resort; see resync.c).
 */
int dirty_map_absorb(struct dirty_map *dst, const struct dirty_map *src);

/* Entries marked: misses and records. */
static inline uint64_t dirty_map_count(const struct dirty_map *m)
{
	return m->dirty;
}

/* Entries that are records (our own map's: misses that were records). */
static inline uint64_t dirty_map_records(const struct dirty_map *m)
{
	return m->records;
}

/* Bytes of memory the pages take (the root array not counted). */
static inline size_t dirty_map_memory(const struct dirty_map *m)
{
	return m->bytes;
}

#endif
