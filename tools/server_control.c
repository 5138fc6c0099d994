/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* brmr-server's control socket and recovery events (see server_control.h). */
#include "server_control.h"
#include "control_line.h"
#include "daemon_log.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* A control client gets this long to send its line and take the answer. */
#define CONTROL_TIMEOUT_S 2
#define ROLE "member"

static void write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* the client went away: nothing to do */
		buf += n;
		len -= (size_t)n;
	}
}

/* ---- events ---------------------------------------------------------------- */

static unsigned member_of(const struct server_ctl *ctl, const char *pool)
{
	for (unsigned i = 0; i < ctl->npools; i++)
		if (!strcmp(ctl->pools[i].name, pool))
			return ctl->pools[i].member_id;
	return 0;
}

static void publish(struct server_ctl *ctl, struct evline *l)
{
	const char *line = evline_end(l);

	if (line)
		evstream_publish(&ctl->ev, line);
}

static void ev_dirty(void *priv, const char *pool, uint16_t member_id, bool dirty)
{
	struct server_ctl *ctl = priv;
	unsigned self = member_of(ctl, pool);
	struct evline l;

	dlog_pm(RMR_LOG_NOTICE, pool, self, "event: member %u %s", member_id,
		dirty ? "missed writes: its chunks are tracked dirty" : "holds every chunk again");
	evline_begin(&l, ROLE, "change", "dirty_tracking", pool);
	evline_u64(&l, "member", self);
	evline_u64(&l, "peer", member_id);
	evline_bool(&l, "dirty", dirty);
	publish(ctl, &l);
}

static void ev_resync(void *priv, const char *pool, uint64_t done, uint64_t total, uint64_t bytes)
{
	struct server_ctl *ctl = priv;
	unsigned self = member_of(ctl, pool);
	struct evline l;

	dlog_pm(RMR_LOG_NOTICE, pool, self,
		"event: resync %llu/%llu chunks, %llu MiB copied from peers%s",
		(unsigned long long)done, (unsigned long long)total,
		(unsigned long long)(bytes >> 20), done == total ? ": complete" : "");
	evline_begin(&l, ROLE, "change", "resync", pool);
	evline_u64(&l, "member", self);
	evline_u64(&l, "done", done);
	evline_u64(&l, "total", total);
	evline_u64(&l, "bytes", bytes);
	evline_bool(&l, "complete", done == total);
	publish(ctl, &l);
}

static void ev_map_update(void *priv, const char *pool, uint16_t source, int status)
{
	struct server_ctl *ctl = priv;
	unsigned self = member_of(ctl, pool);
	struct evline l;

	dlog_pm(status ? RMR_LOG_WARN : RMR_LOG_NOTICE, pool, self,
		"event: dirty maps from member %u: %s", source, status ? strerror(-status) : "taken");
	evline_begin(&l, ROLE, "change", "map_update", pool);
	evline_u64(&l, "member", self);
	evline_u64(&l, "from", source);
	evline_int(&l, "status", status);
	evline_str(&l, "error", status ? strerror(-status) : NULL);
	publish(ctl, &l);
}

static void ev_verify(void *priv, const char *pool, uint64_t done, uint64_t total,
		      uint64_t mismatches)
{
	struct server_ctl *ctl = priv;
	unsigned self = member_of(ctl, pool);
	struct evline l;

	dlog_pm(mismatches ? RMR_LOG_WARN : RMR_LOG_NOTICE, pool, self,
		"event: verify %llu/%llu chunks, %llu differ", (unsigned long long)done,
		(unsigned long long)total, (unsigned long long)mismatches);
	evline_begin(&l, ROLE, "change", "verify", pool);
	evline_u64(&l, "member", self);
	evline_u64(&l, "done", done);
	evline_u64(&l, "total", total);
	evline_u64(&l, "mismatches", mismatches);
	publish(ctl, &l);
}

/* librmr logged the refusal already (one line each): only the event here. */
static void ev_auth_refused(void *priv, const char *pool, const char *role, uint16_t claimed_id,
			    const char *reason)
{
	struct server_ctl *ctl = priv;
	struct evline l;

	evline_begin(&l, ROLE, "change", "auth_refused", pool);
	evline_u64(&l, "member", pool ? member_of(ctl, pool) : 0);
	evline_str(&l, "peer_role", role);
	evline_u64(&l, "claimed_id", claimed_id);
	evline_str(&l, "reason", reason);
	publish(ctl, &l);
}

const struct rmr_server_events server_ctl_events = {
	.size = sizeof(server_ctl_events),
	.dirty_tracking = ev_dirty,
	.resync_progress = ev_resync,
	.map_update = ev_map_update,
	.verify_progress = ev_verify,
	.auth_refused = ev_auth_refused,
};

/*
 * The current state as "exists" lines: per pool its identity, the members
 * it records as having missed writes, and its own resync if one is under
 * way; then "exists-done". @return a malloc'd text, or NULL.
 */
static char *render_exists(struct server_ctl *ctl, size_t *len)
{
	struct rmr_server_status *st = calloc(1, sizeof(*st));
	struct evline l;
	char *text = NULL;
	FILE *f;

	if (!st)
		return NULL;
	st->size = sizeof(*st);
	if (rmr_server_status(ctl->srv, st) < 0 || !(f = open_memstream(&text, len))) {
		free(st);
		return NULL;
	}
	for (unsigned i = 0; i < st->npools && i < RMR_SERVER_MAX_POOLS; i++) {
		const struct rmr_server_pool_status *p = &st->pools[i];
		char uuid[37];

		rmr_uuid_format(&p->uuid, uuid);
		evline_begin(&l, ROLE, "exists", "pool", p->name);
		evline_u64(&l, "member", p->member_id);
		evline_str(&l, "uuid", uuid);
		evline_u64(&l, "size", p->pool_size);
		evline_u64(&l, "chunk_size", p->chunk_size);
		evline_u64(&l, "map_ver", p->map_ver);
		evline_u64(&l, "sessions", p->sessions);
		evline_put(f, &l);
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
			if (!(p->missed_mask & (1ull << id)) && !p->dirty_chunks[id])
				continue;
			evline_begin(&l, ROLE, "exists", "dirty_tracking", p->name);
			evline_u64(&l, "member", p->member_id);
			evline_u64(&l, "peer", id);
			evline_bool(&l, "dirty", true);
			evline_u64(&l, "chunks", p->dirty_chunks[id]);
			evline_put(f, &l);
		}
		if (p->resync_total && (p->resync_done < p->resync_total || p->resync_running)) {
			evline_begin(&l, ROLE, "exists", "resync", p->name);
			evline_u64(&l, "member", p->member_id);
			evline_u64(&l, "done", p->resync_done);
			evline_u64(&l, "total", p->resync_total);
			evline_u64(&l, "bytes", p->resync_bytes);
			evline_bool(&l, "complete", false);
			evline_bool(&l, "waiting", p->resync_waiting);
			evline_bool(&l, "paused", p->resync_paused);
			evline_put(f, &l);
		}
		if (p->verify_running) {
			evline_begin(&l, ROLE, "exists", "verify", p->name);
			evline_u64(&l, "member", p->member_id);
			evline_u64(&l, "done", p->verify_done);
			evline_u64(&l, "total", p->verify_total);
			evline_u64(&l, "mismatches", p->verify_mismatches);
			evline_put(f, &l);
		}
	}
	evline_begin(&l, ROLE, "exists-done", NULL, NULL);
	evline_put(f, &l);
	free(st);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* "events" (stream) or "events now" (the state, then close). Takes @p fd. */
static void answer_events(struct server_ctl *ctl, int fd, bool now)
{
	size_t len = 0;
	char *text;
	int slot = -1;

	if (!now) {
		slot = evstream_attach(&ctl->ev, fd);
		if (slot < 0) {
			static const char err[] = "error: too many events listeners\n";

			write_all(fd, err, sizeof(err) - 1);
			close(fd);
			return;
		}
	}
	/* After the attach: no change can fall between the state and the stream. */
	text = render_exists(ctl, &len);
	if (!text) {
		static const char err[] = "error: status unavailable\n";

		text = strdup(err);
		len = text ? strlen(text) : 0;
	}
	if (now) {
		write_all(fd, text, len);
		close(fd);
	} else {
		evstream_start(&ctl->ev, slot, text ? text : "", len);
	}
	free(text);
}

/* ---- status and the other commands ------------------------------------------ */

/*
 * Render the status, pool @first (if not NULL) ahead of the others: a pool's
 * own control socket shows it first. Returns a malloc'd string or NULL.
 */
static char *render_status(struct rmr_server *srv, enum rmr_format fmt, const char *first)
{
	struct rmr_server_status *st = calloc(1, sizeof(*st));
	size_t cap = 16384;
	char *buf = NULL;
	int n = -ENOSPC;

	if (!st)
		return NULL;
	st->size = sizeof(*st);
	if (rmr_server_status(srv, st) < 0)
		goto out;
	for (uint32_t i = 1; first && i < st->npools && i < RMR_SERVER_MAX_POOLS; i++)
		if (!strcmp(st->pools[i].name, first)) {
			struct rmr_server_pool_status p = st->pools[i];

			memmove(&st->pools[1], &st->pools[0], i * sizeof(p));
			st->pools[0] = p;
			break;
		}
	while (n == -ENOSPC && cap <= (16u << 20)) {
		char *nb = realloc(buf, cap);

		if (!nb)
			break;
		buf = nb;
		n = rmr_server_status_format(st, fmt, buf, cap);
		cap *= 2;
	}
out:
	free(st);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/*
 * The pool named @name (NULL: the socket's own, else the only one served),
 * or NULL with a reason in @err.
 */
static struct served_pool *pick_pool(struct server_ctl *ctl, const struct ctl_socket *sock,
				     const char *name, char *err, size_t errlen)
{
	if (!name)
		name = sock->pool;
	for (unsigned i = 0; i < ctl->npools; i++)
		if (ctl->pools[i].handle && (name ? !strcmp(ctl->pools[i].name, name) : ctl->npools == 1))
			return &ctl->pools[i];
	if (name)
		snprintf(err, errlen, "error: no pool '%s' served here\n", name);
	else
		snprintf(err, errlen, "error: this server serves %u pools: name one\n", ctl->npools);
	return NULL;
}

/*
 * "resync stop|start [POOL]", "resync rate BYTES [POOL]", "verify [repair] [POOL]",
 * "verify stop [POOL]": the answer in @out.
 */
static void answer_action(struct server_ctl *ctl, const struct ctl_socket *sock, char *args,
			  bool verify, char *out, size_t outlen)
{
	char *words[4] = { NULL };
	unsigned n = 0;
	struct served_pool *sp;
	const char *pool = NULL, *what;
	unsigned long long rate = 0;
	char *end;
	int ret;

	for (char *save = NULL, *w = strtok_r(args, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (n == 4) {
			snprintf(out, outlen, "error: too many words\n");
			return;
		}
		words[n++] = w;
	}
	what = n ? words[0] : "";
	if (verify && (n == 0 || (strcmp(what, "repair") && strcmp(what, "stop")))) {
		what = "start";
		pool = n ? words[0] : NULL;
		if (n > 1) {
			snprintf(out, outlen, "error: usage: verify [repair|stop] [POOL]\n");
			return;
		}
	} else if (!verify && !strcmp(what, "rate")) {
		errno = 0;
		if (n < 2 || !*words[1] || words[1][0] == '-' ||
		    (rate = strtoull(words[1], &end, 10), errno || *end) || n > 3) {
			snprintf(out, outlen, "error: usage: resync rate BYTES-PER-SECOND [POOL]\n");
			return;
		}
		pool = words[2];
	} else if (verify || !strcmp(what, "stop") || !strcmp(what, "start")) {
		if (n > 2) {
			snprintf(out, outlen, "error: usage: %s\n",
				 verify ? "verify [repair|stop] [POOL]" : "resync stop|start|rate [POOL]");
			return;
		}
		pool = words[1];
	} else {
		snprintf(out, outlen, "error: usage: resync stop|start|rate [POOL]\n");
		return;
	}
	sp = pick_pool(ctl, sock, pool, out, outlen);
	if (!sp)
		return;
	if (!verify && !strcmp(what, "rate")) {
		ret = rmr_server_resync_rate(sp->handle, rate);
	} else if (!verify) {
		ret = rmr_server_resync_pause(sp->handle, !strcmp(what, "stop"));
		if (ret == -EALREADY) {
			snprintf(out, outlen, "error: the resync is %s paused\n",
				 strcmp(what, "stop") ? "not" : "already");
			return;
		}
	} else if (!strcmp(what, "stop")) {
		ret = rmr_server_verify_stop(sp->handle);
		if (ret == -EALREADY) {
			snprintf(out, outlen, "error: no verify runs\n");
			return;
		}
	} else {
		struct rmr_verify_opts vo = { .size = sizeof(vo), .repair = !strcmp(what, "repair") };

		ret = rmr_server_verify(sp->handle, &vo);
		if (ret == -EBUSY || ret == -EAGAIN) {
			snprintf(out, outlen, "error: %s\n",
				 ret == -EBUSY ? "a verify runs already"
					       : "this member misses chunks itself: verify from a member that holds every chunk");
			return;
		}
	}
	if (ret < 0) {
		snprintf(out, outlen, "error: %s\n", strerror(-ret));
		return;
	}
	if (!verify && !strcmp(what, "rate"))
		dlog_pm(RMR_LOG_NOTICE, sp->name, sp->member_id,
			"resync rate %llu bytes/s (control socket)", rate);
	else
		dlog_pm(RMR_LOG_NOTICE, sp->name, sp->member_id, "%s %s (control socket)",
			verify ? "verify" : "resync", what);
	snprintf(out, outlen, "ok\n");
}

static void serve_one(struct server_ctl *ctl, const struct ctl_socket *sock)
{
	char line[128];
	int fd = control_accept_line(sock->fd, CONTROL_TIMEOUT_S * 1000, line, sizeof(line));

	if (fd < 0)
		return;

	if (!strcmp(line, "status text") || !strcmp(line, "status") ||
	    !strcmp(line, "status json") || !strcmp(line, "status prometheus")) {
		enum rmr_format fmt = !strcmp(line, "status json") ? RMR_FORMAT_JSON
				      : !strcmp(line, "status prometheus") ? RMR_FORMAT_PROMETHEUS
				      : RMR_FORMAT_TEXT;
		char *out = render_status(ctl->srv, fmt, sock->pool);

		if (out) {
			write_all(fd, out, strlen(out));
			if (!*out || out[strlen(out) - 1] != '\n')
				write_all(fd, "\n", 1);
		} else {
			static const char err[] = "error: status unavailable\n";

			write_all(fd, err, sizeof(err) - 1);
		}
		free(out);
	} else if (!strcmp(line, "fault on") || !strcmp(line, "fault off")) {
		bool on = !strcmp(line, "fault on");

		for (unsigned i = 0; i < ctl->npools; i++)
			brmr_store_inject_fault(ctl->pools[i].store, on);
		dlog(RMR_LOG_NOTICE, "fault injection switched %s for %u store(s) (control socket)",
		     on ? "on" : "off", ctl->npools);
		write_all(fd, "ok\n", 3);
	} else if (!strncmp(line, "resync ", 7) || !strcmp(line, "verify") ||
		   !strncmp(line, "verify ", 7)) {
		char out[160];

		answer_action(ctl, sock, line + (line[6] ? 7 : 6), line[0] == 'v', out, sizeof(out));
		write_all(fd, out, strlen(out));
	} else if (!strcmp(line, "events") || !strcmp(line, "events now")) {
		answer_events(ctl, fd, !strcmp(line, "events now"));
		return; /* answer_events() took the descriptor */
	} else {
		static const char err[] = "error: unknown command\n";

		write_all(fd, err, sizeof(err) - 1);
	}
	close(fd);
}

/* ---- the socket -------------------------------------------------------------- */

int server_ctl_init(struct server_ctl *ctl)
{
	ctl->nsocks = 0;
	return evstream_init(&ctl->ev, "control socket");
}

/*
 * Whether two socket paths name one socket: the same name in the same
 * directory, however the directories are spelled (//, a symlink).
 */
static bool same_socket(const char *a, const char *b)
{
	char da[PATH_MAX], db[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX];
	const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');

	if (!strcmp(a, b))
		return true;
	if (!na || !nb || strcmp(na, nb))
		return false;
	snprintf(da, sizeof(da), "%.*s", (int)(na - a), a);
	snprintf(db, sizeof(db), "%.*s", (int)(nb - b), b);
	return realpath(da[0] ? da : "/", ra) && realpath(db[0] ? db : "/", rb) && !strcmp(ra, rb);
}

int server_ctl_listen(struct server_ctl *ctl, const char *path, const char *pool)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, ret;

	/* Two pool files name one socket: it acts on a pool named in the command. */
	for (unsigned i = 0; i < ctl->nsocks; i++)
		if (same_socket(ctl->socks[i].path, path)) {
			ctl->socks[i].pool = NULL;
			return 0;
		}
	if (ctl->nsocks == RMR_SERVER_MAX_POOLS)
		return -ENOSPC;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			dlog(RMR_LOG_ERR, "control socket %s: exists and is not a socket", path);
			return -EEXIST;
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		ret = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
		if (ret == 0) {
			dlog(RMR_LOG_ERR, "control socket %s: in use by another process", path);
			return -EADDRINUSE;
		}
		unlink(path); /* stale: its server died */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* Created 0600 from the start: status is for the operator only. */
	old = umask(0177);
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret == 0)
		ret = listen(fd, 16);
	if (ret < 0) {
		ret = -errno;
		dlog(RMR_LOG_ERR, "control socket %s: %s", path, strerror(errno));
		close(fd);
		return ret;
	}
	ctl->socks[ctl->nsocks++] = (struct ctl_socket){ .fd = fd, .path = path, .pool = pool };
	if (ctl->nsocks == 1)
		ctl->ev.what = path;
	return 0;
}

unsigned server_ctl_pollfds(struct server_ctl *ctl, struct pollfd *pfd)
{
	if (!ctl->nsocks)
		return 0;
	for (unsigned i = 0; i < ctl->nsocks; i++)
		pfd[i] = (struct pollfd){ .fd = ctl->socks[i].fd, .events = POLLIN };
	return ctl->nsocks + evstream_pollfds(&ctl->ev, pfd + ctl->nsocks);
}

void server_ctl_handle(struct server_ctl *ctl, const struct pollfd *pfd, unsigned n)
{
	if (!n)
		return;
	/* Listeners first: a socket closed here is not in pfd any more. */
	evstream_handle(&ctl->ev, pfd + ctl->nsocks, n - ctl->nsocks);
	for (unsigned i = 0; i < ctl->nsocks; i++)
		if (pfd[i].revents & POLLIN)
			serve_one(ctl, &ctl->socks[i]);
}

void server_ctl_close(struct server_ctl *ctl)
{
	evstream_destroy(&ctl->ev);
	for (unsigned i = 0; i < ctl->nsocks; i++) {
		close(ctl->socks[i].fd);
		unlink(ctl->socks[i].path);
	}
	ctl->nsocks = 0;
}
