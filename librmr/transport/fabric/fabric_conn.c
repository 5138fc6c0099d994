/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Connections of the libfabric transport, whatever the provider: their
 * preallocated buffers and send slots, the send and receive data path,
 * completion handling, and the failure path that owes the core its
 * send_done/closed upcalls. See fabric_common.h for the design.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compiler.h"
#include "fabric_common.h"
#include "log.h"

/* --- connections: allocation and buffers ---------------------------------- */

struct fab_conn *fab_conn_alloc(struct fab_tp *tp, struct fab_domain *dom, const char *peer,
				bool outgoing)
{
	struct fab_conn *c = calloc(1, sizeof(*c));

	if (!c) {
		log_err("%s: out of memory for a connection to %s", tp->name, peer);
		return NULL;
	}
	c->tp = tp;
	c->dom = dom;
	c->id = ++tp->next_conn_id;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	c->outgoing = outgoing;
	c->state = outgoing ? FAB_CONN_CONNECTING : FAB_CONN_ACCEPTING;
	c->peer_addr = FI_ADDR_UNSPEC;
	c->listen_addr = FI_ADDR_UNSPEC;
	c->cq_fd = -1;
	c->eq_fd = -1;
	c->peer_pidfd = -1;
	return c;
}

void fab_conn_watch_peer(struct fab_conn *c, pid_t pid)
{
	if (c->peer_pidfd >= 0 || pid <= 0)
		return;
	c->peer_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (c->peer_pidfd < 0)
		log_warn("%s: conn %u: cannot watch peer process %d: %s", c->tp->name, c->id,
			 (int)pid, strerror(errno));
}

bool fab_conn_peer_dead(const struct fab_conn *c)
{
	struct pollfd p = { .fd = c->peer_pidfd, .events = POLLIN };

	/* A pidfd turns readable when its process exits. */
	return c->peer_pidfd >= 0 && poll(&p, 1, 0) > 0;
}

/*
 * Register @p len bytes at @p buf for @p access when the provider needs local
 * registration (FI_MR_LOCAL: verbs). FI_MR_ALLOCATED asks that the pages be
 * backed, which the caller did by touching them.
 */
static int fab_mr_reg(struct fab_conn *c, void *buf, size_t len, uint64_t access,
		      struct fid_mr **mr, void **desc)
{
	struct fab_domain *d = c->dom;
	/* Without FI_MR_PROV_KEY the key is ours and must be unique per domain. */
	uint64_t key = (d->mr_mode & FI_MR_PROV_KEY) ? 0 : d->next_key++;
	int ret;

	ret = fi_mr_reg(d->domain, buf, len, access, 0, key, 0, mr, NULL);
	if (ret) {
		log_err("%s: conn %u: fi_mr_reg(%zu bytes): %s", c->tp->name, c->id, len,
			fab_strerror(ret));
		*mr = NULL;
		return fab_errno(ret);
	}
	if (d->mr_mode & FI_MR_ENDPOINT) {
		ret = fi_mr_bind(*mr, &c->ep->fid, 0);
		if (!ret)
			ret = fi_mr_enable(*mr);
		if (ret) {
			log_err("%s: conn %u: binding a memory region to the endpoint: %s",
				c->tp->name, c->id, fab_strerror(ret));
			fab_close_fid(c->tp, &(*mr)->fid, "memory region");
			*mr = NULL;
			return fab_errno(ret);
		}
	}
	*desc = fi_mr_desc(*mr);
	return 0;
}

static void *fab_page_alloc(size_t len)
{
	void *p = NULL;

	/* Page aligned: verbs registers whole pages (fork safety). */
	if (posix_memalign(&p, 4096, len ? len : 1))
		return NULL;
	return p;
}

/*
 * Allocate the receive buffers and send slots of @p c; once its endpoint
 * exists, register them if the provider wants registered local memory
 * (FI_MR_LOCAL: verbs). Called before the endpoint exists (so that the core
 * can queue sends from accepted()) and again after. Bounce buffers exist
 * only with FI_MR_LOCAL or when the provider takes fewer iov pieces than we
 * accept.
 */
int fab_conn_setup_buffers(struct fab_conn *c)
{
	struct fab_tp *tp = c->tp;
	size_t max_msg = tp->params.max_msg;
	unsigned nrx = tp->params.rx_depth, ntx = tp->params.tx_depth;
	bool mr_local = c->dom->mr_mode & FI_MR_LOCAL;
	unsigned i;
	int ret;

	if (!c->rx) {
		c->rx = calloc(nrx, sizeof(*c->rx));
		c->tx = calloc(ntx, sizeof(*c->tx));
		c->rx_mem = fab_page_alloc(nrx * max_msg);
		if (!c->rx || !c->tx || !c->rx_mem)
			goto nomem;
		if (mr_local || c->tx_iov_limit < FAB_MAX_IOV) {
			c->tx_mem = fab_page_alloc(ntx * max_msg);
			if (!c->tx_mem)
				goto nomem;
		}
		for (i = 0; i < nrx; i++) {
			c->rx[i].op.conn = c;
			c->rx[i].op.kind = FAB_OP_RX;
			c->rx[i].buf = c->rx_mem + (size_t)i * max_msg;
			c->rx[i].state = FAB_RX_IDLE;
		}
		for (i = ntx; i-- > 0;) {
			struct fab_tx *tx = &c->tx[i];

			tx->op.conn = c;
			tx->op.kind = FAB_OP_TX;
			tx->state = FAB_TX_FREE;
			tx->bounce = c->tx_mem ? c->tx_mem + (size_t)i * max_msg : NULL;
			tx->next = c->tx_free;
			c->tx_free = tx;
		}
		for (i = FAB_BUNDLES; i-- > 0;) {
			struct fab_bundle *b = &c->bundles[i];

			b->op.conn = c;
			b->op.kind = FAB_OP_BUNDLE;
			b->next = c->bundle_free;
			c->bundle_free = b;
		}
	}
	if (mr_local && c->ep && !c->rx_mr) {
		/* FI_MR_ALLOCATED: register only pages that are backed. */
		memset(c->rx_mem, 0, nrx * max_msg);
		memset(c->tx_mem, 0, ntx * max_msg);
		ret = fab_mr_reg(c, c->rx_mem, nrx * max_msg, FI_RECV, &c->rx_mr, &c->rx_desc);
		if (ret)
			return ret;
		ret = fab_mr_reg(c, c->tx_mem, ntx * max_msg, FI_SEND, &c->tx_mr, &c->tx_desc);
		if (ret)
			return ret;
	}
	return 0;
nomem:
	log_err("%s: conn %u: out of memory for %u x %zu byte buffers", tp->name, c->id,
		nrx + ntx, max_msg);
	return -ENOMEM;
}

int fab_rx_post(struct fab_conn *c, struct fab_rx *rx)
{
	int ret = fi_recv(c->ep, rx->buf, c->tp->params.max_msg, c->rx_desc, FI_ADDR_UNSPEC,
			  &rx->op.ctx);

	if (!ret) {
		rx->state = FAB_RX_POSTED;
		rx->repost = false;
	}
	return ret;
}

int fab_conn_post_receives(struct fab_conn *c)
{
	unsigned i;
	int ret;

	for (i = 0; i < c->tp->params.rx_depth; i++) {
		ret = fab_rx_post(c, &c->rx[i]);
		if (ret) {
			log_err("%s: conn %u: posting receive %u of %u: %s", c->tp->name, c->id,
				i + 1, c->tp->params.rx_depth, fab_strerror(ret));
			return ret == -FI_EAGAIN ? -ENOBUFS : fab_errno(ret);
		}
	}
	return 0;
}

void fab_conn_link(struct fab_conn *c)
{
	/* At the head: a progress pass in flight simply does not visit it yet. */
	c->next = c->tp->conns;
	c->tp->conns = c;
}

/* Close every libfabric object of @p c; the memory stays until fab_conn_free. */
void fab_conn_teardown(struct fab_conn *c)
{
	struct fab_tp *tp = c->tp;

	fab_epoll_del(tp, &c->cq_fd);
	fab_epoll_del(tp, &c->eq_fd);
	/* The endpoint first: then the provider no longer touches our buffers
	 * nor the contexts of abandoned sends. */
	if (c->ep)
		fab_close_fid(tp, &c->ep->fid, "endpoint");
	c->ep = NULL;
	if (c->rx_mr)
		fab_close_fid(tp, &c->rx_mr->fid, "receive memory region");
	if (c->tx_mr)
		fab_close_fid(tp, &c->tx_mr->fid, "send memory region");
	c->rx_mr = c->tx_mr = NULL;
	if (c->cq)
		fab_close_fid(tp, &c->cq->fid, "completion queue");
	if (c->eq)
		fab_close_fid(tp, &c->eq->fid, "event queue");
	if (c->av)
		fab_close_fid(tp, &c->av->fid, "address vector");
	c->cq = NULL;
	c->eq = NULL;
	c->av = NULL;
	fab_domain_put(tp, c->dom);
	c->dom = NULL;
}

void fab_conn_free(struct fab_conn *c)
{
	if (c->peer_pidfd >= 0)
		close(c->peer_pidfd);
	fab_bundle_free(c);
	free(c->rx_mem);
	free(c->tx_mem);
	free(c->rx);
	free(c->tx);
	free(c);
}

/* Teardown and free a connection that was never linked or announced. */
void fab_conn_destroy(struct fab_conn *c)
{
	fab_conn_teardown(c);
	fab_conn_free(c);
}

void fab_conn_unlink(struct fab_conn *c)
{
	struct fab_conn **pp;

	for (pp = &c->tp->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return;
		}
	}
}

/*
 * Drop a linked connection the core never heard of (it refused it): no
 * upcall, and no close() will come.
 */
void fab_conn_discard(struct fab_conn *c)
{
	fab_conn_set_state(c, FAB_CONN_CLOSED, "discarded");
	fab_conn_teardown(c);
	if (c->tp->in_progress) {
		c->tp->reap_owed = true;
	} else {
		fab_conn_unlink(c);
		fab_conn_free(c);
	}
}

/* --- connections: failure, upcalls --------------------------------------- */

/*
 * Note that @p c failed. The upcalls it owes (send_done for every send in
 * flight, then connected or closed) are made by progress, because this may
 * run inside send() or recv_release().
 */
void fab_conn_fail(struct fab_conn *c, int reason, const char *why)
{
	if (c->state == FAB_CONN_FAILED || c->state == FAB_CONN_DEAD ||
	    c->state == FAB_CONN_CLOSED)
		return;
	/* send() returns the reason from now on: never "try again", never 0. */
	if (reason >= 0 || reason == -EAGAIN)
		reason = -EIO;
	if (reason == -ECONNRESET || reason == -ECONNREFUSED)
		log_info("%s: conn %u (%s): %s: %s", c->tp->name, c->id, c->peer, why,
			 strerror(-reason));
	else
		log_warn("%s: conn %u (%s): %s: %s", c->tp->name, c->id, c->peer, why,
			 strerror(-reason));
	c->fail_reason = reason;
	c->announce_closed = c->state != FAB_CONN_CONNECTING;
	fab_conn_set_state(c, FAB_CONN_FAILED, why);
}

/* Make the upcalls a failed connection owes. Returns false if it got closed. */
bool fab_conn_finish_failure(struct fab_conn *c)
{
	struct fab_tp *tp = c->tp;
	struct fab_rx *rx;
	unsigned i;

	/* Receives that never reached the core are dropped. */
	while ((rx = c->held_head)) {
		c->held_head = rx->next;
		rx->state = FAB_RX_IDLE;
	}
	c->held_tail = NULL;
	if (c->split) {
		c->split->state = FAB_RX_IDLE;
		c->split = NULL;
	}
	/* Sends waiting for the end of the turn are newer than the queued ones. */
	if (c->defer_head) {
		if (c->pend_tail)
			c->pend_tail->next = c->defer_head;
		else
			c->pend_head = c->defer_head;
		c->pend_tail = c->defer_tail;
		c->defer_head = c->defer_tail = NULL;
		c->ndefer = 0;
		c->defer_bytes = 0;
	}
	/* Queued sends never reached the provider: fail them, oldest first. */
	while (c->pend_head) {
		struct fab_tx *tx = c->pend_head;
		void *op_ctx = tx->op_ctx;

		c->pend_head = tx->next;
		if (!c->pend_head)
			c->pend_tail = NULL;
		tx->state = FAB_TX_FREE;
		tx->next = c->tx_free;
		c->tx_free = tx;
		tp->events++;
		tp->ev.send_done(tp->ev_ctx, c->ctx, op_ctx, c->fail_reason);
		if (c->state == FAB_CONN_CLOSED)
			return false;
	}
	/*
	 * Sends the provider still owns may never complete (a dead peer); the
	 * core hears now, and the slots stay allocated until the endpoint is
	 * closed.
	 */
	for (i = 0; c->tx && i < tp->params.tx_depth; i++) {
		struct fab_tx *tx = &c->tx[i];

		if (tx->state != FAB_TX_POSTED && tx->state != FAB_TX_BUNDLED)
			continue;
		tx->state = FAB_TX_ABANDONED;
		tp->events++;
		tp->ev.send_done(tp->ev_ctx, c->ctx, tx->op_ctx, c->fail_reason);
		if (c->state == FAB_CONN_CLOSED)
			return false;
	}
	fab_conn_set_state(c, FAB_CONN_DEAD, "failure reported");
	tp->events++;
	if (c->announce_closed)
		tp->ev.closed(tp->ev_ctx, c->ctx, c->fail_reason);
	else
		tp->ev.connected(tp->ev_ctx, c->ctx, c->fail_reason);
	return c->state != FAB_CONN_CLOSED;
}

static int fab_tx_post(struct fab_conn *c, struct fab_tx *tx)
{
	struct fi_msg msg = {
		.msg_iov = tx->iov,
		.desc = tx->bounced && c->tx_desc ? tx->desc : NULL,
		.iov_count = (size_t)tx->iovcnt,
		.addr = c->peer_addr,
		.context = &tx->op.ctx,
		.data = 0,
	};
	int ret;

	if (fab_conn_peer_dead(c))
		return -FI_ECONNRESET;
	/* Registered only once the endpoint existed, maybe after queueing. */
	tx->desc[0] = tx->bounced ? c->tx_desc : NULL;
	ret = fi_sendmsg(c->ep, &msg, FI_COMPLETION);
	if (!ret) {
		tx->state = FAB_TX_POSTED;
		c->tx_posted++;
		c->peer_tried = c->peer_reached = true;
	} else if (ret == -FI_EAGAIN) {
		c->peer_tried = true; /* shm: maybe a connection request pending */
	}
	return ret;
}

/* Hand queued sends to the provider, in order, until it pushes back. */
void fab_conn_flush_pending(struct fab_conn *c)
{
	while (c->pend_head && c->state == FAB_CONN_UP) {
		struct fab_tx *tx = c->pend_head;
		int ret = fab_tx_post(c, tx);

		if (ret == -FI_EAGAIN) {
			tx->state = FAB_TX_QUEUED;
			return;
		}
		if (ret) {
			tx->state = FAB_TX_QUEUED;
			fab_conn_fail(c, fab_errno(ret), "fi_sendmsg failed");
			return;
		}
		c->pend_head = tx->next;
		if (!c->pend_head)
			c->pend_tail = NULL;
		c->tp->events++;
	}
}

static void fab_conn_deliver(struct fab_conn *c, struct fab_rx *rx, size_t len)
{
	struct fab_tp *tp = c->tp;

	rx->state = FAB_RX_LENT;
	c->rx_lent++;
	tp->events++;
	tp->ev.recv(tp->ev_ctx, c->ctx, rx->buf, len, rx);
}

/*
 * The connection is up: tell the core if it asked for it, then deliver what
 * arrived early and send what it queued meanwhile.
 */
void fab_conn_up(struct fab_conn *c)
{
	struct fab_tp *tp = c->tp;

	fab_conn_set_state(c, FAB_CONN_UP, "connected");
	log_info("%s: conn %u (%s): connected", tp->name, c->id, c->peer);
	if (c->outgoing) {
		tp->events++;
		tp->ev.connected(tp->ev_ctx, c->ctx, 0);
		if (c->state != FAB_CONN_UP)
			return;
	}
	fab_conn_flush_pending(c);
	if (c->state == FAB_CONN_UP)
		fab_conn_resume_rx(c);
}

/*
 * Whether the core may be lent one more buffer of @p c: at most rx_depth
 * at once, posted buffers and a bundle's copies together, as many as it
 * could hold without bundles.
 */
bool fab_conn_may_lend(const struct fab_conn *c)
{
	return c->rx_lent + c->spares_lent < c->tp->params.rx_depth;
}

/* Go on lending what waits behind a bundle being split or for a release (up connections). */
void fab_conn_resume_rx(struct fab_conn *c)
{
	struct fab_rx *rx;

	if (c->split)
		fab_bundle_split_resume(c);
	while (c->state == FAB_CONN_UP && !c->split && (rx = c->held_head) &&
	       fab_conn_may_lend(c)) {
		c->held_head = rx->next;
		if (!c->held_head)
			c->held_tail = NULL;
		if (rx->bundle)
			fab_bundle_split(c, rx, rx->len);
		else
			fab_conn_deliver(c, rx, rx->len);
	}
}

static void fab_conn_hold(struct fab_conn *c, struct fab_rx *rx, size_t len, bool bundle)
{
	rx->state = FAB_RX_HELD;
	rx->len = len;
	rx->bundle = bundle;
	rx->next = NULL;
	if (c->held_tail)
		c->held_tail->next = rx;
	else
		c->held_head = rx;
	c->held_tail = rx;
}

static void fab_conn_handle_rx(struct fab_conn *c, struct fab_rx *rx, size_t len, uint64_t flags,
			       uint64_t data)
{
	bool bundle = false;

	rx->state = FAB_RX_IDLE;
	if (flags & FI_REMOTE_CQ_DATA) {
		if (c->tp->kind == FAB_KIND_SHM) {
			/* shm control message (handshake, goodbye), never data. */
			fab_shm_handle_ctl(c, rx, len, data);
			return;
		}
		if (data != FAB_BUNDLE_DATA) {
			fab_conn_fail(c, -EPROTO, "unknown remote CQ data");
			return;
		}
		bundle = true;
	}
	switch (c->state) {
	case FAB_CONN_UP:
		/* Behind a bundle being lent out, or the core holds rx_depth: wait. */
		if (c->split || c->held_head || !fab_conn_may_lend(c))
			fab_conn_hold(c, rx, len, bundle);
		else if (bundle)
			fab_bundle_split(c, rx, len);
		else
			fab_conn_deliver(c, rx, len);
		return;
	case FAB_CONN_CONNECTING:
	case FAB_CONN_ACCEPTING:
		/* The data overtook the connected event: keep it for fab_conn_up. */
		fab_conn_hold(c, rx, len, bundle);
		return;
	case FAB_CONN_FAILED:
	case FAB_CONN_DEAD:
	case FAB_CONN_CLOSED:
		return;
	}
}

static void fab_conn_handle_tx(struct fab_conn *c, struct fab_tx *tx)
{
	struct fab_tp *tp = c->tp;
	enum fab_tx_state was = tx->state;
	void *op_ctx = tx->op_ctx;

	c->tx_posted--;
	tx->state = FAB_TX_FREE;
	tx->next = c->tx_free;
	c->tx_free = tx;
	/* An abandoned send was already failed towards the core. */
	if (was == FAB_TX_POSTED) {
		tp->events++;
		tp->ev.send_done(tp->ev_ctx, c->ctx, op_ctx, 0);
	}
}

static void fab_conn_handle_cq_error(struct fab_conn *c)
{
	struct fi_cq_err_entry ee;
	struct fab_op *op;
	int ret, reason;

	memset(&ee, 0, sizeof(ee));
	ret = fi_cq_readerr(c->cq, &ee, 0);
	if (ret < 0) {
		if (ret != -FI_EAGAIN)
			fab_conn_fail(c, fab_errno(ret), "fi_cq_readerr failed");
		return;
	}
	c->tp->events++;
	op = ee.op_context;
	if (ee.err == FI_ETRUNC)
		reason = -EMSGSIZE;
	else if (ee.err == FI_ECANCELED)
		reason = -ECONNRESET; /* queues flushed: the connection went away */
	else
		reason = fab_errno(ee.err ? -ee.err : -FI_EIO);
	log_debug("%s: conn %u: completion error %d (%s), provider errno %d", c->tp->name, c->id,
		  ee.err, fi_strerror(ee.err), ee.prov_errno);
	if (!op) {
		fab_conn_fail(c, reason, "completion error");
		return;
	}
	if (op->kind == FAB_OP_BUNDLE) {
		fab_conn_fail(c, reason, ee.err == FI_ECANCELED ? "send flushed" : "send failed");
		fab_bundle_done(c, (struct fab_bundle *)op, c->fail_reason);
	} else if (op->kind == FAB_OP_RX) {
		struct fab_rx *rx = (struct fab_rx *)op;

		rx->state = FAB_RX_IDLE;
		fab_conn_fail(c, reason,
			      ee.err == FI_ETRUNC ? "message larger than max_msg"
			      : ee.err == FI_ECANCELED ? "receive flushed"
						       : "receive failed");
	} else {
		struct fab_tx *tx = (struct fab_tx *)op;
		enum fab_tx_state was = tx->state;
		struct fab_tp *tp = c->tp;

		fab_conn_fail(c, reason, ee.err == FI_ECANCELED ? "send flushed" : "send failed");
		c->tx_posted--;
		tx->state = FAB_TX_FREE;
		tx->next = c->tx_free;
		c->tx_free = tx;
		if (was == FAB_TX_POSTED) {
			tp->events++;
			tp->ev.send_done(tp->ev_ctx, c->ctx, tx->op_ctx, c->fail_reason);
		}
	}
}

/*
 * Read completions of @p c and make their upcalls. At most FAB_CQ_BUDGET
 * entries unless @p all, so one busy connection cannot starve the others.
 */
void fab_conn_handle_cq(struct fab_conn *c, bool all)
{
	struct fi_cq_data_entry e[FAB_CQ_BATCH];
	unsigned done = 0;

	while (c->state != FAB_CONN_CLOSED && (all || done < FAB_CQ_BUDGET)) {
		ssize_t n = fi_cq_read(c->cq, e, FAB_CQ_BATCH);
		ssize_t i;

		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			fab_conn_handle_cq_error(c);
			done++;
			continue;
		}
		if (n < 0) {
			fab_conn_fail(c, fab_errno((int)n), "fi_cq_read failed");
			return;
		}
		for (i = 0; i < n && c->state != FAB_CONN_CLOSED; i++) {
			struct fab_op *op = e[i].op_context;

			c->tp->events++;
			if (op->kind == FAB_OP_RX)
				fab_conn_handle_rx(c, (struct fab_rx *)op, e[i].len, e[i].flags,
						   e[i].data);
			else if (op->kind == FAB_OP_BUNDLE)
				fab_bundle_done(c, (struct fab_bundle *)op, 0);
			else
				fab_conn_handle_tx(c, (struct fab_tx *)op);
		}
		done += (unsigned)n;
		/*
		 * The answers this batch's upcalls sent on the connection leave
		 * now, not after the whole pass: a pass can be long (a member
		 * that writes each piece of a resync to its store), and the peer
		 * waits. Other connections' go at the end of the pass.
		 */
		if (c->state == FAB_CONN_UP)
			fab_bundle_flush(c);
	}
}

static void fab_conn_queue(struct fab_conn *c, struct fab_tx *tx);

int fab_send(void *arg, struct rmr_conn *conn, const struct iovec *iov, int iovcnt,
		    void *op_ctx)
{
	struct fab_tp *tp = arg;
	struct fab_conn *c = fab_conn_of(conn);
	struct fab_tx *tx;
	size_t total = 0;
	int i, ret;

	if (iovcnt < 1 || iovcnt > FAB_MAX_IOV) {
		log_err("%s: conn %u: send with %d pieces (1 to %d)", tp->name, c->id, iovcnt,
			FAB_MAX_IOV);
		return -EINVAL;
	}
	for (i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	if (total > tp->params.max_msg) {
		log_err("%s: conn %u: message of %zu bytes exceeds max_msg %zu", tp->name, c->id,
			total, tp->params.max_msg);
		return -EMSGSIZE;
	}
	switch (c->state) {
	case FAB_CONN_CONNECTING:
	case FAB_CONN_ACCEPTING:
	case FAB_CONN_UP:
		break;
	case FAB_CONN_FAILED:
	case FAB_CONN_DEAD:
		return c->fail_reason;
	case FAB_CONN_CLOSED:
		log_err("%s: conn %u: send after close", tp->name, c->id);
		return -EBADF;
	}
	tx = c->tx_free;
	if (!tx) {
		log_err("%s: conn %u: more than tx_depth (%u) sends in flight", tp->name, c->id,
			tp->params.tx_depth);
		return -ENOBUFS;
	}
	c->tx_free = tx->next;
	tx->next = NULL;
	tx->op_ctx = op_ctx;
	tx->bounced = tx->bounce && ((c->dom->mr_mode & FI_MR_LOCAL) ||
				     iovcnt > (int)c->tx_iov_limit);
	if (tx->bounced) {
		/* Registered memory wanted (verbs) or too many pieces: one copy. */
		char *p = tx->bounce;

		for (i = 0; i < iovcnt; i++) {
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
		tx->iov[0].iov_base = tx->bounce;
		tx->iov[0].iov_len = total;
		tx->iovcnt = 1;
	} else {
		for (i = 0; i < iovcnt; i++)
			tx->iov[i] = iov[i];
		tx->iovcnt = iovcnt;
	}
	if (fab_bundle_defer(c, tx, total))
		return 0;
	/* After the small ones before it. */
	fab_bundle_flush(c);
	if (c->state == FAB_CONN_UP && !c->pend_head) {
		ret = fab_tx_post(c, tx);
		if (!ret)
			return 0;
		if (ret != -FI_EAGAIN) {
			/* The connection is gone: the core hears it as an error now
			 * (no send_done) and through closed() from progress. */
			tx->state = FAB_TX_FREE;
			tx->next = c->tx_free;
			c->tx_free = tx;
			fab_conn_fail(c, fab_errno(ret), "fi_sendmsg failed");
			return c->fail_reason;
		}
	} else if (c->state == FAB_CONN_FAILED) {
		/* The flush just failed it. */
		tx->state = FAB_TX_FREE;
		tx->next = c->tx_free;
		c->tx_free = tx;
		return c->fail_reason;
	}
	fab_conn_queue(c, tx);
	return 0;
}

/* Not connected yet or the provider pushed back: progress retries. */
static void fab_conn_queue(struct fab_conn *c, struct fab_tx *tx)
{
	tx->state = FAB_TX_QUEUED;
	tx->next = NULL;
	if (c->pend_tail)
		c->pend_tail->next = tx;
	else
		c->pend_head = tx;
	c->pend_tail = tx;
}

/*
 * A send fab_send already accepted (a deferred one): post it, or queue it.
 * If the connection failed, the queue's send_done upcalls report it.
 */
void fab_conn_post_or_queue(struct fab_conn *c, struct fab_tx *tx)
{
	int ret;

	if (c->state == FAB_CONN_UP && !c->pend_head) {
		ret = fab_tx_post(c, tx);
		if (!ret)
			return;
		if (ret != -FI_EAGAIN)
			fab_conn_fail(c, fab_errno(ret), "fi_sendmsg failed");
	}
	fab_conn_queue(c, tx);
}

void fab_recv_release(void *arg, struct rmr_conn *conn, void *rx_arg)
{
	struct fab_tp *tp = arg;
	struct fab_conn *c = fab_conn_of(conn);
	struct fab_rx *rx = rx_arg;

	if (rx->state != FAB_RX_LENT || rx->op.conn != c) {
		log_err("%s: conn %u: recv_release of a buffer not lent on it", tp->name, c->id);
		return;
	}
	if (rx->spare) {
		fab_bundle_spare_release(c, rx);
	} else {
		c->rx_lent--;
		c->spare_nomem = false; /* a split that waits may try again */
		fab_rx_done(c, rx);
	}
}

/* A posted buffer is free again (released, or its bundle all lent): post it. */
void fab_rx_done(struct fab_conn *c, struct fab_rx *rx)
{
	int ret;

	rx->state = FAB_RX_IDLE;
	if (c->state != FAB_CONN_UP)
		return; /* a dead connection does not receive any more */
	ret = fab_rx_post(c, rx);
	if (ret == -FI_EAGAIN) {
		rx->repost = true;
		c->rx_repost_owed = true;
	} else if (ret) {
		fab_conn_fail(c, fab_errno(ret), "reposting a receive failed");
	}
}

void fab_conn_repost(struct fab_conn *c)
{
	unsigned i;

	c->rx_repost_owed = false;
	for (i = 0; i < c->tp->params.rx_depth; i++) {
		struct fab_rx *rx = &c->rx[i];
		int ret;

		if (!rx->repost)
			continue;
		ret = fab_rx_post(c, rx);
		if (ret == -FI_EAGAIN) {
			c->rx_repost_owed = true;
			return;
		}
		if (ret) {
			rx->repost = false;
			fab_conn_fail(c, fab_errno(ret), "reposting a receive failed");
			return;
		}
	}
}
