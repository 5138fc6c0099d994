/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nbd_conn.c: one NBD connection from accept to close, and the set of live
 * connections.
 *
 * Transmission phase, per connection:
 *  - the connection's own thread runs the handshake, then hands the socket
 *    to librmr's event-loop thread (which reads with MSG_DONTWAIT), reads
 *    the large WRITE payloads the loop passes back, and waits for the end;
 *  - the reader runs on that loop thread (a watched epoll set of every
 *    connection): it parses requests, validates them, reads WRITE payloads
 *    into a request context and calls brmr_submit(), which goes out in the
 *    same loop turn: no thread hand-off between a request and its sends.
 *    When no context or no librmr slot is free it stops reading that
 *    connection and resumes after a completion (or a context the writer
 *    freed), reading what the socket kept meanwhile;
 *  - completions run on librmr's event-loop thread. A reply with at most
 *    CONN_LOOP_DATA_MAX bytes of data (writes, errors, small reads) is sent
 *    right there when it is the connection's only request in flight
 *    (non-blocking; QD1 latency). Otherwise it is gathered, and at the end
 *    of the loop turn (a kicked watch, rmr_client_kick_fd()) each
 *    connection's gathered replies go out in one non-blocking sendmsg(): no
 *    writer wake-up, and
 *    one system call for the ~5 completions of a turn instead of one each
 *    (on loopback a sendmsg() also runs the receiver's TCP input, most of
 *    the loop thread's time; docs/performance.md). What a full socket
 *    did not take, and larger reads, go to the reply queue (a short
 *    critical section): the writer copies their data into the socket, in
 *    batches, not on the event loop;
 *  - the writer thread sends the queued replies, batched; one thread sends
 *    at a time (@sending), so replies never interleave, and they leave in
 *    completion order (NBD allows any order).
 * Requests the reader refuses (bad flags, range, shutdown) are answered the
 * same way, from the loop thread. A connection that keeps its socket full
 * is read for at most CONN_READ_BUDGET bytes or CONN_READ_REQUESTS requests
 * per loop turn, so that it cannot hold the loop (and every other
 * connection, and the members' heartbeats) for long.
 *
 * Contexts are preallocated up to the queue depth; the reader stops reading
 * when all of them are busy, which is the back-pressure towards the client. Data
 * buffers are allocated once per context when first needed and kept, so the
 * steady state does no malloc per request; a per-connection cap on buffer
 * memory frees idle buffers before growing another one.
 */
#include "nbdb.h"
#include "nbd_proto.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Buffer memory one connection may keep: enough for 64 requests of 2 MiB
 * or 4 of the largest, bounded so that many connections cannot eat the
 * host. Must be at least NBDB_MAX_PAYLOAD. */
#define CONN_BUF_CAP (128u * 1024 * 1024)
_Static_assert(CONN_BUF_CAP >= NBDB_MAX_PAYLOAD, "a maximum request must fit");

/* Smallest data buffer: one page, the common request size. */
#define CONN_BUF_MIN 4096u

/* Input buffer of the reader: several small requests per recv(). Payloads
 * at least this big are read straight into the context's buffer. */
#define CONN_RBUF_SIZE (64u * 1024)

/* Replies the writer gathers into one sendmsg(). */
#define CONN_WRITE_BATCH 32

/* Gathered replies sent per sendmsg() at the end of a loop turn. */
#define CONN_FLUSH_BATCH 64

/* WRITE payloads from this size on are read by the connection's own
 * thread, beside the loop: copying megabytes from the socket on the loop
 * would leave the members waiting for their next request meanwhile. */
#define CONN_OFFLOAD_MIN (256u * 1024)

/* What the reader takes from one connection per loop turn at most. */
#define CONN_READ_BUDGET (1u << 20)
#define CONN_READ_REQUESTS 256u

/* Replies with at most this much read data are sent from the event loop;
 * larger ones by the writer, so that no copy of megabytes stalls the loop. */
#define CONN_LOOP_DATA_MAX (64u * 1024)

/* One request context. */
struct nbdb_req {
	struct nbdb_req *next;        /* free list or reply queue */
	struct nbdb_conn *conn;
	struct nbd_simple_reply hdr;  /* reply header, cookie already set */
	uint32_t data_len;            /* READ: bytes to send on success */
	size_t sent;                  /* bytes of the reply already sent */
	void *buf;                    /* data buffer, NULL until needed */
	size_t bufsize;

	/* The request as read, and what to submit (the reader, on the loop thread). */
	uint16_t nbd_type, nbd_flags;
	enum brmr_op op;
	unsigned bflags;
	uint64_t off;
	uint32_t len;
};

/* Where the reader is in the request stream. */
enum conn_input {
	IN_HEADER,   /* the next request header */
	IN_PAYLOAD,  /* a WRITE's payload, into cur's buffer */
	IN_DISCARD,  /* a refused WRITE's payload, dropped */
	IN_OFFLOAD,  /* a large payload, read by the connection's thread */
};

struct nbdb_conn {
	struct nbdb_conn *prev, *next; /* in the server's list */
	struct nbdb_server *srv;
	const struct nbdb_export *ex;
	unsigned long id;
	char peer[96];
	int fd;
	pthread_t thread;

	/* Request contexts: lock guards free_list, the reply queue, busy
	 * changes, sending, dead and writer_stop. */
	pthread_mutex_t lock;
	pthread_cond_t free_cv;  /* reading ended, or then a context came back */
	pthread_cond_t reply_cv; /* a reply was queued, or writer_stop */
	struct nbdb_req *reqs;
	struct nbdb_req *free_list;
	struct nbdb_req *reply_head, *reply_tail;
	atomic_uint busy;        /* taken by the reader, not yet answered */
	bool sending;            /* a thread writes to the socket */
	bool dead;               /* a send failed: discard further replies */
	bool writer_stop;
	pthread_t writer;

	/* librmr's loop thread only: replies gathered in this turn. */
	struct nbdb_req *gather_head, *gather_tail;
	struct nbdb_conn *flush_next; /* in srv->flush_head */
	bool flush_listed;

	/* The reader (librmr's loop thread) only. */
	size_t buf_bytes;        /* data buffer memory held by all contexts */
	uint8_t *rbuf;
	size_t rpos, rend;
	uint64_t nreq;
	enum conn_input in;
	struct nbdb_req *cur;    /* payload being read, or a request to submit */
	uint32_t cur_err;        /* IN_DISCARD: the answer once it is dropped */
	size_t want;             /* payload bytes still to read or drop */
	size_t budget;           /* bytes this conn_read() may still take */
	bool parked;             /* cur waits for a librmr slot */
	bool stall_listed;       /* in srv->stalled: waits for a context or slot */
	struct nbdb_conn *stall_next;

	/* Under lock: the loop wants a context back (wake it); reading is
	 * over (the connection's thread drains and closes); a payload for the
	 * connection's thread to read (offload, then offload_done and its
	 * result). */
	bool wants_ctx;
	bool read_done;
	struct nbdb_req *offload;
	size_t offload_want;
	bool offload_done;
	int offload_rc;
};

/* ------------------------------------------------------------------ */
/* Errors                                                             */
/* ------------------------------------------------------------------ */

uint32_t nbdb_errno_to_nbd(int err)
{
	switch (-err) {
	case 0:
		return NBD_SUCCESS;
	case EPERM:
	case EACCES:
	case EROFS:
		return NBD_EPERM;
	case ENOMEM:
	case ENOBUFS:
		return NBD_ENOMEM;
	case EINVAL:
	case ERANGE:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ENOTSUP:
		return NBD_ENOTSUP;
	case ESHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		/* EIO, ETIMEDOUT (no member answered), ENOTCONN, ...: to the
		 * client every other failure is an I/O error. */
		return NBD_EIO;
	}
}

static const char *cmd_name(uint16_t type)
{
	switch (type) {
	case NBD_CMD_READ: return "READ";
	case NBD_CMD_WRITE: return "WRITE";
	case NBD_CMD_DISC: return "DISC";
	case NBD_CMD_FLUSH: return "FLUSH";
	case NBD_CMD_TRIM: return "TRIM";
	case NBD_CMD_CACHE: return "CACHE";
	case NBD_CMD_WRITE_ZEROES: return "WRITE_ZEROES";
	case NBD_CMD_BLOCK_STATUS: return "BLOCK_STATUS";
	default: return "unknown";
	}
}

/* ------------------------------------------------------------------ */
/* Buffered input of the reader                                       */
/* ------------------------------------------------------------------ */

/* Results of the reader's steps. */
enum step {
	STEP_MORE,  /* go on */
	STEP_WAIT,  /* the socket is empty, or the connection waits for a context or slot */
	STEP_END,   /* reading is over */
};

/* Receive into the input buffer behind what it holds. @return bytes; 0 at
 * end of stream; -EAGAIN when the socket is empty; -errno. */
static ssize_t rb_fill(struct nbdb_conn *c)
{
	ssize_t r;

	if (c->rpos == c->rend) {
		c->rpos = c->rend = 0;
	} else if (c->rpos > 0 && CONN_RBUF_SIZE - c->rend < sizeof(struct nbd_request)) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rend - c->rpos);
		c->rend -= c->rpos;
		c->rpos = 0;
	}
	do
		r = recv(c->fd, c->rbuf + c->rend, CONN_RBUF_SIZE - c->rend, MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	c->rend += (size_t)r;
	return r;
}

/* The end of the stream or a failed receive ends reading; logged. */
static enum step rb_failed(struct nbdb_conn *c, ssize_t r)
{
	if (r == -EAGAIN)
		return STEP_WAIT;
	if (r < 0)
		nbdb_log(NBDB_DEBUG, "conn %lu: receive failed: %s", c->id, strerror((int)-r));
	else if (atomic_load(&c->srv->stopping))
		nbdb_log(NBDB_DEBUG, "conn %lu: closing for shutdown", c->id);
	else
		nbdb_log(NBDB_DEBUG, "conn %lu: client closed the connection", c->id);
	return STEP_END;
}

/*
 * Read up to @p n payload bytes into @p dst (NULL: drop them). Big
 * remainders go straight from the socket to @p dst. @return bytes taken
 * (> 0), or what rb_fill() or recv() reported (0, -EAGAIN, -errno).
 */
static ssize_t rb_take_some(struct nbdb_conn *c, uint8_t *dst, size_t n)
{
	size_t avail = c->rend - c->rpos;
	ssize_t r;

	if (avail == 0 && dst && n >= CONN_RBUF_SIZE) {
		do
			r = recv(c->fd, dst, n, MSG_DONTWAIT);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		return r;
	}
	if (avail == 0) {
		r = rb_fill(c);
		if (r <= 0)
			return r;
		avail = c->rend - c->rpos;
	}
	if (avail > n)
		avail = n;
	if (dst)
		memcpy(dst, c->rbuf + c->rpos, avail);
	c->rpos += avail;
	return (ssize_t)avail;
}

/* rb_take_some() within this turn's budget, which the caller checked. */
static ssize_t rb_take(struct nbdb_conn *c, uint8_t *dst, size_t n)
{
	ssize_t r = rb_take_some(c, dst, n < c->budget ? n : c->budget);

	if (r > 0)
		c->budget -= (size_t)r;
	return r;
}

/* ------------------------------------------------------------------ */
/* Request contexts                                                   */
/* ------------------------------------------------------------------ */

static size_t buf_size_for(size_t need)
{
	size_t s = CONN_BUF_MIN;

	while (s < need)
		s <<= 1;
	return s;
}

/*
 * Take a free context with a data buffer of at least @p need bytes (0: none
 * needed). NULL when every context is busy, or the buffer would exceed the
 * connection's cap and no idle buffer can be freed: the loop is woken when
 * one comes back. On allocation failure the context comes back with no
 * buffer and @p *nomem set; the caller answers ENOMEM.
 */
static struct nbdb_req *req_try_get(struct nbdb_conn *c, size_t need, bool *nomem)
{
	struct nbdb_req *r;
	size_t size;
	void *buf;

	*nomem = false;
	pthread_mutex_lock(&c->lock);
	r = c->free_list;
	if (!r) {
		c->wants_ctx = true;
		pthread_mutex_unlock(&c->lock);
		return NULL;
	}
	if (need == 0 || r->bufsize >= need) {
		c->free_list = r->next;
		r->next = NULL;
		atomic_fetch_add(&c->busy, 1);
		pthread_mutex_unlock(&c->lock);
		return r;
	}

	/* Grow this context's buffer within the connection's cap, freeing
	 * buffers of idle contexts first, else wait for busy ones to come
	 * back. That ends: once nothing else is busy, every other buffer is
	 * idle and the cap holds the largest request. */
	size = buf_size_for(need);
	while (c->buf_bytes - r->bufsize + size > CONN_BUF_CAP) {
		struct nbdb_req *v;

		for (v = r->next; v && !v->buf; v = v->next)
			;
		if (!v) {
			c->wants_ctx = true;
			pthread_mutex_unlock(&c->lock);
			return NULL;
		}
		free(v->buf);
		c->buf_bytes -= v->bufsize;
		v->buf = NULL;
		v->bufsize = 0;
	}
	c->free_list = r->next;
	r->next = NULL;
	atomic_fetch_add(&c->busy, 1);
	pthread_mutex_unlock(&c->lock);

	free(r->buf);
	c->buf_bytes -= r->bufsize;
	r->buf = NULL;
	r->bufsize = 0;
	/* Page-aligned: transports may register or DMA from it. */
	if (posix_memalign(&buf, 4096, size) != 0) {
		*nomem = true;
		return r;
	}
	r->buf = buf;
	r->bufsize = size;
	c->buf_bytes += size;
	return r;
}

/* The iovecs of @r's reply, less what was sent already; returns how many. */
static unsigned reply_iov(const struct nbdb_req *r, struct iovec *iov)
{
	size_t skip = r->sent;
	unsigned n = 0;

	iov[n].iov_base = (void *)&r->hdr;
	iov[n++].iov_len = sizeof(r->hdr);
	if (r->hdr.error == 0 && r->data_len > 0) {
		iov[n].iov_base = r->buf;
		iov[n++].iov_len = r->data_len;
	}
	while (skip && n) {
		if (skip >= iov[0].iov_len) {
			skip -= iov[0].iov_len;
			iov[0] = iov[1];
			n--;
		} else {
			iov[0].iov_base = (char *)iov[0].iov_base + skip;
			iov[0].iov_len -= skip;
			skip = 0;
		}
	}
	return n;
}

static size_t reply_len(const struct nbdb_req *r)
{
	return sizeof(r->hdr) + (r->hdr.error == 0 ? r->data_len : 0);
}

/*
 * Have the loop run the flush (which also resumes waiting readers): its
 * watch kicked on the loop thread, else the wake eventfd written.
 */
static void server_wake_loop(struct nbdb_server *s)
{
	uint64_t one = 1;

	if (rmr_client_kick_fd(brmr_client(s->ex->dev), s->flush_fd) == 0)
		return;
	if (write(s->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		nbdb_log(NBDB_WARN, "cannot wake the event loop: %s", strerror(errno));
}

/* @r..@last (linked) are answered: back to the free list. Under c->lock. */
static void reqs_release(struct nbdb_conn *c, struct nbdb_req *r, struct nbdb_req *last,
			 unsigned n)
{
	last->next = c->free_list;
	c->free_list = r;
	atomic_fetch_sub(&c->busy, n);
	/* The connection's thread waits only once reading is over (a wake-up
	 * per reply would cost a context switch each). */
	if (c->read_done)
		pthread_cond_broadcast(&c->free_cv);
	if (c->wants_ctx) {
		c->wants_ctx = false;
		server_wake_loop(c->srv);
	}
}

/* Put @head..@tail (linked) first in the writer's queue. Under c->lock. */
static void writer_take_first(struct nbdb_conn *c, struct nbdb_req *head, struct nbdb_req *tail)
{
	tail->next = c->reply_head;
	c->reply_head = head;
	if (!c->reply_tail)
		c->reply_tail = tail;
	if (!c->sending)
		pthread_cond_signal(&c->reply_cv);
}

/* Put @head..@tail (linked) last in the writer's queue. Under c->lock. */
static void writer_take_last(struct nbdb_conn *c, struct nbdb_req *head, struct nbdb_req *tail)
{
	tail->next = NULL;
	if (c->reply_tail)
		c->reply_tail->next = head;
	else
		c->reply_head = head;
	c->reply_tail = tail;
	if (!c->sending)
		pthread_cond_signal(&c->reply_cv);
}

/*
 * Answer a finished context: a reply with at most CONN_LOOP_DATA_MAX bytes
 * of data at once if the socket is free and takes all of it without
 * blocking, else through the writer. Any thread, never blocks long.
 */
static void reply_queue(struct nbdb_req *r, uint32_t nbd_error)
{
	struct nbdb_conn *c = r->conn;

	r->hdr.error = nbd_to_be32(nbd_error);
	r->next = NULL;
	r->sent = 0;
	pthread_mutex_lock(&c->lock);
	if (!c->sending && !c->reply_head && !c->dead &&
	    (nbd_error || r->data_len <= CONN_LOOP_DATA_MAX)) {
		struct iovec iov[2];
		struct msghdr mh = { .msg_iov = iov };
		ssize_t w;

		c->sending = true;
		pthread_mutex_unlock(&c->lock);
		mh.msg_iovlen = reply_iov(r, iov);
		do
			w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (w < 0 && errno == EINTR);
		pthread_mutex_lock(&c->lock);
		c->sending = false;
		if (w >= 0 && (size_t)w == reply_len(r)) {
			reqs_release(c, r, r, 1);
			if (c->reply_head)
				pthread_cond_signal(&c->reply_cv);
			pthread_mutex_unlock(&c->lock);
			return;
		}
		/* The rest goes first, by the writer, whose blocking send
		 * also reports a failed socket. */
		r->sent = w > 0 ? (size_t)w : 0;
		writer_take_first(c, r, r);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	writer_take_last(c, r, r);
	pthread_mutex_unlock(&c->lock);
}

/* Keep a reply for the flush at the end of this loop turn (loop thread). */
static void reply_gather(struct nbdb_req *r, uint32_t nbd_error)
{
	struct nbdb_conn *c = r->conn;
	struct nbdb_server *s = c->srv;

	rmr_client_kick_fd(brmr_client(c->ex->dev), s->flush_fd);
	r->hdr.error = nbd_to_be32(nbd_error);
	r->next = NULL;
	r->sent = 0;
	if (c->gather_tail)
		c->gather_tail->next = r;
	else
		c->gather_head = r;
	c->gather_tail = r;
	if (!c->flush_listed) {
		c->flush_listed = true;
		c->flush_next = s->flush_head;
		s->flush_head = c;
	}
}

/* brmr completion: on librmr's event-loop thread (nbd-brmr submits only there). */
static void req_done(void *priv, int status)
{
	struct nbdb_req *r = priv;
	uint32_t err = nbdb_errno_to_nbd(status);

	/* A reader waiting for a librmr slot resumes after this turn. */
	if (r->conn->srv->stalled)
		server_wake_loop(r->conn->srv);
	/* Alone in flight (QD1), nothing would join it: sent at once. */
	if ((err || r->data_len <= CONN_LOOP_DATA_MAX) && atomic_load(&r->conn->busy) > 1)
		reply_gather(r, err);
	else
		reply_queue(r, err);
}

/*
 * Send @c's gathered replies, CONN_FLUSH_BATCH per non-blocking sendmsg().
 * What the socket does not take goes to the writer, whose blocking send
 * also reports a failed socket; so do all of them while the writer has
 * replies of its own or is sending. @c may be freed once its last context
 * is released: it is not touched after that.
 */
static void conn_flush(struct nbdb_conn *c)
{
	struct nbdb_req *r = c->gather_head;

	c->gather_head = c->gather_tail = NULL;
	pthread_mutex_lock(&c->lock);
	if (c->sending || c->reply_head || c->dead) {
		struct nbdb_req *tail = r;

		while (tail->next)
			tail = tail->next;
		writer_take_last(c, r, tail); /* after the writer's own */
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->sending = true;
	pthread_mutex_unlock(&c->lock);

	while (r) {
		struct iovec iov[2 * CONN_FLUSH_BATCH];
		struct msghdr mh = { .msg_iov = iov };
		struct nbdb_req *q, *last = NULL, *rest;
		unsigned n = 0, nr = 0, done = 0;
		ssize_t w;

		for (q = r; q && nr < CONN_FLUSH_BATCH; q = q->next, nr++)
			n += reply_iov(q, &iov[n]);
		mh.msg_iovlen = n;
		do
			w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (w < 0 && errno == EINTR);
		/* The replies it took whole. */
		for (q = r; q && done < nr && w >= (ssize_t)reply_len(q); q = q->next) {
			w -= (ssize_t)reply_len(q);
			last = q;
			done++;
		}
		rest = last ? last->next : r;
		pthread_mutex_lock(&c->lock);
		if (!rest || done < nr) {
			/* The last round: the socket took all, or not all of it. */
			c->sending = false;
			if (rest) {
				rest->sent = w > 0 ? (size_t)w : 0;
				for (q = rest; q->next; q = q->next)
					;
				writer_take_first(c, rest, q);
			} else if (c->reply_head) {
				pthread_cond_signal(&c->reply_cv);
			}
			if (last) {
				last->next = NULL;
				reqs_release(c, r, last, done);
			}
			pthread_mutex_unlock(&c->lock);
			return;
		}
		last->next = NULL;
		reqs_release(c, r, last, done); /* rest are still busy: c stays */
		pthread_mutex_unlock(&c->lock);
		r = rest;
	}
}

static void conn_read(struct nbdb_conn *c);

/*
 * The flush watch: on librmr's loop thread, after the turn's completions,
 * or (wake_up()) when another thread freed a context. Sends the gathered
 * replies, then lets readers that waited for a context, a slot or their
 * next turn go on.
 */
static void flush_replies(void *priv)
{
	struct nbdb_server *s = priv;
	struct nbdb_conn *c, *next;

	while ((c = s->flush_head)) {
		s->flush_head = c->flush_next;
		c->flush_listed = false;
		conn_flush(c);
	}
	c = s->stalled;
	s->stalled = NULL;
	for (; c; c = next) {
		next = c->stall_next;
		c->stall_listed = false;
		conn_read(c);
	}
}

/* The wake eventfd, written by a thread that freed a context. */
static void wake_up(void *priv)
{
	struct nbdb_server *s = priv;
	uint64_t v;

	if (read(s->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		nbdb_log(NBDB_WARN, "cannot read the wake eventfd: %s", strerror(errno));
	flush_replies(s);
}

/* ------------------------------------------------------------------ */
/* Writer                                                             */
/* ------------------------------------------------------------------ */

static void *writer_main(void *arg)
{
	struct nbdb_conn *c = arg;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct nbdb_req *batch, *r, *last = NULL;
		struct iovec iov[2 * CONN_WRITE_BATCH];
		unsigned n = 0, cnt = 0;

		bool dead;

		while ((!c->reply_head || c->sending) && !c->writer_stop)
			pthread_cond_wait(&c->reply_cv, &c->lock);
		if (!c->reply_head)
			break;
		/* At the end, an inline sender may still be at it: wait for it. */
		if (c->sending) {
			pthread_cond_wait(&c->reply_cv, &c->lock);
			continue;
		}
		/* Take up to a batch off the queue. */
		batch = c->reply_head;
		for (r = batch; r && n < CONN_WRITE_BATCH; r = r->next) {
			last = r;
			n++;
		}
		c->reply_head = last->next;
		if (!c->reply_head)
			c->reply_tail = NULL;
		last->next = NULL;
		c->sending = true;
		dead = c->dead;
		pthread_mutex_unlock(&c->lock);

		for (r = batch; r; r = r->next)
			cnt += reply_iov(r, &iov[cnt]);
		if (!dead) {
			int rc = nbdb_writev_full(c->fd, iov, cnt);

			if (rc < 0) {
				/* The client is gone or stuck: wake the reader
				 * too; keep draining replies without sending. */
				nbdb_log(NBDB_DEBUG, "conn %lu: send failed: %s", c->id,
					 strerror(-rc));
				dead = true;
				shutdown(c->fd, SHUT_RDWR);
			}
		}

		pthread_mutex_lock(&c->lock);
		c->sending = false;
		c->dead = c->dead || dead;
		reqs_release(c, batch, last, n);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Reader                                                             */
/* ------------------------------------------------------------------ */

/* Allowed command flags per command. FUA is accepted on every command, as
 * the spec requires once SEND_FUA is advertised; it only means something
 * for the ones that modify data. DF needs structured replies, FAST_ZERO
 * and REQ_ONE were not advertised: EINVAL. */
static bool cmd_known(uint16_t type, uint16_t *allowed)
{
	switch (type) {
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
	case NBD_CMD_FLUSH:
	case NBD_CMD_TRIM:
		*allowed = NBD_CMD_FLAG_FUA;
		return true;
	case NBD_CMD_WRITE_ZEROES:
		*allowed = NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE;
		return true;
	default:
		/* CACHE, BLOCK_STATUS (no meta context can be negotiated),
		 * and anything newer. */
		return false;
	}
}

/* Decide a request's fate before it takes a context. @return 0 to submit,
 * or the NBD error to answer with. */
static uint32_t req_check(const struct nbdb_conn *c, uint16_t flags, uint16_t type,
			  uint64_t off, uint32_t len)
{
	uint64_t size = c->ex->size;
	uint16_t allowed;

	if (!cmd_known(type, &allowed))
		return NBD_EINVAL;
	if (flags & ~allowed)
		return NBD_EINVAL;
	if (atomic_load(&c->srv->stopping))
		return NBD_ESHUTDOWN;
	if (type == NBD_CMD_FLUSH)
		/* offset and length are reserved and must be zero. */
		return off == 0 && len == 0 ? 0 : NBD_EINVAL;
	if (type == NBD_CMD_READ && len > NBDB_MAX_PAYLOAD)
		/* No payload follows a READ, so this is safely refused. */
		return NBD_EINVAL;
	if (off > size || len > size - off)
		return type == NBD_CMD_WRITE || type == NBD_CMD_WRITE_ZEROES ? NBD_ENOSPC
									 : NBD_EINVAL;
	return 0;
}

/* Wait for a context or a librmr slot: resumed by flush_replies(). */
static enum step conn_stall(struct nbdb_conn *c)
{
	struct nbdb_server *s = c->srv;

	if (!c->stall_listed) {
		c->stall_listed = true;
		c->stall_next = s->stalled;
		s->stalled = c;
	}
	return STEP_WAIT;
}

/* Submit @r. False when librmr has no free slot: @r is parked and the
 * connection waits. */
static bool req_submit(struct nbdb_conn *c, struct nbdb_req *r)
{
	bool data = r->op == BRMR_OP_READ || r->op == BRMR_OP_WRITE;
	struct iovec iov = { r->buf, r->len };
	int rc;

	rc = brmr_submit(c->ex->dev, r->op, r->bflags, r->off, r->len, data ? &iov : NULL,
			 data ? 1 : 0, req_done, r);
	if (rc == -EAGAIN) {
		c->cur = r;
		c->parked = true;
		return false;
	}
	if (rc < 0) {
		/* The callback will not run: answer here. */
		r->data_len = 0;
		reply_queue(r, nbdb_errno_to_nbd(rc));
	}
	c->nreq++;
	return true;
}

/* A whole request is in @r (@p err: refused): answer it or submit it. */
static enum step req_dispatch(struct nbdb_conn *c, struct nbdb_req *r, uint32_t err)
{
	uint16_t type = r->nbd_type;

	if (err || (r->len == 0 && type != NBD_CMD_FLUSH)) {
		/* Zero-length requests inside the device are no-ops. */
		reply_queue(r, err);
		return STEP_MORE;
	}
	switch (type) {
	case NBD_CMD_READ:
		r->op = BRMR_OP_READ;
		r->data_len = r->len;
		break;
	case NBD_CMD_WRITE:
		r->op = BRMR_OP_WRITE;
		break;
	case NBD_CMD_FLUSH:
		r->op = BRMR_OP_FLUSH;
		r->off = 0;
		r->len = 0;
		break;
	case NBD_CMD_TRIM:
		r->op = BRMR_OP_TRIM;
		break;
	default: /* NBD_CMD_WRITE_ZEROES, the last one req_check() lets by */
		r->op = BRMR_OP_WRITE_ZEROES;
		break;
	}
	/* NO_HOLE needs nothing: brmr's write-zeroes always leaves the range
	 * allocated (libbrmr/store.c zero_range); TRIM frees it. */
	r->bflags = 0;
	if ((r->nbd_flags & NBD_CMD_FLAG_FUA) && r->op != BRMR_OP_READ && r->op != BRMR_OP_FLUSH)
		r->bflags |= BRMR_F_FUA;
	return req_submit(c, r) ? STEP_MORE : conn_stall(c);
}

/*
 * Hand cur's payload, less what the input buffer holds, to the
 * connection's thread; the connection waits until it is read.
 */
static enum step offload_start(struct nbdb_conn *c)
{
	struct nbdb_req *r = c->cur;
	size_t n = c->rend - c->rpos;

	if (n > c->want)
		n = c->want;
	memcpy(r->buf, c->rbuf + c->rpos, n);
	c->rpos += n;
	c->want -= n;
	if (c->want == 0)
		return STEP_MORE; /* in_payload() dispatches it */
	c->in = IN_OFFLOAD;
	pthread_mutex_lock(&c->lock);
	c->offload = r;
	c->offload_want = c->want;
	pthread_cond_broadcast(&c->free_cv);
	pthread_mutex_unlock(&c->lock);
	return conn_stall(c);
}

/* Resumed: submit the payload the connection's thread read, or wait on. */
static enum step offload_finish(struct nbdb_conn *c)
{
	struct nbdb_req *r = c->cur;
	bool done;
	int rc;

	pthread_mutex_lock(&c->lock);
	done = c->offload_done;
	rc = c->offload_rc;
	c->offload_done = false;
	pthread_mutex_unlock(&c->lock);
	if (!done)
		return conn_stall(c); /* resumed for another connection's sake */
	c->cur = NULL;
	if (rc != 0) {
		rb_failed(c, rc == -EPIPE ? 0 : rc);
		reply_queue(r, NBD_EIO); /* nothing was submitted */
		return STEP_END;
	}
	c->want = 0;
	c->in = IN_HEADER;
	return req_dispatch(c, r, 0);
}

/* The next request header: refuse, read on into the payload, or submit. */
static enum step in_header(struct nbdb_conn *c)
{
	struct nbd_request rq;
	uint16_t flags, type;
	uint64_t off;
	uint32_t len, err;
	bool payload, nomem;
	struct nbdb_req *r;

	while (c->rend - c->rpos < sizeof(rq)) {
		ssize_t n = rb_fill(c);

		if (n <= 0)
			return rb_failed(c, n);
	}
	memcpy(&rq, c->rbuf + c->rpos, sizeof(rq));
	if (nbd_be32(rq.magic) != NBD_REQUEST_MAGIC) {
		nbdb_log(NBDB_INFO, "conn %lu: bad request magic 0x%08x, closing", c->id,
			 nbd_be32(rq.magic));
		return STEP_END;
	}
	flags = nbd_be16(rq.flags);
	type = nbd_be16(rq.type);
	off = nbd_be64(rq.offset);
	len = nbd_be32(rq.len);
	payload = type == NBD_CMD_WRITE;
	if (type == NBD_CMD_DISC) {
		nbdb_log(NBDB_DEBUG, "conn %lu: client disconnects", c->id);
		return STEP_END;
	}
	if (payload && len > NBDB_MAX_PAYLOAD) {
		/* The payload must be consumed to find the next request. */
		if (len > NBDB_DISCARD_MAX) {
			nbdb_log(NBDB_INFO, "conn %lu: WRITE of %u bytes, above the maximum payload; closing",
				 c->id, len);
			return STEP_END;
		}
		err = NBD_EINVAL;
	} else {
		err = req_check(c, flags, type, off, len);
	}

	r = req_try_get(c, !err && (payload || type == NBD_CMD_READ) ? len : 0, &nomem);
	if (!r)
		return conn_stall(c); /* the header stays in the buffer */
	c->rpos += sizeof(rq);
	if (err)
		nbdb_log(NBDB_DEBUG, "conn %lu: refusing %s (%u) flags 0x%x offset %llu length %u: error %u",
			 c->id, cmd_name(type), type, flags, (unsigned long long)off, len, err);
	else if (nomem)
		err = NBD_ENOMEM;
	r->hdr.cookie = rq.cookie; /* echoed as sent */
	r->data_len = 0;
	r->off = off;
	r->len = len;
	r->nbd_type = type;
	r->nbd_flags = flags;
	if (payload && len > 0) {
		c->cur = r;
		c->cur_err = err;
		c->want = len;
		c->in = err ? IN_DISCARD : IN_PAYLOAD;
		return !err && len >= CONN_OFFLOAD_MIN ? offload_start(c) : STEP_MORE;
	}
	return req_dispatch(c, r, err);
}

/* A WRITE's payload into cur's buffer (IN_PAYLOAD), or dropped (IN_DISCARD). */
static enum step in_payload(struct nbdb_conn *c)
{
	struct nbdb_req *r = c->cur;

	while (c->want > 0) {
		if (c->budget == 0)
			return STEP_MORE; /* conn_read() ends the turn */
		uint8_t *dst = c->in == IN_PAYLOAD ? (uint8_t *)r->buf + (r->len - c->want) : NULL;
		ssize_t n = rb_take(c, dst, c->want);

		if (n <= 0) {
			enum step st = rb_failed(c, n);

			/* Nothing was submitted. The reply (most likely to a
			 * client that is gone) brings the context back like
			 * any other. */
			if (st == STEP_END) {
				c->cur = NULL;
				reply_queue(r, NBD_EIO);
			}
			return st;
		}
		c->want -= (size_t)n;
	}
	c->cur = NULL;
	c->in = IN_HEADER;
	return req_dispatch(c, r, c->cur_err);
}

/* Reading is over: leave the epoll set; the connection's thread takes over. */
static void conn_end_reading(struct nbdb_conn *c)
{
	if (epoll_ctl(c->srv->conn_epfd, EPOLL_CTL_DEL, c->fd, NULL) < 0)
		nbdb_log(NBDB_WARN, "conn %lu: epoll_ctl: %s", c->id, strerror(errno));
	pthread_mutex_lock(&c->lock);
	c->read_done = true;
	pthread_cond_broadcast(&c->free_cv);
	pthread_mutex_unlock(&c->lock);
	/* c may be gone from here on. */
}

/*
 * Read and act on requests until the socket is empty (it is watched
 * edge-triggered, so that is the only place to stop), a context or slot is
 * missing, the stream ends, or this turn's budget is spent (then the next
 * turn goes on). On librmr's loop thread.
 */
static void conn_read(struct nbdb_conn *c)
{
	enum step st = STEP_MORE;
	unsigned requests = 0;

	if (c->stall_listed)
		return; /* resumed by flush_replies() */
	c->budget = CONN_READ_BUDGET;
	while (st == STEP_MORE) {
		if (c->budget == 0 || requests++ == CONN_READ_REQUESTS) {
			conn_stall(c);
			server_wake_loop(c->srv);
			return;
		}
		if (c->parked) {
			if (!req_submit(c, c->cur)) {
				st = conn_stall(c);
				break;
			}
			c->parked = false;
			c->cur = NULL;
		}
		if (c->in == IN_HEADER)
			st = in_header(c);
		else if (c->in == IN_OFFLOAD)
			st = offload_finish(c);
		else
			st = in_payload(c);
	}
	if (st == STEP_END)
		conn_end_reading(c);
}

/* The connections' epoll set is ready: on librmr's loop thread. */
static void serve_conns(void *priv)
{
	struct nbdb_server *s = priv;
	struct epoll_event evs[32];
	int n;

	do
		n = epoll_wait(s->conn_epfd, evs, 32, 0);
	while (n < 0 && errno == EINTR);
	for (int i = 0; i < n; i++)
		conn_read(evs[i].data.ptr);
}

/* ------------------------------------------------------------------ */
/* Connection lifetime                                                */
/* ------------------------------------------------------------------ */

/*
 * The connection's thread in the transmission phase: read the large
 * payloads the loop hands over, until reading is over.
 */
static void conn_serve_offloads(struct nbdb_conn *c)
{
	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct nbdb_req *r = c->offload;
		size_t want = c->offload_want;
		int rc;

		if (c->read_done)
			break;
		if (!r) {
			pthread_cond_wait(&c->free_cv, &c->lock);
			continue;
		}
		c->offload = NULL;
		pthread_mutex_unlock(&c->lock);
		/* One blocking recv(MSG_WAITALL): the kernel fills the
		 * buffer as the data comes, without a wake-up per piece. */
		rc = nbdb_read_full(c->fd, (uint8_t *)r->buf + (r->len - want), want);
		pthread_mutex_lock(&c->lock);
		c->offload_rc = rc;
		c->offload_done = true;
		server_wake_loop(c->srv); /* the loop resumes the connection */
	}
	pthread_mutex_unlock(&c->lock);
}

static void conn_transmit(struct nbdb_conn *c)
{
	unsigned qd = c->ex->queue_depth;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c };
	int rc;

	c->reqs = calloc(qd, sizeof(*c->reqs));
	c->rbuf = malloc(CONN_RBUF_SIZE);
	if (!c->reqs || !c->rbuf) {
		nbdb_log(NBDB_ERR, "conn %lu: out of memory", c->id);
		goto out;
	}
	for (unsigned i = 0; i < qd; i++) {
		c->reqs[i].conn = c;
		c->reqs[i].hdr.magic = nbd_to_be32(NBD_SIMPLE_REPLY_MAGIC);
		c->reqs[i].next = i + 1 < qd ? &c->reqs[i + 1] : NULL;
	}
	c->free_list = &c->reqs[0];
	c->in = IN_HEADER;

	rc = pthread_create(&c->writer, NULL, writer_main, c);
	if (rc != 0) {
		nbdb_log(NBDB_ERR, "conn %lu: cannot start writer thread: %s", c->id,
			 strerror(rc));
		goto out;
	}

	/* From here on the loop thread reads; what the client sent already
	 * is reported at once. The socket stays blocking for the writer and
	 * the large payloads; the loop's calls are MSG_DONTWAIT. */
	rc = epoll_ctl(c->srv->conn_epfd, EPOLL_CTL_ADD, c->fd, &ev);
	if (rc < 0) {
		nbdb_log(NBDB_ERR, "conn %lu: cannot watch the socket: %s", c->id,
			 strerror(errno));
		pthread_mutex_lock(&c->lock);
		c->read_done = true;
		pthread_mutex_unlock(&c->lock);
	}
	conn_serve_offloads(c);

	/* Drain: every request taken must be answered (or dropped by a dead
	 * writer) before the contexts go away; brmr callbacks still hold
	 * pointers to them until then. */
	pthread_mutex_lock(&c->lock);
	while (atomic_load(&c->busy) > 0)
		pthread_cond_wait(&c->free_cv, &c->lock);
	c->writer_stop = true;
	pthread_cond_signal(&c->reply_cv);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->writer, NULL);
	nbdb_log(NBDB_DEBUG, "conn %lu: closed after %llu requests", c->id,
		 (unsigned long long)c->nreq);
out:
	if (c->reqs)
		for (unsigned i = 0; i < qd; i++)
			free(c->reqs[i].buf);
	free(c->reqs);
	free(c->rbuf);
}

static void conn_free(struct nbdb_conn *c)
{
	pthread_cond_destroy(&c->reply_cv);
	pthread_cond_destroy(&c->free_cv);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Leave the server's list, then close: the main thread only calls
 * shutdown() on sockets of listed connections, so it never touches a
 * descriptor number that has been reused. */
static void conn_unlist_and_close(struct nbdb_conn *c)
{
	struct nbdb_server *s = c->srv;

	pthread_mutex_lock(&s->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	close(c->fd);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->lock);
}

static void *conn_main(void *arg)
{
	struct nbdb_conn *c = arg;
	enum nbdb_hs_result hs;

	nbdb_log(NBDB_DEBUG, "conn %lu: from %s", c->id, c->peer);
	hs = nbdb_handshake(c->fd, c->ex, c->id, &c->srv->stopping);
	switch (hs) {
	case NBDB_HS_TRANSMIT:
		nbdb_log(NBDB_DEBUG, "conn %lu: transmission phase", c->id);
		conn_transmit(c);
		break;
	case NBDB_HS_CLOSE:
		nbdb_log(NBDB_DEBUG, "conn %lu: closed during handshake", c->id);
		break;
	case NBDB_HS_ERROR:
		nbdb_log(NBDB_DEBUG, "conn %lu: handshake failed", c->id);
		break;
	}
	conn_unlist_and_close(c);
	conn_free(c);
	return NULL;
}

int nbdb_conn_start(struct nbdb_server *s, int fd, const char *peer)
{
	struct nbdb_conn *c;
	pthread_attr_t attr;
	int rc;

	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->srv = s;
	c->ex = s->ex;
	c->fd = fd;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->free_cv, NULL);
	pthread_cond_init(&c->reply_cv, NULL);
	atomic_init(&c->busy, 0);

	pthread_mutex_lock(&s->lock);
	if (s->nconns >= NBDB_MAX_CONNS) {
		pthread_mutex_unlock(&s->lock);
		nbdb_log(NBDB_WARN, "refusing connection from %s: %u connections open", peer,
			 NBDB_MAX_CONNS);
		close(fd);
		conn_free(c);
		return -EMFILE;
	}
	c->id = ++s->next_id;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	pthread_mutex_unlock(&s->lock);

	/* Detached: the connection cleans up after itself; shutdown waits on
	 * the server's count instead of joining. */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&c->thread, &attr, conn_main, c);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		nbdb_log(NBDB_ERR, "cannot start a thread for %s: %s", peer, strerror(rc));
		conn_unlist_and_close(c);
		conn_free(c);
		return -rc;
	}
	/* c may be gone already: the thread owns it now. */
	return 0;
}

/* ------------------------------------------------------------------ */
/* Server: the set of connections                                     */
/* ------------------------------------------------------------------ */

int nbdb_server_init(struct nbdb_server *s, const struct nbdb_export *ex)
{
	struct rmr_client *client = brmr_client(ex->dev);
	pthread_condattr_t ca;
	int rc;

	memset(s, 0, sizeof(*s));
	s->ex = ex;
	atomic_init(&s->stopping, false);
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	s->flush_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->conn_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->flush_fd < 0 || s->wake_fd < 0 || s->conn_epfd < 0) {
		rc = -errno;
		nbdb_log(NBDB_ERR, "cannot set up the connections' events: %s", strerror(-rc));
		goto fail;
	}
	rc = rmr_client_watch_fd(client, s->flush_fd, flush_replies, s);
	if (rc < 0)
		goto fail_watch;
	rc = rmr_client_watch_fd(client, s->wake_fd, wake_up, s);
	if (rc < 0)
		goto fail_watch_wake;
	rc = rmr_client_watch_fd(client, s->conn_epfd, serve_conns, s);
	if (rc < 0)
		goto fail_watch_conns;
	return 0;

fail_watch_conns:
	rmr_client_unwatch_fd(client, s->wake_fd);
fail_watch_wake:
	rmr_client_unwatch_fd(client, s->flush_fd);
fail_watch:
	nbdb_log(NBDB_ERR, "cannot serve connections on the event loop: %s", strerror(-rc));
fail:
	if (s->flush_fd >= 0)
		close(s->flush_fd);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	if (s->conn_epfd >= 0)
		close(s->conn_epfd);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->lock);
	return rc;
}

void nbdb_server_destroy(struct nbdb_server *s)
{
	struct rmr_client *client = brmr_client(s->ex->dev);

	rmr_client_unwatch_fd(client, s->conn_epfd);
	rmr_client_unwatch_fd(client, s->wake_fd);
	rmr_client_unwatch_fd(client, s->flush_fd);
	close(s->conn_epfd);
	close(s->wake_fd);
	close(s->flush_fd);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->lock);
}

unsigned nbdb_server_busy(struct nbdb_server *s)
{
	unsigned busy = 0;

	pthread_mutex_lock(&s->lock);
	for (struct nbdb_conn *c = s->conns; c; c = c->next)
		busy += atomic_load(&c->busy);
	pthread_mutex_unlock(&s->lock);
	return busy;
}

void nbdb_server_shutdown_conns(struct nbdb_server *s, int how)
{
	pthread_mutex_lock(&s->lock);
	for (struct nbdb_conn *c = s->conns; c; c = c->next)
		shutdown(c->fd, how);
	pthread_mutex_unlock(&s->lock);
}

unsigned nbdb_server_wait_idle(struct nbdb_server *s, unsigned timeout_ms)
{
	struct timespec dl;
	unsigned n;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&s->lock);
	while (s->nconns > 0)
		if (pthread_cond_timedwait(&s->cv, &s->lock, &dl) == ETIMEDOUT)
			break;
	n = s->nconns;
	pthread_mutex_unlock(&s->lock);
	return n;
}
