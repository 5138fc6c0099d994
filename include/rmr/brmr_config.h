/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * @file brmr_config.h
 * @brief libbrmr: the pool configuration file read by brmr-server, nbd-brmr
 *        and brmrctl.
 *
 * One file describes one pool: its identity and geometry, its members (id,
 * address, store, control socket) and the client's sockets. The same file is
 * meant to be deployed on every host of the pool; each program takes the
 * parts it needs. The format is INI-like:
 *
 * @code
 * # /etc/brmr/pools.d/vol1.conf
 * [pool]
 * name = vol1
 * uuid = 1b4e28ba-2fa1-41d2-883f-0016d3cca427
 * size = 10G                  ; K/M/G/T suffixes (binary)
 * chunk_size = 128K
 * [member 1]
 * address = 10.0.0.1:7000
 * store = /dev/nvme0n1
 * [member 2]
 * address = 10.0.0.2:7000
 * store = /dev/nvme0n1
 * [client]
 * socket = /run/brmr/vol1.nbd.sock
 * @endcode
 *
 * Every key, its default and its range are listed in the brmr-pool.conf(5)
 * manual page. The parser refuses anything it does not understand: unknown
 * sections and keys, bad values, duplicates and contradictions (two members
 * with one address, a size that is not a multiple of 4096, min_legs above
 * the number of members, ...), each with one line of the form
 * "FILE:LINE: reason".
 *
 * Threading: the functions keep no state; they may be called from any thread.
 */
#ifndef RMR_BRMR_CONFIG_H
#define RMR_BRMR_CONFIG_H

#include <rmr/rmr.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Directory of the pool files when neither a path nor BRMR_CONFIG_DIR says otherwise. */
#define BRMR_CONFIG_DIR "/etc/brmr/pools.d"
/** Environment variable that replaces #BRMR_CONFIG_DIR. */
#define BRMR_CONFIG_DIR_ENV "BRMR_CONFIG_DIR"
/** Directory of the default control and NBD sockets. */
#define BRMR_RUN_DIR "/run/brmr"
/** Longest path in a configuration file (store), without the terminating NUL. */
#define BRMR_CONFIG_PATH_MAX 1023
/** Longest unix socket path (control, NBD socket), without the terminating NUL. */
#define BRMR_CONFIG_SOCKET_MAX 107
/** Largest file brmr_config_load() reads. */
#define BRMR_CONFIG_FILE_MAX (1024 * 1024)

/** One [member ID] section. */
struct brmr_config_member {
	uint16_t id;                                  /**< 1..RMR_MAX_MEMBER_ID */
	char address[RMR_ADDR_MAX + 1];               /**< where its brmr-server listens */
	char store[BRMR_CONFIG_PATH_MAX + 1];         /**< its store, a path on its host */
	/** its brmr-server's control socket (default BRMR_RUN_DIR/NAME-mID.ctl) */
	char control[BRMR_CONFIG_SOCKET_MAX + 1];
	unsigned line;                                /**< line of the section header */
};

/**
 * A parsed pool file. Every number is set: keys the file does not give
 * hold their defaults.
 */
struct brmr_config {
	size_t size;                        /**< set by the caller to sizeof(*this) */
	char file[BRMR_CONFIG_PATH_MAX + 1]; /**< the file name errors were reported with */
	unsigned line;                      /**< line of the [pool] header */
	char name[RMR_NAME_MAX + 1];        /**< pool name, [A-Za-z0-9._-] */
	rmr_uuid uuid;                      /**< pool UUID, not all zero */
	uint64_t pool_size;                 /**< bytes, a positive multiple of 4096 */
	uint32_t chunk_size;                /**< a power of two in BRMR_CHUNK_MIN..BRMR_CHUNK_MAX (default 128 KiB) */
	char transport[8];                  /**< "fabric" (default) or "mem" */
	char provider[8];                   /**< "tcp" (default), "shm" or "verbs" */
	unsigned min_legs;                  /**< members that must apply a write: 1..members (default 1) */
	unsigned queue_depth;               /**< request slots per session: 2..1024 (default 128; the client keeps one for itself) */
	unsigned sync_queue_depth;          /**< resync pieces in flight: 1..256 (default 32) */
	uint64_t resync_rate;               /**< resync bytes per second, 0 = unlimited (default) */
	unsigned heartbeat_ms;              /**< heartbeat interval: 10..60000 (default 250) */
	unsigned failure_timeout_ms;        /**< silence that fails a session: at least 2 heartbeats (default 2000) */
	unsigned request_timeout_ms;        /**< deadline of a request on one member: 100..3600000 (default 10000) */
	unsigned nmembers;                  /**< entries used in @c members, 1..RMR_MAX_MEMBERS */
	struct brmr_config_member members[RMR_MAX_MEMBERS]; /**< in the order of the file */
	/** NBD unix socket of nbd-brmr (default BRMR_RUN_DIR/NAME.nbd.sock; empty if @c client_tcp is set) */
	char client_socket[BRMR_CONFIG_SOCKET_MAX + 1];
	char client_tcp[RMR_ADDR_MAX + 1];  /**< NBD over TCP instead: HOST:PORT (empty: unix socket) */
	/** nbd-brmr's control socket (default BRMR_RUN_DIR/NAME-client.ctl) */
	char client_control[BRMR_CONFIG_SOCKET_MAX + 1];
	/**
	 * The pool key file (see rmr_key_load()): the [pool] key_file, a path
	 * relative to the pool file's directory unless absolute; default
	 * NAME.key in that directory.
	 */
	char key_file[BRMR_CONFIG_PATH_MAX + 1];
	/** @c key_file was named in the file (else it is the default) */
	bool key_file_set;
	/** [client] poll_us: the client's longest poll, 0..1000 us, 0 = never (default 100; rmr_client_opts.poll_us) */
	unsigned poll_us;
};

/**
 * Parse a pool file held in memory. Pure: reads nothing but @p buf (no
 * file, no environment), so it may run on any input.
 *
 * @param file name of the file, for the @p err messages and @c cfg->file (NULL: "-")
 * @param buf the text (need not be NUL-terminated)
 * @param len bytes at @p buf
 * @param cfg filled in on success; @c cfg->size must be set
 * @param err receives "FILE:LINE: reason" on failure (may be NULL)
 * @param errlen bytes at @p err
 * @return 0; -EINVAL for a file that is not a valid pool file (or a
 *         @c cfg->size too small).
 */
int brmr_config_parse(const char *file, const char *buf, size_t len, struct brmr_config *cfg,
		      char *err, size_t errlen);

/**
 * Read and parse the pool file at @p path (see brmr_config_parse()).
 * @return 0; -EINVAL for a bad file; -EFBIG for a file above
 *         #BRMR_CONFIG_FILE_MAX; -errno if it cannot be read (-ENOENT ...).
 *         @p err says which in one line.
 */
int brmr_config_load(const char *path, struct brmr_config *cfg, char *err, size_t errlen);

/**
 * The path of pool @p pool's file: DIR/POOL.conf, where DIR is the value of
 * the environment variable BRMR_CONFIG_DIR if set and not empty, else
 * #BRMR_CONFIG_DIR.
 * @return 0; -EINVAL if @p pool is not a valid pool name (so that it cannot
 *         name a file outside DIR); -ENAMETOOLONG if @p out is too small.
 */
int brmr_config_pool_path(const char *pool, char *out, size_t outlen);

/**
 * brmr_config_load() of brmr_config_pool_path(@p pool), which must also name
 * pool @p pool (a file whose name key differs is refused with its line).
 * @return as brmr_config_load(); -EINVAL for a bad pool name too.
 */
int brmr_config_load_pool(const char *pool, struct brmr_config *cfg, char *err, size_t errlen);

/**
 * The key of @p cfg's pool: rmr_key_load() of @c cfg->key_file. When the
 * file names no key_file and NAME.key does not exist, the pool is open:
 * 0 with @p *have false.
 *
 * @return 0 (@p *have says whether @p key was filled in); an error of
 *         rmr_key_load() (-ENOENT for a key_file named but missing).
 */
int brmr_config_key(const struct brmr_config *cfg, uint8_t key[RMR_KEY_LEN], bool *have,
		    char *err, size_t errlen);

/**
 * Find member @p id in @p cfg.
 * @return the member, or NULL if the pool has no member with that id.
 */
const struct brmr_config_member *brmr_config_member(const struct brmr_config *cfg, unsigned id);

#ifdef __cplusplus
}
#endif
#endif /* RMR_BRMR_CONFIG_H */
