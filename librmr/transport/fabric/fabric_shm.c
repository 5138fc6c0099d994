/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shm (FI_EP_RDM): connections emulated by a tiny handshake.
 *
 * A listener is a named endpoint ("rmr-NAME", i.e. /dev/shm/rmr-NAME) that
 * only receives connect requests. Each connection, on either side, gets an
 * endpoint, AV and CQ of its own with a unique anonymous-style name:
 *
 *   connector C                 listener L               new endpoint A
 *     CONNECT(C's name) ------->   creates A, inserts C, asks the core
 *     <---------------------------------------------------  ACCEPT(A's name)
 *     inserts A; both sides now talk C <-> A only
 *     BYE on close() <-------------------------------------> BYE on close()
 *
 * Control messages are fi_injectdata with CQ data FAB_SHM_TAG|type, so a
 * completion with FI_REMOTE_CQ_DATA is control and anything else is data;
 * the core's messages travel untouched. Why one endpoint per connection: shm
 * 1.17 is not safe when a peer restarts behind an fi_av_remove/fi_av_insert
 * (the restarted peer crashed, the sender then spun forever); a fresh
 * endpoint per session is the recipe that worked. shm reports a dead peer
 * not at all (sends complete into the void), so "closed" comes only from a
 * BYE or a send error; the core's heartbeats cover the rest.
 *
 * shm installs its own SIGINT/SIGTERM/SIGSEGV/SIGBUS handlers when the
 * first endpoint is created (to unlink its regions); an application that
 * wants its own must install them afterwards and chain. Regions of a process
 * killed with SIGKILL stay in /dev/shm (rmr-*); shm reuses one whose owner
 * is dead, and they can be removed by hand when nothing runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler.h"
#include "fabric_common.h"
#include "log.h"

#define FAB_SHM_PREFIX "rmr-"
#define FAB_SHM_MAGIC 0x524d5246u            /* "RMRF" */
#define FAB_SHM_VERSION 2
#define FAB_SHM_TAG 0x524d524354000000ull    /* CQ data of control messages */
#define FAB_SHM_TAG_MASK 0xffffffffff000000ull
#define FAB_SHM_CONNECT_TIMEOUT_MS 5000
#define FAB_SHM_LISTEN_RX 16
#define FAB_SHM_EPNAME_MAX 128

enum fab_shm_ctl_type {
	FAB_SHM_CONNECT = 1,
	FAB_SHM_ACCEPT = 2,
	FAB_SHM_REFUSE = 3,
	FAB_SHM_BYE = 4,
};

/* Between processes of one host: native byte order is fine. */
struct fab_shm_ctl {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint64_t cookie;                /* the connector's, echoed by the listener */
	uint32_t pid;                   /* the sender's process, see fab_conn.peer_pidfd */
	uint32_t reserved;
	char name[FAB_SHM_EPNAME_MAX];  /* the sender's endpoint name */
};

static unsigned fab_shm_seq; /* unique endpoint names within the process */

static const char *fab_shm_ctl_name(unsigned type)
{
	switch (type) {
	case FAB_SHM_CONNECT: return "CONNECT";
	case FAB_SHM_ACCEPT: return "ACCEPT";
	case FAB_SHM_REFUSE: return "REFUSE";
	case FAB_SHM_BYE: return "BYE";
	}
	return "?";
}

static int fab_shm_check_name(struct fab_tp *tp, const char *op, const char *addr)
{
	size_t len = strlen(addr);

	if (!len || len > FAB_SHM_NAME_MAX) {
		log_err("%s: %s \"%s\": an shm address is a name of 1 to %d characters", tp->name,
			op, addr, FAB_SHM_NAME_MAX);
		return -EINVAL;
	}
	if (strspn(addr, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
	    len) {
		log_err("%s: %s \"%s\": an shm address may only contain A-Z a-z 0-9 . _ -",
			tp->name, op, addr);
		return -EINVAL;
	}
	return 0;
}

static size_t fab_pow2_at_least(size_t n, size_t max)
{
	size_t p = 16;

	while (p < n)
		p <<= 1;
	return p < max ? p : max;
}

/*
 * Open endpoint @p region (a region name in /dev/shm) with its own AV and
 * CQ. Queue sizes are trimmed to what we use: the region's size follows them.
 */
static int fab_shm_ep_open(struct fab_tp *tp, struct fab_domain *dom, const char *region,
			   size_t rx, size_t tx, void *ctx, struct fid_ep **ep, struct fid_av **av,
			   struct fid_cq **cq)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	struct fi_cq_attr cq_attr = {
		.size = rx + tx + 16,
		.format = FI_CQ_FORMAT_DATA,
		.wait_obj = FI_WAIT_NONE, /* shm's CQ has no wait fd (-FI_ENOSYS) */
	};
	struct fi_info *info;
	char src[FAB_SHM_EPNAME_MAX];
	int ret;

	info = fi_dupinfo(tp->shm_info);
	if (!info)
		return -ENOMEM;
	/* "fi_ns://X" names the region X exactly; "fi_shm://" would add indexes. */
	snprintf(src, sizeof(src), "fi_ns://%s", region);
	free(info->src_addr);
	info->src_addr = strdup(src);
	info->src_addrlen = strlen(src) + 1;
	if (!info->src_addr) {
		fi_freeinfo(info);
		return -ENOMEM;
	}
	info->rx_attr->size = fab_pow2_at_least(rx, info->rx_attr->size);
	info->tx_attr->size = fab_pow2_at_least(tx, info->tx_attr->size);
	ret = fi_av_open(dom->domain, &av_attr, av, NULL);
	if (ret) {
		log_err("%s: %s: fi_av_open: %s", tp->name, region, fab_strerror(ret));
		goto out;
	}
	ret = fi_cq_open(dom->domain, &cq_attr, cq, NULL);
	if (ret) {
		log_err("%s: %s: fi_cq_open: %s", tp->name, region, fab_strerror(ret));
		goto out;
	}
	ret = fi_endpoint(dom->domain, info, ep, ctx);
	if (ret) {
		log_err("%s: %s: fi_endpoint: %s", tp->name, region, fab_strerror(ret));
		goto out;
	}
	ret = fi_ep_bind(*ep, &(*av)->fid, 0);
	if (!ret)
		ret = fi_ep_bind(*ep, &(*cq)->fid, FI_TRANSMIT | FI_RECV);
	if (ret) {
		log_err("%s: %s: fi_ep_bind: %s", tp->name, region, fab_strerror(ret));
		goto out;
	}
	ret = fi_enable(*ep);
	if (ret) {
		/* The region exists and its owner is alive. */
		if (ret == -FI_EBUSY || ret == -EEXIST || ret == -FI_EADDRINUSE)
			log_err("%s: %s: the name is in use", tp->name, region);
		else
			log_err("%s: %s: fi_enable: %s", tp->name, region, fab_strerror(ret));
	}
out:
	fi_freeinfo(info);
	if (ret == -FI_EBUSY || ret == -EEXIST || ret == -FI_EADDRINUSE)
		return -EADDRINUSE;
	return fab_errno(ret);
}

static int fab_shm_av_insert(struct fab_conn *c, const char *name, fi_addr_t *out)
{
	int ret = fi_av_insert(c->av, name, 1, out, 0, NULL);

	if (ret != 1) {
		log_warn("%s: conn %u: fi_av_insert(%s): %s", c->tp->name, c->id, name,
			 ret < 0 ? fab_strerror(ret) : "not inserted");
		return ret < 0 ? fab_errno(ret) : -EINVAL;
	}
	return 0;
}

static int fab_shm_send_ctl(struct fab_conn *c, unsigned type, fi_addr_t dest)
{
	struct fab_shm_ctl msg;
	size_t len = sizeof(msg.name);
	int ret;

	memset(&msg, 0, sizeof(msg));
	msg.magic = FAB_SHM_MAGIC;
	msg.version = FAB_SHM_VERSION;
	msg.type = (uint16_t)type;
	msg.cookie = c->cookie;
	msg.pid = (uint32_t)getpid();
	ret = fi_getname(&c->ep->fid, msg.name, &len);
	if (ret) {
		log_err("%s: conn %u: fi_getname: %s", c->tp->name, c->id, fab_strerror(ret));
		return ret;
	}
	msg.name[sizeof(msg.name) - 1] = '\0';
	/* Never into the region of a dead peer: see fab_conn.peer_pidfd. */
	if (dest == c->peer_addr && fab_conn_peer_dead(c))
		return -FI_ECONNRESET;
	/* Inject: the small message is copied into the peer's queue at once,
	 * with no completion to wait for (also right before fi_close). */
	ret = (int)fi_injectdata(c->ep, &msg, sizeof(msg), FAB_SHM_TAG | type, dest);
	if (ret == -FI_EAGAIN || !ret) {
		if (dest == c->listen_addr) {
			c->listen_tried = true;
			c->listen_reached |= !ret;
		} else {
			c->peer_tried = true;
			c->peer_reached |= !ret;
		}
	}
	if (!ret)
		log_debug("%s: conn %u: sent %s", c->tp->name, c->id, fab_shm_ctl_name(type));
	return ret;
}

/* The endpoint, buffers and posted receives of a new shm connection. */
static int fab_shm_conn_open(struct fab_conn *c)
{
	struct fab_tp *tp = c->tp;
	char region[FAB_SHM_EPNAME_MAX];
	int ret;

	snprintf(region, sizeof(region), FAB_SHM_PREFIX "%d-%u", (int)getpid(),
		 __atomic_add_fetch(&fab_shm_seq, 1, __ATOMIC_RELAXED));
	ret = fab_shm_ep_open(tp, c->dom, region, tp->params.rx_depth + 4,
			      tp->params.tx_depth + 4, c, &c->ep, &c->av, &c->cq);
	if (ret)
		return ret;
	c->tx_iov_limit = tp->shm_info->tx_attr->iov_limit;
	ret = fab_conn_setup_buffers(c);
	if (ret)
		return ret;
	return fab_conn_post_receives(c);
}

static void fab_shm_region_of(const char *addr, char *out, size_t len)
{
	snprintf(out, len, FAB_SHM_PREFIX "%s", addr);
}

/*
 * shm answers -FI_EAGAIN forever to a peer whose region does not exist (and
 * sends complete into the void when it exists but nobody reads it), so the
 * file in /dev/shm is the only hint that a peer is gone for good.
 */
static bool fab_shm_region_gone(const char *region)
{
	char path[256];

	if (!region[0])
		return false;
	snprintf(path, sizeof(path), "/dev/shm/%s", region);
	return access(path, F_OK) < 0 && errno == ENOENT;
}

static void fab_shm_set_peer_region(struct fab_conn *c, const char *name)
{
	const char *p = strstr(name, "://");

	snprintf(c->peer_region, sizeof(c->peer_region), "%s", p ? p + 3 : name);
}

int fab_shm_connect(struct fab_tp *tp, const char *addr, void *conn_ctx, struct fab_conn **out)
{
	struct fab_domain *dom = NULL;
	struct fab_conn *c;
	char dest[FAB_SHM_EPNAME_MAX];
	struct timespec now;
	int ret;

	ret = fab_shm_check_name(tp, "connect", addr);
	if (ret)
		return ret;
	ret = fab_domain_get(tp, tp->shm_info, &dom);
	if (ret)
		return ret;
	c = fab_conn_alloc(tp, dom, addr, true);
	if (!c) {
		fab_domain_put(tp, dom);
		return -ENOMEM;
	}
	c->ctx = conn_ctx;
	fab_shm_region_of(addr, c->listen_region, sizeof(c->listen_region));
	ret = fab_shm_conn_open(c);
	if (!ret) {
		snprintf(dest, sizeof(dest), "fi_ns://%s", c->listen_region);
		ret = fab_shm_av_insert(c, dest, &c->listen_addr);
	}
	if (ret) {
		fab_conn_destroy(c);
		return ret;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	c->cookie = ((uint64_t)getpid() << 32) ^ ((uint64_t)c->id << 20) ^
		    (uint64_t)now.tv_nsec ^ ((uint64_t)(uintptr_t)c >> 4);
	fab_deadline_set(&c->deadline, FAB_SHM_CONNECT_TIMEOUT_MS);
	/* Sent from progress, which also retries it and reports failures. */
	c->ctl_owed = FAB_SHM_CONNECT;
	fab_conn_link(c);
	log_debug("%s: conn %u: connecting to %s", tp->name, c->id, addr);
	*out = c;
	return 0;
}

/* Send the control message @p c owes; on success act on it. */
static void fab_shm_send_owed(struct fab_conn *c)
{
	unsigned type = c->ctl_owed;
	bool to_listener = type == FAB_SHM_CONNECT;
	fi_addr_t dest = to_listener ? c->listen_addr : c->peer_addr;
	int ret = fab_shm_send_ctl(c, type, dest);

	if (ret == -FI_EAGAIN) {
		if (!fab_shm_region_gone(to_listener ? c->listen_region : c->peer_region))
			return; /* retried by the next progress */
		c->ctl_owed = 0;
		if (to_listener)
			fab_conn_fail(c, -ECONNREFUSED, "nobody listens there");
		else
			fab_conn_fail(c, -ECONNRESET, "the peer's endpoint is gone");
		return;
	}
	c->ctl_owed = 0;
	if (ret) {
		fab_conn_fail(c, fab_errno(ret), "sending a handshake message failed");
		return;
	}
	if (type == FAB_SHM_ACCEPT)
		fab_conn_up(c);
}

void fab_shm_conn_progress(struct fab_conn *c)
{
	if (c->ctl_owed && (c->state == FAB_CONN_CONNECTING || c->state == FAB_CONN_ACCEPTING))
		fab_shm_send_owed(c);
	if (c->state == FAB_CONN_CONNECTING && fab_deadline_passed(&c->deadline))
		fab_conn_fail(c, -ETIMEDOUT, "no answer from the listener");
}

static bool fab_shm_ctl_valid(const struct fab_shm_ctl *m, size_t len, uint64_t data)
{
	return len == sizeof(*m) && m->magic == FAB_SHM_MAGIC && m->version == FAB_SHM_VERSION &&
	       (data & FAB_SHM_TAG_MASK) == FAB_SHM_TAG && (data & ~FAB_SHM_TAG_MASK) == m->type &&
	       memchr(m->name, '\0', sizeof(m->name)) != NULL;
}

/* A control message arrived in receive buffer @p rx of @p c. */
void fab_shm_handle_ctl(struct fab_conn *c, struct fab_rx *rx, size_t len, uint64_t data)
{
	struct fab_shm_ctl m;
	int ret;

	memcpy(&m, rx->buf, len < sizeof(m) ? len : sizeof(m));
	/* The buffer goes straight back to the provider. */
	ret = fab_rx_post(c, rx);
	if (ret == -FI_EAGAIN) {
		rx->repost = true;
		c->rx_repost_owed = true;
	} else if (ret) {
		fab_conn_fail(c, fab_errno(ret), "reposting a receive failed");
		return;
	}
	if (!fab_shm_ctl_valid(&m, len, data)) {
		log_warn("%s: conn %u: ignoring a malformed control message (%zu bytes)",
			 c->tp->name, c->id, len);
		return;
	}
	if (m.cookie != c->cookie) {
		log_warn("%s: conn %u: ignoring %s of another connection", c->tp->name, c->id,
			 fab_shm_ctl_name(m.type));
		return;
	}
	log_debug("%s: conn %u: received %s", c->tp->name, c->id, fab_shm_ctl_name(m.type));
	switch (m.type) {
	case FAB_SHM_ACCEPT:
		if (c->state != FAB_CONN_CONNECTING)
			return;
		ret = fab_shm_av_insert(c, m.name, &c->peer_addr);
		if (ret) {
			fab_conn_fail(c, -ECONNREFUSED, "cannot reach the accepting endpoint");
			return;
		}
		fab_shm_set_peer_region(c, m.name);
		fab_conn_watch_peer(c, (pid_t)m.pid);
		c->ctl_owed = 0;
		fab_conn_up(c);
		return;
	case FAB_SHM_REFUSE:
		c->peer_gone = true;
		fab_conn_fail(c, -ECONNREFUSED, "refused by the listener");
		return;
	case FAB_SHM_BYE:
		c->peer_gone = true;
		fab_conn_fail(c, c->state == FAB_CONN_CONNECTING ? -ECONNREFUSED : -ECONNRESET,
			      "peer closed the connection");
		return;
	default:
		log_warn("%s: conn %u: unexpected %s", c->tp->name, c->id,
			 fab_shm_ctl_name(m.type));
		return;
	}
}

/* A first message to the listener or the peer may still be unprocessed. */
static bool fab_shm_listen_pending(const struct fab_conn *c)
{
	return c->listen_tried && !c->listen_reached && !fab_shm_region_gone(c->listen_region);
}

static bool fab_shm_peer_pending(const struct fab_conn *c)
{
	return c->peer_tried && !c->peer_reached && !fab_shm_region_gone(c->peer_region);
}

/*
 * close(): say goodbye, so that the peer reports closed() without waiting
 * for a timeout. Returns true if the endpoint must linger because a message
 * of ours (and the connection request riding on it) is still pending.
 */
bool fab_shm_conn_close(struct fab_conn *c)
{
	int ret;

	c->ctl_owed = 0;
	if (!c->ep)
		return false;
	if (c->peer_addr != FI_ADDR_UNSPEC && !c->peer_gone) {
		ret = fab_shm_send_ctl(c, FAB_SHM_BYE, c->peer_addr);
		if (ret == -FI_EAGAIN && fab_shm_peer_pending(c)) {
			c->ctl_owed = FAB_SHM_BYE;
			return true;
		}
		/* EAGAIN after the peer was reached: its queue is full (a dead or
		 * stuck peer); it will time out on its own. */
		if (ret)
			log_debug("%s: conn %u: goodbye not sent (%s); the peer will time out",
				  c->tp->name, c->id, fab_strerror(ret));
	}
	if (fab_shm_listen_pending(c)) {
		/* Our CONNECT is still queued at the listener: the listener ignores
		 * a BYE, which is only there to learn when it has been taken. */
		c->ctl_owed = FAB_SHM_BYE;
		return true;
	}
	return false;
}

/* A lingering endpoint: retry its last message, then really close it. */
void fab_shm_linger_progress(struct fab_conn *c)
{
	struct fi_cq_data_entry e[FAB_CQ_BATCH];
	struct fi_cq_err_entry ee;
	ssize_t n;

	/* Completions no longer matter; reading them keeps shm moving. */
	while ((n = fi_cq_read(c->cq, e, FAB_CQ_BATCH)) > 0 || n == -FI_EAVAIL) {
		if (n == -FI_EAVAIL && fi_cq_readerr(c->cq, &ee, 0) < 0)
			break;
	}
	/* The listener ignores a BYE; the peer gets the message we owe it. */
	if (fab_shm_listen_pending(c))
		fab_shm_send_ctl(c, FAB_SHM_BYE, c->listen_addr);
	if (fab_shm_peer_pending(c))
		fab_shm_send_ctl(c, c->ctl_owed, c->peer_addr);
	if (fab_shm_listen_pending(c) || fab_shm_peer_pending(c))
		return;
	log_debug("%s: conn %u (%s): lingering endpoint closed", c->tp->name, c->id, c->peer);
	c->ctl_owed = 0;
	fab_conn_teardown(c);
	c->tp->reap_owed = true;
}

/* A connect request reached listener @p l. */
static void fab_shm_accept(struct fab_tp *tp, struct fab_listener *l, const struct fab_shm_ctl *m)
{
	struct fab_domain *dom = NULL;
	struct fab_conn *c;
	const char *peer = strstr(m->name, "://");
	int ret;

	peer = peer ? peer + 3 : m->name;
	ret = fab_domain_get(tp, tp->shm_info, &dom);
	if (ret)
		return;
	c = fab_conn_alloc(tp, dom, peer, false);
	if (!c) {
		fab_domain_put(tp, dom);
		return;
	}
	c->cookie = m->cookie;
	fab_conn_watch_peer(c, (pid_t)m->pid);
	fab_shm_set_peer_region(c, m->name);
	ret = fab_shm_conn_open(c);
	if (!ret)
		ret = fab_shm_av_insert(c, m->name, &c->peer_addr);
	if (ret) {
		log_warn("%s: %s: dropping a connect request from %s: could not set it up",
			 tp->name, l->addr, peer);
		fab_conn_destroy(c);
		return;
	}
	fab_conn_link(c);
	tp->events++;
	c->ctx = tp->ev.accepted(tp->ev_ctx, fab_rmr_conn(c));
	if (c->state == FAB_CONN_CLOSED)
		return; /* closed from the upcall; close() said goodbye */
	if (!c->ctx) {
		log_info("%s: %s: connection from %s refused by the core", tp->name, l->addr, peer);
		ret = fab_shm_send_ctl(c, FAB_SHM_REFUSE, c->peer_addr);
		if (ret == -FI_EAGAIN && fab_shm_peer_pending(c)) {
			/* Linger until the refusal is through (see fabric_common.h). */
			c->ctl_owed = FAB_SHM_REFUSE;
			fab_conn_set_state(c, FAB_CONN_CLOSED, "refused, lingering");
			return;
		}
		if (ret)
			log_debug("%s: %s: refusal not sent: %s", tp->name, l->addr,
				  fab_strerror(ret));
		fab_conn_discard(c);
		return;
	}
	log_debug("%s: %s: accepting conn %u from %s", tp->name, l->addr, c->id, peer);
	c->ctl_owed = FAB_SHM_ACCEPT;
	fab_shm_send_owed(c);
}

void fab_shm_listener_progress(struct fab_tp *tp, struct fab_listener *l)
{
	struct fi_cq_data_entry e[FAB_CQ_BATCH];
	struct fi_cq_err_entry ee;
	ssize_t n, i;

	for (;;) {
		n = fi_cq_read(l->cq, e, FAB_CQ_BATCH);
		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			memset(&ee, 0, sizeof(ee));
			if (fi_cq_readerr(l->cq, &ee, 0) < 0)
				return;
			log_warn("%s: listener %s: receive error %d (%s)%s", tp->name, l->addr,
				 ee.err, fi_strerror(ee.err),
				 ee.err == FI_ETRUNC ? ": not a connect request" : "");
			if (ee.op_context) {
				struct fab_rx *rx = ee.op_context;

				rx->state = FAB_RX_IDLE;
				if (fi_recv(l->ep, rx->buf, sizeof(struct fab_shm_ctl), NULL,
					    FI_ADDR_UNSPEC, &rx->op.ctx) == 0)
					rx->state = FAB_RX_POSTED;
			}
			continue;
		}
		if (n < 0) {
			log_err("%s: listener %s: fi_cq_read: %s", tp->name, l->addr,
				fab_strerror((int)n));
			return;
		}
		for (i = 0; i < n; i++) {
			struct fab_rx *rx = e[i].op_context;
			struct fab_shm_ctl m;
			int ret;

			tp->events++;
			memcpy(&m, rx->buf, sizeof(m));
			rx->state = FAB_RX_IDLE;
			ret = fi_recv(l->ep, rx->buf, sizeof(struct fab_shm_ctl), NULL,
				      FI_ADDR_UNSPEC, &rx->op.ctx);
			if (ret)
				log_err("%s: listener %s: reposting a receive: %s", tp->name,
					l->addr, fab_strerror(ret));
			else
				rx->state = FAB_RX_POSTED;
			if ((e[i].flags & FI_REMOTE_CQ_DATA) &&
			    fab_shm_ctl_valid(&m, e[i].len, e[i].data) && m.type == FAB_SHM_BYE)
				continue; /* a connector that gave up before an answer */
			if (!(e[i].flags & FI_REMOTE_CQ_DATA) ||
			    !fab_shm_ctl_valid(&m, e[i].len, e[i].data) ||
			    m.type != FAB_SHM_CONNECT) {
				log_warn("%s: listener %s: ignoring a message that is not a "
					 "connect request (%zu bytes)",
					 tp->name, l->addr, e[i].len);
				continue;
			}
			fab_shm_accept(tp, l, &m);
		}
	}
}

int fab_shm_listen(struct fab_tp *tp, const char *addr)
{
	struct fab_listener *l;
	char region[FAB_SHM_EPNAME_MAX];
	unsigned i;
	int ret;

	ret = fab_shm_check_name(tp, "listen", addr);
	if (ret)
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->fd = -1;
	snprintf(l->addr, sizeof(l->addr), "%s", addr);
	ret = fab_domain_get(tp, tp->shm_info, &l->dom);
	if (ret)
		goto fail;
	fab_shm_region_of(addr, region, sizeof(region));
	ret = fab_shm_ep_open(tp, l->dom, region, FAB_SHM_LISTEN_RX, 16, l, &l->ep, &l->av,
			      &l->cq);
	if (ret)
		goto fail;
	l->nrx = FAB_SHM_LISTEN_RX;
	l->rx = calloc(l->nrx, sizeof(*l->rx));
	l->rx_mem = calloc(l->nrx, sizeof(struct fab_shm_ctl));
	if (!l->rx || !l->rx_mem) {
		ret = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < l->nrx; i++) {
		struct fab_rx *rx = &l->rx[i];

		rx->op.kind = FAB_OP_RX;
		rx->buf = l->rx_mem + i * sizeof(struct fab_shm_ctl);
		ret = fi_recv(l->ep, rx->buf, sizeof(struct fab_shm_ctl), NULL, FI_ADDR_UNSPEC,
			      &rx->op.ctx);
		if (ret) {
			log_err("%s: listen %s: posting a receive: %s", tp->name, addr,
				fab_strerror(ret));
			ret = fab_errno(ret);
			goto fail;
		}
		rx->state = FAB_RX_POSTED;
	}
	l->next = tp->listeners;
	tp->listeners = l;
	log_info("%s: listening on %s (shm region /dev/shm/%s)", tp->name, addr, region);
	return 0;
fail:
	fab_shm_listener_close(tp, l);
	return ret;
}

void fab_shm_listener_close(struct fab_tp *tp, struct fab_listener *l)
{
	if (l->ep)
		fab_close_fid(tp, &l->ep->fid, "listener endpoint");
	if (l->cq)
		fab_close_fid(tp, &l->cq->fid, "listener completion queue");
	if (l->av)
		fab_close_fid(tp, &l->av->fid, "listener address vector");
	fab_domain_put(tp, l->dom);
	free(l->rx);
	free(l->rx_mem);
	free(l);
}
