/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * @file transport.h
 * @brief The transport plug-in interface of librmr.
 *
 * A transport moves whole messages over connections. It knows nothing about
 * pools, members or replication: librmr's core owns heartbeats, deadlines,
 * retries and failure detection, because no provider reports a dead or hung
 * peer reliably.
 *
 * Threading: every call into a transport instance and every upcall out of it
 * happens on the one thread that runs librmr's event loop for that instance.
 * Upcalls are made only from inside @c progress (never from inside another
 * op), so the core may call @c send or @c close from an upcall.
 *
 * Message model: a message is at most @c max_msg bytes. The transport
 * receives into buffers of @c max_msg bytes it owns (posted in advance,
 * @c rx_depth per connection) and lends each one to the core through
 * @c recv; the core may use the whole @c max_msg bytes of a lent buffer; the core gives
 * it back with @c recv_release, possibly much later (for example after a
 * store wrote the payload). The core may reuse a lent buffer as the source of
 * one reply on the same connection before releasing it.
 */
#ifndef RMR_TRANSPORT_H
#define RMR_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A transport's connection; opaque to the core. */
struct rmr_conn;

/** Parameters of a transport instance. */
struct rmr_transport_params {
	size_t size;          /**< sizeof(struct rmr_transport_params) */
	const char *provider; /**< transport-specific, e.g. "tcp", "shm", "verbs" */
	size_t max_msg;       /**< largest message, header included */
	unsigned rx_depth;    /**< receive buffers posted per connection */
	unsigned tx_depth;    /**< sends the core keeps in flight per connection, at most */
	const char *name;     /**< for log lines, e.g. "pool=vol1 client" */
};

/** Upcalls from a transport to the core, made only from @c progress. */
struct rmr_transport_events {
	size_t size; /**< sizeof(struct rmr_transport_events) */
	/**
	 * A peer connected to a listening address. Returns the core's context
	 * for the connection (passed to later upcalls), or NULL to refuse it
	 * (the transport then closes it without a @c closed upcall).
	 */
	void *(*accepted)(void *ev_ctx, struct rmr_conn *conn);
	/**
	 * An outgoing connection started by @c connect is up (@p status 0) or
	 * could not be made (negative errno; no @c closed upcall follows,
	 * and the core still calls @c close to free the connection).
	 */
	void (*connected)(void *ev_ctx, void *conn_ctx, int status);
	/**
	 * A message arrived. @p buf stays valid and owned by the core until it
	 * calls @c recv_release with @p rx.
	 */
	void (*recv)(void *ev_ctx, void *conn_ctx, void *buf, size_t len, void *rx);
	/** The send with @p op_ctx finished (0) or failed (negative errno). */
	void (*send_done)(void *ev_ctx, void *conn_ctx, void *op_ctx, int status);
	/**
	 * The connection is gone (peer closed, error): @p reason is a negative
	 * errno. Sends still in flight get @c send_done with an error before it.
	 * Buffers the core holds stay valid until it releases them; after that
	 * the core must call @c close.
	 */
	void (*closed)(void *ev_ctx, void *conn_ctx, int reason);
};

/** A transport implementation: a table of operations. */
struct rmr_transport_ops {
	size_t size;      /**< sizeof(struct rmr_transport_ops) */
	const char *name; /**< "fabric", "mem", ... */

	/** Create an instance. @return 0 or a negative errno. */
	int (*create)(const struct rmr_transport_params *params,
		      const struct rmr_transport_events *ev, void *ev_ctx,
		      void **tp);
	/** Destroy an instance; all its connections must be closed first. */
	void (*destroy)(void *tp);
	/**
	 * Accept connections on @p addr (format is transport-specific, e.g.
	 * "127.0.0.1:7001" for tcp, a name for shm and mem).
	 * @return 0, -EADDRINUSE, -EINVAL (bad address) or another negative errno.
	 */
	int (*listen)(void *tp, const char *addr);
	/**
	 * Start connecting to @p addr; completion is reported by @c connected.
	 * @return 0 and the new connection in @p out, or a negative errno (then
	 *         no upcall follows).
	 */
	int (*connect)(void *tp, const char *addr, void *conn_ctx, struct rmr_conn **out);
	/**
	 * Queue one message made of @p iovcnt pieces (at most 4, total at most
	 * @c max_msg). The memory must stay untouched until @c send_done.
	 * Never returns -EAGAIN: the core keeps at most @c tx_depth sends per
	 * connection in flight and the transport queues internally.
	 * @return 0, or a negative errno if the connection is gone (no
	 *         @c send_done follows then).
	 */
	int (*send)(void *tp, struct rmr_conn *conn, const struct iovec *iov,
		    int iovcnt, void *op_ctx);
	/** Give back a receive buffer lent by @c recv. */
	void (*recv_release)(void *tp, struct rmr_conn *conn, void *rx);
	/**
	 * Close a connection. No upcall for it happens afterwards: sends still
	 * in flight are abandoned without @c send_done, and once close returns
	 * the transport no longer reads their memory. Buffers lent to the core
	 * must have been released before.
	 */
	void (*close)(void *tp, struct rmr_conn *conn);
	/**
	 * File descriptor that becomes readable when @c progress has work, or
	 * -1 if the transport must be polled (then the loop spins briefly and
	 * sleeps in short steps).
	 */
	int (*wait_fd)(void *tp);
	/**
	 * Before blocking on @c wait_fd: 0 if it is safe to block, -EAGAIN if
	 * @c progress must run again first.
	 */
	int (*trywait)(void *tp);
	/** Make progress; makes upcalls. @return events handled (>= 0). */
	int (*progress)(void *tp);
};

/**
 * Find a transport by name among those built in ("fabric", "mem") and those
 * registered with rmr_transport_register().
 * @return the ops table, or NULL if none has that name.
 */
const struct rmr_transport_ops *rmr_transport_find(const char *name);

/**
 * Make an out-of-tree transport available under @c ops->name.
 * @return 0, -EEXIST if the name is taken, -EINVAL if @p ops is incomplete,
 *         -ENOSPC if the registry is full.
 */
int rmr_transport_register(const struct rmr_transport_ops *ops);

#ifdef __cplusplus
}
#endif
#endif /* RMR_TRANSPORT_H */
