/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * @file rmr.h
 * @brief librmr: types shared by the client, server and transport APIs.
 *
 * librmr is a reliable-multicast replication library. A *pool* is the unit of
 * replication: an address space of @c pool_size bytes, split into chunks of
 * @c chunk_size bytes, held by up to #RMR_MAX_MEMBERS *members* (storage
 * nodes). A client writes every write-like request to every healthy member and
 * reads each read-like request from one member. librmr knows nothing about
 * blocks: the consumer gives meaning to the opcodes it sends.
 *
 * Conventions of every librmr call: functions return 0 (or a count) on
 * success and a negative errno on failure; structures passed in carry their
 * own @c size so that they can grow; if a call that takes a callback fails,
 * the callback is never called, otherwise it is called exactly once.
 */
#ifndef RMR_RMR_H
#define RMR_RMR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most members a pool can have. */
#define RMR_MAX_MEMBERS 16
/** Highest member id; ids run from 1 to this value (0 means "no member"). */
#define RMR_MAX_MEMBER_ID 63
/** Longest pool name, without the terminating NUL. */
#define RMR_NAME_MAX 63
/** Longest member address, without the terminating NUL. */
#define RMR_ADDR_MAX 107
/** Bytes in a pool UUID. */
#define RMR_UUID_LEN 16
/**
 * Bytes in a pool key: the shared secret whose possession a member or client
 * proves when it opens a session (rmr_client_opts.key, rmr_pool_params.key).
 */
#define RMR_KEY_LEN 32

/** A pool UUID (RFC 4122 layout, random version 4). */
typedef struct rmr_uuid {
	uint8_t b[RMR_UUID_LEN]; /**< the 16 bytes, in text order */
} rmr_uuid;

/**
 * State of one member's session as seen by a client (or by a peer member).
 * Only NORMAL sessions carry I/O.
 */
#define RMR_MEMBER_STATES(X)                                                  \
	X(NEW, "new")                   /**< never connected yet */           \
	X(NORMAL, "normal")             /**< healthy: serves reads, gets writes */ \
	X(FAILED, "failed")             /**< session lost; reconnect pending */ \
	X(RECONNECTING, "reconnecting") /**< connected, not yet admitted to I/O */ \
	X(MAINTENANCE, "maintenance")   /**< taken out by the operator */    \
	X(DETACHED, "detached")         /**< removed from I/O and disconnected by the operator; \
	                                     the others track what it misses */ \
	X(REMOVED, "removed")           /**< no longer a member of the pool */

/** Member session states; see #RMR_MEMBER_STATES. */
enum rmr_member_state {
/** @cond INTERNAL */
#define RMR_X_ENUM(name, str) RMR_MEMBER_##name,
	RMR_MEMBER_STATES(RMR_X_ENUM)
#undef RMR_X_ENUM
/** @endcond */
	RMR_MEMBER_STATE_COUNT /**< number of states */
};

/**
 * Name of a member state ("normal", "failed", ...).
 * @return a static string; "invalid" for an out-of-range value.
 */
const char *rmr_member_state_name(enum rmr_member_state s);

/** Kind of a request: decides how it is routed. */
enum rmr_io_kind {
	RMR_IO_READ = 1,  /**< read-like: served by one NORMAL member */
	RMR_IO_WRITE = 2, /**< write-like: applied by every NORMAL member */
};

/** Flags of a request (rmr_io.flags), handed to the store (rmr_store_io.flags). */
enum rmr_io_flags {
	/**
	 * Write-like only: the payload is a change to make inside the range,
	 * not its bytes. It may be shorter than the range (1..max_io_size
	 * bytes, the range any length inside the pool), and the write never
	 * counts as overwriting a chunk whole: a member that missed a chunk
	 * of the range copies it from a peer before it applies the write, and
	 * a member that misses the write has every chunk of the range marked
	 * dirty. For a consumer whose one request changes several chunks in
	 * part (a key-value store's writes to many buckets).
	 */
	RMR_IO_PATCH = 1u << 0,
	/**
	 * Write-like only, no data, an empty range: the request makes every
	 * write the member acknowledged before it durable (the store knows it
	 * by its opcode: this flag stays with the client). With
	 * rmr_client_opts.volatile_writes, the client counts a member's
	 * acknowledged writes as at risk until such a request succeeded on
	 * it.
	 */
	RMR_IO_FLUSH = 1u << 1,
	/**
	 * Read-like only: a success must return all @c len bytes. A member
	 * that answers with fewer is taken as broken: it leaves NORMAL and
	 * the read goes to another member (a block device's reads, where a
	 * short answer would leave stale bytes in the buffer; without the
	 * flag the store may return fewer, as a key-value store's value
	 * shorter than the buffer).
	 */
	RMR_IO_WHOLE = 1u << 2,
};

/** Log levels, as in syslog. */
enum rmr_log_level {
	RMR_LOG_ERR = 3,
	RMR_LOG_WARN = 4,
	RMR_LOG_NOTICE = 5,
	RMR_LOG_INFO = 6,
	RMR_LOG_DEBUG = 7,
};

/**
 * Log sink. @p msg is one line without a trailing newline; it names the
 * object it is about ("pool=vol1 member=2: normal -> failed (heartbeat
 * timeout)"). Called from librmr's threads; must be thread-safe.
 */
typedef void (*rmr_log_fn)(void *ctx, enum rmr_log_level level, const char *msg);

/**
 * Route librmr's log lines to @p fn (NULL restores the default: stderr).
 * Lines above @p max_level are dropped. Process-wide.
 */
void rmr_log_set_sink(rmr_log_fn fn, void *ctx, enum rmr_log_level max_level);

/**
 * Parse a UUID in its 36-character text form.
 * @return 0, or -EINVAL if @p text is not a UUID.
 */
int rmr_uuid_parse(const char *text, rmr_uuid *out);

/** Format @p u into @p buf (at least 37 bytes). */
void rmr_uuid_format(const rmr_uuid *u, char buf[37]);

/**
 * Generate a random (version 4) UUID.
 * @return 0, or -errno if no randomness could be read.
 */
int rmr_uuid_generate(rmr_uuid *out);

/** Bytes of a pool key file: 2 * #RMR_KEY_LEN lower-case hex digits and a newline. */
#define RMR_KEY_FILE_LEN (2 * RMR_KEY_LEN + 1)

/**
 * Read a pool key file: 2 * #RMR_KEY_LEN hexadecimal digits, then an
 * optional newline, nothing else. The file must be a regular file that
 * neither group nor others may read or write (mode 0600 or 0400).
 *
 * @param path the key file
 * @param key receives the #RMR_KEY_LEN bytes
 * @param err receives "key file PATH: reason" on failure (may be NULL)
 * @param errlen bytes at @p err
 * @return 0; -EPERM if the file is open to group or others; -EINVAL if it
 *         is not a key (length, characters) or not a regular file; -errno
 *         if it cannot be read (-ENOENT ...).
 */
int rmr_key_load(const char *path, uint8_t key[RMR_KEY_LEN], char *err, size_t errlen);

/**
 * Create a new pool key file at @p path: #RMR_KEY_LEN random bytes from
 * libsodium, written as rmr_key_load() reads them, mode 0600. Never
 * overwrites: an existing file is left as it is.
 *
 * @return 0; -EEXIST if @p path exists; -errno from the system (@p err
 *         says which, in one line).
 */
int rmr_key_create(const char *path, char *err, size_t errlen);

/** Counters and state of one member, part of #rmr_pool_status. */
struct rmr_member_status {
	uint16_t member_id;               /**< 0 until the member answered */
	enum rmr_member_state state;      /**< session state */
	char addr[RMR_ADDR_MAX + 1];      /**< address the client dials */
	char reason[64];                  /**< why it entered its state */
	uint64_t map_ver;                 /**< member's map version at hello */
	uint64_t reads;                   /**< read requests it served */
	uint64_t writes;                  /**< write requests it applied */
	uint64_t read_bytes;              /**< payload bytes read from it */
	uint64_t write_bytes;             /**< payload bytes written to it */
	uint64_t errors;                  /**< requests that failed on it */
	uint64_t reconnects;              /**< sessions re-established */
	uint32_t inflight;                /**< requests awaiting its answer */
	uint64_t tx_bytes;                /**< bytes sent on the session, headers included */
	uint64_t rx_bytes;                /**< bytes received on the session, headers included */
	uint64_t resync_bytes;            /**< resync payload bytes on the session: always 0, the
	                                       members copy chunks among themselves (measured on
	                                       @c tx_bytes and @c rx_bytes by
	                                       tests/integration/resync_path.sh) */
	uint64_t map_updates;             /**< dirty-map updates it took from a peer at our request */
	/**
	 * With rmr_client_opts.volatile_writes: chunks of writes it
	 * acknowledged that no flush on it covered yet, what a power loss of
	 * its host could take from it (the whole pool when tracking failed
	 * for memory).
	 */
	uint64_t unflushed_chunks;
	/**
	 * Chunks the others must record as maybe lost by it, still queued:
	 * no other member was up to take the record. It takes the maps
	 * before it serves again.
	 */
	uint64_t record_chunks_queued;
};

/** Snapshot of a pool as seen by a client; see rmr_client_status(). */
struct rmr_pool_status {
	size_t size;                  /**< set by the caller to sizeof(*this) */
	char name[RMR_NAME_MAX + 1];  /**< pool name */
	rmr_uuid uuid;                /**< pool UUID (zero until learnt) */
	uint64_t pool_size;           /**< bytes in the address space */
	uint32_t chunk_size;          /**< bytes per chunk */
	uint64_t map_ver;             /**< client's map version */
	uint64_t missed_mask;         /**< member ids (bit n = id n) that missed writes */
	uint32_t queue_depth;         /**< request slots */
	uint32_t inflight;            /**< slots in use */
	uint32_t normal_members;      /**< members in NORMAL */
	uint32_t nmembers;            /**< entries used in @c members */
	struct rmr_member_status members[RMR_MAX_MEMBERS]; /**< one per member (deleted ones left out) */
	uint64_t writer_epoch;        /**< the writer epoch the members granted this client */
	uint64_t membership_ver;      /**< version of the pool's membership (0: as formatted) */
	bool fenced;                  /**< another writer took the pool over: all I/O fails -ESTALE */
	/**
	 * Sessions that failed authentication: a member that did not prove
	 * the pool key (or asked for one this client does not hold), or that
	 * refused this client's proof.
	 */
	uint64_t auth_refused;
	/**
	 * Times the client's event loop went to sleep waiting for work. Against
	 * the requests served, it tells how often polling (rmr_client_opts.poll_us)
	 * kept the loop awake: each sleep costs a wake-up later.
	 */
	uint64_t loop_sleeps;
	/**
	 * Turns of the event loop that looked for work without sleeping because
	 * polling (rmr_client_opts.poll_us) expected it within microseconds:
	 * CPU time spent to save wake-ups. Always 0 with polling off.
	 */
	uint64_t loop_polls;
};

/** Output formats of the status formatters. */
enum rmr_format {
	RMR_FORMAT_TEXT = 0, /**< a table for humans */
	RMR_FORMAT_JSON = 1, /**< one JSON object */
	/**
	 * Prometheus text exposition format (version 0.0.4): the counters and
	 * gauges, labelled with pool, member and peer, each with HELP and TYPE.
	 */
	RMR_FORMAT_PROMETHEUS = 2,
};

/**
 * Render a client pool status snapshot.
 * @return the length written (without NUL), or -ENOSPC if @p buf is too small,
 *         or -EINVAL for a bad @p fmt.
 */
int rmr_pool_status_format(const struct rmr_pool_status *st, enum rmr_format fmt,
			   char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* RMR_RMR_H */
