/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nbdb.h: internal interfaces of nbd-brmr, an NBD server in front of a
 * libbrmr block device.
 *
 * Threads: the main thread accepts connections, serves the control socket
 * and handles signals. Every NBD connection has a thread of its own that
 * runs the handshake and then waits for the connection to end, and, in the
 * transmission phase, a writer thread that sends the replies the event loop
 * does not. Requests are read, parsed and submitted on librmr's event-loop
 * thread, where completions run and send or queue replies.
 */
#ifndef NBD_BRMR_NBDB_H
#define NBD_BRMR_NBDB_H

#include <rmr/brmr.h>

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* ---- limits of the export ------------------------------------------ */

/* Advertised in NBD_INFO_BLOCK_SIZE. libbrmr takes byte offsets, so the
 * minimum is the spec's default of 1; 4096 is what the pool stores well. */
#define NBDB_BLOCK_MIN 1u
#define NBDB_BLOCK_PREFERRED 4096u
#define NBDB_MAX_PAYLOAD (32u * 1024 * 1024)

/* A WRITE above the maximum payload is read and thrown away (then answered
 * EINVAL) up to this length; longer ones are taken as a broken or hostile
 * client and the connection is dropped rather than spending minutes
 * reading garbage. */
#define NBDB_DISCARD_MAX (64u * 1024 * 1024)

/* Default and largest NBD requests in flight per connection. */
#define NBDB_QUEUE_DEPTH_DEFAULT 64u
#define NBDB_QUEUE_DEPTH_MAX 1024u

/* Connections at once; beyond it new ones are closed right away. */
#define NBDB_MAX_CONNS 128u

/* ---- logging (log.c) ----------------------------------------------- */

enum nbdb_log_level {
	NBDB_ERR = 3,
	NBDB_WARN = 4,
	NBDB_NOTICE = 5,
	NBDB_INFO = 6,
	NBDB_DEBUG = 7,
};

/* Set the identity (pool=NAME member=-), the verbosity and the sink
 * (stderr, or syslog). */
void nbdb_log_init(const char *pool, bool verbose, bool use_syslog);
bool nbdb_log_verbose(void);
/* One line; lines above NBDB_INFO only with --verbose. */
void nbdb_log(enum nbdb_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* One line about member @p member (its member=ID instead of member=-). */
void nbdb_log_member(enum nbdb_log_level level, unsigned member, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* librmr's log sink, so its lines carry the same prefix. */
void nbdb_log_rmr_sink(void *ctx, enum rmr_log_level level, const char *msg);

/* ---- socket I/O (sockio.c) ----------------------------------------- */

/* Read exactly @p n bytes. @return 0; -EPIPE on end of stream (also
 * part-way); -errno. Retries EINTR. */
int nbdb_read_full(int fd, void *buf, size_t n);
/* Write exactly @p n bytes (MSG_NOSIGNAL). @return 0 or -errno. */
int nbdb_write_full(int fd, const void *buf, size_t n);
/* Write a whole iovec array; @p iov is modified. @return 0 or -errno. */
int nbdb_writev_full(int fd, struct iovec *iov, unsigned cnt);

/* ---- the export and the connections (nbd_conn.c) -------------------- */

/* What every connection serves. Read-only once the server runs. */
struct nbdb_export {
	struct brmr_dev *dev;
	uint64_t size;               /* bytes */
	const char *name;            /* export name ("" is accepted too) */
	const char *description;     /* NBD_INFO_DESCRIPTION */
	uint16_t tflags;             /* transmission flags */
	unsigned queue_depth;        /* requests in flight per connection */
};

struct nbdb_conn;

/* The set of live connections. */
struct nbdb_server {
	const struct nbdb_export *ex;
	atomic_bool stopping;        /* new requests get ESHUTDOWN */
	pthread_mutex_t lock;        /* guards the fields below */
	pthread_cond_t cv;           /* signalled when a connection ends */
	struct nbdb_conn *conns;     /* doubly linked list */
	unsigned nconns;
	unsigned long next_id;

	/* Watched by librmr's loop thread: every connection's socket in the
	 * transmission phase (edge-triggered; the reader runs there). */
	int conn_epfd;
	/* Watched too: the flush, only ever kicked, after completions (sends
	 * the replies they gathered, resumes waiting readers); and an eventfd
	 * another thread writes when it freed a context a reader waits for. */
	int flush_fd;
	int wake_fd;
	/* Loop thread only. */
	struct nbdb_conn *flush_head; /* connections with gathered replies */
	struct nbdb_conn *stalled;    /* readers waiting for a context or slot */
};

/*
 * atomic_file.c: write @p text to @p path through PATH.tmp and rename(), so
 * that a reader sees either no file (or the old one) or the whole new one;
 * @p sync: fsync first, so that it also survives a crash of the host.
 * @p mode for a new file (before the umask). @return 0 or -errno.
 */
int nbdb_write_file_atomic(const char *path, const char *text, mode_t mode, bool sync);

/*
 * close_record.c: the record of the last clean close, in a text file.
 * load: 0 and @p rec; -ENOENT if there is none; -EINVAL if it does not
 * parse (@p rec zeroed); another -errno. save: atomically, synced.
 */
int nbdb_close_record_load(const char *path, struct rmr_close_record *rec);
int nbdb_close_record_save(const char *path, const char *pool, const struct rmr_close_record *rec);

/* Before any connection; after brmr_open(). @return 0 or -errno (logged). */
int nbdb_server_init(struct nbdb_server *s, const struct nbdb_export *ex);
/* After the last connection ended; before brmr_close(). */
void nbdb_server_destroy(struct nbdb_server *s);

/* Serve an accepted socket on its own thread. Takes @p fd in every case.
 * @return 0; -EMFILE-like errors when the connection was refused. */
int nbdb_conn_start(struct nbdb_server *s, int fd, const char *peer);

/* Requests in flight over all connections (taken but not yet answered). */
unsigned nbdb_server_busy(struct nbdb_server *s);
/* shutdown(2) every connection's socket with @p how (SHUT_RD wakes readers
 * with end-of-stream; SHUT_RDWR also fails blocked writers). */
void nbdb_server_shutdown_conns(struct nbdb_server *s, int how);
/* Wait until every connection ended; @return remaining count on timeout. */
unsigned nbdb_server_wait_idle(struct nbdb_server *s, unsigned timeout_ms);

/* ---- handshake (nbd_handshake.c) ----------------------------------- */

/* Outcome of the handshake. */
enum nbdb_hs_result {
	NBDB_HS_TRANSMIT = 0, /* enter the transmission phase */
	NBDB_HS_CLOSE = 1,    /* close quietly (ABORT, end of stream) */
	NBDB_HS_ERROR = 2,    /* protocol violation or I/O error: drop */
};

/* Run the fixed newstyle handshake on @p fd for connection @p id. */
enum nbdb_hs_result nbdb_handshake(int fd, const struct nbdb_export *ex,
				   unsigned long id, const atomic_bool *stopping);

/* ---- listening sockets (listen.c) ---------------------------------- */

/* Listen on the unix socket @p path (mode 0600). A stale socket file (no
 * server behind it) is replaced; a live one or another kind of file is not.
 * @return the listening fd or -errno; @p why gets a reason on failure. */
int nbdb_listen_unix(const char *path, char *why, size_t whylen);
/* Listen on "HOST:PORT", "[V6]:PORT", ":PORT" or "PORT" (host 127.0.0.1).
 * @p uri receives "nbd://HOST:PORT/" with the port actually bound.
 * @return the listening fd or -errno; @p why gets a reason on failure. */
int nbdb_listen_tcp(const char *hostport, char *uri, size_t urilen, char *why,
		    size_t whylen);
/* Check the syntax of a --tcp argument. @return 0 or -EINVAL. */
int nbdb_parse_hostport(const char *arg, char *host, size_t hostlen, char *port,
			size_t portlen);
/* "nbd+unix:///?socket=PATH" with PATH percent-encoded as needed. */
void nbdb_unix_uri(const char *path, char *uri, size_t urilen);
/* Accept one client (CLOEXEC). For TCP, disables Nagle: replies are small
 * and latency-bound. @return fd or -errno; @p peer describes the client. */
int nbdb_accept(int lfd, bool tcp, char *peer, size_t peerlen);

/* ---- control socket and events (control.c) ------------------------- */

struct evstream;

/* The control socket (--control) and its event stream. */
struct nbdb_control {
	int lfd;                       /* -1 without --control */
	struct brmr_dev *dev;          /* set once the pool is open */
	const char *pool;
	struct evstream *ev;
};

/* librmr's client events: a log line and an event each; priv is the
 * nbdb_control. */
extern const struct rmr_client_ops nbdb_client_ops;

/* Prepare the event stream. @return 0 or -errno. */
int nbdb_control_init(struct nbdb_control *ctl, const char *pool);
/* Serve the control socket @p lfd (bound at @p path) for @p dev. */
void nbdb_control_start(struct nbdb_control *ctl, int lfd, struct brmr_dev *dev, const char *path);
/* Entries for poll(2): the control socket and its listeners (room for
 * NBDB_CONTROL_POLLFDS). @return the entries used. */
#define NBDB_CONTROL_POLLFDS 18
unsigned nbdb_control_pollfds(struct nbdb_control *ctl, struct pollfd *pfd);
/* Act on the results of the entries nbdb_control_pollfds() filled: serve a
 * new client ("status text|json|prometheus", "maintenance on|off ID",
 * "events", "events now"), write to and drop listeners. */
void nbdb_control_handle(struct nbdb_control *ctl, const struct pollfd *pfd, unsigned n);
/* Close every listener and free the event stream (not the socket). */
void nbdb_control_destroy(struct nbdb_control *ctl);

/* ---- errors --------------------------------------------------------- */

/* Map a negative errno of libbrmr to an NBD error value. */
uint32_t nbdb_errno_to_nbd(int err);

#endif /* NBD_BRMR_NBDB_H */
