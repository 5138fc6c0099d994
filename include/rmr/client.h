/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * @file client.h
 * @brief librmr client: open a pool of members and submit requests to it.
 *
 * A client keeps one session per member. Write-like requests go in parallel
 * to every NORMAL member and complete when all of them answered; read-like
 * requests go round-robin to one NORMAL member and are retried on another one
 * if that member fails. Overlapping write-like requests in flight are ordered
 * by the client, so members apply them in the same order.
 *
 * Threading: rmr_client_submit(), rmr_client_status() and rmr_client_info()
 * may be called from any thread. Completion and event callbacks run on the
 * client's own event-loop thread; they must not block and must not call
 * rmr_client_close(). A consumer may serve its own descriptors on that
 * thread too (rmr_client_watch_fd()).
 */
#ifndef RMR_CLIENT_H
#define RMR_CLIENT_H

#include <rmr/rmr.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** An open pool, client side. */
struct rmr_client;

/** Events of a client pool, all optional. Run on the event-loop thread. */
struct rmr_client_ops {
	size_t size; /**< sizeof(struct rmr_client_ops) */
	/**
	 * Member @p member_id (0 if not yet known) at @p addr moved from
	 * @p from to @p to. @p index is its entry in the client (a member added
	 * to the pool later takes a new entry or one a deleted member left, so
	 * it is not the position in rmr_client_opts.members).
	 */
	void (*member_state)(void *priv, unsigned index, uint16_t member_id, const char *addr,
			     enum rmr_member_state from, enum rmr_member_state to,
			     const char *reason);
	/**
	 * The client now records member @p member_id as having missed writes
	 * (@p tracking true: every write it misses is marked dirty for it on
	 * the members that have the write), or no longer (it took the maps, or
	 * the records that named it emptied as it copied the chunks in).
	 */
	void (*dirty_tracking)(void *priv, uint16_t member_id, bool tracking);
	/**
	 * Member @p member_id finished taking the dirty maps from member
	 * @p source_id: @p status 0 (it is NORMAL next and resyncs by itself)
	 * or a negative errno (it is failed and retried).
	 */
	void (*map_update)(void *priv, uint16_t member_id, uint16_t source_id, int status);
};

/**
 * What a writer's clean close proves, for its next open
 * (rmr_client_close_and_record(), rmr_client_opts.last_close): at writer
 * epoch @c writer_epoch, members @c current_ids held every write it
 * acknowledged (NORMAL, nothing recorded as missed by them, and, with
 * volatile_writes, every write flushed on them).
 */
struct rmr_close_record {
	rmr_uuid pool_uuid;      /**< the pool it is about */
	uint64_t writer_epoch;   /**< 0: the close proved nothing */
	uint64_t current_ids;    /**< member ids (bit n = id n) */
};

/** Options of rmr_client_open(). Zero means "default" for every number. */
struct rmr_client_opts {
	size_t size;                    /**< sizeof(struct rmr_client_opts) */
	const char *pool_name;          /**< required; members must agree */
	const rmr_uuid *pool_uuid;      /**< optional; NULL = learnt from members */
	const char *transport;          /**< "fabric" (default) or "mem" */
	const char *provider;           /**< fabric provider: "tcp" (default), "shm", "verbs" */
	unsigned nmembers;              /**< 1..RMR_MAX_MEMBERS */
	const char *const *members;     /**< member addresses */
	unsigned queue_depth;           /**< request slots (default 128, max 1024) */
	unsigned max_io_size;           /**< largest request (default 128 KiB, max 4 MiB) */
	unsigned heartbeat_ms;          /**< heartbeat interval (default 250) */
	unsigned failure_timeout_ms;    /**< silence that fails a session (default 2000) */
	unsigned request_timeout_ms;    /**< deadline of one request on one member (default 10000) */
	unsigned open_timeout_ms;       /**< wait for a first NORMAL member (default 10000) */
	unsigned reconnect_min_ms;      /**< first reconnect delay (default 200) */
	unsigned reconnect_max_ms;      /**< reconnect backoff cap (default 5000) */
	unsigned min_legs;              /**< members that must succeed a write (default 1) */
	const struct rmr_client_ops *ops; /**< event callbacks, may be NULL */
	void *priv;                     /**< passed to @c ops */
	/**
	 * Take the pool over from the writer that holds it (failover to this
	 * host): the members fence the old writer, whose requests they refuse
	 * from then on. Without it, opening a pool that another live writer
	 * holds fails with -EBUSY.
	 */
	bool takeover;
	/**
	 * The pool key, #RMR_KEY_LEN bytes (copied), or NULL. With a key, every
	 * session starts with a mutual proof of it: a member that does not
	 * prove it is failed (and counted in rmr_pool_status.auth_refused),
	 * and a pool whose members hold a key refuses a client without the
	 * same one. NULL opens sessions without a proof (an open pool, logged
	 * as a warning once), which only members without a key accept.
	 */
	const uint8_t *key;
	/**
	 * Poll instead of sleeping, for at most this many microseconds, where
	 * the loop's wait usually ends within microseconds: after requests
	 * were sent while none was in flight by a consumer that sends one at
	 * a time (for their first answer), after
	 * an answer while the same request's other members are still to
	 * answer, and after the last request in flight completed (a consumer that waits for
	 * each answer sends its next request at once). Each is tried again
	 * only while it pays. Default 100, at most 1000; #RMR_POLL_OFF: never
	 * (every wait sleeps, for hosts where CPU time matters more than the
	 * latency of one request).
	 */
	unsigned poll_us;
	/**
	 * Member ids (bit n = id n) the open may go without. An open goes on
	 * once every attached member answered; otherwise it waits for them
	 * (up to @c open_timeout_ms, then fails with -EHOSTUNREACH): a member
	 * cannot tell by itself that it missed writes, and one that did must
	 * not serve, nor be the source the others converge on. Naming a member
	 * here gives up the writes only it may hold: for an operator whose
	 * member is gone for good. Default 0.
	 */
	uint64_t open_without;
	/**
	 * The members' stores acknowledge writes before they are durable (from
	 * a page cache), and the consumer marks its flushes RMR_IO_FLUSH. A
	 * member whose host loses power then loses the writes no flush covered
	 * on it, and cannot tell. So when a member leaves NORMAL, the client
	 * has the others record the chunks of the writes it acknowledged since
	 * its last successful flush as missed by it, and it copies them back
	 * when it returns (whether its host lost power or only its process
	 * died). A flush waits until that record is on the others. A consumer
	 * that never flushes makes every chunk it wrote count. The record
	 * takes one of the @c queue_depth slots for itself (at least 2; see
	 * rmr_pool_info.queue_depth).
	 */
	bool volatile_writes;
	/**
	 * The record of this writer's last clean close, or NULL. The open may
	 * then go without the members outside its @c current_ids once every
	 * one of those answered and granted the next writer epoch (no writer
	 * came since): whatever the others missed is on their record, and
	 * they take the maps when they return. Without it (or if it does not
	 * hold: another pool, another writer since, a current member away),
	 * the open waits for every attached member, as @c open_without says.
	 */
	const struct rmr_close_record *last_close;
};

/** rmr_client_opts.poll_us: the loop never polls. */
#define RMR_POLL_OFF (~0u)

/**
 * Open a pool: connect to every member, wait until at least one member is
 * NORMAL (or @c open_timeout_ms passes), then return. Members that are away
 * are reconnected in the background.
 *
 * @return 0 and the handle in @p out; -EINVAL for bad options; -ENOENT if
 *         the transport is unknown; -ETIMEDOUT if no member became NORMAL in
 *         time; -EHOSTUNREACH if the members that answered cannot show they
 *         hold every acknowledged write (see @c open_without); -EBUSY if
 *         another writer holds the pool (see @c takeover);
 *         -ESTALE if a newer writer fenced this one; -ENOMEM; another
 *         negative errno from the transport.
 */
int rmr_client_open(const struct rmr_client_opts *opts, struct rmr_client **out);

/**
 * Close a pool. Waits for requests in flight to complete (their callbacks
 * run), then tears the sessions down. Must not be called from a callback.
 */
void rmr_client_close(struct rmr_client *c);

/**
 * Close a pool like rmr_client_close(), and fill @p rec with what the close
 * proves (@c writer_epoch 0 if nothing: fenced, no member current, a record
 * of unflushed writes still on its way...). Keep it durably and give it to
 * the next open (rmr_client_opts.last_close): it may then go on without
 * members that are away. With volatile_writes, flush first: a member with
 * writes no flush covered is not current here.
 */
void rmr_client_close_and_record(struct rmr_client *c, struct rmr_close_record *rec);

/**
 * Completion of a request: @p status is a negative errno, or on success the
 * number of bytes a read-like request returned (its @c len unless the store
 * returned fewer) and 0 for a write-like one. The request's slot is free
 * again when this runs: the callback may submit the next request.
 */
typedef void (*rmr_io_cb)(void *priv, int status);

/** Most iovec entries in one request. */
#define RMR_MAX_IOV 32

/** One request. Copied by rmr_client_submit(); the data is not. */
struct rmr_io {
	enum rmr_io_kind kind;    /**< RMR_IO_READ or RMR_IO_WRITE */
	uint16_t op;              /**< consumer opcode, handed to the store */
	uint32_t op_flags;        /**< consumer flags, handed to the store */
	uint64_t addr;            /**< first byte of the range */
	uint32_t len;             /**< bytes in the range (<= max_io_size, or any for writes without
	                               data or with RMR_IO_PATCH) */
	const struct iovec *iov;  /**< write payload or read destination; NULL for writes without data */
	unsigned iovcnt;          /**< 0..RMR_MAX_IOV; data bytes must equal @c len (but see @c flags) */
	rmr_io_cb cb;             /**< required */
	void *priv;               /**< passed to @c cb */
	/**
	 * Read-like only: an argument sent with the request and handed to the
	 * store (a key to look up, say), or NULL. @c arg_len + @c len must not
	 * exceed max_io_size. Must stay valid until the callback.
	 */
	const void *arg;
	uint32_t arg_len;         /**< bytes at @c arg */
	/**
	 * Read-like only: 0 to let the client pick a NORMAL member (round-robin,
	 * retried on another one if it fails), or the id of the one member
	 * that must serve it (completes with -ENXIO unless it is NORMAL, and is
	 * not retried elsewhere).
	 */
	uint16_t member_id;
	/**
	 * #rmr_io_flags. With RMR_IO_PATCH (write-like only) the data are the
	 * change, 1..max_io_size bytes, and need not equal @c len.
	 */
	uint32_t flags;
};

/** Flags of rmr_client_submit(). */
enum rmr_submit_flags {
	RMR_SUBMIT_WAIT = 1 << 0, /**< block while every slot is busy instead of -EAGAIN */
};

/**
 * Submit a request. The data buffers must stay valid until the callback.
 *
 * @return 0 (the callback will run exactly once); -EAGAIN if every slot is
 *         busy and RMR_SUBMIT_WAIT is not set; -EINVAL for a malformed
 *         request (range outside the pool, length above max_io_size, iovec
 *         sum different from @c len, too many iovecs, an argument or a
 *         member id on a write-like request, argument and length together
 *         above max_io_size, unknown #rmr_io_flags, RMR_IO_PATCH on a
 *         read-like request or without data); -ESHUTDOWN if the pool is closing. On error
 *         the callback never runs.
 *
 * Completion status: see #rmr_io_cb; -ENXIO if the member a read-like
 * request names is not NORMAL; -EIO if no member could serve it (or fewer than
 * min_legs members applied a write); -ESTALE once another writer took the
 * pool over (every request from then on); the member's negative errno for
 * an error the store itself reported on every member.
 */
int rmr_client_submit(struct rmr_client *c, const struct rmr_io *io, unsigned flags);

/**
 * Call @p fn(@p priv) on the client's event-loop thread whenever @p fd is
 * readable (level-triggered; @p fn reads until it would block, or is called
 * again). A consumer that serves its own sockets there, or an epoll
 * descriptor of them, saves two thread wake-ups per request: what it submits
 * from @p fn goes out in the same loop turn, and completions run on the same
 * thread. On that thread rmr_client_submit() never blocks (RMR_SUBMIT_WAIT
 * is ignored: -EAGAIN when every slot is busy), rmr_client_status() and
 * rmr_client_info() answer at once, and rmr_client_close(),
 * rmr_client_add_member() and rmr_client_remove_member() must not be called.
 * @p fn must not block.
 *
 * @return 0; -EEXIST if @p fd is watched already; -ENOSPC beyond 8
 *         descriptors; -EINVAL for a negative @p fd or no @p fn;
 *         -EOPNOTSUPP in a deterministic simulation; -errno of epoll_ctl(2)
 *         (e.g. -EPERM for a regular file).
 */
int rmr_client_watch_fd(struct rmr_client *c, int fd, void (*fn)(void *priv), void *priv);

/**
 * From the event-loop thread (a completion callback, or @p fn itself): call
 * @p fd's callback in this loop turn, readable or not. A consumer queues
 * its completions and kicks instead of writing to an eventfd of its own:
 * no system call, no extra pass through epoll.
 * @return 0; -EPERM on another thread (wake the consumer some other way);
 *         -ENOENT if @p fd is not watched.
 */
int rmr_client_kick_fd(struct rmr_client *c, int fd);

/** Whether the caller runs on the client's event-loop thread. */
bool rmr_client_on_loop_thread(struct rmr_client *c);

/**
 * Stop watching @p fd: once this returns, its callback runs no more, and
 * the descriptor may be closed. Not from the event-loop thread.
 * @return 0; -ENOENT if @p fd is not watched; -EDEADLK on the event-loop
 *         thread.
 */
int rmr_client_unwatch_fd(struct rmr_client *c, int fd);

/**
 * Take member @p member_id out of I/O for maintenance (@p on true), or put
 * it back. Out: the member leaves NORMAL and every write from then on is
 * recorded as missed by it; its session stays up. Back: it returns like a
 * member after a failure: it takes the dirty maps from a current member and
 * resyncs what it missed from its peers, then is NORMAL again. A member in
 * maintenance that loses its session stays out after it reconnects.
 *
 * @return 0; -ENOENT if no member has that id; -EBUSY (on) if the member is
 *         not NORMAL or is the last NORMAL member; -EALREADY if it already
 *         is (on) or is not (off) in maintenance.
 */
int rmr_client_set_maintenance(struct rmr_client *c, uint16_t member_id, bool on);

/**
 * Add member @p member_id at @p addr to the pool, or attach a detached
 * member again (@p addr NULL keeps its address). Writes are held until none
 * is in flight; every member that is up records the new membership durably
 * (and, for a new member, that it misses every chunk); then the client
 * connects to it and it copies what it lacks from its peers by itself,
 * while I/O goes on. Its brmr-server must serve a store of this pool under
 * that id. Blocks until the members took the change.
 *
 * Calls are serialised: a second one waits for the first to end. Do not
 * close the client while one runs.
 *
 * @return 0; -EINVAL for a bad id or address (a new member needs one);
 *         -EEXIST if it is a member already; -EADDRINUSE if another member
 *         has that address; -ENOSPC if the pool has RMR_MAX_MEMBERS members;
 *         -EIO if no member took it; -ESHUTDOWN if the pool is closing or
 *         fenced.
 */
int rmr_client_add_member(struct rmr_client *c, uint16_t member_id, const char *addr);

/**
 * Remove member @p member_id from the pool while I/O goes on: deleted
 * (@p detach false: the members forget it; adding it back later copies
 * everything), or detached (@p detach true: it stays a member out of I/O
 * and the others keep marking what it misses, so that attaching it again
 * with rmr_client_add_member() copies only that). Refused unless every
 * remaining NORMAL member holds every chunk itself: the member leaving may
 * hold the only copy of some otherwise. Blocks until the members took the
 * change.
 *
 * @return 0; -EINVAL for a bad id; -ENOENT if it is not a member;
 *         -EALREADY if it is detached already; -EBUSY if no other member is
 *         NORMAL, fewer than min_legs would stay, or a remaining member
 *         still copies chunks in (or could not say); -EIO if no member took
 *         it; -ESHUTDOWN if the pool is closing or fenced.
 */
int rmr_client_remove_member(struct rmr_client *c, uint16_t member_id, bool detach);

/** What the members told about the pool. */
struct rmr_pool_info {
	size_t size;                 /**< sizeof(struct rmr_pool_info) */
	char name[RMR_NAME_MAX + 1]; /**< pool name */
	rmr_uuid uuid;               /**< pool UUID */
	uint64_t pool_size;          /**< bytes */
	uint32_t chunk_size;         /**< bytes, a power of two */
	uint32_t max_io_size;        /**< largest request the pool accepts */
	uint32_t queue_depth;        /**< request slots the consumer has (one less with volatile_writes) */
};

/**
 * Describe the pool. @return 0, or -EINVAL if @c info->size is too small.
 */
int rmr_client_info(struct rmr_client *c, struct rmr_pool_info *info);

/**
 * Take a consistent snapshot of the pool's state and counters.
 * @return 0, or -EINVAL if @c st->size is too small.
 */
int rmr_client_status(struct rmr_client *c, struct rmr_pool_status *st);

#ifdef __cplusplus
}
#endif
#endif /* RMR_CLIENT_H */
