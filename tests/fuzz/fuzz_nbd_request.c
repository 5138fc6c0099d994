/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_nbd_request: nbd-brmr's transmission phase (nbd_conn.c): the input,
 * after 1 flag byte, is the client's request stream on a socket, parsed by
 * the real reader (headers, WRITE payloads, refused payloads skipped,
 * request contexts and their buffers) and answered by the real writer.
 *
 * nbd_conn.c is included here so that its reader runs on the fuzzer's thread
 * and one connection with its writer thread serves every input: a thread
 * per input (nbdb_conn_start() starts two) would cost more than the input.
 * What conn_transmit() does around reader_loop() is repeated below; the
 * handshake has a target of its own.
 *
 * Flag bits 0-1 pick the queue depth (1, 2, 8, 64); bit 2: the server is
 * shutting down.
 *
 * libbrmr is not linked: brmr_submit() below stands in for the device (1 MiB
 * in memory) and checks what the parser hands it (a range inside the
 * export, a buffer of exactly the request's length, flags that fit the op).
 * It completes on a thread of its own, as librmr's event loop would, or
 * fails by the request's offset, so both reply paths are taken; that thread
 * also runs the reply flush that completions kick (the stand-ins for
 * librmr's watch calls below), so gathered replies are fuzzed too.
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

/* Completions waiting for the completion thread. */
static struct completion {
	brmr_cb cb;
	void *priv;
	int status;
} ring[QUEUE_MAX];
static unsigned ring_head, ring_count;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cv = PTHREAD_COND_INITIALIZER;

/*
 * librmr's loop as far as nbd_conn.c uses it: the completion thread is the
 * loop thread, and a kicked watch (the reply flush) runs once the
 * completions ready at the time are done, as at the end of a loop turn.
 */
static pthread_t completer_thread;
static void (*watch_fn)(void *priv);
static void *watch_priv;
static int watched_fd = -1;
static bool kicked; /* completion thread only */

struct rmr_client *brmr_client(struct brmr_dev *d)
{
	return (struct rmr_client *)d;
}

int rmr_client_watch_fd(struct rmr_client *c, int fd, void (*fn)(void *priv), void *priv)
{
	if (c != (struct rmr_client *)FAKE_DEV || fd < 0 || !fn || watched_fd >= 0)
		abort();
	watched_fd = fd;
	watch_fn = fn;
	watch_priv = priv;
	return 0;
}

int rmr_client_kick_fd(struct rmr_client *c, int fd)
{
	if (c != (struct rmr_client *)FAKE_DEV || fd != watched_fd)
		abort();
	if (!pthread_equal(pthread_self(), completer_thread))
		return -EPERM;
	kicked = true;
	return 0;
}

int rmr_client_unwatch_fd(struct rmr_client *c, int fd)
{
	(void)c;
	(void)fd;
	abort(); /* the connection lives across inputs */
}

static void *completer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ring_lock);
	for (;;) {
		struct completion c;

		while (!ring_count)
			pthread_cond_wait(&ring_cv, &ring_lock);
		c = ring[ring_head];
		ring_head = (ring_head + 1) % QUEUE_MAX;
		ring_count--;
		pthread_mutex_unlock(&ring_lock);
		c.cb(c.priv, c.status);
		pthread_mutex_lock(&ring_lock);
		if (!ring_count && kicked) {
			/* The end of a turn. */
			kicked = false;
			pthread_mutex_unlock(&ring_lock);
			watch_fn(watch_priv);
			pthread_mutex_lock(&ring_lock);
		}
	}
	return NULL;
}

int brmr_submit(struct brmr_dev *d, enum brmr_op op, unsigned flags, uint64_t offset,
		uint64_t len, const struct iovec *iov, unsigned iovcnt, brmr_cb cb, void *priv)
{
	bool data = op == BRMR_OP_READ || op == BRMR_OP_WRITE;
	int status = 0;

	if (d != FAKE_DEV || !cb || (flags & ~(unsigned)BRMR_F_FUA))
		abort();
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
	pthread_mutex_lock(&ring_lock);
	if (ring_count == QUEUE_MAX)
		abort(); /* more in flight than the queue depth */
	ring[(ring_head + ring_count) % QUEUE_MAX] = (struct completion){ cb, priv, status };
	ring_count++;
	pthread_cond_signal(&ring_cv);
	pthread_mutex_unlock(&ring_lock);
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

/* The connection, its writer and the device's completion thread live across inputs. */
static void setup(void)
{
	if (pthread_create(&completer_thread, NULL, completer, NULL))
		abort();
	nbdb_server_init(&srv, &ex);
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
	fd = fz_client_start(&client, NULL, 0, data + 1, size - 1);
	pthread_mutex_lock(&c->lock);
	c->free_list = &c->reqs[0];
	c->fd = fd;
	c->dead = false;
	pthread_mutex_unlock(&c->lock);

	reader_loop(c);

	/* And its drain: every request taken is answered before the contexts go. */
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
