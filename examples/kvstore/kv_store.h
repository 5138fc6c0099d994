/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * kv_store.h: a member's store, one file (docs/kvstore.md has the layout):
 *
 *   0            4 KiB          superblock: identity and geometry, crc32c
 *   meta_offset  2 x meta_slot  librmr's metadata blob, slots A/B (sequence, crc32c)
 *   map_offset   map_size       librmr's dirty-map area
 *   data_offset  nbuckets x bucket_size   the bucket pages (kv_bucket.h)
 *
 * The pages are the file's, mapped shared (in memory, as Redis keeps its
 * data): a change is in the page cache as it is made, with no system call,
 * so it survives the member process being killed, and reaches stable
 * storage on flush (librmr calls it before it records resynced buckets
 * clean) or before every acknowledgement with --sync-writes (msync of
 * what changed). Metadata and dirty-map writes are durable on return. A
 * kill while a page changes leaves it failing its checks (see below); a
 * change that might not fit is tried on a copy first, never undone in place.
 *
 * A page that fails its checks when the store is opened (a write torn by a
 * crash) is kept *damaged*: requests for that bucket fail with -EIO and a
 * peer is never given it, until librmr copies the bucket in from a peer
 * (the write that tore it was in flight, so the peers recorded it missed).
 *
 * Threading: the rmr store callbacks run on librmr's event loop; nothing
 * else touches the pages while the store is served.
 */
#ifndef KVSTORE_STORE_H
#define KVSTORE_STORE_H

#include <rmr/server.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kv_bucket.h"
#include "kv_index.h"

#define KV_STORE_MIN_BUCKET (4u * 1024)
#define KV_STORE_MAX_BUCKET (4u * 1024 * 1024)

/* What kv_store_create() writes. */
struct kv_store_params {
	const char *pool_name;       /* 1..RMR_NAME_MAX of [A-Za-z0-9._-] */
	rmr_uuid uuid;
	uint16_t member_id;          /* 1..RMR_MAX_MEMBER_ID */
	uint64_t nbuckets;
	uint32_t bucket_size;        /* power of two, KV_STORE_MIN_BUCKET..KV_STORE_MAX_BUCKET */
};

struct kv_store {
	int fd;
	char path[4096];
	char pool_name[RMR_NAME_MAX + 1];
	rmr_uuid uuid;
	uint16_t member_id;
	struct kv_bucket_geom geom;
	uint64_t nbuckets;
	uint32_t bucket_size;
	uint64_t pool_size;          /* nbuckets * bucket_size */
	uint64_t meta_offset, meta_slot_size;
	uint64_t map_offset, map_size;
	uint64_t data_offset;
	bool sync_writes;            /* every change durable before it is acknowledged */

	uint8_t *pages;              /* nbuckets * bucket_size: the file's data area, mapped shared */
	uint8_t *damaged;            /* per bucket: 1 while its page is unusable */
	uint8_t *scratch;            /* one page: where a batch that might not fit is tried */
	struct kv_index *index;      /* per bucket, built at first use */
	uint64_t ndamaged;
	uint64_t keys;               /* entries over all good pages */

	bool meta_known;             /* meta_seq is valid */
	uint64_t meta_seq;           /* sequence of the newest valid blob, 0 if none */

	/*
	 * This member may still have buckets of its own to copy in (librmr's
	 * dirty_tracking event for its own id). True until the member knows:
	 * a multi-key read, which librmr syncs only one bucket for, is then
	 * refused and goes key by key.
	 */
	atomic_bool own_dirty;
};

/* Is @name a valid pool name? */
bool kv_store_name_valid(const char *name);

/*
 * Create the store file @path (it must not exist unless @force). @return 0,
 * or -errno with the reason in @why.
 */
int kv_store_create(const char *path, const struct kv_store_params *p, bool force, char *why,
		    size_t whylen);

/*
 * Open and load a store: the superblock must be good; each page is checked,
 * a bad one is kept damaged (kv_store_report_damaged() says why). @p lock takes an exclusive lock (a
 * store is served by one process at a time). @return 0 or -errno with the
 * reason in @why.
 */
int kv_store_open(const char *path, bool lock, struct kv_store **out, char *why, size_t whylen);
void kv_store_close(struct kv_store *s);
/* Log every damaged page with the reason its checks gave. */
void kv_store_report_damaged(const struct kv_store *s);

/* The page of bucket @b. */
static inline uint8_t *kv_store_page(const struct kv_store *s, uint64_t b)
{
	return s->pages + b * s->bucket_size;
}

/*
 * Bucket @b's page changed where the @n changes @ch say: with --sync-writes,
 * make that durable now (the entries, then the header). @return 0 or -errno.
 */
int kv_store_persist(struct kv_store *s, uint64_t b, const struct kv_change *ch, unsigned n);
/* The same for bucket @b's whole page. */
int kv_store_persist_page(struct kv_store *s, uint64_t b);

/* The librmr store callbacks (kv_store_ops.c); the store pointer is the kv_store. */
extern const struct rmr_store_ops kv_store_ops;
/*
 * What kv_store_ops.io does with a request, synchronously: @return the
 * status it completes with (a read's byte count, 0, or -errno).
 */
int kv_store_apply(struct kv_store *s, struct rmr_store_io *io);

/* librmr metadata blob and dirty-map area, in the file (kv_store_file.c). */
int kv_store_meta_load(struct kv_store *s, void *buf, size_t cap, size_t *len);
int kv_store_meta_save(struct kv_store *s, const void *buf, size_t len);
int kv_store_map_read(struct kv_store *s, uint64_t off, void *buf, size_t len);
int kv_store_map_write(struct kv_store *s, uint64_t off, const void *buf, size_t len);
int kv_store_flush(struct kv_store *s);

/*
 * The digest of the store's data (kv_digest.c): SHA-256 over every key,
 * bucket by bucket and in key order within a bucket, of klen, key, vlen,
 * value and expire_ms, so members that hold the same data have the same
 * digest whatever the order their pages keep entries in. Damaged buckets
 * are left out and counted in @damaged. @return 0 or -ENOMEM.
 */
int kv_store_digest(const struct kv_store *s, uint8_t digest[32], uint64_t *keys,
		    uint64_t *damaged);

#endif
