/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The event stream of a control socket (see evstream.h). */
#include "evstream.h"
#include "daemon_log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- one event line ------------------------------------------------------ */

__attribute__((format(printf, 2, 3)))
static void lput(struct evline *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->overflow)
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->buf + l->len, sizeof(l->buf) - l->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(l->buf) - l->len)
		l->overflow = true;
	else
		l->len += (size_t)n;
}

static void lput_json(struct evline *l, const char *s)
{
	lput(l, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			lput(l, "\\%c", c);
		else if (c < 0x20)
			lput(l, "\\u%04x", c);
		else
			lput(l, "%c", c);
	}
	lput(l, "\"");
}

void evline_begin(struct evline *l, const char *role, const char *type, const char *kind,
		  const char *pool)
{
	struct timespec ts;
	struct tm tm;

	l->len = 0;
	l->overflow = false;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	lput(l, "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"role\":", tm.tm_year + 1900,
	     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	lput_json(l, role);
	lput(l, ",\"type\":");
	lput_json(l, type);
	if (kind) {
		lput(l, ",\"kind\":");
		lput_json(l, kind);
	}
	if (pool) {
		lput(l, ",\"pool\":");
		lput_json(l, pool);
	}
}

void evline_str(struct evline *l, const char *key, const char *val)
{
	lput(l, ",\"%s\":", key);
	if (val)
		lput_json(l, val);
	else
		lput(l, "null");
}

void evline_u64(struct evline *l, const char *key, uint64_t v)
{
	lput(l, ",\"%s\":%" PRIu64, key, v);
}

void evline_int(struct evline *l, const char *key, long long v)
{
	lput(l, ",\"%s\":%lld", key, v);
}

void evline_bool(struct evline *l, const char *key, bool v)
{
	lput(l, ",\"%s\":%s", key, v ? "true" : "false");
}

const char *evline_end(struct evline *l)
{
	lput(l, "}");
	return l->overflow ? NULL : l->buf;
}

/* ---- the listeners --------------------------------------------------------- */

int evstream_init(struct evstream *es, const char *what)
{
	memset(es, 0, sizeof(*es));
	es->what = what;
	for (unsigned i = 0; i < EVSTREAM_MAX_LISTENERS; i++)
		es->l[i].fd = -1;
	es->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (es->wake_fd < 0)
		return -errno;
	pthread_mutex_init(&es->lock, NULL);
	return 0;
}

static void listener_free(struct evlistener *l)
{
	if (l->fd >= 0)
		close(l->fd);
	free(l->buf);
	memset(l, 0, sizeof(*l));
	l->fd = -1;
}

void evstream_destroy(struct evstream *es)
{
	if (es->wake_fd < 0)
		return;
	for (unsigned i = 0; i < EVSTREAM_MAX_LISTENERS; i++)
		listener_free(&es->l[i]);
	close(es->wake_fd);
	es->wake_fd = -1;
	pthread_mutex_destroy(&es->lock);
}

static void wake(struct evstream *es)
{
	uint64_t one = 1;

	/* A full counter already means "wake up": nothing is lost. */
	(void)!write(es->wake_fd, &one, sizeof(one));
}

/* Mark @p l dropped (lock held): the main thread closes it. */
static void drop(struct evstream *es, struct evlistener *l, const char *why)
{
	if (l->dead)
		return;
	l->dead = true;
	/* Ends the peer's stream now; the descriptor stays ours until closed. */
	shutdown(l->fd, SHUT_RDWR);
	dlog(RMR_LOG_WARN, "%s: events listener dropped: %s", es->what, why);
	wake(es);
}

/* Write what is queued without blocking (lock held). */
static void flush(struct evstream *es, struct evlistener *l)
{
	size_t off = 0;

	if (!l->ready || l->dead)
		return;
	while (off < l->len) {
		ssize_t n = send(l->fd, l->buf + off, l->len - off, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			char why[96];

			snprintf(why, sizeof(why), "write failed: %s", n < 0 ? strerror(errno) : "closed");
			drop(es, l, why);
			return;
		}
		off += (size_t)n;
	}
	memmove(l->buf, l->buf + off, l->len - off);
	l->len -= off;
}

/* Queue @p len bytes for @p l (lock held). @return false if @p l was dropped. */
static bool enqueue(struct evstream *es, struct evlistener *l, const char *data, size_t len)
{
	if (l->len + len > EVSTREAM_MAX_QUEUE) {
		char why[128];

		snprintf(why, sizeof(why), "it reads too slowly (%zu bytes unread, limit %u)",
			 l->len, EVSTREAM_MAX_QUEUE);
		drop(es, l, why);
		return false;
	}
	if (l->len + len > l->cap) {
		size_t cap = l->cap ? l->cap : 4096;
		char *nb;

		while (cap < l->len + len)
			cap *= 2;
		nb = realloc(l->buf, cap);
		if (!nb) {
			drop(es, l, "out of memory");
			return false;
		}
		l->buf = nb;
		l->cap = cap;
	}
	memcpy(l->buf + l->len, data, len);
	l->len += len;
	return true;
}

int evstream_attach(struct evstream *es, int fd)
{
	int slot = -EMFILE;

	pthread_mutex_lock(&es->lock);
	for (unsigned i = 0; i < EVSTREAM_MAX_LISTENERS; i++)
		if (es->l[i].fd < 0) {
			es->l[i].fd = fd;
			slot = (int)i;
			break;
		}
	pthread_mutex_unlock(&es->lock);
	if (slot >= 0)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return slot;
}

void evstream_start(struct evstream *es, int slot, const char *initial, size_t len)
{
	struct evlistener *l = &es->l[slot];
	char *queued;
	size_t qlen;

	pthread_mutex_lock(&es->lock);
	/* The initial state goes first; changes queued since attach follow it. */
	queued = l->buf;
	qlen = l->len;
	l->buf = NULL;
	l->len = l->cap = 0;
	if (enqueue(es, l, initial, len) && qlen)
		enqueue(es, l, queued, qlen);
	free(queued);
	l->ready = true;
	flush(es, l);
	pthread_mutex_unlock(&es->lock);
	dlog(RMR_LOG_INFO, "%s: events listener attached (%u connected)", es->what,
	     evstream_listeners(es));
}

void evstream_publish(struct evstream *es, const char *line)
{
	size_t n = strlen(line);
	bool pending = false;

	pthread_mutex_lock(&es->lock);
	for (unsigned i = 0; i < EVSTREAM_MAX_LISTENERS; i++) {
		struct evlistener *l = &es->l[i];

		if (l->fd < 0 || l->dead)
			continue;
		if (!enqueue(es, l, line, n) || !enqueue(es, l, "\n", 1))
			continue;
		flush(es, l);
		pending |= l->ready && l->len && !l->dead;
	}
	pthread_mutex_unlock(&es->lock);
	/* The main loop polls for POLLOUT only for listeners it knows to be behind. */
	if (pending)
		wake(es);
}

unsigned evstream_pollfds(struct evstream *es, struct pollfd *pfd)
{
	unsigned n = 0;

	pfd[n++] = (struct pollfd){ .fd = es->wake_fd, .events = POLLIN };
	pthread_mutex_lock(&es->lock);
	for (unsigned i = 0; i < EVSTREAM_MAX_LISTENERS; i++) {
		struct evlistener *l = &es->l[i];

		if (l->fd < 0)
			continue;
		/* A dead one is polled too: POLLHUP gets it closed right away. */
		pfd[n++] = (struct pollfd){
			.fd = l->fd,
			.events = (short)((l->rd_eof ? 0 : POLLIN) | (l->ready && l->len ? POLLOUT : 0)),
		};
	}
	pthread_mutex_unlock(&es->lock);
	return n;
}

void evstream_handle(struct evstream *es, const struct pollfd *pfd, unsigned n)
{
	unsigned closed = 0;

	if (n && (pfd[0].revents & POLLIN)) {
		uint64_t v;

		(void)!read(es->wake_fd, &v, sizeof(v));
	}
	pthread_mutex_lock(&es->lock);
	for (unsigned k = 1; k < n; k++) {
		struct evlistener *l = NULL;

		for (unsigned i = 0; i < EVSTREAM_MAX_LISTENERS; i++)
			if (es->l[i].fd == pfd[k].fd)
				l = &es->l[i];
		if (!l)
			continue;
		if (!l->dead && (pfd[k].revents & POLLIN)) {
			char junk[256];
			ssize_t r = recv(l->fd, junk, sizeof(junk), MSG_DONTWAIT);

			/* A listener only listens: what it sends is read and ignored.
			 * End of its sending side is no goodbye (it may have shut
			 * only that half); POLLHUP or a failed write is. */
			if (r == 0) {
				l->rd_eof = true;
			} else if (r < 0 && errno != EAGAIN && errno != EINTR) {
				l->dead = true;
				closed++;
			}
		}
		if (!l->dead && (pfd[k].revents & (POLLERR | POLLHUP))) {
			l->dead = true;
			closed++;
		}
		if (!l->dead && (pfd[k].revents & POLLOUT))
			flush(es, l);
	}
	/* Close the dropped ones here, on the thread that polls them. */
	for (unsigned i = 0; i < EVSTREAM_MAX_LISTENERS; i++)
		if (es->l[i].fd >= 0 && es->l[i].dead)
			listener_free(&es->l[i]);
	pthread_mutex_unlock(&es->lock);
	if (closed)
		dlog(RMR_LOG_INFO, "%s: %u events listener(s) left (%u connected)", es->what, closed,
		     evstream_listeners(es));
}

unsigned evstream_listeners(struct evstream *es)
{
	unsigned n = 0;

	pthread_mutex_lock(&es->lock);
	for (unsigned i = 0; i < EVSTREAM_MAX_LISTENERS; i++)
		n += es->l[i].fd >= 0 && !es->l[i].dead;
	pthread_mutex_unlock(&es->lock);
	return n;
}

void evline_put(FILE *f, struct evline *l)
{
	const char *line = evline_end(l);

	if (line)
		fprintf(f, "%s\n", line);
}
