/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the nbd-brmr fuzz targets share: a client that feeds the input to the
 * real socket code, and a quiet log.
 *
 * nbd-brmr reads from and writes to a stream socket, so the harnesses run the
 * real functions on one end of a socketpair. The client (a thread) writes the
 * input, half-closes, and reads and drops every reply until the server
 * closes its end; it polls both ways so neither side can block the other.
 * Include it once per target: it defines nbdb_log().
 */
#ifndef FUZZ_NBD_H
#define FUZZ_NBD_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nbdb.h"

/*
 * One client thread serves every input: a thread per input would cost more
 * than the input (ASan maps and unmaps per-thread state).
 */
struct fz_client {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool started, busy;     /* busy: a connection is being fed */
	int fd;
	const uint8_t *data[2]; /* written in turn: a fixed prefix, the input */
	size_t len[2];
	pthread_t thread;
	uint8_t *got;           /* if set: the first got_cap bytes the server sent */
	size_t got_cap, got_len;
	bool got_all;           /* got holds all of them */
};

/* Feed one connection: write the input, half-close, drain until the server closes. */
static void fz_client_feed(struct fz_client *c)
{
	unsigned part = 0;
	size_t done = 0;
	bool wr = true;
	char buf[16384];

	fcntl(c->fd, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		ssize_t n;

		while (wr && part < 2 && done == c->len[part]) {
			part++;
			done = 0;
		}
		if (wr && part == 2) {
			shutdown(c->fd, SHUT_WR);
			wr = false;
		}
		if (wr)
			p.events |= POLLOUT;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			abort();
		if (p.revents & POLLIN) {
			n = read(c->fd, buf, sizeof(buf));
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				break; /* the server closed its end */
			if (n > 0 && c->got) {
				size_t k = (size_t)n < c->got_cap - c->got_len ?
						   (size_t)n : c->got_cap - c->got_len;

				memcpy(c->got + c->got_len, buf, k);
				c->got_len += k;
				c->got_all &= k == (size_t)n;
			}
		}
		if (wr && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
			n = send(c->fd, c->data[part] + done, c->len[part] - done, MSG_NOSIGNAL);
			if (n > 0)
				done += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				wr = false; /* server gone: stop writing, drain */
		}
		if (!wr && (p.revents & (POLLERR | POLLHUP)) && !(p.revents & POLLIN))
			break;
	}
	close(c->fd);
}

static void *fz_client_main(void *arg)
{
	struct fz_client *c = arg;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->busy)
			pthread_cond_wait(&c->cv, &c->lock);
		pthread_mutex_unlock(&c->lock);
		fz_client_feed(c);
		pthread_mutex_lock(&c->lock);
		c->busy = false;
		pthread_cond_broadcast(&c->cv);
	}
	return NULL;
}

/* Hand the client a new socketpair to feed. @return the server's end. */
static inline int fz_client_start(struct fz_client *c, const void *prefix, size_t plen,
				  const void *data, size_t len)
{
	int sv[2];

	if (!c->started) {
		pthread_mutex_init(&c->lock, NULL);
		pthread_cond_init(&c->cv, NULL);
		if (pthread_create(&c->thread, NULL, fz_client_main, c))
			abort();
		c->started = true;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	pthread_mutex_lock(&c->lock);
	c->fd = sv[1];
	c->data[0] = prefix;
	c->len[0] = plen;
	c->data[1] = data;
	c->len[1] = len;
	c->got_len = 0;
	c->got_all = true;
	c->busy = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->lock);
	return sv[0];
}

/* Wait until the client saw the server close its end. */
static inline void fz_client_wait(struct fz_client *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->busy)
		pthread_cond_wait(&c->cv, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

/* nbd-brmr's log (log.c is not linked): format every line, print none. */
void nbdb_log(enum nbdb_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	(void)level;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
}

#endif
