/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * FI_EP_MSG providers (tcp, verbs): the provider owns the connections.
 * Listening is a passive endpoint with its own EQ; each connection has its
 * own endpoint, EQ and CQ. The EQ reports FI_CONNECTED, FI_SHUTDOWN (peer
 * closed or died: 1-8 ms after a kill on tcp loopback) and, as error entries,
 * refused or failed connects.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "compiler.h"
#include "fabric_common.h"
#include "log.h"

#define FAB_EQ_BUDGET 64 /* listener events handled per progress */

/*
 * A connection event with room for the connection data the peer sent
 * (fab_hello), which fi_eq_read puts in entry.data[], the flexible end.
 */
union fab_cm_event {
	struct fi_eq_cm_entry entry;
	uint8_t bytes[sizeof(struct fi_eq_cm_entry) + 64];
};

/*
 * Split "HOST:PORT" and resolve HOST to dotted IPv4, so that bad addresses
 * fail here with a clear reason rather than deep inside the provider.
 */
static int fab_parse_inet(struct fab_tp *tp, const char *op, const char *addr,
			  char host[INET_ADDRSTRLEN], char port[8])
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	char name[FAB_ADDR_MAX];
	const char *colon = strrchr(addr, ':');
	const char *p;
	unsigned long portnum;
	size_t hlen;
	int ret;

	if (strlen(addr) >= sizeof(name)) {
		log_err("%s: %s: address too long", tp->name, op);
		return -EINVAL;
	}
	if (!colon) {
		log_err("%s: %s \"%s\": expected HOST:PORT", tp->name, op, addr);
		return -EINVAL;
	}
	if (strchr(addr, ':') != colon) {
		log_err("%s: %s \"%s\": expected HOST:PORT with an IPv4 address or host name",
			tp->name, op, addr);
		return -EINVAL;
	}
	hlen = (size_t)(colon - addr);
	if (!hlen) {
		log_err("%s: %s \"%s\": empty host", tp->name, op, addr);
		return -EINVAL;
	}
	p = colon + 1;
	if (!*p || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p)) {
		log_err("%s: %s \"%s\": the port must be a number", tp->name, op, addr);
		return -EINVAL;
	}
	portnum = strtoul(p, NULL, 10);
	if (portnum < 1 || portnum > 65535) {
		log_err("%s: %s \"%s\": port out of range 1-65535", tp->name, op, addr);
		return -EINVAL;
	}
	snprintf(port, 8, "%lu", portnum);
	memcpy(name, addr, hlen);
	name[hlen] = '\0';
	ret = getaddrinfo(name, NULL, &hints, &res);
	if (ret) {
		log_err("%s: %s \"%s\": cannot resolve \"%s\": %s", tp->name, op, addr, name,
			gai_strerror(ret));
		return ret == EAI_AGAIN ? -EAGAIN : ret == EAI_MEMORY ? -ENOMEM : -EINVAL;
	}
	inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, host,
		  INET_ADDRSTRLEN);
	freeaddrinfo(res);
	return 0;
}

static int fab_msg_getinfo(struct fab_tp *tp, const char *op, const char *addr, bool source,
			   struct fi_info **out)
{
	char host[INET_ADDRSTRLEN], port[8];
	struct fi_info *hints;
	int ret;

	*out = NULL;
	ret = fab_parse_inet(tp, op, addr, host, port);
	if (ret)
		return ret;
	hints = fab_hints_dup(tp);
	if (!hints)
		return -ENOMEM;
	ret = fi_getinfo(FAB_FI_VERSION, host, port, FI_NUMERICHOST | (source ? FI_SOURCE : 0),
			 hints, out);
	fi_freeinfo(hints);
	if (ret) {
		log_err("%s: %s %s: no %s endpoint for this address: %s", tp->name, op, addr,
			tp->prov, fab_strerror(ret));
		return ret == -FI_ENODATA ? -EADDRNOTAVAIL : fab_errno(ret);
	}
	if ((*out)->rx_attr->size < tp->params.rx_depth) {
		log_err("%s: %s %s: rx_depth %u exceeds the provider's receive queue (%zu)",
			tp->name, op, addr, tp->params.rx_depth, (*out)->rx_attr->size);
		fi_freeinfo(*out);
		*out = NULL;
		return -EINVAL;
	}
	return 0;
}

/* Endpoint, EQ, CQ, buffers and posted receives of a new connection. */
static int fab_msg_conn_open(struct fab_conn *c, struct fi_info *info)
{
	struct fab_tp *tp = c->tp;
	struct fi_eq_attr eq_attr = { .size = 16, .wait_obj = FI_WAIT_FD };
	/* Room for every completion that can be outstanding: one per posted op. */
	struct fi_cq_attr cq_attr = {
		.size = tp->params.rx_depth + tp->params.tx_depth + 16,
		.format = FI_CQ_FORMAT_DATA,
		.wait_obj = FI_WAIT_FD,
	};
	int ret;

	c->tx_iov_limit = info->tx_attr->iov_limit;
	ret = fi_eq_open(c->dom->fabric, &eq_attr, &c->eq, c);
	if (ret) {
		log_err("%s: conn %u: fi_eq_open: %s", tp->name, c->id, fab_strerror(ret));
		return fab_errno(ret);
	}
	ret = fi_cq_open(c->dom->domain, &cq_attr, &c->cq, c);
	if (ret) {
		log_err("%s: conn %u: fi_cq_open: %s", tp->name, c->id, fab_strerror(ret));
		return fab_errno(ret);
	}
	ret = fi_endpoint(c->dom->domain, info, &c->ep, c);
	if (ret) {
		log_err("%s: conn %u: fi_endpoint: %s", tp->name, c->id, fab_strerror(ret));
		return fab_errno(ret);
	}
	ret = fi_ep_bind(c->ep, &c->eq->fid, 0);
	if (!ret)
		ret = fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret) {
		log_err("%s: conn %u: fi_ep_bind: %s", tp->name, c->id, fab_strerror(ret));
		return fab_errno(ret);
	}
	ret = fi_enable(c->ep);
	if (ret) {
		log_err("%s: conn %u: fi_enable: %s", tp->name, c->id, fab_strerror(ret));
		return fab_errno(ret);
	}
	ret = fab_epoll_add(tp, &c->cq->fid, &c->cq_fd);
	if (!ret)
		ret = fab_epoll_add(tp, &c->eq->fid, &c->eq_fd);
	if (ret)
		return ret;
	ret = fab_conn_setup_buffers(c);
	if (ret)
		return ret;
	/* Before connecting, so that nothing the peer sends finds no buffer. */
	return fab_conn_post_receives(c);
}

int fab_msg_connect(struct fab_tp *tp, const char *addr, void *conn_ctx, struct fab_conn **out)
{
	struct fab_domain *dom = NULL;
	struct fab_conn *c;
	struct fi_info *info;
	int ret;

	ret = fab_msg_getinfo(tp, "connect", addr, false, &info);
	if (ret)
		return ret;
	ret = fab_domain_get(tp, info, &dom);
	if (ret) {
		fi_freeinfo(info);
		return ret;
	}
	c = fab_conn_alloc(tp, dom, addr, true);
	if (!c) {
		fab_domain_put(tp, dom);
		fi_freeinfo(info);
		return -ENOMEM;
	}
	c->ctx = conn_ctx;
	ret = fab_msg_conn_open(c, info);
	if (!ret) {
		uint8_t hello[FAB_HELLO_LEN];

		fab_hello_encode(tp, hello);
		ret = fi_connect(c->ep, info->dest_addr, hello, sizeof(hello));
		if (ret) {
			log_err("%s: conn %u: fi_connect(%s): %s", tp->name, c->id, addr,
				fab_strerror(ret));
			ret = fab_errno(ret);
		}
	}
	fi_freeinfo(info);
	if (ret) {
		fab_conn_destroy(c);
		return ret;
	}
	log_debug("%s: conn %u: connecting to %s", tp->name, c->id, addr);
	fab_conn_link(c);
	*out = c;
	return 0;
}

/* Tell the peer we are leaving; it sees FI_SHUTDOWN. */
void fab_msg_conn_shutdown(struct fab_conn *c)
{
	int ret;

	if (!c->ep || c->state == FAB_CONN_CONNECTING)
		return;
	ret = fi_shutdown(c->ep, 0);
	if (ret && ret != -FI_ENOTCONN)
		log_debug("%s: conn %u: fi_shutdown: %s", c->tp->name, c->id, fab_strerror(ret));
}

static void fab_msg_conn_eq_error(struct fab_conn *c)
{
	struct fi_eq_err_entry ee;
	int ret, reason;

	memset(&ee, 0, sizeof(ee));
	ret = (int)fi_eq_readerr(c->eq, &ee, 0);
	if (ret < 0) {
		if (ret != -FI_EAGAIN)
			fab_conn_fail(c, fab_errno(ret), "fi_eq_readerr failed");
		return;
	}
	c->tp->events++;
	reason = ee.err ? fab_errno(-ee.err) : -ECONNABORTED;
	log_debug("%s: conn %u: event queue error %d (%s), provider errno %d", c->tp->name,
		  c->id, ee.err, fi_strerror(ee.err), ee.prov_errno);
	/*
	 * tcp 1.17 reports a peer's fi_reject as err FI_EINPROGRESS (observed);
	 * to the core any error before FI_CONNECTED means "not accepted".
	 */
	if (c->state == FAB_CONN_CONNECTING &&
	    (reason == -EINPROGRESS || reason == -EAGAIN || reason == -EIO))
		reason = -ECONNREFUSED;
	if (c->state == FAB_CONN_CONNECTING)
		fab_conn_fail(c, reason, "connect failed");
	else
		fab_conn_fail(c, reason, "connection error");
}

/* Connection events of @p c: connected, shut down, failed. */
void fab_msg_conn_progress_eq(struct fab_conn *c)
{
	union fab_cm_event ev;
	uint32_t event;

	while (c->state == FAB_CONN_CONNECTING || c->state == FAB_CONN_ACCEPTING ||
	       c->state == FAB_CONN_UP) {
		ssize_t n = fi_eq_read(c->eq, &event, &ev, sizeof(ev), 0);

		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			fab_msg_conn_eq_error(c);
			continue;
		}
		if (n < 0) {
			fab_conn_fail(c, fab_errno((int)n), "fi_eq_read failed");
			return;
		}
		c->tp->events++;
		switch (event) {
		case FI_CONNECTED:
			if (c->state == FAB_CONN_UP)
				break;
			/* The acceptor's connection data (the acceptor read ours from the request). */
			if (c->outgoing && (size_t)n > sizeof(ev.entry))
				fab_hello_apply(c, ev.entry.data, (size_t)n - sizeof(ev.entry));
			fab_conn_up(c);
			break;
		case FI_SHUTDOWN:
			/* Deliver what arrived before the peer left, then fail. */
			fab_conn_handle_cq(c, true);
			fab_conn_fail(c, -ECONNRESET, "peer closed the connection");
			break;
		default:
			log_debug("%s: conn %u: ignoring event %u", c->tp->name, c->id, event);
			break;
		}
	}
}

static void fab_msg_peer_name(struct fi_info *info, char *out, size_t len)
{
	const struct sockaddr_in *sin = info->dest_addr;
	char ip[INET_ADDRSTRLEN];

	if (sin && info->dest_addrlen >= sizeof(*sin) && sin->sin_family == AF_INET &&
	    inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)))
		snprintf(out, len, "%s:%u", ip, ntohs(sin->sin_port));
	else
		snprintf(out, len, "incoming");
}

/*
 * A connection request: ask the core, then accept or reject it. The core is
 * asked before an endpoint exists, because an endpoint opened from the
 * request takes over its handle, which fi_reject frees (a use after free
 * under valgrind when both happen).
 */
static void fab_msg_accept(struct fab_tp *tp, struct fab_listener *l, struct fi_info *info,
			   const void *hello, size_t hello_len)
{
	struct fab_domain *dom = NULL;
	struct fab_conn *c;
	char peer[FAB_ADDR_MAX];
	int ret;

	fab_msg_peer_name(info, peer, sizeof(peer));
	ret = fab_domain_get(tp, info, &dom);
	if (ret)
		goto reject;
	c = fab_conn_alloc(tp, dom, peer, false);
	if (!c) {
		fab_domain_put(tp, dom);
		goto reject;
	}
	/* Send slots first: the core may queue sends from the upcall. */
	c->tx_iov_limit = info->tx_attr->iov_limit;
	ret = fab_conn_setup_buffers(c);
	if (ret) {
		fab_conn_destroy(c);
		goto reject;
	}
	fab_conn_link(c);
	tp->events++;
	c->ctx = tp->ev.accepted(tp->ev_ctx, fab_rmr_conn(c));
	if (c->state == FAB_CONN_CLOSED) {
		/* The core closed it from the upcall itself. */
		fi_reject(l->pep, info->handle, NULL, 0);
		return;
	}
	if (!c->ctx) {
		log_info("%s: %s: connection from %s refused by the core", tp->name, l->addr, peer);
		fi_reject(l->pep, info->handle, NULL, 0);
		fab_conn_discard(c); /* never announced: gone without an upcall */
		return;
	}
	ret = fab_msg_conn_open(c, info);
	if (!ret) {
		uint8_t mine[FAB_HELLO_LEN];

		fab_hello_apply(c, hello, hello_len);
		fab_hello_encode(tp, mine);
		ret = fi_accept(c->ep, mine, sizeof(mine));
		if (ret) {
			log_err("%s: conn %u: fi_accept: %s", tp->name, c->id, fab_strerror(ret));
			ret = fab_errno(ret);
		}
	} else if (!c->ep) {
		fi_reject(l->pep, info->handle, NULL, 0);
	}
	/* Otherwise closing the endpoint (at close()) drops the connection. */
	if (ret) {
		fab_conn_fail(c, ret, "setting up an accepted connection failed");
		return;
	}
	log_debug("%s: %s: accepting conn %u from %s", tp->name, l->addr, c->id, peer);
	return;
reject:
	log_warn("%s: %s: rejecting a connection from %s: could not set it up", tp->name, l->addr,
		 peer);
	ret = fi_reject(l->pep, info->handle, NULL, 0);
	if (ret)
		log_warn("%s: fi_reject: %s", tp->name, fab_strerror(ret));
}

void fab_msg_listener_progress(struct fab_tp *tp, struct fab_listener *l)
{
	union fab_cm_event ev;
	struct fi_eq_err_entry ee;
	uint32_t event;
	unsigned budget = FAB_EQ_BUDGET;

	while (budget--) {
		ssize_t n = fi_eq_read(l->eq, &event, &ev, sizeof(ev), 0);

		if (n == -FI_EAGAIN)
			return;
		if (n == -FI_EAVAIL) {
			memset(&ee, 0, sizeof(ee));
			if (fi_eq_readerr(l->eq, &ee, 0) >= 0)
				log_warn("%s: listener %s: event error %d (%s)", tp->name, l->addr,
					 ee.err, fi_strerror(ee.err));
			continue;
		}
		if (n < 0) {
			log_err("%s: listener %s: fi_eq_read: %s", tp->name, l->addr,
				fab_strerror((int)n));
			return;
		}
		tp->events++;
		if (event == FI_CONNREQ) {
			size_t hello_len = (size_t)n > sizeof(ev.entry) ? (size_t)n - sizeof(ev.entry) : 0;

			fab_msg_accept(tp, l, ev.entry.info, ev.entry.data, hello_len);
			fi_freeinfo(ev.entry.info);
		} else {
			log_debug("%s: listener %s: ignoring event %u", tp->name, l->addr, event);
		}
	}
}

int fab_msg_listen(struct fab_tp *tp, const char *addr)
{
	struct fi_eq_attr eq_attr = { .size = 64, .wait_obj = FI_WAIT_FD };
	struct fab_listener *l;
	struct fi_info *info;
	int ret;

	ret = fab_msg_getinfo(tp, "listen", addr, true, &info);
	if (ret)
		return ret;
	l = calloc(1, sizeof(*l));
	if (!l) {
		fi_freeinfo(info);
		return -ENOMEM;
	}
	l->fd = -1;
	snprintf(l->addr, sizeof(l->addr), "%s", addr);
	ret = fab_domain_get(tp, info, &l->dom);
	if (ret)
		goto fail;
	ret = fi_eq_open(l->dom->fabric, &eq_attr, &l->eq, l);
	if (ret) {
		log_err("%s: listen %s: fi_eq_open: %s", tp->name, addr, fab_strerror(ret));
		goto fail_fi;
	}
	ret = fi_passive_ep(l->dom->fabric, info, &l->pep, l);
	if (ret) {
		log_err("%s: listen %s: fi_passive_ep: %s", tp->name, addr, fab_strerror(ret));
		goto fail_fi;
	}
	ret = fi_pep_bind(l->pep, &l->eq->fid, 0);
	if (ret) {
		log_err("%s: listen %s: fi_pep_bind: %s", tp->name, addr, fab_strerror(ret));
		goto fail_fi;
	}
	ret = fi_listen(l->pep);
	if (ret) {
		if (ret == -FI_EADDRINUSE)
			log_err("%s: listen %s: address in use", tp->name, addr);
		else
			log_err("%s: listen %s: fi_listen: %s", tp->name, addr, fab_strerror(ret));
		goto fail_fi;
	}
	ret = fab_epoll_add(tp, &l->eq->fid, &l->fd);
	if (ret)
		goto fail;
	fi_freeinfo(info);
	l->next = tp->listeners;
	tp->listeners = l;
	log_info("%s: listening on %s (%s)", tp->name, addr, tp->prov);
	return 0;
fail_fi:
	ret = fab_errno(ret);
fail:
	fi_freeinfo(info);
	fab_msg_listener_close(tp, l);
	return ret;
}

/*
 * Refuse the connection requests still queued at close: closing the event
 * queue does not free what the provider allocated for each (the request's
 * fi_info and its handle; LeakSanitizer saw both after a peer dialed a
 * member that was stopping).
 */
static void fab_msg_listener_drain(struct fab_listener *l)
{
	union fab_cm_event ev;
	struct fi_eq_err_entry ee;
	uint32_t event;

	for (unsigned budget = FAB_EQ_BUDGET; budget; budget--) {
		ssize_t n = fi_eq_read(l->eq, &event, &ev, sizeof(ev), 0);

		if (n == -FI_EAVAIL) {
			memset(&ee, 0, sizeof(ee));
			fi_eq_readerr(l->eq, &ee, 0);
			continue;
		}
		if (n < 0)
			return;
		if (event == FI_CONNREQ && ev.entry.info) {
			fi_reject(l->pep, ev.entry.info->handle, NULL, 0);
			fi_freeinfo(ev.entry.info);
		}
	}
}

void fab_msg_listener_close(struct fab_tp *tp, struct fab_listener *l)
{
	fab_epoll_del(tp, &l->fd);
	if (l->pep && l->eq)
		fab_msg_listener_drain(l);
	if (l->pep)
		fab_close_fid(tp, &l->pep->fid, "passive endpoint");
	if (l->eq)
		fab_close_fid(tp, &l->eq->fid, "listener event queue");
	fab_domain_put(tp, l->dom);
	free(l);
}
