/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_nbd_request: nbd-brmr's transmission phase (nbd_conn.c): the input,
 * after 1 flag byte, is the client's request stream on a socket, parsed by
 * the real reader (headers, WRITE payloads, refused payloads skipped,
 * request contexts and their buffers) and answered by the real writer.
 *
 * nbd_conn.c is included here so that one connection with its writer thread
 * serves every input: a thread per input (nbdb_conn_start() starts two)
 * would cost more than the input. What conn_transmit() does around the
 * reader is repeated below, on the fuzzer's thread; the handshake has a
 * target of its own.
 *
 * Flag bits 0-1 pick the queue depth (1, 2, 8, 64); bit 2: the server is
 * shutting down.
 *
 * libbrmr is not linked: a thread below stands in for librmr's event loop
 * (it serves the watched descriptors, so the reader runs there, and runs
 * completions and kicked watches after them), and brmr_submit() for the
 * device (1 MiB in memory): it checks what the parser hands it (a range
 * inside the export, a buffer of exactly the request's length, flags that
 * fit the op), and completes later in the loop, fails, or by the request's
 * offset now and then finds no free slot (-EAGAIN), so every reply path and
 * the reader's wait for a slot are taken; gathered replies are fuzzed too.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_nbd.h"
#include "nbd_conn.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPORT_SIZE (1u << 20)
#define QUEUE_MAX 64u

/* The device: its bytes, written and read in place when a request is submitted. */
static uint8_t disk[EXPORT_SIZE];
#define FAKE_DEV ((struct brmr_dev *)disk)

/* Completions waiting for their loop turn (loop thread only). */
static struct completion {
	brmr_cb cb;
	void *priv;
	int status;
} ring[QUEUE_MAX];
static unsigned ring_head, ring_count;
static bool refused_last; /* the last submission met -EAGAIN */

/*
 * librmr's loop as far as nbd_conn.c uses it: watched descriptors (the
 * connections' epoll set, the flush and wake eventfds), completions, and kicked
 * watches, which run once the completions ready at the time are done, as at
 * the end of a loop turn.
 */
#define MAX_WATCH 3
static pthread_t loop_thread;
static struct watch {
	int fd;
	void (*fn)(void *priv);
	void *priv;
	bool kicked;
} watches[MAX_WATCH];
static unsigned nwatch;

struct rmr_client *brmr_client(struct brmr_dev *d)
{
	return (struct rmr_client *)d;
}

int rmr_client_watch_fd(struct rmr_client *c, int fd, void (*fn)(void *priv), void *priv)
{
	if (c != (struct rmr_client *)FAKE_DEV || fd < 0 || !fn || nwatch == MAX_WATCH)
		abort();
	watches[nwatch++] = (struct watch){ fd, fn, priv, false };
	return 0;
}

int rmr_client_kick_fd(struct rmr_client *c, int fd)
{
	if (c != (struct rmr_client *)FAKE_DEV)
		abort();
	if (!pthread_equal(pthread_self(), loop_thread))
		return -EPERM;
	for (unsigned i = 0; i < nwatch; i++) {
		if (watches[i].fd == fd) {
			watches[i].kicked = true;
			return 0;
		}
	}
	abort();
}

int rmr_client_unwatch_fd(struct rmr_client *c, int fd)
{
	(void)c;
	(void)fd;
	abort(); /* the server lives across inputs */
}

static void *loop_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[MAX_WATCH];
		unsigned n = ring_count;
		bool kicked = false;

		/* This turn's completions, then the watches they kicked. */
		while (n--) {
			struct completion c = ring[ring_head];

			ring_head = (ring_head + 1) % QUEUE_MAX;
			ring_count--;
			c.cb(c.priv, c.status);
		}
		for (unsigned i = 0; i < nwatch; i++) {
			if (watches[i].kicked) {
				watches[i].kicked = false;
				kicked = true;
				watches[i].fn(watches[i].priv);
			}
		}
		if (ring_count || kicked)
			continue;
		for (unsigned i = 0; i < nwatch; i++)
			p[i] = (struct pollfd){ .fd = watches[i].fd, .events = POLLIN };
		if (poll(p, nwatch, -1) < 0 && errno != EINTR)
			abort();
		for (unsigned i = 0; i < nwatch; i++)
			if (p[i].revents & POLLIN)
				watches[i].fn(watches[i].priv);
	}
	return NULL;
}

int brmr_submit(struct brmr_dev *d, enum brmr_op op, unsigned flags, uint64_t offset,
		uint64_t len, const struct iovec *iov, unsigned iovcnt, brmr_cb cb, void *priv)
{
	bool data = op == BRMR_OP_READ || op == BRMR_OP_WRITE;
	int status = 0;

	if (d != FAKE_DEV || !cb || (flags & ~(unsigned)BRMR_F_FUA) ||
	    !pthread_equal(pthread_self(), loop_thread))
		abort();
	/* No free slot, while something is in flight (whose completion
	 * resumes the reader), every other time for these offsets. */
	if ((offset >> 9) % 8 == 6 && ring_count > 0 && !refused_last) {
		refused_last = true;
		return -EAGAIN;
	}
	refused_last = false;
	if (op == BRMR_OP_FLUSH) {
		if (offset || len || flags)
			abort();
	} else if (op == BRMR_OP_READ) {
		if (flags)
			abort();
	} else if (op != BRMR_OP_WRITE && op != BRMR_OP_TRIM && op != BRMR_OP_WRITE_ZEROES) {
		abort();
	}
	if (op != BRMR_OP_FLUSH && (!len || offset > EXPORT_SIZE || len > EXPORT_SIZE - offset))
		abort();
	if (data) {
		/* The whole buffer is copied: ASan checks its size. */
		if (iovcnt != 1 || !iov || iov[0].iov_len != len || !iov[0].iov_base)
			abort();
		if (op == BRMR_OP_READ)
			memcpy(iov[0].iov_base, disk + offset, len);
		else
			memcpy(disk + offset, iov[0].iov_base, len);
	} else if (iov || iovcnt) {
		abort();
	} else if (op != BRMR_OP_FLUSH) {
		memset(disk + offset, 0, len);
	}

	/* The device's answer, by offset: done, failed, or refused at submit. */
	switch ((offset >> 9) % 4) {
	case 1:
		status = -EIO;
		break;
	case 2:
		return -ESHUTDOWN;
	case 3:
		status = -ENOSPC;
		break;
	default:
		break;
	}
	if (ring_count == QUEUE_MAX)
		abort(); /* more in flight than the queue depth */
	ring[(ring_head + ring_count) % QUEUE_MAX] = (struct completion){ cb, priv, status };
	ring_count++;
	return 0;
}

static struct nbdb_export ex = {
	.dev = FAKE_DEV,
	.size = EXPORT_SIZE,
	.name = "fuzz",
	.description = "fuzzed export",
	.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		  NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES,
};
static struct nbdb_server srv;
static struct nbdb_conn *conn;
static struct fz_client client;

/* The connection, its writer and the loop thread live across inputs. */
static void setup(void)
{
	if (nbdb_server_init(&srv, &ex) < 0 || pthread_create(&loop_thread, NULL, loop_main, NULL))
		abort();
	conn = calloc(1, sizeof(*conn));
	if (!conn)
		abort();
	conn->srv = &srv;
	conn->ex = &ex;
	conn->id = 1;
	pthread_mutex_init(&conn->lock, NULL);
	pthread_cond_init(&conn->free_cv, NULL);
	pthread_cond_init(&conn->reply_cv, NULL);
	atomic_init(&conn->busy, 0);
	conn->rbuf = malloc(CONN_RBUF_SIZE);
	if (!conn->rbuf || pthread_create(&conn->writer, NULL, writer_main, conn))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned depth[] = { 1, 2, 8, QUEUE_MAX };
	struct nbdb_conn *c;
	unsigned qd;
	int fd;

	if (size < 1)
		return 0;
	if (!conn)
		setup();
	c = conn;
	atomic_store(&srv.stopping, (data[0] & 4) != 0);

	/* What conn_transmit() sets up, per input. */
	qd = depth[data[0] & 3];
	c->reqs = calloc(qd, sizeof(*c->reqs));
	if (!c->reqs)
		abort();
	for (unsigned i = 0; i < qd; i++) {
		c->reqs[i].conn = c;
		c->reqs[i].hdr.magic = nbd_to_be32(NBD_SIMPLE_REPLY_MAGIC);
		c->reqs[i].next = i + 1 < qd ? &c->reqs[i + 1] : NULL;
	}
	c->buf_bytes = 0;
	c->rpos = c->rend = 0;
	c->nreq = 0;
	c->in = IN_HEADER;
	c->cur = NULL;
	c->parked = c->stall_listed = false;
	fd = fz_client_start(&client, NULL, 0, data + 1, size - 1);
	pthread_mutex_lock(&c->lock);
	c->free_list = &c->reqs[0];
	c->fd = fd;
	c->dead = false;
	c->wants_ctx = c->read_done = c->offload_done = false;
	c->offload = NULL;
	pthread_mutex_unlock(&c->lock);

	/* The reader runs on the loop thread until the stream ends (this
	 * thread reads the large payloads it hands over); then the drain:
	 * every request taken is answered before the contexts go. */
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c };

	if (epoll_ctl(srv.conn_epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		abort();
	conn_serve_offloads(c); /* large payloads, as the connection's thread */
	pthread_mutex_lock(&c->lock);
	while (atomic_load(&c->busy) > 0)
		pthread_cond_wait(&c->free_cv, &c->lock);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < qd; i++)
		free(c->reqs[i].buf);
	free(c->reqs);
	c->reqs = NULL;
	close(fd);
	fz_client_wait(&client);
	return 0;
}
