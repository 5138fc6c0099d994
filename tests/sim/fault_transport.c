/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fault transport (see fault_transport.h): every connection of the mem
 * transport gets a wrapper that holds what arrives on it in a queue, in
 * order, until its delivery time, and decides per message whether the
 * network fails there.
 */
#include "fault_transport.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"
#include "transports.h"

static const struct rmr_transport_ops *const inner = &rmr_mem_transport_ops;

static struct fault_cfg cfg;
static struct fault_stats stats;

/* Something that arrived and waits for its time: a message, or the close. */
struct held {
	struct held *next;
	uint64_t due;
	void *buf;     /* NULL: the connection closed with @reason */
	size_t len;
	void *rx;
	int reason;
};

struct fault_tp {
	void *in;                        /* the mem transport instance */
	struct rmr_transport_events ev;  /* the core's upcalls */
	void *ev_ctx;
	struct rmr_conn *conns;          /* every open wrapper */
};

struct rmr_conn {
	struct fault_tp *tp;
	struct rmr_conn *in;             /* the mem transport's connection */
	void *ctx;                       /* the core's context */
	struct rmr_conn *next;
	struct held *head, *tail;
	uint64_t last_due;               /* keeps the queue in order */
	bool broken;                     /* lost a message: deliver nothing more */
	bool deaf;                       /* ... not even the close (half-open) */
	bool closing;                    /* our own close is queued */
	bool busy;                       /* an upcall for it is running */
	bool gone;                       /* the core closed it during that upcall */
};

static bool chance(uint32_t ppm)
{
	return ppm && loop_random() % 1000000 < ppm;
}

/* --- the queue ------------------------------------------------------------------- */

static void hold(struct rmr_conn *c, void *buf, size_t len, void *rx, int reason, uint64_t delay)
{
	struct held *h = calloc(1, sizeof(*h));

	if (!h)
		abort(); /* test transport: out of memory is fatal */
	h->due = loop_clock_ns() + delay;
	if (h->due < c->last_due)
		h->due = c->last_due;
	c->last_due = h->due;
	h->buf = buf;
	h->len = len;
	h->rx = rx;
	h->reason = reason;
	if (c->tail)
		c->tail->next = h;
	else
		c->head = h;
	c->tail = h;
}

/* Throw away the messages still queued (the close, if queued, stays last). */
static void drop_held(struct rmr_conn *c)
{
	struct held **p = &c->head;

	c->tail = NULL;
	while (*p) {
		struct held *h = *p;

		if (h->buf) {
			*p = h->next;
			inner->recv_release(c->tp->in, c->in, h->rx);
			free(h);
		} else {
			c->tail = h;
			p = &h->next;
		}
	}
}

/* The network broke here: nothing more arrives; with @reset the core hears so. */
static void break_conn(struct rmr_conn *c, bool reset)
{
	c->broken = true;
	drop_held(c);
	if (reset && !c->closing) {
		c->closing = true;
		hold(c, NULL, 0, NULL, -ECONNRESET, 0);
	}
}

/* --- upcalls from the mem transport ------------------------------------------------ */

static void link_conn(struct fault_tp *tp, struct rmr_conn *c)
{
	c->next = tp->conns;
	tp->conns = c;
}

static void unlink_conn(struct rmr_conn *c)
{
	for (struct rmr_conn **p = &c->tp->conns; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			return;
		}
	}
}

static void *on_accepted(void *arg, struct rmr_conn *in)
{
	struct fault_tp *tp = arg;
	struct rmr_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->tp = tp;
	c->in = in;
	link_conn(tp, c);
	c->ctx = tp->ev.accepted(tp->ev_ctx, c);
	if (!c->ctx) {
		unlink_conn(c);
		free(c);
		return NULL;
	}
	return c;
}

static void on_connected(void *arg, void *conn_ctx, int status)
{
	struct fault_tp *tp = arg;
	struct rmr_conn *c = conn_ctx;

	if (status == 0 && chance(cfg.refuse_ppm)) {
		stats.refused++;
		break_conn(c, true);
	}
	tp->ev.connected(tp->ev_ctx, c->ctx, status);
}

static void on_recv(void *arg, void *conn_ctx, void *buf, size_t len, void *rx)
{
	struct fault_tp *tp = arg;
	struct rmr_conn *c = conn_ctx;
	uint64_t delay = 0;
	bool reset;

	if (c->broken) {
		inner->recv_release(tp->in, c->in, rx);
		return;
	}
	reset = chance(cfg.reset_ppm);
	if (reset || chance(cfg.deaf_ppm)) {
		inner->recv_release(tp->in, c->in, rx);
		if (reset) {
			stats.resets++;
		} else {
			stats.deaf++;
			c->deaf = true;
		}
		break_conn(c, reset);
		return;
	}
	if (cfg.delay_max_us) {
		delay = loop_random() % ((uint64_t)cfg.delay_max_us * 1000 + 1);
		stats.delayed += delay > 0;
	}
	hold(c, buf, len, rx, 0, delay);
	if (chance(cfg.reply_lost_ppm)) {
		stats.replies_lost++;
		c->broken = true; /* the reply cannot leave (send refuses) */
		c->closing = true;
		hold(c, NULL, 0, NULL, -ECONNRESET, 0);
	}
}

static void on_send_done(void *arg, void *conn_ctx, void *op_ctx, int status)
{
	struct fault_tp *tp = arg;
	struct rmr_conn *c = conn_ctx;

	tp->ev.send_done(tp->ev_ctx, c->ctx, op_ctx, status);
}

static void on_closed(void *arg, void *conn_ctx, int reason)
{
	struct rmr_conn *c = conn_ctx;

	(void)arg;
	/* Data sent before a close arrives before it. */
	if (!c->closing && !c->deaf) {
		c->closing = true;
		hold(c, NULL, 0, NULL, reason, 0);
	}
}

static const struct rmr_transport_events inner_events = {
	.size = sizeof(struct rmr_transport_events),
	.accepted = on_accepted,
	.connected = on_connected,
	.recv = on_recv,
	.send_done = on_send_done,
	.closed = on_closed,
};

/* --- the ops the core calls ----------------------------------------------------------- */

static int fault_create(const struct rmr_transport_params *params,
			const struct rmr_transport_events *ev, void *ev_ctx, void **out)
{
	struct fault_tp *tp = calloc(1, sizeof(*tp));
	int ret;

	if (!tp)
		return -ENOMEM;
	tp->ev = *ev;
	tp->ev_ctx = ev_ctx;
	ret = inner->create(params, &inner_events, tp, &tp->in);
	if (ret) {
		free(tp);
		return ret;
	}
	*out = tp;
	return 0;
}

static void fault_destroy(void *arg)
{
	struct fault_tp *tp = arg;

	inner->destroy(tp->in);
	free(tp);
}

static int fault_listen(void *arg, const char *addr)
{
	return inner->listen(((struct fault_tp *)arg)->in, addr);
}

static int fault_connect(void *arg, const char *addr, void *conn_ctx, struct rmr_conn **out)
{
	struct fault_tp *tp = arg;
	struct rmr_conn *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	c->tp = tp;
	c->ctx = conn_ctx;
	ret = inner->connect(tp->in, addr, c, &c->in);
	if (ret) {
		free(c);
		return ret;
	}
	link_conn(tp, c);
	*out = c;
	return 0;
}

static int fault_send(void *arg, struct rmr_conn *c, const struct iovec *iov, int iovcnt,
		      void *op_ctx)
{
	/* A reset connection takes nothing more; a deaf end still talks. */
	if (c->broken && !c->deaf)
		return -ENOTCONN;
	return inner->send(((struct fault_tp *)arg)->in, c->in, iov, iovcnt, op_ctx);
}

static void fault_recv_release(void *arg, struct rmr_conn *c, void *rx)
{
	inner->recv_release(((struct fault_tp *)arg)->in, c->in, rx);
}

static void conn_free(struct rmr_conn *c)
{
	while (c->head) {
		struct held *h = c->head;

		c->head = h->next;
		if (h->buf)
			inner->recv_release(c->tp->in, c->in, h->rx);
		free(h);
	}
	inner->close(c->tp->in, c->in);
	unlink_conn(c);
	free(c);
}

static void fault_close(void *arg, struct rmr_conn *c)
{
	(void)arg;
	if (c->busy)
		c->gone = true; /* freed when its upcall returns */
	else
		conn_free(c);
}

static int fault_wait_fd(void *arg)
{
	return inner->wait_fd(((struct fault_tp *)arg)->in);
}

static int fault_trywait(void *arg)
{
	struct fault_tp *tp = arg;

	for (struct rmr_conn *c = tp->conns; c; c = c->next)
		if (c->head)
			return -EAGAIN;
	return inner->trywait(tp->in);
}

/* Deliver what is due on @c, oldest first; the core may close @c meanwhile. */
static int deliver_due(struct fault_tp *tp, struct rmr_conn *c, uint64_t now)
{
	int n = 0;

	c->busy = true;
	while (c->head && c->head->due <= now && !c->gone) {
		struct held *h = c->head;

		c->head = h->next;
		if (!c->head)
			c->tail = NULL;
		if (h->buf) {
			stats.delivered++;
			tp->ev.recv(tp->ev_ctx, c->ctx, h->buf, h->len, h->rx);
		} else {
			tp->ev.closed(tp->ev_ctx, c->ctx, h->reason);
		}
		free(h);
		n++;
	}
	c->busy = false;
	if (c->gone)
		conn_free(c);
	return n;
}

static int fault_progress(void *arg)
{
	struct fault_tp *tp = arg;
	uint64_t now = loop_clock_ns();
	int n = inner->progress(tp->in);
	struct rmr_conn *c = tp->conns;

	while (c) {
		/* Upcalls may close any connection: restart after one that did work. */
		int k = c->head && c->head->due <= now ? deliver_due(tp, c, now) : 0;

		n += k;
		c = k ? tp->conns : c->next;
	}
	return n;
}

const struct rmr_transport_ops fault_transport_ops = {
	.size = sizeof(struct rmr_transport_ops),
	.name = "fault",
	.create = fault_create,
	.destroy = fault_destroy,
	.listen = fault_listen,
	.connect = fault_connect,
	.send = fault_send,
	.recv_release = fault_recv_release,
	.close = fault_close,
	.wait_fd = fault_wait_fd,
	.trywait = fault_trywait,
	.progress = fault_progress,
};

void fault_transport_register(void)
{
	int ret = rmr_transport_register(&fault_transport_ops);

	if (ret && ret != -EEXIST)
		abort();
}

void fault_set(const struct fault_cfg *c)
{
	cfg = *c;
}

struct fault_stats fault_get_stats(void)
{
	return stats;
}

void fault_reset_stats(void)
{
	memset(&stats, 0, sizeof(stats));
}
