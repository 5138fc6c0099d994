/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Bundles (tcp): the small messages of one loop turn to one peer go as one
 * provider message.
 *
 * Why: on tcp every fi_sendmsg is a sendmsg(2), and on loopback the sender's
 * call also runs the receiver's TCP input. nbd-brmr's event loop spent 69 %
 * of its time there at 4k random writes, QD32: two sends per request (one
 * per member), and each member one per answer (docs/performance.md). A
 * loop turn handles several requests, so their messages to one peer can
 * share a system call on both ends.
 *
 * Sender: fab_send keeps a small message (1 to FAB_BUNDLE_MSG_MAX bytes) of
 * an up connection on the connection's deferred list instead of posting it.
 * The list goes out after each batch of the connection's completions, at
 * the end of each progress call and before the loop sleeps
 * (fab_bundle_flush_all), before any larger message (order is kept) and
 * before close(): one message is posted as it is; several are copied into
 * a bundle buffer, each as [u32 length][u32 0][bytes, padded to 8], posted
 * with FAB_BUNDLE_DATA as remote CQ data. Their send_done upcalls come, in
 * order, when the bundle completes. A bundle is at most FAB_BUNDLE_BYTES
 * and at most the peer's max_msg.
 *
 * Receiver: a bundle arrives in a posted receive buffer. The core may use
 * the whole max_msg of a lent buffer (a member reads a READ's data into
 * it), so each message is copied into a spare buffer of its own and lent
 * from there; the bundle's buffer is posted again once all are out. The
 * core holds at most rx_depth buffers of a connection at once, spares and
 * posted ones together (fab_conn_may_lend), as without bundles: beyond
 * that the split waits for a release, the bundle keeps its posted buffer
 * and what arrives behind it waits too, so a peer that sends faster than
 * the core releases meets the same back-pressure as before. Spares are
 * allocated when first needed and kept until the connection goes.
 *
 * Who sends bundles: each end of a tcp connection tells the other in the
 * connection data (fi_connect/fi_accept) that it reads them, and its
 * max_msg. A peer that says nothing (an older librmr) gets none. shm uses
 * remote CQ data for its handshake and verbs has no system call to save:
 * neither bundles.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "fabric_common.h"
#include "log.h"

#define FAB_SUB_HDR 8u
#define FAB_HELLO_MAGIC "RMRf"
#define FAB_HELLO_VERSION 1
#define FAB_HELLO_BUNDLES 0x1 /* this end reads bundles */

static size_t fab_sub_size(size_t len)
{
	return FAB_SUB_HDR + ((len + 7u) & ~(size_t)7u);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* --- connection data --------------------------------------------------------- */

/* "RMRf", version, flags, 2 bytes zero, max_msg (le32). */
void fab_hello_encode(const struct fab_tp *tp, uint8_t out[FAB_HELLO_LEN])
{
	memcpy(out, FAB_HELLO_MAGIC, 4);
	out[4] = FAB_HELLO_VERSION;
	out[5] = FAB_HELLO_BUNDLES;
	out[6] = out[7] = 0;
	put_le32(out + 8, (uint32_t)RMR_MIN(tp->params.max_msg, (size_t)UINT32_MAX));
}

void fab_hello_apply(struct fab_conn *c, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t peer_max;

	c->bundle_max = 0;
	if (!p || len < FAB_HELLO_LEN || memcmp(p, FAB_HELLO_MAGIC, 4) ||
	    p[4] != FAB_HELLO_VERSION || !(p[5] & FAB_HELLO_BUNDLES))
		return;
	if (strcmp(c->tp->prov, "tcp"))
		return;
	peer_max = get_le32(p + 8);
	c->bundle_max = RMR_MIN(RMR_MIN(peer_max, (size_t)FAB_BUNDLE_BYTES), c->tp->params.max_msg);
	/* Two of the largest must fit, or bundling is pointless. */
	if (c->bundle_max < 2 * fab_sub_size(FAB_BUNDLE_MSG_MAX))
		c->bundle_max = 0;
	log_debug("%s: conn %u: bundles %s (peer max_msg %zu)", c->tp->name, c->id,
		  c->bundle_max ? "on" : "off", peer_max);
}

/* --- sender -------------------------------------------------------------------- */

bool fab_bundle_defer(struct fab_conn *c, struct fab_tx *tx, size_t len)
{
	size_t need = fab_sub_size(len);

	/* A bundle frames no empty message (its length 0 is malformed). */
	if (!c->bundle_max || c->state != FAB_CONN_UP || !len || len > FAB_BUNDLE_MSG_MAX ||
	    tx->bounced)
		return false;
	if (c->defer_bytes + need > c->bundle_max)
		fab_bundle_flush(c);
	if (c->state != FAB_CONN_UP)
		return false;
	tx->state = FAB_TX_DEFERRED;
	tx->next = NULL;
	if (c->defer_tail)
		c->defer_tail->next = tx;
	else
		c->defer_head = tx;
	c->defer_tail = tx;
	c->ndefer++;
	c->defer_bytes += need;
	c->tp->defer_owed = true;
	return true;
}

static struct fab_bundle *fab_bundle_get(struct fab_conn *c)
{
	struct fab_bundle *b = c->bundle_free;

	if (!b)
		return NULL;
	if (!b->buf) {
		b->buf = malloc(FAB_BUNDLE_BYTES);
		if (!b->buf)
			return NULL;
	}
	c->bundle_free = b->next;
	b->next = NULL;
	return b;
}

static void fab_bundle_put(struct fab_conn *c, struct fab_bundle *b)
{
	b->head = NULL;
	b->len = 0;
	b->next = c->bundle_free;
	c->bundle_free = b;
}

/* Copy the messages of @p list into @p b, which then owns them. */
static void fab_bundle_fill(struct fab_bundle *b, struct fab_tx *list)
{
	uint8_t *p = (uint8_t *)b->buf;
	struct fab_tx *tx;

	b->head = list;
	for (tx = list; tx; tx = tx->next) {
		size_t len = 0;
		int i;

		for (i = 0; i < tx->iovcnt; i++) {
			memcpy(p + FAB_SUB_HDR + len, tx->iov[i].iov_base, tx->iov[i].iov_len);
			len += tx->iov[i].iov_len;
		}
		put_le32(p, (uint32_t)len);
		put_le32(p + 4, 0);
		memset(p + FAB_SUB_HDR + len, 0, fab_sub_size(len) - FAB_SUB_HDR - len);
		p += fab_sub_size(len);
		tx->state = FAB_TX_BUNDLED;
	}
	b->len = (size_t)(p - (uint8_t *)b->buf);
}

static int fab_bundle_post(struct fab_conn *c, struct fab_bundle *b)
{
	struct iovec iov = { b->buf, b->len };
	struct fi_msg msg = {
		.msg_iov = &iov,
		.iov_count = 1,
		.addr = c->peer_addr,
		.context = &b->op.ctx,
		.data = FAB_BUNDLE_DATA,
	};

	return fi_sendmsg(c->ep, &msg, FI_COMPLETION | FI_REMOTE_CQ_DATA);
}

void fab_bundle_flush(struct fab_conn *c)
{
	struct fab_tx *list = c->defer_head, *tx, *next;
	struct fab_bundle *b = NULL;
	unsigned n = c->ndefer;
	int ret;

	if (!list)
		return;
	c->defer_head = c->defer_tail = NULL;
	c->ndefer = 0;
	c->defer_bytes = 0;
	/* Alone, behind queued sends or without a free bundle: one by one. */
	if (n > 1 && c->state == FAB_CONN_UP && !c->pend_head)
		b = fab_bundle_get(c);
	if (b) {
		fab_bundle_fill(b, list);
		ret = fab_bundle_post(c, b);
		if (!ret) {
			c->tx_posted++;
			c->tp->stats.bundles_sent++;
			c->tp->stats.bundled_msgs += n;
			return;
		}
		fab_bundle_put(c, b);
		if (ret != -FI_EAGAIN)
			fab_conn_fail(c, fab_errno(ret), "fi_sendmsg of a bundle failed");
		/* Pushed back: they wait in the queue, each on its own. */
	}
	for (tx = list; tx; tx = next) {
		next = tx->next;
		tx->next = NULL;
		fab_conn_post_or_queue(c, tx);
	}
}

void fab_bundle_flush_all(struct fab_tp *tp)
{
	struct fab_conn *c;

	if (!tp->defer_owed)
		return;
	tp->defer_owed = false;
	for (c = tp->conns; c; c = c->next)
		if (c->defer_head && c->state != FAB_CONN_CLOSED)
			fab_bundle_flush(c);
}

/* The bundle completed (@p status 0) or failed: its messages' send_done, in order. */
void fab_bundle_done(struct fab_conn *c, struct fab_bundle *b, int status)
{
	struct fab_tp *tp = c->tp;
	struct fab_tx *tx = b->head, *next;

	c->tx_posted--;
	fab_bundle_put(c, b);
	for (; tx; tx = next) {
		enum fab_tx_state was = tx->state;
		void *op_ctx = tx->op_ctx;

		next = tx->next;
		tx->state = FAB_TX_FREE;
		tx->next = c->tx_free;
		c->tx_free = tx;
		/* An abandoned one was already failed towards the core. */
		if (was != FAB_TX_BUNDLED || c->state == FAB_CONN_CLOSED)
			continue;
		tp->events++;
		tp->ev.send_done(tp->ev_ctx, c->ctx, op_ctx, status);
	}
}

/* --- receiver ------------------------------------------------------------------ */

/*
 * Whether the core may get one more buffer: posted buffers it holds and
 * spares together stay within rx_depth, as without bundles. A bundle
 * being split holds a posted buffer that is not lent, so one always fits
 * unless the core holds all the others.
 */
static bool fab_spare_allowed(const struct fab_conn *c)
{
	return fab_conn_may_lend(c) && !c->spare_nomem;
}

static struct fab_rx *fab_spare_get(struct fab_conn *c)
{
	struct fab_rx *s = c->spare_free;

	if (!fab_spare_allowed(c))
		return NULL;
	if (s) {
		c->spare_free = s->next;
		return s;
	}
	if (!c->spares) {
		c->spares = calloc(c->tp->params.rx_depth, sizeof(*c->spares));
		if (!c->spares)
			goto nomem;
	}
	if (c->nspares == c->tp->params.rx_depth)
		return NULL;
	s = &c->spares[c->nspares];
	s->buf = malloc(c->tp->params.max_msg);
	if (!s->buf)
		goto nomem;
	c->nspares++;
	s->op.conn = c;
	s->op.kind = FAB_OP_RX;
	s->spare = true;
	return s;
nomem:
	c->spare_nomem = true; /* until a buffer comes back: no retry every turn */
	return NULL;
}

void fab_bundle_spare_release(struct fab_conn *c, struct fab_rx *rx)
{
	rx->state = FAB_RX_IDLE;
	rx->next = c->spare_free;
	c->spare_free = rx;
	c->spares_lent--; /* a split waiting for it resumes in progress (fab_bundle_split_owed) */
	c->spare_nomem = false;
}

int rmr_fabric_bundle_next(const void *buf, size_t len, size_t *off, size_t max_msg,
			   const void **msg, size_t *msg_len)
{
	const uint8_t *p;
	size_t left;
	uint32_t n;

	if (*off > len)
		return -EPROTO;
	p = (const uint8_t *)buf + *off;
	left = len - *off;
	if (!left)
		return 0;
	if (left < FAB_SUB_HDR)
		return -EPROTO;
	n = get_le32(p);
	if (!n || n > max_msg || get_le32(p + 4) || fab_sub_size(n) > left)
		return -EPROTO;
	*msg = p + FAB_SUB_HDR;
	*msg_len = n;
	*off += fab_sub_size(n);
	return 1;
}

void fab_bundle_split(struct fab_conn *c, struct fab_rx *rx, size_t len)
{
	rx->state = FAB_RX_SPLIT;
	c->split = rx;
	c->split_off = 0;
	c->split_len = len;
	c->tp->stats.bundles_received++;
	if (len < FAB_SUB_HDR) {
		c->split = NULL;
		rx->state = FAB_RX_IDLE;
		fab_conn_fail(c, -EPROTO, "empty bundle");
		return;
	}
	fab_bundle_split_resume(c);
}

bool fab_bundle_split_owed(const struct fab_conn *c)
{
	return c->split && c->state == FAB_CONN_UP && fab_spare_allowed(c);
}

void fab_bundle_split_resume(struct fab_conn *c)
{
	struct fab_tp *tp = c->tp;

	while (c->split && c->state == FAB_CONN_UP) {
		struct fab_rx *rx = c->split, *s;
		size_t off = c->split_off, len = 0;
		const void *msg = NULL;
		int ret = rmr_fabric_bundle_next(rx->buf, c->split_len, &off, tp->params.max_msg,
						 &msg, &len);

		if (ret <= 0) {
			c->split = NULL;
			if (!ret) {
				fab_rx_done(c, rx);
				return;
			}
			rx->state = FAB_RX_IDLE;
			fab_conn_fail(c, ret, "malformed bundle");
			return;
		}
		s = fab_spare_get(c);
		if (!s) {
			if (!c->spares_lent && !c->rx_lent)
				fab_conn_fail(c, -ENOMEM, "no memory for a bundle's messages");
			return; /* the next release resumes it */
		}
		memcpy(s->buf, msg, len);
		c->split_off = off;
		s->state = FAB_RX_LENT;
		c->spares_lent++;
		tp->events++;
		tp->ev.recv(tp->ev_ctx, c->ctx, s->buf, len, s);
	}
	/* Not up any more: what was not lent is dropped, as unread receives are. */
	if (c->split) {
		c->split->state = FAB_RX_IDLE;
		c->split = NULL;
	}
}

void fab_bundle_free(struct fab_conn *c)
{
	unsigned i;

	for (i = 0; i < FAB_BUNDLES; i++)
		free(c->bundles[i].buf);
	for (i = 0; c->spares && i < c->nspares; i++)
		free(c->spares[i].buf);
	free(c->spares);
}

void rmr_fabric_stats(void *arg, struct rmr_fabric_stats *out)
{
	const struct fab_tp *tp = arg;

	*out = tp->stats;
}
