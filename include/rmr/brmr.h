/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * @file brmr.h
 * @brief libbrmr: a block device on an rmr pool, and the member's store.
 *
 * Client side: brmr_open() opens a pool through librmr and offers block
 * reads, writes, flushes, trims and write-zeroes; requests are split at chunk
 * boundaries and at the pool's largest request size.
 *
 * Storage side: a backing store (file or block device) holds a superblock, a
 * metadata area for librmr's blob, a dirty-map area for librmr's bitmaps, and
 * the data. brmr_store_format() writes a new one; brmr_store_open() checks and
 * opens one; brmr_store_serve() serves it through an rmr server.
 *
 * Threading: brmr_submit() may be called from any thread; callbacks run on
 * librmr's event-loop thread (or, when every piece of a request completed
 * before brmr_submit() returned, on the submitting thread) and must not
 * block.
 */
#ifndef RMR_BRMR_H
#define RMR_BRMR_H

#include <rmr/rmr.h>
#include <rmr/client.h>
#include <rmr/server.h>
#include <stdbool.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Client side                                                        */
/* ------------------------------------------------------------------ */

/** An open block device. */
struct brmr_dev;

/** Block operations; these are the rmr opcodes libbrmr sends. */
enum brmr_op {
	BRMR_OP_READ = 1,         /**< read @c len bytes */
	BRMR_OP_WRITE = 2,        /**< write @c len bytes */
	BRMR_OP_FLUSH = 3,        /**< make completed writes durable (offset/len 0) */
	BRMR_OP_TRIM = 4,         /**< discard a range (reads back as zeroes) */
	BRMR_OP_WRITE_ZEROES = 5, /**< write zeroes to a range */
};

/** Flags of a block request. */
enum brmr_flags {
	BRMR_F_FUA = 1 << 0, /**< the write is durable when it completes */
};

/** Completion: @p status is 0 or a negative errno. */
typedef void (*brmr_cb)(void *priv, int status);

/** Most iovec entries in one block request. */
#define BRMR_MAX_IOV RMR_MAX_IOV

/**
 * Open the block device of a pool. @p opts are passed to rmr_client_open(),
 * with @c volatile_writes set: the members' stores acknowledge writes from
 * the page cache, and BRMR_OP_FLUSH is what makes them durable.
 * @return 0 and the handle in @p out, or a negative errno from
 *         rmr_client_open(); -ENOMEM.
 */
int brmr_open(const struct rmr_client_opts *opts, struct brmr_dev **out);

/**
 * Close: waits for requests in flight, flushes every member (so that no
 * write is left only in a member's page cache), then ends the sessions.
 * Not from a callback.
 */
void brmr_close(struct brmr_dev *d);

/**
 * brmr_close(), and fill @p rec with what the close proves (see
 * rmr_client_close_and_record()): keep it for the next brmr_open()'s
 * rmr_client_opts.last_close.
 */
void brmr_close_and_record(struct brmr_dev *d, struct rmr_close_record *rec);

/** The pool below, for status and info. */
struct rmr_client *brmr_client(struct brmr_dev *d);

/** Device size in bytes. */
uint64_t brmr_size(struct brmr_dev *d);

/** Chunk size of the pool in bytes. */
uint32_t brmr_chunk_size(struct brmr_dev *d);

/**
 * Submit a block request. For READ and WRITE the iovecs must add up to
 * @p len; for the other ops @p iov is NULL and @p iovcnt 0. The request may be
 * split internally; @p cb runs once when every piece completed, with the
 * first error seen. Blocks while librmr has no free slot, except on
 * librmr's event-loop thread (a callback of rmr_client_watch_fd() or a
 * completion), where it never blocks: a request whose first piece finds no
 * free slot is refused with -EAGAIN (retry after a completion), and the
 * rest of one that ran out part-way goes out as its pieces complete, before
 * any newer request from the loop thread (which gets -EAGAIN meanwhile). @p iov itself need not
 * stay valid after the call, only the buffers it points to.
 *
 * @return 0 (the callback will run exactly once); -EINVAL for a bad op,
 *         flag, range (beyond the device) or iovec; -ESHUTDOWN while
 *         closing; -EAGAIN on the loop thread as above. On error the
 *         callback never runs.
 */
int brmr_submit(struct brmr_dev *d, enum brmr_op op, unsigned flags, uint64_t offset,
		uint64_t len, const struct iovec *iov, unsigned iovcnt, brmr_cb cb,
		void *priv);

/* ------------------------------------------------------------------ */
/* Storage side                                                       */
/* ------------------------------------------------------------------ */

/** A member's backing store. */
struct brmr_store;

/** Smallest chunk size of a block pool. */
#define BRMR_CHUNK_MIN (128u * 1024)
/** Largest chunk size of a block pool. */
#define BRMR_CHUNK_MAX (1024u * 1024)

/** What brmr_store_format() writes. */
struct brmr_format_params {
	size_t size;                  /**< sizeof(struct brmr_format_params) */
	const char *pool_name;        /**< 1..RMR_NAME_MAX bytes, [A-Za-z0-9._-] */
	rmr_uuid pool_uuid;           /**< not all zero */
	uint64_t pool_size;           /**< bytes, a multiple of 4096, > 0 */
	uint32_t chunk_size;          /**< power of two, BRMR_CHUNK_MIN..BRMR_CHUNK_MAX */
	uint16_t member_id;           /**< 1..RMR_MAX_MEMBER_ID */
	bool force;                   /**< overwrite an existing brmr superblock */
};

/**
 * Format the store at @p path (a file, created sparse if missing, or a block
 * device) for a pool whose member list is not recorded (the store then knows
 * only itself; see brmr_store_format_pool()). Without @c force, a target
 * whose first MiB is not all zero (a brmr superblock, a file system label,
 * anything) is refused.
 *
 * @return 0; -EINVAL for bad parameters; -EEXIST if the target holds data
 *         and @c force is not set; -EBUSY if a brmr-server is serving it;
 *         -ENOSPC if a block device is too small; -errno from the system.
 */
int brmr_store_format(const char *path, const struct brmr_format_params *p);

/** One member of a pool, as listed in every member's superblock. */
struct brmr_member {
	uint16_t id;                 /**< 1..RMR_MAX_MEMBER_ID, unique in the pool */
	char addr[RMR_ADDR_MAX + 1]; /**< where its brmr-server listens; printable, no spaces */
};

/** brmr_store_format_pool() flags. */
enum brmr_format_flags {
	/** Check everything (parameters, the target, its size) but write nothing. */
	BRMR_FORMAT_CHECK_ONLY = 1 << 0,
};

/**
 * brmr_store_format() with the pool's member list: @p members (@p nmembers
 * entries, at most RMR_MAX_MEMBERS; may be 0) must include @c p->member_id.
 * Without @c force, a target whose first MiB is not all zero (a brmr
 * superblock or anything else) is refused. The data area of the new store
 * reads as zeroes, so members formatted together start identical.
 * @p why receives a one-line reason on failure (may be NULL).
 *
 * @return 0; -EINVAL for bad parameters or flags; -EEXIST if the target
 *         holds a superblock or other data and @c force is not set; -EBUSY
 *         if a brmr-server is serving it; -ENOSPC if a block device is too
 *         small; -errno from the system.
 */
int brmr_store_format_pool(const char *path, const struct brmr_format_params *p,
			   const struct brmr_member *members, unsigned nmembers,
			   unsigned flags, char *why, size_t whylen);

/**
 * Copy the member list of an open store into @p out (room for @p cap).
 * @return the number of members listed (may exceed @p cap; 0 if the store
 *         was formatted without a list).
 */
int brmr_store_members(struct brmr_store *s, struct brmr_member *out, unsigned cap);

/** Identity and geometry read from a store's superblock. */
struct brmr_store_info {
	size_t size;                  /**< sizeof(struct brmr_store_info) */
	char pool_name[RMR_NAME_MAX + 1]; /**< pool name */
	rmr_uuid pool_uuid;           /**< pool UUID */
	uint64_t pool_size;           /**< bytes in the pool's address space */
	uint32_t chunk_size;          /**< bytes per chunk */
	uint16_t member_id;           /**< this store's member id */
	uint32_t format_version;      /**< on-disk format version */
	uint64_t data_offset;         /**< byte offset of the data area */
	uint64_t meta_offset;         /**< byte offset of the metadata area */
	uint64_t meta_size;           /**< bytes in the metadata area */
	uint64_t sequence;            /**< superblock sequence number */
	uint64_t map_offset;          /**< byte offset of the dirty-map area */
	uint64_t map_size;            /**< bytes in the dirty-map area */
	/** served: its data area is mapped (a store on tmpfs; see brmr_serve_opts.no_mmap) */
	bool mapped;
	/**
	 * A write-back to the store failed: data it acknowledged may be lost,
	 * so it is not served again (brmr_store_serve() fails with -EIO);
	 * replace it (brmr-server --replace onto a new store).
	 */
	bool data_lost;
};

/**
 * Open a formatted store and check its superblock. Nothing is written.
 * @p why receives a one-line reason on failure (may be NULL).
 *
 * @return 0 and the handle in @p out; -ENOENT; -EBADMSG for a corrupt,
 *         truncated or foreign superblock (never overwritten);
 *         -EPROTONOSUPPORT for an unknown format version; -errno.
 */
int brmr_store_open(const char *path, struct brmr_store **out, char *why, size_t whylen);

/** Close a store that is not being served. */
void brmr_store_close(struct brmr_store *s);

/**
 * Copy the store's identity. A caller built against an older, shorter
 * struct (@c info->size) gets the fields that fit.
 * @return 0, or -EINVAL if @c info->size is smaller than any version's.
 */
int brmr_store_info(struct brmr_store *s, struct brmr_store_info *info);

/** Options of brmr_store_serve(). Zero means "default" for every number. */
struct brmr_serve_opts {
	size_t size;                  /**< sizeof(struct brmr_serve_opts) */
	unsigned sync_queue_depth;    /**< resync pieces in flight (default 32, max 256) */
	uint64_t resync_rate;         /**< resync bytes per second, 0 = unlimited */
	bool replace;                 /**< a blank replacement member: see rmr_pool_params.replace */
	bool no_activity_log;         /**< measurement only: see rmr_pool_params.no_activity_log */
	/** the pool key, #RMR_KEY_LEN bytes, or NULL: see rmr_pool_params.key */
	const uint8_t *key;
	uint32_t al_extent_size;      /**< 0 for 4 MiB: see rmr_pool_params.al_extent_size */
	/**
	 * Measurement only: serve a store on tmpfs with pread and pwrite. By
	 * default its data area is mapped and copied to and from directly,
	 * which saves a system call and a page-cache walk per request.
	 */
	bool no_mmap;
};

/**
 * Serve @p s as a member of its pool on @p srv. The pool's member set
 * (rmr_pool_params.members_mask) and its peers (every listed member but this
 * one, with the address it listens on) come from the superblock's member
 * list; @p opts (NULL for the defaults) set the resync queue depth and rate.
 * The store's dirty-map area backs librmr's dirty maps. A store on tmpfs
 * has its data area mapped (brmr_store_info.mapped), unless @c opts->no_mmap.
 * Takes an exclusive lock on the store: one server per store.
 * @return 0 and the pool in @p out; -EINVAL for bad arguments (or an
 *         @c opts->size too small for its @c size field); -EBUSY if another
 *         process serves the store; -EROFS if it was opened read-only; an
 *         error of rmr_server_add_pool().
 */
int brmr_store_serve(struct brmr_store *s, struct rmr_server *srv,
		     const struct brmr_serve_opts *opts, struct rmr_server_pool **out);

/**
 * Switch fault injection on the store's I/O: while @p fail_io is true every
 * data request, and every chunk export and import of a resync, fails with
 * -EIO (for tests and drills). Metadata and dirty-map I/O are not affected.
 */
void brmr_store_inject_fault(struct brmr_store *s, bool fail_io);

#ifdef __cplusplus
}
#endif
#endif /* RMR_BRMR_H */
