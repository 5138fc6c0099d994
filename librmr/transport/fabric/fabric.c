/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The libfabric transport: instance, connections, buffers, send/receive and
 * progress. Connection setup lives in fabric_msg.c (tcp, verbs) and
 * fabric_shm.c (shm); see fabric_common.h for the overall design.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "compiler.h"
#include "fabric_common.h"
#include "log.h"
#include "transport/transports.h"

/* --- small helpers ------------------------------------------------------ */

/*
 * libfabric returns negative FI_E* codes; those below FI_ERRNO_OFFSET are
 * errno values, the others are libfabric's own and get the nearest errno.
 */
int fab_errno(int fi_ret)
{
	int e = fi_ret < 0 ? -fi_ret : fi_ret;

	if (e == 0)
		return 0;
	if (e < FI_ERRNO_OFFSET)
		return -e;
	switch (e) {
	case FI_ETRUNC:
	case FI_ETOOSMALL:
		return -EMSGSIZE;
	default: /* FI_EOTHER, FI_ECRC, FI_EOVERRUN, ...: the provider failed */
		return -EIO;
	}
}

const char *fab_strerror(int fi_ret)
{
	return fi_strerror(fi_ret < 0 ? -fi_ret : fi_ret);
}

const char *fab_conn_state_name(enum fab_conn_state s)
{
	switch (s) {
#define FAB_X(s)             \
	case FAB_CONN_##s: \
		return #s;
		FAB_CONN_STATES(FAB_X)
#undef FAB_X
	}
	return "?";
}

/* The one door for state changes, so that every transition is logged. */
void fab_conn_set_state(struct fab_conn *c, enum fab_conn_state to, const char *why)
{
	if (c->state == to)
		return;
	log_debug("%s: conn %u (%s): %s -> %s (%s)", c->tp->name, c->id, c->peer,
		  fab_conn_state_name(c->state), fab_conn_state_name(to), why);
	c->state = to;
}

void fab_deadline_set(struct timespec *deadline, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, deadline);
	deadline->tv_sec += ms / 1000;
	deadline->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (deadline->tv_nsec >= 1000000000L) {
		deadline->tv_sec++;
		deadline->tv_nsec -= 1000000000L;
	}
}

int fab_deadline_passed(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline->tv_sec ||
	       (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

void fab_close_fid(struct fab_tp *tp, struct fid *fid, const char *what)
{
	int ret;

	if (!fid)
		return;
	ret = fi_close(fid);
	if (ret)
		log_warn("%s: closing the %s failed: %s", tp->name, what, fab_strerror(ret));
}

int fab_epoll_add(struct fab_tp *tp, struct fid *fid, int *fd_out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fd = -1;
	int ret;

	*fd_out = -1;
	if (tp->epfd < 0)
		return 0;
	ret = fi_control(fid, FI_GETWAIT, &fd);
	if (ret) {
		log_err("%s: no wait fd from the provider: %s", tp->name, fab_strerror(ret));
		return fab_errno(ret);
	}
	if (epoll_ctl(tp->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		ret = -errno;
		log_err("%s: epoll_ctl(ADD, %d): %s", tp->name, fd, strerror(errno));
		return ret;
	}
	*fd_out = fd;
	return 0;
}

void fab_epoll_del(struct fab_tp *tp, int *fd)
{
	if (*fd < 0)
		return;
	/* Before the fid is closed: the provider owns the fd and closes it. */
	if (epoll_ctl(tp->epfd, EPOLL_CTL_DEL, *fd, NULL) < 0)
		log_warn("%s: epoll_ctl(DEL, %d): %s", tp->name, *fd, strerror(errno));
	*fd = -1;
}

/* --- hints and domains --------------------------------------------------- */

struct fi_info *fab_hints_dup(struct fab_tp *tp)
{
	struct fi_info *h = fi_dupinfo(tp->hints);

	if (!h)
		log_err("%s: out of memory duplicating fi_info hints", tp->name);
	return h;
}

static struct fi_info *fab_hints_build(struct fab_tp *tp)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->caps = FI_MSG;
	/*
	 * psm2/psm3 need FI_CONTEXT, opx FI_CONTEXT2: every op starts with a
	 * struct fi_context2, so we can offer both. FI_RX_CQ_DATA (verbs):
	 * remote CQ data only ever arrives with a posted receive, which holds.
	 */
	h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
	h->ep_attr->type = tp->kind == FAB_KIND_MSG ? FI_EP_MSG : FI_EP_RDM;
	h->addr_format = tp->kind == FAB_KIND_MSG ? FI_SOCKADDR_IN : FI_ADDR_STR;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	/* One thread drives an instance (transport.h). */
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->fabric_attr->prov_name = strdup(tp->prov);
	if (!h->fabric_attr->prov_name) {
		fi_freeinfo(h);
		return NULL;
	}
	return h;
}

static bool fab_name_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/*
 * Endpoints of one instance share a fabric and domain when libfabric puts
 * their addresses on the same one (tcp: one per interface subnet, verbs: one
 * per device), so we keep a small cache keyed by those names.
 */
int fab_domain_get(struct fab_tp *tp, struct fi_info *info, struct fab_domain **out)
{
	struct fab_domain *d;
	int ret;

	for (d = tp->domains; d; d = d->next) {
		if (fab_name_eq(d->prov_name, info->fabric_attr->prov_name) &&
		    fab_name_eq(d->fabric_name, info->fabric_attr->name) &&
		    fab_name_eq(d->domain_name, info->domain_attr->name)) {
			d->refs++;
			*out = d;
			return 0;
		}
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->prov_name = info->fabric_attr->prov_name ? strdup(info->fabric_attr->prov_name) : NULL;
	d->fabric_name = info->fabric_attr->name ? strdup(info->fabric_attr->name) : NULL;
	d->domain_name = info->domain_attr->name ? strdup(info->domain_attr->name) : NULL;
	d->mr_mode = info->domain_attr->mr_mode;
	d->next_key = 1;
	ret = fi_fabric(info->fabric_attr, &d->fabric, NULL);
	if (ret) {
		log_err("%s: fi_fabric(%s): %s", tp->name, d->fabric_name ? d->fabric_name : "?",
			fab_strerror(ret));
		goto fail;
	}
	ret = fi_domain(d->fabric, info, &d->domain, NULL);
	if (ret) {
		log_err("%s: fi_domain(%s): %s", tp->name, d->domain_name ? d->domain_name : "?",
			fab_strerror(ret));
		goto fail;
	}
	log_debug("%s: opened %s fabric %s domain %s (mr_mode 0x%llx)", tp->name,
		  d->prov_name ? d->prov_name : "?", d->fabric_name ? d->fabric_name : "?",
		  d->domain_name ? d->domain_name : "?", (unsigned long long)d->mr_mode);
	d->refs = 1;
	d->next = tp->domains;
	tp->domains = d;
	*out = d;
	return 0;
fail:
	if (d->domain)
		fab_close_fid(tp, &d->domain->fid, "domain");
	if (d->fabric)
		fab_close_fid(tp, &d->fabric->fid, "fabric");
	free(d->prov_name);
	free(d->fabric_name);
	free(d->domain_name);
	free(d);
	return fab_errno(ret);
}

void fab_domain_put(struct fab_tp *tp, struct fab_domain *dom)
{
	struct fab_domain **pp;

	if (!dom || --dom->refs)
		return;
	for (pp = &tp->domains; *pp; pp = &(*pp)->next) {
		if (*pp == dom) {
			*pp = dom->next;
			break;
		}
	}
	fab_close_fid(tp, &dom->domain->fid, "domain");
	fab_close_fid(tp, &dom->fabric->fid, "fabric");
	free(dom->prov_name);
	free(dom->fabric_name);
	free(dom->domain_name);
	free(dom);
}

/* --- the ops -------------------------------------------------------------- */

static int fab_create(const struct rmr_transport_params *params,
		      const struct rmr_transport_events *ev, void *ev_ctx, void **out)
{
	struct fab_tp *tp;
	struct fi_info *info = NULL;
	const char *prov;
	int ret;

	*out = NULL;
	tp = calloc(1, sizeof(*tp));
	if (!tp)
		return -ENOMEM;
	tp->epfd = -1;
	if (!rmr_opts_copy(&tp->params, sizeof(tp->params), params) ||
	    !rmr_opts_copy(&tp->ev, sizeof(tp->ev), ev)) {
		log_err("fabric: create: params or events missing or too small");
		ret = -EINVAL;
		goto fail;
	}
	tp->ev_ctx = ev_ctx;
	snprintf(tp->name, sizeof(tp->name), "fabric[%s]",
		 tp->params.name ? tp->params.name : "?");
	tp->params.name = NULL; /* not ours to keep */
	if (!tp->ev.accepted || !tp->ev.connected || !tp->ev.recv || !tp->ev.send_done ||
	    !tp->ev.closed) {
		log_err("%s: create: every upcall must be set", tp->name);
		ret = -EINVAL;
		goto fail;
	}
	if (!tp->params.max_msg || !tp->params.rx_depth || !tp->params.tx_depth) {
		log_err("%s: create: max_msg, rx_depth and tx_depth must be positive", tp->name);
		ret = -EINVAL;
		goto fail;
	}
	prov = tp->params.provider ? tp->params.provider : "tcp";
	tp->params.provider = NULL;
	if (!strcmp(prov, "tcp")) {
		tp->prov = "tcp";
		tp->kind = FAB_KIND_MSG;
	} else if (!strcmp(prov, "verbs")) {
		tp->prov = "verbs";
		tp->kind = FAB_KIND_MSG;
	} else if (!strcmp(prov, "shm")) {
		tp->prov = "shm";
		tp->kind = FAB_KIND_SHM;
	} else {
		log_err("%s: create: unknown provider \"%s\" (tcp, verbs or shm)", tp->name, prov);
		ret = -EINVAL;
		goto fail;
	}
	tp->hints = fab_hints_build(tp);
	if (!tp->hints) {
		ret = -ENOMEM;
		goto fail;
	}
	/* Fail early, with a clear reason, if the provider is not there. */
	ret = fi_getinfo(FAB_FI_VERSION, NULL, NULL, 0, tp->hints, &info);
	if (ret == -FI_ENODATA) {
		/* A provider that only offers automatic progress: we still call
		 * progress, which costs nothing there. */
		tp->hints->domain_attr->data_progress = FI_PROGRESS_UNSPEC;
		ret = fi_getinfo(FAB_FI_VERSION, NULL, NULL, 0, tp->hints, &info);
	}
	if (ret) {
		log_err("%s: provider %s with %s endpoints is not available: %s", tp->name, tp->prov,
			tp->kind == FAB_KIND_MSG ? "FI_EP_MSG" : "FI_EP_RDM", fab_strerror(ret));
		ret = ret == -FI_ENODATA ? -ENODEV : fab_errno(ret);
		goto fail;
	}
	if (info->ep_attr->max_msg_size < tp->params.max_msg) {
		log_err("%s: max_msg %zu exceeds what %s carries (%zu)", tp->name,
			tp->params.max_msg, tp->prov, info->ep_attr->max_msg_size);
		ret = -EINVAL;
		goto fail;
	}
	if (tp->kind == FAB_KIND_SHM)
		tp->shm_info = info; /* the template for every shm endpoint */
	else
		fi_freeinfo(info);
	info = NULL;
	if (tp->kind == FAB_KIND_MSG) {
		tp->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (tp->epfd < 0) {
			ret = -errno;
			log_err("%s: epoll_create1: %s", tp->name, strerror(errno));
			goto fail;
		}
	}
	log_debug("%s: created (provider %s, max_msg %zu, rx_depth %u, tx_depth %u)", tp->name,
		  tp->prov, tp->params.max_msg, tp->params.rx_depth, tp->params.tx_depth);
	*out = tp;
	return 0;
fail:
	if (info)
		fi_freeinfo(info);
	if (tp->hints)
		fi_freeinfo(tp->hints);
	free(tp);
	return ret;
}

static void fab_reap(struct fab_tp *tp)
{
	struct fab_conn **pp = &tp->conns;

	while (*pp) {
		struct fab_conn *c = *pp;

		if (c->state == FAB_CONN_CLOSED && !c->ep) {
			*pp = c->next;
			fab_conn_free(c);
		} else {
			pp = &c->next;
		}
	}
	tp->reap_owed = false;
}

static void fab_close(void *arg, struct rmr_conn *conn)
{
	struct fab_tp *tp = arg;
	struct fab_conn *c = fab_conn_of(conn);
	unsigned i, lent = 0;

	if (c->state == FAB_CONN_CLOSED) {
		log_err("%s: conn %u closed twice", tp->name, c->id);
		return;
	}
	for (i = 0; c->rx && i < tp->params.rx_depth; i++)
		lent += c->rx[i].state == FAB_RX_LENT;
	lent += c->spares_lent;
	if (lent)
		log_err("%s: conn %u closed with %u receive buffers still lent to the core",
			tp->name, c->id, lent);
	/* What the core sent before closing leaves, as it would have without bundles. */
	if (c->state == FAB_CONN_UP)
		fab_bundle_flush(c);
	/* Tell the peer, so that it sees closed() instead of waiting for a timeout. */
	if (tp->kind == FAB_KIND_MSG) {
		if (c->state != FAB_CONN_DEAD)
			fab_msg_conn_shutdown(c);
	} else if (fab_shm_conn_close(c)) {
		/* The endpoint lingers (see fabric_common.h); progress ends it. */
		fab_conn_set_state(c, FAB_CONN_CLOSED, "close(), lingering");
		return;
	}
	log_debug("%s: conn %u (%s): closed by the core", tp->name, c->id, c->peer);
	fab_conn_set_state(c, FAB_CONN_CLOSED, "close()");
	fab_conn_teardown(c);
	if (tp->in_progress) {
		tp->reap_owed = true; /* progress may still hold a pointer to it */
	} else {
		fab_conn_unlink(c);
		fab_conn_free(c);
	}
}

static void fab_destroy(void *arg)
{
	struct fab_tp *tp = arg;
	struct fab_listener *l;
	struct fab_conn *c;

	if (!tp)
		return;
	while ((c = tp->conns)) {
		if (c->state != FAB_CONN_CLOSED) {
			if (c->state != FAB_CONN_DEAD)
				log_warn("%s: destroy: conn %u (%s) still open (%s)", tp->name,
					 c->id, c->peer, fab_conn_state_name(c->state));
			fab_close(tp, fab_rmr_conn(c)); /* frees it, or leaves it lingering */
			continue;
		}
		if (c->ep)
			log_warn("%s: destroy: conn %u (%s): closing an shm endpoint whose "
				 "message the peer has not taken yet",
				 tp->name, c->id, c->peer);
		tp->conns = c->next;
		fab_conn_teardown(c);
		fab_conn_free(c);
	}
	while ((l = tp->listeners)) {
		tp->listeners = l->next;
		if (tp->kind == FAB_KIND_MSG)
			fab_msg_listener_close(tp, l);
		else
			fab_shm_listener_close(tp, l);
	}
	if (tp->domains)
		log_warn("%s: destroy: a domain is still referenced", tp->name);
	if (tp->epfd >= 0)
		close(tp->epfd);
	fi_freeinfo(tp->hints);
	if (tp->shm_info)
		fi_freeinfo(tp->shm_info);
	log_debug("%s: destroyed", tp->name);
	free(tp);
}

static int fab_listen(void *arg, const char *addr)
{
	struct fab_tp *tp = arg;

	if (!addr) {
		log_err("%s: listen: no address", tp->name);
		return -EINVAL;
	}
	if (tp->kind == FAB_KIND_MSG)
		return fab_msg_listen(tp, addr);
	return fab_shm_listen(tp, addr);
}

static int fab_connect(void *arg, const char *addr, void *conn_ctx, struct rmr_conn **out)
{
	struct fab_tp *tp = arg;
	struct fab_conn *c = NULL;
	int ret;

	*out = NULL;
	if (!addr) {
		log_err("%s: connect: no address", tp->name);
		return -EINVAL;
	}
	if (tp->kind == FAB_KIND_MSG)
		ret = fab_msg_connect(tp, addr, conn_ctx, &c);
	else
		ret = fab_shm_connect(tp, addr, conn_ctx, &c);
	if (ret)
		return ret;
	*out = fab_rmr_conn(c);
	return 0;
}

static int fab_wait_fd(void *arg)
{
	struct fab_tp *tp = arg;

	return tp->epfd;
}

/* Work that progress must do that no wait fd would announce. */
static bool fab_work_owed(struct fab_tp *tp)
{
	struct fab_conn *c;

	for (c = tp->conns; c; c = c->next) {
		if (c->state == FAB_CONN_CLOSED) {
			if (c->ep)
				return true; /* lingering shm endpoint */
			continue;
		}
		if (c->state == FAB_CONN_FAILED || c->rx_repost_owed || c->ctl_owed ||
		    (c->state == FAB_CONN_UP && c->held_head && !c->split &&
		     fab_conn_may_lend(c)) ||
		    fab_bundle_split_owed(c))
			return true;
		if (tp->kind == FAB_KIND_SHM && c->state == FAB_CONN_CONNECTING)
			return true; /* the handshake deadline is checked by progress */
	}
	return false;
}

static int fab_trywait(void *arg)
{
	struct fab_tp *tp = arg;
	struct fab_listener *l;
	struct fab_conn *c;
	int ret;

	/* The small sends of this turn go before the loop sleeps. */
	fab_bundle_flush_all(tp);
	if (fab_work_owed(tp))
		return -EAGAIN;
	if (tp->epfd < 0)
		return 0; /* polled: nothing to arm */
	for (l = tp->listeners; l; l = l->next) {
		struct fid *fids[1] = { &l->eq->fid };

		ret = fi_trywait(l->dom->fabric, fids, 1);
		if (ret)
			goto busy;
	}
	for (c = tp->conns; c; c = c->next) {
		struct fid *fids[2];

		if (c->state == FAB_CONN_CLOSED || !c->cq || !c->eq)
			continue;
		fids[0] = &c->cq->fid;
		fids[1] = &c->eq->fid;
		ret = fi_trywait(c->dom->fabric, fids, 2);
		if (ret)
			goto busy;
	}
	tp->eq_due_ns = 0; /* the loop sleeps: whatever wakes it, read the EQs then */
	return 0;
busy:
	if (ret != -FI_EAGAIN)
		log_warn("%s: fi_trywait: %s", tp->name, fab_strerror(ret));
	return -EAGAIN;
}

/*
 * Whether this progress call reads the EQs of listeners and established
 * connections. Their events (a connection request, a shutdown) are rare,
 * but every fi_eq_read() costs the tcp provider an epoll_wait(), and a
 * busy loop calls progress several times per turn. So those EQs are read
 * on the first call after the loop slept, and every FAB_EQ_POLL_NS while it
 * does not sleep (fi_trywait() refuses to sleep while an EQ holds an event,
 * so an event that comes meanwhile waits at most that long). CQs, and the
 * EQs of connections being set up, are read on every call.
 */
static bool fab_eq_turn(struct fab_tp *tp)
{
	struct timespec ts;
	uint64_t now;

	if (tp->kind != FAB_KIND_MSG)
		return true;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (now < tp->eq_due_ns)
		return false;
	tp->eq_due_ns = now + FAB_EQ_POLL_NS;
	return true;
}

/*
 * The upcalls' small sends, a bundle per connection. tcp completes a send
 * the socket took whole at once: that completion is read here, while the
 * connection's queue is warm, rather than found by trywait, which would
 * refuse to sleep and cost the loop one more pass (at queue depth 1, a
 * pass per request).
 */
static void fab_flush_sends(struct fab_tp *tp)
{
	struct fab_conn *c;

	if (!tp->defer_owed)
		return;
	tp->defer_owed = false;
	for (c = tp->conns; c; c = c->next) {
		if (!c->defer_head || c->state == FAB_CONN_CLOSED)
			continue;
		fab_bundle_flush(c);
		if (c->state == FAB_CONN_UP && c->cq)
			fab_conn_handle_cq(c, false);
	}
	/* What those completions' upcalls sent goes too; its completions wait. */
	fab_bundle_flush_all(tp);
}

static int fab_progress(void *arg)
{
	struct fab_tp *tp = arg;
	struct fab_listener *l;
	struct fab_conn *c;
	bool eqs;
	int eq_events;

	if (tp->in_progress) {
		log_err("%s: progress called from an upcall", tp->name);
		return 0;
	}
	tp->in_progress = true;
	tp->events = 0;
	/* Sends made since the last call (the core's timers, its consumers). */
	fab_bundle_flush_all(tp);
	eqs = fab_eq_turn(tp);
	for (l = tp->listeners; l; l = l->next) {
		if (tp->kind == FAB_KIND_SHM)
			fab_shm_listener_progress(tp, l);
		else if (eqs)
			fab_msg_listener_progress(tp, l);
	}
	eq_events = tp->events;
	for (c = tp->conns; c; c = c->next) {
		if (c->state == FAB_CONN_CLOSED) {
			if (c->ep && tp->kind == FAB_KIND_SHM)
				fab_shm_linger_progress(c);
			continue;
		}
		if (c->state == FAB_CONN_DEAD)
			continue;
		/* Events first: a connection is announced up before its data. */
		if (tp->kind == FAB_KIND_MSG && c->eq && (eqs || c->state != FAB_CONN_UP)) {
			int before = tp->events;

			fab_msg_conn_progress_eq(c);
			eq_events += tp->events - before;
		}
		if (c->state == FAB_CONN_CLOSED)
			continue;
		if (c->cq)
			fab_conn_handle_cq(c, false);
		if (tp->kind == FAB_KIND_SHM && c->state != FAB_CONN_CLOSED)
			fab_shm_conn_progress(c);
		if (c->state == FAB_CONN_UP && (c->split || c->held_head))
			fab_conn_resume_rx(c);
		if (c->state == FAB_CONN_UP)
			fab_conn_flush_pending(c);
		if (c->rx_repost_owed && (c->state == FAB_CONN_UP || c->state == FAB_CONN_CONNECTING ||
					  c->state == FAB_CONN_ACCEPTING))
			fab_conn_repost(c);
		if (c->state == FAB_CONN_FAILED)
			fab_conn_finish_failure(c);
	}
	fab_flush_sends(tp);
	tp->in_progress = false;
	if (eq_events > 0)
		tp->eq_due_ns = 0; /* events come in bursts (and a listener reads a few at a time) */
	if (tp->reap_owed)
		fab_reap(tp);
	return tp->events;
}

const struct rmr_transport_ops rmr_fabric_transport_ops = {
	.size = sizeof(struct rmr_transport_ops),
	.name = "fabric",
	.create = fab_create,
	.destroy = fab_destroy,
	.listen = fab_listen,
	.connect = fab_connect,
	.send = fab_send,
	.recv_release = fab_recv_release,
	.close = fab_close,
	.wait_fd = fab_wait_fd,
	.trywait = fab_trywait,
	.progress = fab_progress,
};
