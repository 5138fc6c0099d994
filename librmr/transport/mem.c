/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * In-process transport for tests: instances in one process reach each other
 * by name. Every message is copied into a fresh buffer and delivered through
 * the receiving instance's inbox, so client and members may run on different
 * threads exactly as over a real network.
 *
 * One process-wide mutex guards everything: simplicity beats speed here.
 * Receive buffers are recycled, though: a simulation sends hundreds of
 * thousands of messages, and a fresh max_msg allocation for each one costs
 * page faults that dwarf everything the test exercises.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "compiler.h"
#include "log.h"
#include "transports.h"

enum mem_ev_kind { EV_CONNREQ, EV_CONNECTED, EV_CONNFAIL, EV_MSG, EV_SEND_DONE, EV_CLOSED };

struct mem_tp;

struct mem_ev;

struct rmr_conn {
	struct mem_tp *tp;
	struct rmr_conn *peer; /* NULL once the peer end is gone */
	void *ctx;             /* core's context */
	unsigned refs;         /* the owner, plus events that name it */
	bool open;             /* the owner has not closed it */
	bool up;               /* connected (or accepted) */
	/* Sent while the link was cut: delivered, in order, once it is restored. */
	struct mem_ev *held_head, *held_tail;
	struct rmr_conn *next_held; /* held_conns */
};

/* A receive buffer: lent to the core as @data, recycled on release. */
struct mem_buf {
	size_t cap;
	struct mem_buf *next_free;
	char data[];
};

struct mem_ev {
	enum mem_ev_kind kind;
	struct rmr_conn *conn; /* holds a reference */
	void *op_ctx;
	int status;
	size_t len;
	struct mem_buf *buf;   /* EV_MSG payload */
	struct mem_ev *next;
};

struct mem_tp {
	struct rmr_transport_params params;
	struct rmr_transport_events ev;
	void *ev_ctx;
	char *listen_name;
	int efd;
	bool signaled;         /* efd written since progress last read it (under mem_lock) */
	struct mem_ev *head, *tail;
	struct mem_tp *next_listener;
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mem_tp *listeners;
static struct rmr_conn *held_conns; /* connections holding messages, under mem_lock */

#define FREE_BYTES_MAX (64u << 20)
static struct mem_buf *free_bufs; /* under mem_lock */
static size_t free_bytes;

/* A buffer of at least @cap bytes. Under mem_lock. */
static struct mem_buf *buf_get(size_t cap)
{
	struct mem_buf *b = free_bufs, **prev = &free_bufs;

	for (; b; prev = &b->next_free, b = b->next_free) {
		if (b->cap >= cap) {
			*prev = b->next_free;
			free_bytes -= b->cap;
			return b;
		}
	}
	b = malloc(sizeof(*b) + cap);
	if (!b)
		abort(); /* test transport: out of memory is fatal */
	b->cap = cap;
	return b;
}

/* Under mem_lock. */
static void buf_put(struct mem_buf *b)
{
	if (!b)
		return;
	if (free_bytes + b->cap > FREE_BYTES_MAX) {
		free(b);
		return;
	}
	b->next_free = free_bufs;
	free_bufs = b;
	free_bytes += b->cap;
}

#define MAX_CUTS 32
static char cuts[MAX_CUTS][2][RMR_ADDR_MAX + 1]; /* empty = unused */

static rmr_mem_tamper_fn tamper; /* under mem_lock */
static void *tamper_ctx;

void rmr_mem_tamper(rmr_mem_tamper_fn fn, void *ctx)
{
	pthread_mutex_lock(&mem_lock);
	tamper = fn;
	tamper_ctx = ctx;
	pthread_mutex_unlock(&mem_lock);
}

static bool same_pair(unsigned i, const char *a, const char *b)
{
	return (!strcmp(cuts[i][0], a) && !strcmp(cuts[i][1], b)) ||
	       (!strcmp(cuts[i][0], b) && !strcmp(cuts[i][1], a));
}

/* Under mem_lock. */
static bool link_cut(const struct mem_tp *x, const struct mem_tp *y)
{
	if (!x->params.name || !y->params.name)
		return false;
	for (unsigned i = 0; i < MAX_CUTS; i++)
		if (cuts[i][0][0] && same_pair(i, x->params.name, y->params.name))
			return true;
	return false;
}

static void held_flush(void);

int rmr_mem_link_cut(const char *a, const char *b, bool cut)
{
	int ret = cut ? -ENOSPC : 0;

	pthread_mutex_lock(&mem_lock);
	for (unsigned i = 0; i < MAX_CUTS; i++) {
		if (cuts[i][0][0] && same_pair(i, a, b)) {
			if (!cut)
				cuts[i][0][0] = cuts[i][1][0] = '\0';
			ret = 0;
			cut = false; /* already there */
		}
	}
	for (unsigned i = 0; cut && i < MAX_CUTS; i++) {
		if (!cuts[i][0][0]) {
			snprintf(cuts[i][0], sizeof(cuts[i][0]), "%s", a);
			snprintf(cuts[i][1], sizeof(cuts[i][1]), "%s", b);
			ret = 0;
			break;
		}
	}
	held_flush();
	pthread_mutex_unlock(&mem_lock);
	return ret;
}

static void conn_put(struct rmr_conn *c)
{
	if (--c->refs == 0)
		free(c);
}

/* Queue an event for @tp's progress; takes a new reference on @conn. */
static void post(struct mem_tp *tp, struct mem_ev *e)
{
	uint64_t one = 1;

	e->next = NULL;
	if (e->conn)
		e->conn->refs++;
	if (tp->tail)
		tp->tail->next = e;
	else
		tp->head = e;
	tp->tail = e;
	/* One wake-up per drain: a simulation posts millions of events. */
	if (tp->signaled)
		return;
	tp->signaled = true;
	if (write(tp->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_err("mem transport: eventfd write: %s", strerror(errno));
}

static struct mem_ev *ev_new(enum mem_ev_kind kind, struct rmr_conn *conn)
{
	struct mem_ev *e = calloc(1, sizeof(*e));

	if (!e)
		abort(); /* test transport: out of memory is fatal */
	e->kind = kind;
	e->conn = conn;
	return e;
}

/* Under mem_lock. */
static void ev_free(struct mem_ev *e)
{
	buf_put(e->buf);
	free(e);
}

/* @msg goes out once the link of @c is restored, behind what @c holds. Under mem_lock. */
static void held_add(struct rmr_conn *c, struct mem_ev *msg)
{
	msg->next = NULL;
	if (!c->held_head) {
		c->held_head = msg;
		c->next_held = held_conns;
		held_conns = c;
	} else {
		c->held_tail->next = msg;
	}
	c->held_tail = msg;
}

/* Drop what @c holds: the connection is gone. Under mem_lock. */
static void held_drop(struct rmr_conn *c)
{
	if (!c->held_head)
		return;
	for (struct rmr_conn **p = &held_conns; *p; p = &(*p)->next_held) {
		if (*p == c) {
			*p = c->next_held;
			break;
		}
	}
	while (c->held_head) {
		struct mem_ev *e = c->held_head;

		c->held_head = e->next;
		ev_free(e);
	}
	c->held_tail = NULL;
}

/* Deliver what connections held across links that are whole again. Under mem_lock. */
static void held_flush(void)
{
	for (struct rmr_conn **p = &held_conns; *p;) {
		struct rmr_conn *c = *p;

		if (c->peer && link_cut(c->tp, c->peer->tp)) {
			p = &c->next_held;
			continue;
		}
		*p = c->next_held;
		while (c->held_head) {
			struct mem_ev *e = c->held_head;

			c->held_head = e->next;
			if (c->peer) {
				e->conn = c->peer;
				post(c->peer->tp, e);
			} else {
				ev_free(e);
			}
		}
		c->held_tail = NULL;
	}
}

static int mem_create(const struct rmr_transport_params *params,
		      const struct rmr_transport_events *ev, void *ev_ctx, void **out)
{
	struct mem_tp *tp = calloc(1, sizeof(*tp));

	if (!tp)
		return -ENOMEM;
	tp->params = *params;
	tp->ev = *ev;
	tp->ev_ctx = ev_ctx;
	tp->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (tp->efd < 0) {
		free(tp);
		return -errno;
	}
	*out = tp;
	return 0;
}

static void mem_destroy(void *arg)
{
	struct mem_tp *tp = arg;

	pthread_mutex_lock(&mem_lock);
	for (struct mem_tp **p = &listeners; *p; p = &(*p)->next_listener) {
		if (*p == tp) {
			*p = tp->next_listener;
			break;
		}
	}
	while (tp->head) {
		struct mem_ev *e = tp->head;

		tp->head = e->next;
		if (e->conn)
			conn_put(e->conn);
		ev_free(e);
	}
	pthread_mutex_unlock(&mem_lock);
	close(tp->efd);
	free(tp->listen_name);
	free(tp);
}

static int mem_listen(void *arg, const char *addr)
{
	struct mem_tp *tp = arg;
	int ret = 0;

	if (!addr || !*addr)
		return -EINVAL;
	pthread_mutex_lock(&mem_lock);
	for (struct mem_tp *l = listeners; l; l = l->next_listener)
		if (!strcmp(l->listen_name, addr))
			ret = -EADDRINUSE;
	if (!ret && tp->listen_name)
		ret = -EINVAL;
	if (!ret) {
		tp->listen_name = strdup(addr);
		tp->next_listener = listeners;
		listeners = tp;
	}
	pthread_mutex_unlock(&mem_lock);
	return ret;
}

static int mem_connect(void *arg, const char *addr, void *conn_ctx, struct rmr_conn **out)
{
	struct mem_tp *tp = arg, *l;
	struct rmr_conn *c;

	if (!addr || !*addr)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->tp = tp;
	c->ctx = conn_ctx;
	c->refs = 1;
	c->open = true;

	pthread_mutex_lock(&mem_lock);
	for (l = listeners; l; l = l->next_listener)
		if (!strcmp(l->listen_name, addr))
			break;
	if (l && link_cut(tp, l)) {
		/* The request vanishes: the dialer's own timeout must notice. */
	} else if (l) {
		post(l, ev_new(EV_CONNREQ, c));
	} else {
		struct mem_ev *e = ev_new(EV_CONNFAIL, c);

		e->status = -ECONNREFUSED;
		post(tp, e);
	}
	pthread_mutex_unlock(&mem_lock);
	*out = c;
	return 0;
}

static int mem_send(void *arg, struct rmr_conn *c, const struct iovec *iov, int iovcnt,
		    void *op_ctx)
{
	struct mem_tp *tp = arg;
	size_t len = 0, off = 0;
	struct mem_ev *msg, *done;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > tp->params.max_msg || iovcnt > 4)
		return -EMSGSIZE;

	pthread_mutex_lock(&mem_lock);
	if (!c->open || !c->up || !c->peer) {
		pthread_mutex_unlock(&mem_lock);
		return -ENOTCONN;
	}
	/* Receive buffers have room for max_msg bytes, as with a real transport. */
	msg = ev_new(EV_MSG, c->peer);
	msg->buf = buf_get(RMR_MAX(len, c->peer->tp->params.max_msg));
	msg->len = len;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(msg->buf->data + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	if (tamper) {
		size_t n = tamper(tamper_ctx, tp->params.name, c->peer->tp->params.name,
				  msg->buf->data, len);

		msg->len = RMR_MIN(len, n);
	}
	/* Across a cut link, as over TCP: nothing arrives until it is whole again. */
	if (link_cut(tp, c->peer->tp) || c->held_head) {
		msg->conn = NULL;
		held_add(c, msg);
	} else {
		post(c->peer->tp, msg);
	}
	done = ev_new(EV_SEND_DONE, c);
	done->op_ctx = op_ctx;
	post(tp, done);
	pthread_mutex_unlock(&mem_lock);
	return 0;
}

static void mem_recv_release(void *arg, struct rmr_conn *c, void *rx)
{
	(void)arg;
	(void)c;
	pthread_mutex_lock(&mem_lock);
	buf_put(rx);
	pthread_mutex_unlock(&mem_lock);
}

/* Detach @c from its peer and tell the peer it is closed. Under mem_lock. */
static void disconnect(struct rmr_conn *c, int reason)
{
	struct rmr_conn *peer = c->peer;

	if (!peer)
		return;
	c->peer = NULL;
	peer->peer = NULL;
	if (peer->open && peer->up) {
		struct mem_ev *e = ev_new(EV_CLOSED, peer);

		e->status = reason;
		post(peer->tp, e);
	}
}

static void mem_close(void *arg, struct rmr_conn *c)
{
	(void)arg;
	pthread_mutex_lock(&mem_lock);
	held_drop(c);
	disconnect(c, -ECONNRESET);
	c->open = false;
	conn_put(c);
	pthread_mutex_unlock(&mem_lock);
}

static int mem_wait_fd(void *arg)
{
	return ((struct mem_tp *)arg)->efd;
}

static int mem_trywait(void *arg)
{
	struct mem_tp *tp = arg;
	int ret;

	pthread_mutex_lock(&mem_lock);
	ret = tp->head ? -EAGAIN : 0;
	pthread_mutex_unlock(&mem_lock);
	return ret;
}

/* Handle one event outside the lock; the core may call back into us. */
static void deliver(struct mem_tp *tp, struct mem_ev *e)
{
	struct rmr_conn *c = e->conn;
	bool open;

	pthread_mutex_lock(&mem_lock);
	open = c->open;
	pthread_mutex_unlock(&mem_lock);

	switch (e->kind) {
	case EV_CONNREQ: {
		/* @c is the client end; make the server end. */
		struct rmr_conn *s = calloc(1, sizeof(*s));
		void *ctx;

		if (!s)
			abort();
		s->tp = tp;
		s->refs = 1;
		s->open = true;
		pthread_mutex_lock(&mem_lock);
		if (!c->open) {
			pthread_mutex_unlock(&mem_lock);
			free(s);
			break;
		}
		s->peer = c;
		c->peer = s;
		s->up = true;
		pthread_mutex_unlock(&mem_lock);

		ctx = tp->ev.accepted(tp->ev_ctx, s);
		pthread_mutex_lock(&mem_lock);
		if (!ctx) {
			struct mem_ev *f = ev_new(EV_CONNFAIL, c);

			f->status = -ECONNREFUSED;
			c->peer = NULL;
			s->peer = NULL;
			s->open = false;
			conn_put(s);
			post(c->tp, f);
		} else {
			s->ctx = ctx;
			if (s->peer)
				post(c->tp, ev_new(EV_CONNECTED, c));
		}
		pthread_mutex_unlock(&mem_lock);
		break;
	}
	case EV_CONNECTED:
		pthread_mutex_lock(&mem_lock);
		c->up = c->peer != NULL;
		pthread_mutex_unlock(&mem_lock);
		if (!open)
			break;
		if (c->up) {
			tp->ev.connected(tp->ev_ctx, c->ctx, 0);
		} else {
			tp->ev.connected(tp->ev_ctx, c->ctx, -ECONNRESET);
		}
		break;
	case EV_CONNFAIL:
		if (open)
			tp->ev.connected(tp->ev_ctx, c->ctx, e->status);
		break;
	case EV_MSG:
		if (open && c->up) {
			/* Lend the buffer; the core gives it back with recv_release. */
			struct mem_buf *b = e->buf;

			e->buf = NULL;
			tp->ev.recv(tp->ev_ctx, c->ctx, b->data, e->len, b);
			break;
		}
		break;
	case EV_SEND_DONE:
		if (open)
			tp->ev.send_done(tp->ev_ctx, c->ctx, e->op_ctx, 0);
		break;
	case EV_CLOSED:
		if (open)
			tp->ev.closed(tp->ev_ctx, c->ctx, e->status);
		break;
	}
	pthread_mutex_lock(&mem_lock);
	conn_put(c);
	ev_free(e);
	pthread_mutex_unlock(&mem_lock);
}

static int mem_progress(void *arg)
{
	struct mem_tp *tp = arg;
	uint64_t v;
	int n = 0;

	/* Under the lock: a post right after must see the flag clear, and write again. */
	pthread_mutex_lock(&mem_lock);
	if (tp->signaled && read(tp->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_err("mem transport: eventfd read: %s", strerror(errno));
	tp->signaled = false;
	pthread_mutex_unlock(&mem_lock);
	for (;;) {
		struct mem_ev *e;

		pthread_mutex_lock(&mem_lock);
		e = tp->head;
		if (e) {
			tp->head = e->next;
			if (!tp->head)
				tp->tail = NULL;
		}
		pthread_mutex_unlock(&mem_lock);
		if (!e)
			break;
		deliver(tp, e);
		n++;
	}
	return n;
}

const struct rmr_transport_ops rmr_mem_transport_ops = {
	.size = sizeof(struct rmr_transport_ops),
	.name = "mem",
	.create = mem_create,
	.destroy = mem_destroy,
	.listen = mem_listen,
	.connect = mem_connect,
	.send = mem_send,
	.recv_release = mem_recv_release,
	.close = mem_close,
	.wait_fd = mem_wait_fd,
	.trywait = mem_trywait,
	.progress = mem_progress,
};
