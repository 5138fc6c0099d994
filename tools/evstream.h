/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * evstream: the "events" command of the daemons' control sockets. Every
 * event is one JSON object on one line; each listener first gets the
 * current state ("exists" lines, then one "exists-done" line, as drbdsetup
 * events2 does), then every change as it happens.
 *
 * Events are published from librmr's event-loop thread, which must never
 * block: lines are queued per listener and written without blocking; a
 * listener whose queue passes its limit is dropped (and the reason logged),
 * never waited for. Only the main thread closes listener sockets, so the
 * descriptors it polls stay valid.
 *
 *   main thread:  evstream_attach(), evstream_start(), evstream_pollfds(),
 *                 evstream_handle(), evstream_destroy()
 *   any thread:   evstream_publish()
 */
#ifndef BRMR_TOOLS_EVSTREAM_H
#define BRMR_TOOLS_EVSTREAM_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* Listeners at once; more are refused. */
#define EVSTREAM_MAX_LISTENERS 16
/* Bytes queued for one listener before it is dropped as too slow. */
#define EVSTREAM_MAX_QUEUE (256u * 1024)
/* Longest event line. */
#define EVLINE_MAX 1024

/* ---- one event line ------------------------------------------------------ */

struct evline {
	char buf[EVLINE_MAX];
	size_t len;
	bool overflow;
};

/* Start a line: {"time":"...Z","role":ROLE,"type":TYPE[,"kind":KIND][,"pool":POOL]
 * (KIND and POOL may be NULL). */
void evline_begin(struct evline *l, const char *role, const char *type, const char *kind,
		  const char *pool);
void evline_str(struct evline *l, const char *key, const char *val); /* NULL: null */
void evline_u64(struct evline *l, const char *key, uint64_t v);
void evline_int(struct evline *l, const char *key, long long v);
void evline_bool(struct evline *l, const char *key, bool v);
/* Close the object. @return the line (without a newline), or NULL if it overflowed. */
const char *evline_end(struct evline *l);
/* Finish @p l and append it, with a newline, to @p f (a snapshot being built). */
void evline_put(FILE *f, struct evline *l);

/* ---- the listeners --------------------------------------------------------- */

struct evlistener {
	int fd;            /* -1: slot free */
	bool ready;        /* got its initial state: queued lines may go out */
	bool dead;         /* dropped; the main thread closes it */
	bool rd_eof;       /* it shut its sending side: poll only for POLLHUP */
	char *buf;         /* lines not yet written */
	size_t len, cap;
};

struct evstream {
	pthread_mutex_t lock;
	int wake_fd;       /* eventfd: a listener needs the main thread */
	const char *what;  /* "control socket PATH", for log lines */
	struct evlistener l[EVSTREAM_MAX_LISTENERS];
};

int evstream_init(struct evstream *es, const char *what);
void evstream_destroy(struct evstream *es);

/* Take @p fd (an accepted control connection) as a listener. Events are
 * queued for it from now on, but sent only after evstream_start().
 * @return the listener's slot, or -EMFILE if there are too many (the caller
 * answers and closes @p fd). */
int evstream_attach(struct evstream *es, int fd);
/* Send @p initial (the "exists" lines), then what was queued since attach. */
void evstream_start(struct evstream *es, int slot, const char *initial, size_t len);
/* Queue @p line (without its newline) for every listener. Never blocks. */
void evstream_publish(struct evstream *es, const char *line);

/* Fill @p pfd (room for EVSTREAM_MAX_LISTENERS + 1) with what the main loop
 * polls for the stream. @return the entries used. */
unsigned evstream_pollfds(struct evstream *es, struct pollfd *pfd);
/* Act on the poll results of the entries evstream_pollfds() filled. */
void evstream_handle(struct evstream *es, const struct pollfd *pfd, unsigned n);
/* Listeners connected now. */
unsigned evstream_listeners(struct evstream *es);

#endif
