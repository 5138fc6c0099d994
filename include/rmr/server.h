/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * @file server.h
 * @brief librmr server: serve pools from consumer-supplied stores.
 *
 * A server listens on one address and serves any number of pools. For each
 * pool the consumer supplies a store: callbacks that apply requests to an
 * address range, export and import one chunk for a peer member, and load and
 * save an opaque metadata blob. librmr has no on-disk format of its own.
 *
 * Threading: the server runs one event-loop thread. Store callbacks are
 * called on it; rmr_store_io_done() may be called from any thread.
 * rmr_server_add_pool(), rmr_server_remove_pool() and rmr_server_status() may
 * be called from any thread except the event loop's.
 */
#ifndef RMR_SERVER_H
#define RMR_SERVER_H

#include <rmr/rmr.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most pools one server serves. */
#define RMR_SERVER_MAX_POOLS 16

/** A server instance. */
struct rmr_server;
/** One pool served by a server. */
struct rmr_server_pool;

/** One request handed to a store. */
struct rmr_store_io {
	enum rmr_io_kind kind; /**< RMR_IO_READ or RMR_IO_WRITE */
	uint16_t op;           /**< consumer opcode from the client */
	uint32_t op_flags;     /**< consumer flags from the client */
	uint64_t addr;         /**< first byte (inside the pool) */
	uint32_t len;          /**< bytes in the range */
	void *data;            /**< write: payload (NULL if none); read: @c len bytes to fill */
	uint32_t data_len;     /**< bytes at @c data (0 or @c len; any with RMR_IO_PATCH) */
	const void *arg;       /**< read: the request's argument (rmr_io.arg), NULL if none;
	                            it does not overlap @c data */
	uint32_t arg_len;      /**< bytes at @c arg */
	/**
	 * #rmr_io_flags from the client. With RMR_IO_PATCH, @c data is a
	 * change to make inside the range, and every chunk of the range this
	 * member missed was copied in first.
	 */
	uint32_t flags;
};

/**
 * The consumer's store of one pool. @c io is required; the others may be NULL
 * where noted.
 */
struct rmr_store_ops {
	size_t size; /**< sizeof(struct rmr_store_ops) */
	/**
	 * Apply @p io. The store calls rmr_store_io_done(@p io, status) exactly
	 * once, from any thread, possibly before returning. A negative status
	 * is sent to the client as is. A read-like request may fill fewer than
	 * @c len bytes: the status then says how many.
	 */
	void (*io)(void *store, struct rmr_store_io *io);
	/**
	 * Copy bytes [@p addr, @p addr + @p len) of the pool into @p buf, for a
	 * peer that resyncs them. The range lies inside one chunk and is at
	 * most the session's max io size. Called on the event loop; may block
	 * briefly. @return 0 or -errno.
	 */
	int (*chunk_export)(void *store, uint64_t addr, void *buf, uint32_t len);
	/**
	 * Overwrite bytes [@p addr, @p addr + @p len) of the pool with @p buf,
	 * copied from a peer during resync (same rules as @c chunk_export).
	 * Need not be durable on return: librmr calls @c flush before it
	 * records the chunk as clean. @return 0 or -errno.
	 */
	int (*chunk_import)(void *store, uint64_t addr, const void *buf, uint32_t len);
	/**
	 * Load the metadata blob saved last: copy up to @p cap bytes into
	 * @p buf and set @p *len. A store that never saved one sets @p *len to
	 * 0. @return 0, or -errno (the pool then refuses to start).
	 */
	int (*meta_load)(void *store, void *buf, size_t cap, size_t *len);
	/**
	 * Durably save the metadata blob (at most rmr_server_meta_max() bytes)
	 * so that a crash leaves either the old or the new blob.
	 * @return 0 or -errno.
	 */
	int (*meta_save)(void *store, const void *buf, size_t len);
	/**
	 * Make every completed write durable. @return 0 or -errno. May be NULL.
	 * librmr calls it from a thread of its own too (a flush can take
	 * longer than a heartbeat: not on the event loop), at the same time as
	 * the other callbacks and possibly as another call of it.
	 */
	int (*flush)(void *store);
	/**
	 * Read @p len bytes at @p off of the dirty-map area, an array of
	 * rmr_server_map_area_size() bytes that the store keeps for librmr
	 * (zero when never written). May be NULL together with @c map_write:
	 * dirty tracking then survives a restart only per whole member.
	 * @return 0 or -errno.
	 */
	int (*map_read)(void *store, uint64_t off, void *buf, size_t len);
	/**
	 * Durably write @p len bytes at @p off of the dirty-map area. Writes
	 * are 4 KiB aligned multiples of 4 KiB; a crash leaves each 4 KiB
	 * block either old or new. @return 0 or -errno.
	 */
	int (*map_write)(void *store, uint64_t off, const void *buf, size_t len);
	/**
	 * 0 while the store can be trusted; -EIO once it may have lost data it
	 * acknowledged (a failed write-back): the member then refuses client
	 * sessions (HELLO_RSP -EIO), so that no writer admits it or makes it
	 * the source the others converge on. May be NULL (always 0). Called on
	 * the event loop; must not block.
	 */
	int (*health)(void *store);
};

/**
 * Report the completion of a store request.
 * @param io the request the store got through @c io.
 * @param status 0 or a negative errno; for a read-like request a positive
 *        status is the number of bytes filled, if fewer than @c len (0
 *        means all of them).
 */
void rmr_store_io_done(struct rmr_store_io *io, int status);

/** Largest metadata blob librmr saves through @c meta_save. */
size_t rmr_server_meta_max(void);

/**
 * Bytes of the dirty-map area a store keeps for a pool (see @c map_read):
 * one bit per chunk for each possible member id (1..RMR_MAX_MEMBER_ID), each member's
 * bitmap rounded up to 4 KiB.
 * @return the size, or 0 if the geometry is invalid.
 */
uint64_t rmr_server_map_area_size(uint64_t pool_size, uint32_t chunk_size);

/**
 * What a member tells its consumer about dirty tracking and recovery. Every
 * callback runs on the server's event-loop thread: it must not block, nor
 * call back into the server. Any may be NULL.
 */
struct rmr_server_events {
	size_t size; /**< sizeof(struct rmr_server_events) */
	/**
	 * This member now records chunks missed by member @p member_id of pool
	 * @p pool (@p dirty true; @p member_id may be this member itself), or
	 * no longer does (its last dirty chunk there became clean).
	 */
	void (*dirty_tracking)(void *priv, const char *pool, uint16_t member_id, bool dirty);
	/**
	 * This member's resync of @p pool: @p done of @p total chunks, @p bytes
	 * copied from peers so far. Called about once a second while chunks are
	 * copied, and once more when the last one is clean (@p done == @p total).
	 */
	void (*resync_progress)(void *priv, const char *pool, uint64_t done, uint64_t total,
				uint64_t bytes);
	/**
	 * A map update a client asked for (taking the dirty maps from member
	 * @p source_id) finished with @p status (0 or a negative errno).
	 */
	void (*map_update)(void *priv, const char *pool, uint16_t source_id, int status);
	/**
	 * This member's verify of @p pool (rmr_server_verify()): @p done of
	 * @p total chunks compared, @p mismatches of them found to differ on
	 * some peer so far. Called about once a second, and once more when it
	 * ends (@p done == @p total, or stopped).
	 */
	void (*verify_progress)(void *priv, const char *pool, uint64_t done, uint64_t total,
				uint64_t mismatches);
	/**
	 * A session was refused for who it claims to be (counted in
	 * rmr_server_status.auth_refused): @p pool the pool it asked for (or
	 * the pool of a member this one dialed; NULL if none matched), @p role
	 * "client" or "member", @p claimed_id the member id it claimed (0 for
	 * a client), @p reason one line (no key, wrong key, wrong pool UUID,
	 * an id that is not another member, an id held by a live session).
	 */
	void (*auth_refused)(void *priv, const char *pool, const char *role, uint16_t claimed_id,
			     const char *reason);
};

/** Options of rmr_server_create(). Zero means "default" for every number. */
struct rmr_server_opts {
	size_t size;                 /**< sizeof(struct rmr_server_opts) */
	const char *listen_addr;     /**< required: where clients and peers connect */
	const char *transport;       /**< "fabric" (default) or "mem" */
	const char *provider;        /**< fabric provider: "tcp" (default), "shm", "verbs" */
	const char *name;            /**< for log lines (default: the listen address) */
	unsigned queue_depth;        /**< most requests per session (default 128, max 1024) */
	unsigned max_io_size;        /**< largest request (default 128 KiB, max 4 MiB) */
	unsigned heartbeat_ms;       /**< heartbeat interval (default 250) */
	unsigned failure_timeout_ms; /**< silence that drops a session (default 2000) */
	const struct rmr_server_events *events; /**< recovery callbacks, may be NULL; copied */
	void *priv;                  /**< passed to @c events */
};

/**
 * Create a server and start listening.
 * @return 0 and the handle in @p out; -EINVAL for bad options; -ENOENT if
 *         the transport is unknown; -EADDRINUSE; -ENOMEM; another negative
 *         errno from the transport.
 */
int rmr_server_create(const struct rmr_server_opts *opts, struct rmr_server **out);

/** Stop serving: close every session and free the server. Pools must be removed first. */
void rmr_server_destroy(struct rmr_server *s);

/** Another member of a pool: the server keeps a member-to-member session to it. */
struct rmr_peer {
	uint16_t member_id;          /**< 1..RMR_MAX_MEMBER_ID, in @c members_mask */
	const char *addr;            /**< where its server listens */
};

/** Identity and geometry of a served pool. */
struct rmr_pool_params {
	size_t size;                 /**< sizeof(struct rmr_pool_params) */
	const char *name;            /**< pool name, 1..RMR_NAME_MAX bytes */
	rmr_uuid uuid;               /**< pool UUID, not all zero */
	uint64_t pool_size;          /**< bytes, > 0 */
	uint32_t chunk_size;         /**< power of two, 4 KiB..1 GiB */
	uint16_t member_id;          /**< 1..RMR_MAX_MEMBER_ID */
	uint64_t members_mask;       /**< every member id of the pool, bit n = id n; must include @c member_id */
	unsigned npeers;             /**< entries in @c peers */
	const struct rmr_peer *peers; /**< where the other members listen; copied */
	unsigned sync_queue_depth;   /**< resync pieces in flight (default 32, max 256) */
	uint64_t resync_rate;        /**< resync bytes per second, 0 = unlimited */
	/**
	 * The store is a blank replacement for member @c member_id: every
	 * chunk is recorded dirty for it and copied from the peers while it
	 * serves (a chunk is read or written only once it is copied in). Only
	 * for a store that never served the pool (-EEXIST otherwise).
	 */
	bool replace;
	/**
	 * For measurement only (bench/al): keep no activity log. A crash of
	 * the writer can then leave members different with nobody knowing
	 * where; never set it on a pool that holds data.
	 */
	bool no_activity_log;
	/**
	 * The pool key, #RMR_KEY_LEN bytes (copied), or NULL. With a key, a
	 * session from a client or a member is admitted only once it proved
	 * the key (and the member proves it back); without one or with
	 * another key, a wrong pool UUID, or a member id that is not another
	 * member of the pool or is held by a live session of another process,
	 * it is refused with a logged reason and counted in
	 * rmr_server_status.auth_refused. The member-to-member sessions this
	 * member dials prove it too and refuse a peer that does not. NULL
	 * serves an open pool (logged as a warning once): anyone who reaches
	 * the listen address may join it.
	 */
	const uint8_t *key;
	/**
	 * Bytes of one activity log extent: a write brings the aligned
	 * extents around it into the member's log (a durable record when it
	 * was not there yet), and after a writer's crash every chunk of the
	 * logged extents is copied from the source. The log keeps 1024 of
	 * them besides the ones in use. A power of two, at least
	 * @c chunk_size, at most 1 GiB; 0 for 4 MiB (or one chunk when
	 * @c chunk_size is larger). Larger: fewer record writes under spread
	 * writes, more to copy after a writer's crash.
	 */
	uint32_t al_extent_size;
	/**
	 * Which boot of its host this member runs in, or 0 if unknown: any
	 * value that changes when the host restarts and never otherwise
	 * (libbrmr hashes the kernel's boot_id). The client compares it with
	 * the value the member had when it acknowledged writes no flush
	 * covered: the same one says the page cache kept them, whatever
	 * happened to the member's process meanwhile, and the client drops
	 * its record that the member may have lost them. With 0 a member
	 * that restarted may always have lost them. Only right where the
	 * host's page cache is the one volatile copy: a store whose device
	 * keeps writes in a cache of its own, which can lose power while the
	 * host does not, must make its writes durable before it acknowledges
	 * them, or pass 0.
	 */
	uint64_t boot_id;
};

/**
 * Serve a pool from @p store. Loads the metadata blob first.
 * @return 0 and the handle in @p out; -EINVAL for bad parameters or ops, or
 *         a pool of more than 2^29 chunks;
 *         -EEXIST if the server already serves a pool with that UUID or
 *         name; -ENOSPC if it serves RMR_SERVER_MAX_POOLS pools already;
 *         -EBADMSG if the metadata blob is corrupt; -EEXIST for @c replace
 *         on a store that served the pool before; -errno from @c meta_load.
 */
int rmr_server_add_pool(struct rmr_server *s, const struct rmr_pool_params *params,
			const struct rmr_store_ops *ops, void *store,
			struct rmr_server_pool **out);

/**
 * Stop serving a pool: its sessions are closed, requests in the store are
 * waited for. The store may be closed afterwards.
 */
void rmr_server_remove_pool(struct rmr_server_pool *p);

/**
 * Pause (@p paused true) or resume this member's background resync of
 * @p p. While paused no chunk is copied in by the resync; a client request
 * that touches a chunk this member missed still gets it copied first, so
 * I/O goes on. Not persistent: a restarted member resyncs again.
 * @return 0; -EALREADY if it already is (or is not) paused.
 */
int rmr_server_resync_pause(struct rmr_server_pool *p, bool paused);

/**
 * Set the background resync's rate limit of @p p, in bytes per second (0:
 * unlimited), from now on. Not persistent.
 * @return 0.
 */
int rmr_server_resync_rate(struct rmr_server_pool *p, uint64_t bytes_per_s);

/** What rmr_server_verify() compares. */
struct rmr_verify_opts {
	size_t size;                 /**< sizeof(struct rmr_verify_opts) */
	uint64_t first_chunk;        /**< first chunk to compare */
	uint64_t chunks;             /**< chunks to compare, 0 = up to the end of the pool */
	/**
	 * Mark each chunk that differs dirty for the members that differ from
	 * this one, on every member, so that they copy it from this one.
	 */
	bool repair;
};

/**
 * Verify online: this member compares the checksums of its chunks with
 * those of every peer whose member-to-member session is up, in the
 * background, while I/O goes on; a chunk counts as different only if it
 * still differs when asked again a little later. Progress and the chunks
 * found are in the status (and the @c verify_progress event).
 *
 * @return 0; -EBUSY if a verify runs already; -EAGAIN if this member does
 *         not hold every chunk itself (it still resyncs, or never took the
 *         maps) and so cannot be the reference; -EINVAL for a range outside
 *         the pool.
 */
int rmr_server_verify(struct rmr_server_pool *p, const struct rmr_verify_opts *opts);

/** Stop a running verify. @return 0, or -EALREADY if none runs. */
int rmr_server_verify_stop(struct rmr_server_pool *p);

/** Chunks a verify lists in the status (the first ones found). */
#define RMR_VERIFY_FOUND_MAX 32

/** A member-to-member session as the dialing member sees it. */
struct rmr_peer_status {
	uint16_t member_id;           /**< the peer's member id */
	char addr[RMR_ADDR_MAX + 1];  /**< where it listens */
	bool connected;               /**< session up (hello answered) */
	uint64_t map_ver;             /**< the peer's map version at hello */
	uint64_t sync_bytes;          /**< resync payload bytes received from it */
	uint64_t map_bytes;           /**< dirty-map bytes received from it */
	uint64_t reconnects;          /**< sessions opened after the first */
	char reason[64];              /**< last change of the session */
};

/** State and counters of one served pool, part of #rmr_server_status. */
struct rmr_server_pool_status {
	char name[RMR_NAME_MAX + 1];  /**< pool name */
	rmr_uuid uuid;                /**< pool UUID */
	uint16_t member_id;           /**< this member's id */
	uint64_t pool_size;           /**< bytes */
	uint32_t chunk_size;          /**< bytes per chunk */
	uint64_t map_ver;             /**< highest map version seen */
	uint64_t missed_mask;         /**< members (bit n = id n) known to have missed writes */
	uint64_t members_mask;        /**< the pool's members as this member knows them (bit n = id n) */
	uint64_t detached_mask;       /**< those of them detached: out of I/O, their misses tracked */
	uint64_t membership_ver;      /**< version of that membership (0: as formatted) */
	uint64_t dirty_chunks[RMR_MAX_MEMBER_ID + 1]; /**< per member id: chunks it missed or may have lost, as recorded here */
	/**
	 * Per member id: of @c dirty_chunks, those it only may have lost: it
	 * acknowledged their writes with no flush covering them, then left
	 * (a client's record). It copies them in when back, and until then is
	 * the holder of last resort of each (for this member's own id: the
	 * chunks it copies in for that reason).
	 */
	uint64_t record_chunks[RMR_MAX_MEMBER_ID + 1];
	uint32_t sessions;            /**< client sessions attached */
	uint64_t reads;               /**< read requests served */
	uint64_t writes;              /**< write requests applied */
	uint64_t read_bytes;          /**< payload bytes read */
	uint64_t write_bytes;         /**< payload bytes written */
	uint64_t errors;              /**< requests that failed in the store */
	uint64_t meta_saves;          /**< metadata blobs written */
	uint64_t map_writes;          /**< dirty-map blocks written */
	uint32_t sync_queue_depth;    /**< resync pieces allowed in flight */
	uint64_t resync_rate_limit;   /**< bytes per second, 0 = unlimited */
	bool resync_running;          /**< own dirty chunks are being copied in (or wait for the rate limit) */
	bool resync_paused;           /**< the background resync is paused by the operator */
	bool resync_waiting;          /**< own chunks dirty, but not copied now: no peer up, or the maps not taken yet */
	uint64_t resync_total;        /**< chunks dirty for this member since it last was clean */
	uint64_t resync_done;         /**< of those, chunks copied in (or overwritten whole) */
	uint64_t resync_bytes;        /**< bytes copied in from peers, lifetime */
	uint64_t resync_bps;          /**< copy rate over the last seconds, bytes per second */
	uint64_t resync_eta_s;        /**< seconds left at that rate (0 if unknown or done) */
	uint64_t served_sync_bytes;   /**< bytes sent to peers for their resync */
	uint32_t resync_inflight;     /**< chunks the background resync copies now (at most
	                                   @c sync_queue_depth; copies a request waits for
	                                   come on top) */
	uint32_t resync_inflight_peak; /**< the most of those at once since the start */
	bool verify_running;          /**< a verify (rmr_server_verify()) runs on this member */
	bool verify_repair;           /**< it repairs what it finds */
	uint64_t verify_total;        /**< chunks it compares (the last one, once done) */
	uint64_t verify_done;         /**< of those, chunks compared so far */
	uint64_t verify_mismatches;   /**< chunks found different on at least one peer */
	uint64_t verify_repaired;     /**< of those, chunks marked dirty for resync */
	uint64_t verify_skipped;      /**< chunk comparisons skipped: a side is known to miss it */
	uint64_t verify_eta_s;        /**< while it runs: seconds left at its rate so far (0: unknown) */
	uint32_t verify_nfound;       /**< entries used in @c verify_found */
	uint64_t verify_found[RMR_VERIFY_FOUND_MAX];      /**< chunks found different (the first ones found, in chunk order) */
	uint64_t verify_found_ids[RMR_VERIFY_FOUND_MAX];  /**< for each, the members (bit n = id n) that differ */
	uint64_t map_pulls;           /**< dirty-map updates taken from a peer */
	uint32_t al_ranges;           /**< activity log: chunk ranges written lately */
	uint64_t al_chunks;           /**< activity log: chunks those ranges cover */
	uint64_t al_writes;           /**< activity log records written since start */
	uint64_t al_evictions;        /**< ranges dropped from the log to make room */
	bool al_stale;                /**< the log holds ranges of a writer that is gone */
	uint64_t writer_epoch;        /**< the writer epoch this member granted last */
	uint64_t fenced_requests;     /**< requests and hellos refused from fenced writers */
	uint32_t npeers;              /**< entries used in @c peers */
	struct rmr_peer_status peers[RMR_MAX_MEMBERS]; /**< member-to-member sessions this member dials */
};

/** Snapshot of a server; see rmr_server_status(). */
struct rmr_server_status {
	size_t size;                          /**< set by the caller to sizeof(*this) */
	char listen_addr[RMR_ADDR_MAX + 1];   /**< where the server listens */
	uint32_t sessions;                    /**< sessions of all pools, plus unbound ones */
	uint64_t rejected;                    /**< sessions refused (bad hello, malformed messages) */
	uint32_t npools;                      /**< entries used in @c pools */
	struct rmr_server_pool_status pools[RMR_SERVER_MAX_POOLS]; /**< one per served pool */
	/**
	 * Sessions refused for who they claim to be, a subset of @c rejected:
	 * no key or a wrong one, a wrong pool UUID, a member id that is not
	 * another member or is held by a live session; and member-to-member
	 * sessions this server dialed whose peer did not prove the key.
	 */
	uint64_t auth_refused;
};

/**
 * Take a consistent snapshot of the server.
 * @return 0, or -EINVAL if @c st->size is too small.
 */
int rmr_server_status(struct rmr_server *s, struct rmr_server_status *st);

/**
 * Render a server status snapshot.
 * @return the length written (without NUL), -ENOSPC if @p buf is too small,
 *         or -EINVAL for a bad @p fmt.
 */
int rmr_server_status_format(const struct rmr_server_status *st, enum rmr_format fmt,
			     char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* RMR_SERVER_H */
