/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The libfabric transport over tcp (FI_EP_MSG, 127.0.0.1) and shm (RDM with
 * emulated connections): a listener and a connector instance in one process,
 * both driven by calling progress until a condition holds or a deadline
 * passes. Exit 77 only if neither provider is available.
 */
#include "unit.h"
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rmr/rmr.h>
#include <rmr/transport.h>

#include "transport/transports.h"

#define MAX_MSG (64 * 1024)
#define RX_DEPTH 8
#define TX_DEPTH 4
#define MAX_CONNS 8
#define RXQ 64
#define TIMEOUT_MS 10000

static const struct rmr_transport_ops *ops = &rmr_fabric_transport_ops;
/* tcp completes a connection's sends in the order they were made, bundles too. */
static bool check_send_order;

struct peer;

struct tconn {
	struct peer *p;
	unsigned send_seq;  /* sends made */
	unsigned done_seq;  /* successful send_done upcalls, which come in order (tcp) */
	bool send_failed;
	struct rmr_conn *conn;
	int connected;      /* 0 pending, 1 up, < 0 the connected() error */
	bool closed;
	int closed_reason;
	unsigned send_ok;
	unsigned send_err;
	unsigned inflight;
	struct tmsg {
		void *buf;
		size_t len;
		void *rx;
	} rxq[RXQ];
	unsigned rx_head, rx_tail;
};

struct peer {
	void *tp;
	struct tconn conns[MAX_CONNS];
	unsigned nconns;
	bool refuse;
	unsigned refused;
};

/* A send buffer, busy until its send_done. */
struct tslot {
	bool busy;
	unsigned seq;       /* the connection's send_seq when sent */
	int status;
	struct tconn *tc;
	uint8_t *buf;
};

/* --- upcalls -------------------------------------------------------------- */

static void *ev_accepted(void *ev_ctx, struct rmr_conn *conn)
{
	struct peer *p = ev_ctx;
	struct tconn *tc;

	if (p->refuse) {
		p->refused++;
		return NULL;
	}
	ck_assert_uint_lt(p->nconns, MAX_CONNS);
	tc = &p->conns[p->nconns++];
	memset(tc, 0, sizeof(*tc));
	tc->p = p;
	tc->conn = conn;
	tc->connected = 1;
	return tc;
}

static void ev_connected(void *ev_ctx, void *conn_ctx, int status)
{
	struct tconn *tc = conn_ctx;

	(void)ev_ctx;
	ck_assert_int_eq(tc->connected, 0);
	ck_assert_int_le(status, 0);
	tc->connected = status ? status : 1;
}

static void ev_recv(void *ev_ctx, void *conn_ctx, void *buf, size_t len, void *rx)
{
	struct tconn *tc = conn_ctx;
	struct tmsg *m;

	(void)ev_ctx;
	ck_assert_int_eq(tc->connected, 1);
	ck_assert(!tc->closed);
	ck_assert_uint_lt(tc->rx_tail - tc->rx_head, RXQ);
	m = &tc->rxq[tc->rx_tail++ % RXQ];
	m->buf = buf;
	m->len = len;
	m->rx = rx;
}

static void ev_send_done(void *ev_ctx, void *conn_ctx, void *op_ctx, int status)
{
	struct tconn *tc = conn_ctx;
	struct tslot *s = op_ctx;

	(void)ev_ctx;
	ck_assert(!tc->closed); /* send_done comes before closed */
	ck_assert(s->busy);
	ck_assert_ptr_eq(s->tc, tc);
	s->busy = false;
	s->status = status;
	tc->inflight--;
	if (status) {
		tc->send_err++;
		tc->send_failed = true;
	} else {
		tc->send_ok++;
		if (check_send_order && !tc->send_failed)
			ck_assert_uint_eq(s->seq, tc->done_seq);
		tc->done_seq = s->seq + 1;
	}
}

static void ev_closed(void *ev_ctx, void *conn_ctx, int reason)
{
	struct tconn *tc = conn_ctx;

	(void)ev_ctx;
	ck_assert_int_eq(tc->connected, 1); /* never after a failed connect */
	ck_assert(!tc->closed);
	ck_assert_int_lt(reason, 0);
	ck_assert_uint_eq(tc->inflight, 0);
	tc->closed = true;
	tc->closed_reason = reason;
}

static const struct rmr_transport_events events = {
	.size = sizeof(struct rmr_transport_events),
	.accepted = ev_accepted,
	.connected = ev_connected,
	.recv = ev_recv,
	.send_done = ev_send_done,
	.closed = ev_closed,
};

/* --- helpers -------------------------------------------------------------- */

static struct timespec deadline_in(unsigned ms)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static bool passed(const struct timespec *d)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

static void progress2(struct peer *a, struct peer *b)
{
	if (a && a->tp)
		ck_assert_int_ge(ops->progress(a->tp), 0);
	if (b && b->tp)
		ck_assert_int_ge(ops->progress(b->tp), 0);
}

/* Drive both instances until @p expr holds; fail the test after 10 s. */
#define PUMP_UNTIL(a, b, expr)                                                       \
	do {                                                                         \
		struct timespec d_ = deadline_in(TIMEOUT_MS);                        \
		while (!(expr)) {                                                    \
			ck_assert_msg(!passed(&d_), "timed out waiting for: %s", #expr); \
			progress2(a, b);                                             \
		}                                                                    \
	} while (0)

static int peer_create(struct peer *p, const char *prov, const char *name)
{
	struct rmr_transport_params params = {
		.size = sizeof(params),
		.provider = prov,
		.max_msg = MAX_MSG,
		.rx_depth = RX_DEPTH,
		.tx_depth = TX_DEPTH,
		.name = name,
	};

	memset(p, 0, sizeof(*p));
	return ops->create(&params, &events, p, &p->tp);
}

static void peer_destroy(struct peer *p)
{
	if (p->tp)
		ops->destroy(p->tp);
	p->tp = NULL;
}

/* A port the kernel just handed out, so most likely free. */
static unsigned free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	close(fd);
	return ntohs(sin.sin_port);
}

/* The API cannot bind port 0: try ports until one is free. */
static void listen_tcp(struct peer *p, char *addr, size_t len)
{
	int ret = -EADDRINUSE;
	unsigned tries;

	for (tries = 0; tries < 50 && ret == -EADDRINUSE; tries++) {
		snprintf(addr, len, "127.0.0.1:%u", free_port());
		ret = ops->listen(p->tp, addr);
	}
	ck_assert_int_eq(ret, 0);
}

static void shm_name(char *addr, size_t len, const char *tag)
{
	snprintf(addr, len, "tf%d-%s", (int)getpid(), tag);
}

static void listen_shm(struct peer *p, const char *tag, char *addr, size_t len)
{
	shm_name(addr, len, tag);
	ck_assert_int_eq(ops->listen(p->tp, addr), 0);
}

/* Connect @p cli to @p addr where @p srv listens; returns both ends. */
static struct tconn *connect_pair(struct peer *srv, struct peer *cli, const char *addr,
				  struct tconn **srv_tc)
{
	struct tconn *tc;
	unsigned before = srv->nconns;
	int ret;

	ck_assert_uint_lt(cli->nconns, MAX_CONNS);
	tc = &cli->conns[cli->nconns++];
	memset(tc, 0, sizeof(*tc));
	tc->p = cli;
	ret = ops->connect(cli->tp, addr, tc, &tc->conn);
	ck_assert_int_eq(ret, 0);
	ck_assert_ptr_nonnull(tc->conn);
	PUMP_UNTIL(srv, cli, tc->connected != 0 && srv->nconns > before);
	ck_assert_int_eq(tc->connected, 1);
	*srv_tc = &srv->conns[before];
	return tc;
}

static uint8_t pattern(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 9));
}

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = pattern(seed, i);
}

static bool check_pattern(const uint8_t *buf, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != pattern(seed, i))
			return false;
	return true;
}

/* Send @p s->buf[0..len) as @p pieces iov pieces of uneven sizes. */
static int send_pieces(struct peer *p, struct tconn *tc, struct tslot *s, size_t len, int pieces)
{
	struct iovec iov[4];
	size_t off = 0;
	int i, ret;

	for (i = 0; i < pieces; i++) {
		size_t n = i == pieces - 1 ? len - off : (len / (size_t)pieces) - (size_t)i * 3;

		iov[i].iov_base = s->buf + off;
		iov[i].iov_len = n;
		off += n;
	}
	ck_assert_uint_eq(off, len);
	s->busy = true;
	s->tc = tc;
	s->seq = tc->send_seq;
	tc->inflight++;
	ret = ops->send(p->tp, tc->conn, iov, pieces, s);
	if (ret) {
		s->busy = false;
		tc->inflight--;
	} else {
		tc->send_seq++;
	}
	return ret;
}

static struct tmsg *next_msg(struct tconn *tc)
{
	return tc->rx_head == tc->rx_tail ? NULL : &tc->rxq[tc->rx_head % RXQ];
}

static void release_msg(struct peer *p, struct tconn *tc)
{
	struct tmsg *m = next_msg(tc);

	ck_assert_ptr_nonnull(m);
	ops->recv_release(p->tp, tc->conn, m->rx);
	tc->rx_head++;
}

/* Count our shm regions still in /dev/shm: listeners and connections. */
static unsigned shm_files_of(int pid)
{
	char a[64], b[64];
	struct dirent *de;
	unsigned n = 0;
	DIR *d = opendir("/dev/shm");

	if (!d)
		return 0;
	snprintf(a, sizeof(a), "rmr-tf%d-", pid);
	snprintf(b, sizeof(b), "rmr-%d-", pid);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, a, strlen(a)) || !strncmp(de->d_name, b, strlen(b)))
			n++;
	closedir(d);
	return n;
}

/* Remove regions left by test processes that died (SIGKILL leaves them). */
static void shm_clean_stale(void)
{
	struct dirent *de;
	DIR *d = opendir("/dev/shm");

	if (!d)
		return;
	while ((de = readdir(d))) {
		const char *s = de->d_name;
		char path[300];
		int pid;

		if (!strncmp(s, "rmr-tf", 6))
			pid = atoi(s + 6);
		else if (!strncmp(s, "rmr-", 4) && s[4] >= '0' && s[4] <= '9')
			pid = atoi(s + 4);
		else
			continue;
		if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH) || pid == getpid()) {
			snprintf(path, sizeof(path), "/dev/shm/%s", s);
			unlink(path);
		}
	}
	closedir(d);
}

/* --- scenarios shared by both providers ------------------------------------ */

static void exchange_sizes(struct peer *srv, struct peer *cli, struct tconn *ctc, struct tconn *stc)
{
	static const struct {
		size_t len;
		int pieces;
	} cases[] = { { 80, 2 }, { 4096, 3 }, { MAX_MSG, 4 }, { MAX_MSG, 2 } };
	struct tslot s = { .buf = malloc(MAX_MSG) };
	unsigned i;

	ck_assert_ptr_nonnull(s.buf);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tmsg *m;
		struct iovec echo;

		fill(s.buf, cases[i].len, i + 1);
		ck_assert_int_eq(send_pieces(cli, ctc, &s, cases[i].len, cases[i].pieces), 0);
		PUMP_UNTIL(srv, cli, !s.busy && next_msg(stc));
		ck_assert_int_eq(s.status, 0);
		m = next_msg(stc);
		ck_assert_uint_eq(m->len, cases[i].len);
		ck_assert(check_pattern(m->buf, m->len, i + 1));

		/* The core may answer from a lent buffer before releasing it. */
		{
			struct tslot r = { .busy = true, .tc = stc, .seq = stc->send_seq++ };

			echo.iov_base = m->buf;
			echo.iov_len = m->len;
			stc->inflight++;
			ck_assert_int_eq(ops->send(srv->tp, stc->conn, &echo, 1, &r), 0);
			PUMP_UNTIL(srv, cli, !r.busy && next_msg(ctc));
			ck_assert_int_eq(r.status, 0);
		}
		release_msg(srv, stc);
		m = next_msg(ctc);
		ck_assert_uint_eq(m->len, cases[i].len);
		ck_assert(check_pattern(m->buf, m->len, i + 1));
		release_msg(cli, ctc);
	}
	free(s.buf);
}

/*
 * Five times rx_depth messages of varying size and piece count, never more
 * than tx_depth in flight; the receiver checks order and content and gives
 * each buffer back.
 */
static void stream(struct peer *srv, struct peer *cli, struct tconn *ctc, struct tconn *stc)
{
	enum { N = RX_DEPTH * 5 };
	struct tslot slots[TX_DEPTH];
	unsigned sent = 0, got = 0, i;
	struct timespec d = deadline_in(TIMEOUT_MS);

	for (i = 0; i < TX_DEPTH; i++) {
		slots[i].busy = false;
		slots[i].buf = malloc(MAX_MSG);
		ck_assert_ptr_nonnull(slots[i].buf);
	}
	while (got < N) {
		struct tmsg *m;

		ck_assert_msg(!passed(&d), "stream stalled: sent %u, received %u", sent, got);
		for (i = 0; i < TX_DEPTH && sent < N; i++) {
			size_t len = 80 + ((size_t)sent * 7919u) % (MAX_MSG - 80);
			int pieces = 1 + (int)(sent % 4);

			if (slots[i].busy)
				continue;
			ck_assert_uint_lt(ctc->inflight, TX_DEPTH);
			fill(slots[i].buf, len, 1000 + sent);
			ck_assert_int_eq(send_pieces(cli, ctc, &slots[i], len, pieces), 0);
			sent++;
		}
		progress2(srv, cli);
		while ((m = next_msg(stc))) {
			size_t len = 80 + ((size_t)got * 7919u) % (MAX_MSG - 80);

			ck_assert_uint_eq(m->len, len);
			ck_assert_msg(check_pattern(m->buf, m->len, 1000 + got),
				      "message %u corrupt or out of order", got);
			release_msg(srv, stc);
			got++;
		}
	}
	PUMP_UNTIL(srv, cli, ctc->inflight == 0);
	ck_assert_uint_ge(ctc->send_ok, N);
	ck_assert_uint_eq(ctc->send_err, 0);
	for (i = 0; i < TX_DEPTH; i++)
		free(slots[i].buf);
}

/* One side closes: the other gets closed(), and send then fails. */
static void close_one_side(struct peer *srv, struct peer *cli, struct tconn *ctc, struct tconn *stc)
{
	struct tslot s = { .buf = malloc(64) };
	struct iovec iov = { .iov_base = s.buf, .iov_len = 64 };

	ops->close(cli->tp, ctc->conn);
	ctc->conn = NULL;
	PUMP_UNTIL(srv, cli, stc->closed);
	ck_assert(stc->closed_reason == -ECONNRESET || stc->closed_reason == -ECONNABORTED);
	ck_assert_int_lt(ops->send(srv->tp, stc->conn, &iov, 1, &s), 0);
	ops->close(srv->tp, stc->conn);
	stc->conn = NULL;
	free(s.buf);
}

/* --- tcp -------------------------------------------------------------------- */

static struct peer srv, cli;

static void setup_tcp(void)
{
	ck_assert_int_eq(peer_create(&srv, "tcp", "test srv"), 0);
	ck_assert_int_eq(peer_create(&cli, NULL, "test cli"), 0); /* NULL = tcp */
	check_send_order = true;
}

static void teardown(void)
{
	peer_destroy(&cli);
	peer_destroy(&srv);
}

START_TEST(tcp_exchange)
{
	char addr[64];
	struct tconn *ctc, *stc;

	ck_assert_int_ge(ops->wait_fd(srv.tp), 0);
	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	exchange_sizes(&srv, &cli, ctc, stc);
	stream(&srv, &cli, ctc, stc);
	close_one_side(&srv, &cli, ctc, stc);
}
END_TEST

START_TEST(tcp_two_connections)
{
	char addr[64], byname[80];
	struct tconn *c1, *s1, *c2, *s2;

	listen_tcp(&srv, addr, sizeof(addr));
	c1 = connect_pair(&srv, &cli, addr, &s1);
	/* A host name is resolved too. */
	snprintf(byname, sizeof(byname), "localhost%s", strchr(addr, ':'));
	c2 = connect_pair(&srv, &cli, byname, &s2);
	stream(&srv, &cli, c2, s2);
	stream(&srv, &cli, c1, s1);
	close_one_side(&srv, &cli, c1, s1);
	close_one_side(&srv, &cli, c2, s2);
}
END_TEST

/* The listening side goes away entirely: the connector hears closed(). */
START_TEST(tcp_peer_destroyed)
{
	char addr[64];
	struct tconn *ctc, *stc;

	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	ops->close(srv.tp, stc->conn);
	peer_destroy(&srv);
	PUMP_UNTIL(NULL, &cli, ctc->closed);
	ck_assert_int_lt(ctc->closed_reason, 0);
	ops->close(cli.tp, ctc->conn);
}
END_TEST

/* Sends in flight when the peer leaves are failed before closed(). */
START_TEST(tcp_inflight_on_close)
{
	char addr[64];
	struct tconn *ctc, *stc;
	struct tslot slots[TX_DEPTH];
	unsigned i;

	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	for (i = 0; i < TX_DEPTH; i++) {
		slots[i].buf = calloc(1, MAX_MSG);
		ck_assert_int_eq(send_pieces(&cli, ctc, &slots[i], MAX_MSG, 4), 0);
	}
	/* The server never progresses again: it closes at once. */
	ops->close(srv.tp, stc->conn);
	peer_destroy(&srv);
	PUMP_UNTIL(NULL, &cli, ctc->closed);
	ck_assert_uint_eq(ctc->inflight, 0);
	ck_assert_uint_eq(ctc->send_ok + ctc->send_err, TX_DEPTH);
	ops->close(cli.tp, ctc->conn);
	for (i = 0; i < TX_DEPTH; i++)
		free(slots[i].buf);
}
END_TEST

/* --- tcp bundles --------------------------------------------------------------- */

/* Sizes that go in bundles (at most 16 KiB), odd ones included. */
static size_t small_len(unsigned i)
{
	static const size_t lens[] = { 1, 4096 + 64, 16 * 1024, 77, 4096, 8191, 100, 13 };

	return lens[i % (sizeof(lens) / sizeof(lens[0]))];
}

static struct rmr_fabric_stats stats_of(struct peer *p)
{
	struct rmr_fabric_stats st;

	rmr_fabric_stats(p->tp, &st);
	return st;
}

/*
 * TX_DEPTH small messages sent in one turn go as one bundle; each arrives
 * alone, in order, in a buffer the core may fill to max_msg and answer
 * from; a large message after them waits for them.
 */
START_TEST(tcp_bundle_small_sends)
{
	char addr[64];
	struct tconn *ctc, *stc;
	struct tslot slots[TX_DEPTH];
	struct rmr_fabric_stats cs, ss;
	unsigned i, round;

	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	for (i = 0; i < TX_DEPTH; i++) {
		slots[i].buf = malloc(MAX_MSG);
		ck_assert_ptr_nonnull(slots[i].buf);
	}
	for (round = 0; round < 3; round++) {
		unsigned base = round * TX_DEPTH;

		/* The last one of round 1 is large: the three before it go first. */
		for (i = 0; i < TX_DEPTH; i++) {
			size_t len = round == 1 && i == TX_DEPTH - 1 ? MAX_MSG : small_len(base + i);

			fill(slots[i].buf, len, base + i);
			ck_assert_int_eq(send_pieces(&cli, ctc, &slots[i], len, 1 + (int)(i % 4)), 0);
		}
		PUMP_UNTIL(&srv, &cli, ctc->inflight == 0 && stc->rx_tail - stc->rx_head == TX_DEPTH);
		ck_assert_uint_eq(ctc->send_err, 0);
		for (i = 0; i < TX_DEPTH; i++) {
			struct tmsg *m = &stc->rxq[(stc->rx_head + i) % RXQ];
			size_t len = round == 1 && i == TX_DEPTH - 1 ? MAX_MSG : small_len(base + i);

			ck_assert_uint_eq(m->len, len);
			ck_assert_msg(check_pattern(m->buf, m->len, base + i),
				      "message %u corrupt or out of order", base + i);
		}
		/* The core may use all of a lent buffer (ASan sees a short one). */
		for (i = 0; i < TX_DEPTH; i++)
			memset(stc->rxq[(stc->rx_head + i) % RXQ].buf, 0xa5, MAX_MSG);
		for (i = 0; i < TX_DEPTH; i++)
			release_msg(&srv, stc);
	}
	cs = stats_of(&cli);
	ss = stats_of(&srv);
	/* Rounds 0 and 2 whole, round 1 its first three. */
	ck_assert_uint_eq(cs.bundles_sent, 3);
	ck_assert_uint_eq(cs.bundled_msgs, 3 * TX_DEPTH - 1);
	ck_assert_uint_eq(ss.bundles_received, 3);

	/* Answers from lent buffers go in bundles too. */
	for (i = 0; i < TX_DEPTH; i++) {
		fill(slots[i].buf, small_len(i), 500 + i);
		ck_assert_int_eq(send_pieces(&cli, ctc, &slots[i], small_len(i), 1), 0);
	}
	PUMP_UNTIL(&srv, &cli, stc->rx_tail - stc->rx_head == TX_DEPTH);
	{
		struct tslot r[TX_DEPTH];

		for (i = 0; i < TX_DEPTH; i++) {
			struct tmsg *m = &stc->rxq[(stc->rx_head + i) % RXQ];
			struct iovec echo = { m->buf, m->len };

			r[i] = (struct tslot){ .busy = true, .tc = stc, .seq = stc->send_seq++ };
			stc->inflight++;
			ck_assert_int_eq(ops->send(srv.tp, stc->conn, &echo, 1, &r[i]), 0);
		}
		PUMP_UNTIL(&srv, &cli, stc->inflight == 0 && ctc->rx_tail - ctc->rx_head == TX_DEPTH);
	}
	for (i = 0; i < TX_DEPTH; i++) {
		struct tmsg *m = next_msg(ctc);

		ck_assert_uint_eq(m->len, small_len(i));
		ck_assert(check_pattern(m->buf, m->len, 500 + i));
		release_msg(&cli, ctc);
		release_msg(&srv, stc);
	}
	ck_assert_uint_eq(stats_of(&srv).bundles_sent, 1);
	stream(&srv, &cli, ctc, stc);
	close_one_side(&srv, &cli, ctc, stc);
	for (i = 0; i < TX_DEPTH; i++)
		free(slots[i].buf);
}
END_TEST

/* Send small messages 2000 + *@p sent... in the free slots, up to @p n in all. */
static void refill(struct tconn *ctc, struct tslot *slots, unsigned *sent, unsigned n)
{
	for (unsigned i = 0; i < TX_DEPTH && *sent < n; i++) {
		if (slots[i].busy)
			continue;
		fill(slots[i].buf, small_len(*sent), 2000 + *sent);
		ck_assert_int_eq(send_pieces(&cli, ctc, &slots[i], small_len(*sent), 2), 0);
		(*sent)++;
	}
}

/*
 * A receiver that keeps every buffer: bundles keep coming (their sends
 * complete once written), but no more than rx_depth messages are lent at
 * once; the rest waits, in order, until buffers come back.
 */
START_TEST(tcp_bundle_backpressure)
{
	enum { N = RX_DEPTH * 4 };
	char addr[64];
	struct tconn *ctc, *stc;
	struct tslot slots[TX_DEPTH];
	unsigned sent = 0, got = 0, i;
	struct timespec d;

	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	for (i = 0; i < TX_DEPTH; i++) {
		slots[i] = (struct tslot){ .buf = malloc(MAX_MSG) };
		ck_assert_ptr_nonnull(slots[i].buf);
	}
	/*
	 * One message alone first (a posted buffer lent as it is), so that
	 * the bundles of TX_DEPTH after it do not end at rx_depth: one of
	 * them stops half lent.
	 */
	fill(slots[0].buf, small_len(0), 2000);
	ck_assert_int_eq(send_pieces(&cli, ctc, &slots[0], small_len(0), 1), 0);
	sent++;
	PUMP_UNTIL(&srv, &cli, next_msg(stc) && !slots[0].busy);
	/* Hold everything: at most rx_depth arrive, however long we wait. */
	d = deadline_in(TIMEOUT_MS);
	while (sent < N && !passed(&d)) {
		refill(ctc, slots, &sent, N);
		progress2(&srv, &cli);
		ck_assert_uint_le(stc->rx_tail - stc->rx_head, RX_DEPTH);
		if (stc->rx_tail - stc->rx_head == RX_DEPTH && sent >= 2 * RX_DEPTH)
			break;
	}
	ck_assert_uint_eq(stc->rx_tail - stc->rx_head, RX_DEPTH);
	d = deadline_in(200);
	while (!passed(&d))
		progress2(&srv, &cli);
	ck_assert_uint_eq(stc->rx_tail - stc->rx_head, RX_DEPTH);
	/* Messages wait for a buffer: once one comes back, the loop must not sleep. */
	ck_assert(check_pattern(next_msg(stc)->buf, small_len(0), 2000));
	release_msg(&srv, stc);
	got++;
	ck_assert_int_eq(ops->trywait(srv.tp), -EAGAIN);
	/* Give back one at a time: the rest comes, in order. */
	d = deadline_in(TIMEOUT_MS);
	while (got < N) {
		struct tmsg *m;

		ck_assert_msg(!passed(&d), "stalled: sent %u, received %u", sent, got);
		refill(ctc, slots, &sent, N);
		progress2(&srv, &cli);
		if ((m = next_msg(stc))) {
			ck_assert_uint_eq(m->len, small_len(got));
			ck_assert_msg(check_pattern(m->buf, m->len, 2000 + got),
				      "message %u corrupt or out of order", got);
			release_msg(&srv, stc);
			got++;
		}
	}
	ck_assert_uint_gt(stats_of(&srv).bundles_received, 0);
	PUMP_UNTIL(&srv, &cli, ctc->inflight == 0);
	ck_assert_uint_eq(ctc->send_err, 0);
	close_one_side(&srv, &cli, ctc, stc);
	for (i = 0; i < TX_DEPTH; i++)
		free(slots[i].buf);
}
END_TEST

/* TX_DEPTH messages of 64 bytes, sent without progress: they wait for the turn's end. */
static void send_tiny(struct tconn *ctc, struct tslot *slots)
{
	for (unsigned i = 0; i < TX_DEPTH; i++) {
		slots[i] = (struct tslot){ .buf = calloc(1, 64) };
		ck_assert_int_eq(send_pieces(&cli, ctc, &slots[i], 64, 1), 0);
	}
}

static void free_slots(struct tslot *slots)
{
	for (unsigned i = 0; i < TX_DEPTH; i++)
		free(slots[i].buf);
}

/* Small sends not yet out when the peer goes: each gets its send_done, then closed(). */
START_TEST(tcp_bundle_peer_gone)
{
	char addr[64];
	struct tconn *ctc, *stc;
	struct tslot slots[TX_DEPTH];

	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	ops->close(srv.tp, stc->conn);
	peer_destroy(&srv);
	send_tiny(ctc, slots);
	PUMP_UNTIL(NULL, &cli, ctc->closed);
	ck_assert_uint_eq(ctc->inflight, 0);
	ck_assert_uint_eq(ctc->send_ok + ctc->send_err, TX_DEPTH);
	ops->close(cli.tp, ctc->conn);
	free_slots(slots);
}
END_TEST

/*
 * Small sends still waiting when the core closes: they leave before the
 * goodbye, as they would have without bundles, and no upcall follows.
 */
START_TEST(tcp_bundle_closed_with_small_sends)
{
	char addr[64];
	struct tconn *ctc, *stc;
	struct tslot slots[TX_DEPTH];

	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	send_tiny(ctc, slots);
	ops->close(cli.tp, ctc->conn);
	ctc->closed = true; /* ev_send_done and ev_closed assert on any upcall now */
	PUMP_UNTIL(&srv, &cli, stc->closed);
	ck_assert_uint_eq(ctc->inflight, TX_DEPTH);
	ck_assert_uint_eq(stc->rx_tail - stc->rx_head, TX_DEPTH);
	while (next_msg(stc))
		release_msg(&srv, stc);
	ops->close(srv.tp, stc->conn);
	free_slots(slots);
}
END_TEST

/*
 * Bundles stuck behind a full socket when the peer dies: each of their
 * messages gets one send_done (the failure), then closed().
 */
START_TEST(tcp_bundle_stuck_when_peer_dies)
{
	enum { NBIG = 1024, NSMALL = 4 };
	struct rmr_transport_params params = {
		.size = sizeof(params), .provider = "tcp", .max_msg = MAX_MSG,
		.rx_depth = RX_DEPTH, .tx_depth = NBIG + NSMALL, .name = "deep cli",
	};
	struct peer deep = { 0 };
	char addr[64];
	struct tconn *ctc, *stc;
	struct tslot *slots = calloc(NBIG + NSMALL, sizeof(*slots));
	uint8_t *big = calloc(1, MAX_MSG);
	unsigned n = 0, i, small_failed = 0;
	struct timespec d;

	ck_assert_ptr_nonnull(slots);
	ck_assert_int_eq(ops->create(&params, &events, &deep, &deep.tp), 0);
	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &deep, addr, &stc);
	/* The server reads no more: fill the socket until sends stop completing. */
	while (n < NBIG) {
		for (i = 0; i < 32 && n < NBIG; i++, n++) {
			slots[n].buf = big;
			ck_assert_int_eq(send_pieces(&deep, ctc, &slots[n], MAX_MSG, 1), 0);
		}
		d = deadline_in(50);
		while (!passed(&d))
			progress2(NULL, &deep);
		if (ctc->inflight > 0)
			break;
	}
	ck_assert_msg(ctc->inflight > 0, "the socket took %u x 64 KiB", n);
	for (i = 0; i < NSMALL; i++) {
		slots[n + i].buf = big;
		ck_assert_int_eq(send_pieces(&deep, ctc, &slots[n + i], 64, 1), 0);
	}
	progress2(NULL, &deep);
	ck_assert_uint_eq(stats_of(&deep).bundles_sent, 1);
	ops->close(srv.tp, stc->conn);
	peer_destroy(&srv);
	PUMP_UNTIL(NULL, &deep, ctc->closed);
	ck_assert_uint_eq(ctc->inflight, 0);
	ck_assert_uint_eq(ctc->send_ok + ctc->send_err, n + NSMALL);
	for (i = 0; i < NSMALL; i++)
		small_failed += slots[n + i].status < 0;
	ck_assert_uint_eq(small_failed, NSMALL);
	ops->close(deep.tp, ctc->conn);
	ops->destroy(deep.tp);
	free(big);
	free(slots);
}
END_TEST

/* An empty message among small ones: it goes on its own, and all arrive in order. */
START_TEST(tcp_bundle_empty_message)
{
	static const size_t lens[] = { 64, 0, 64, 0 };
	char addr[64];
	struct tconn *ctc, *stc;
	struct tslot slots[TX_DEPTH];
	unsigned i;

	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	for (i = 0; i < TX_DEPTH; i++) {
		slots[i] = (struct tslot){ .buf = malloc(64) };
		fill(slots[i].buf, 64, 4000 + i);
		ck_assert_int_eq(send_pieces(&cli, ctc, &slots[i], lens[i], 1), 0);
	}
	PUMP_UNTIL(&srv, &cli, ctc->inflight == 0 && stc->rx_tail - stc->rx_head == TX_DEPTH);
	ck_assert_uint_eq(ctc->send_err, 0);
	for (i = 0; i < TX_DEPTH; i++) {
		ck_assert_uint_eq(next_msg(stc)->len, lens[i]);
		ck_assert(check_pattern(next_msg(stc)->buf, lens[i], 4000 + i));
		release_msg(&srv, stc);
	}
	ck_assert(!stc->closed);
	close_one_side(&srv, &cli, ctc, stc);
	free_slots(slots);
}
END_TEST

/* A peer whose max_msg cannot hold two of the largest small messages gets none. */
START_TEST(tcp_bundle_small_peer)
{
	struct rmr_transport_params params = {
		.size = sizeof(params), .provider = "tcp", .max_msg = 8192,
		.rx_depth = RX_DEPTH, .tx_depth = TX_DEPTH, .name = "small srv",
	};
	char addr[64];
	struct tconn *ctc, *stc;
	struct tslot slots[TX_DEPTH];
	unsigned i;

	peer_destroy(&srv);
	memset(&srv, 0, sizeof(srv));
	ck_assert_int_eq(ops->create(&params, &events, &srv, &srv.tp), 0);
	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	for (i = 0; i < TX_DEPTH; i++) {
		slots[i] = (struct tslot){ .buf = malloc(4096) };
		fill(slots[i].buf, 4096, 3000 + i);
		ck_assert_int_eq(send_pieces(&cli, ctc, &slots[i], 4096, 1), 0);
	}
	PUMP_UNTIL(&srv, &cli, ctc->inflight == 0 && stc->rx_tail - stc->rx_head == TX_DEPTH);
	for (i = 0; i < TX_DEPTH; i++) {
		ck_assert(check_pattern(next_msg(stc)->buf, 4096, 3000 + i));
		release_msg(&srv, stc);
	}
	ck_assert_uint_eq(stats_of(&cli).bundles_sent, 0);
	close_one_side(&srv, &cli, ctc, stc);
	for (i = 0; i < TX_DEPTH; i++)
		free(slots[i].buf);
}
END_TEST

START_TEST(tcp_connect_refused)
{
	char addr[64];
	struct tconn *tc = &cli.conns[0];
	struct timespec d;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", free_port());
	tc->p = &cli;
	ck_assert_int_eq(ops->connect(cli.tp, addr, tc, &tc->conn), 0);
	PUMP_UNTIL(NULL, &cli, tc->connected != 0);
	ck_assert_int_eq(tc->connected, -ECONNREFUSED);
	/* No closed() follows a failed connect (ev_closed would assert). */
	d = deadline_in(100);
	while (!passed(&d))
		progress2(NULL, &cli);
	ops->close(cli.tp, tc->conn);
}
END_TEST

START_TEST(tcp_refused_by_core)
{
	char addr[64];
	struct tconn *tc = &cli.conns[0];

	listen_tcp(&srv, addr, sizeof(addr));
	srv.refuse = true;
	tc->p = &cli;
	ck_assert_int_eq(ops->connect(cli.tp, addr, tc, &tc->conn), 0);
	PUMP_UNTIL(&srv, &cli, tc->connected != 0);
	ck_assert_int_eq(tc->connected, -ECONNREFUSED);
	ck_assert_uint_eq(srv.refused, 1);
	ck_assert_uint_eq(srv.nconns, 0);
	ops->close(cli.tp, tc->conn);
}
END_TEST

START_TEST(tcp_listen_in_use)
{
	char addr[64];
	struct peer other;

	listen_tcp(&srv, addr, sizeof(addr));
	ck_assert_int_eq(peer_create(&other, "tcp", "other"), 0);
	ck_assert_int_eq(ops->listen(other.tp, addr), -EADDRINUSE);
	peer_destroy(&other);
}
END_TEST

START_TEST(tcp_bad_addresses)
{
	static const char *bad[] = {
		"", "127.0.0.1", "127.0.0.1:", ":7000", "127.0.0.1:0", "127.0.0.1:65536",
		"127.0.0.1:70x", "127.0.0.1:-1", "::1:7000", "127.0.0.1:7000x",
	};
	struct rmr_conn *conn = (struct rmr_conn *)&conn;
	unsigned i;
	int ret;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(ops->listen(srv.tp, bad[i]) == -EINVAL, "listen \"%s\"", bad[i]);
		ck_assert_msg(ops->connect(cli.tp, bad[i], NULL, &conn) == -EINVAL,
			      "connect \"%s\"", bad[i]);
		ck_assert_ptr_null(conn);
	}
	/* Without a reachable DNS server the resolver says "try again". */
	ret = ops->connect(cli.tp, "no-such-host.invalid:7000", NULL, &conn);
	ck_assert_msg(ret == -EINVAL || ret == -EAGAIN, "unresolvable host: %d", ret);
	ck_assert_ptr_null(conn);
}
END_TEST

/* The wait fd wakes up for a message, and trywait says when to block. */
START_TEST(tcp_wait_fd)
{
	char addr[64];
	struct tconn *ctc, *stc;
	struct tslot s = { .buf = calloc(1, 80) };
	struct epoll_event ev;
	struct timespec d;
	int fd, n = 0;

	listen_tcp(&srv, addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	fd = ops->wait_fd(srv.tp);
	ck_assert_int_ge(fd, 0);
	/* Quiesce the server until it says blocking is safe. */
	d = deadline_in(TIMEOUT_MS);
	while (ops->trywait(srv.tp) != 0) {
		ck_assert(!passed(&d));
		progress2(&srv, NULL);
	}
	ck_assert_int_eq(send_pieces(&cli, ctc, &s, 80, 1), 0);
	d = deadline_in(TIMEOUT_MS);
	while (n == 0) {
		ck_assert_msg(!passed(&d), "wait fd never became readable");
		progress2(NULL, &cli); /* the client pushes its bytes */
		n = epoll_wait(fd, &ev, 1, 10);
		ck_assert_int_ge(n, 0);
	}
	PUMP_UNTIL(&srv, &cli, next_msg(stc) && !s.busy);
	ck_assert_uint_eq(next_msg(stc)->len, 80);
	release_msg(&srv, stc);
	ops->close(cli.tp, ctc->conn);
	PUMP_UNTIL(&srv, &cli, stc->closed);
	ops->close(srv.tp, stc->conn);
	free(s.buf);
}
END_TEST

/* --- shm -------------------------------------------------------------------- */

static void setup_shm(void)
{
	check_send_order = false;
	ck_assert_int_eq(peer_create(&srv, "shm", "test srv"), 0);
	ck_assert_int_eq(peer_create(&cli, "shm", "test cli"), 0);
	ck_assert_int_eq(ops->wait_fd(srv.tp), -1);
}

static void teardown_shm(void)
{
	teardown();
	/* Every region was unlinked by fi_close. */
	ck_assert_uint_eq(shm_files_of(getpid()), 0);
}

START_TEST(shm_exchange)
{
	char addr[64];
	struct tconn *ctc, *stc;

	listen_shm(&srv, "x", addr, sizeof(addr));
	ctc = connect_pair(&srv, &cli, addr, &stc);
	exchange_sizes(&srv, &cli, ctc, stc);
	stream(&srv, &cli, ctc, stc);
	/* The connector says goodbye: the listener side hears closed(). */
	close_one_side(&srv, &cli, ctc, stc);
}
END_TEST

START_TEST(shm_close_by_listener_side)
{
	char addr[64];
	struct tconn *c1, *s1, *c2, *s2;

	listen_shm(&srv, "l", addr, sizeof(addr));
	c1 = connect_pair(&srv, &cli, addr, &s1);
	c2 = connect_pair(&srv, &cli, addr, &s2);
	stream(&srv, &cli, c1, s1);
	/* Now the accepting side closes; the other connection is unaffected. */
	close_one_side(&cli, &srv, s1, c1);
	stream(&srv, &cli, c2, s2);
	ops->close(srv.tp, s2->conn);
	peer_destroy(&srv);
	PUMP_UNTIL(NULL, &cli, c2->closed);
	ops->close(cli.tp, c2->conn);
}
END_TEST

START_TEST(shm_connect_refused)
{
	char addr[64];
	struct tconn *tc = &cli.conns[0];

	shm_name(addr, sizeof(addr), "nobody");
	tc->p = &cli;
	ck_assert_int_eq(ops->connect(cli.tp, addr, tc, &tc->conn), 0);
	PUMP_UNTIL(NULL, &cli, tc->connected != 0);
	ck_assert_int_eq(tc->connected, -ECONNREFUSED);
	ops->close(cli.tp, tc->conn);
}
END_TEST

START_TEST(shm_refused_by_core)
{
	char addr[64];
	struct tconn *tc = &cli.conns[0];

	listen_shm(&srv, "r", addr, sizeof(addr));
	srv.refuse = true;
	tc->p = &cli;
	ck_assert_int_eq(ops->connect(cli.tp, addr, tc, &tc->conn), 0);
	PUMP_UNTIL(&srv, &cli, tc->connected != 0);
	ck_assert_int_eq(tc->connected, -ECONNREFUSED);
	ck_assert_uint_eq(srv.refused, 1);
	ops->close(cli.tp, tc->conn);
}
END_TEST

/*
 * The core gives up on a connect before the listener ran. Across processes
 * shm 1.17 crashes a listener that processes the connection request of an
 * endpoint that is gone, so the transport keeps such an endpoint until its
 * message got through (within one process shm skips that request, so this
 * checks that lingering ends and leaves nothing behind). If the CONNECT got
 * through, the listener sees a connection that closes at once.
 */
START_TEST(shm_close_while_connecting)
{
	char addr[64];
	struct tconn *tc = &cli.conns[0];
	struct timespec d;
	unsigned i;

	listen_shm(&srv, "c", addr, sizeof(addr));
	tc->p = &cli;
	ck_assert_int_eq(ops->connect(cli.tp, addr, tc, &tc->conn), 0);
	for (i = 0; i < 10; i++)
		progress2(NULL, &cli); /* CONNECT goes out; the listener sleeps */
	ck_assert_int_eq(tc->connected, 0);
	ops->close(cli.tp, tc->conn);
	PUMP_UNTIL(&srv, &cli, ops->trywait(cli.tp) == 0);
	d = deadline_in(200);
	while (!passed(&d))
		progress2(&srv, &cli);
	if (srv.nconns) {
		PUMP_UNTIL(&srv, &cli, srv.conns[0].closed);
		ops->close(srv.tp, srv.conns[0].conn);
	}
}
END_TEST

/*
 * The same across processes, where it matters: the listener (a child
 * process) only starts progressing after the connector gave up and closed.
 * Without lingering, shm 1.17 kills the listener with SIGSEGV here.
 */
START_TEST(shm_close_while_connecting_other_process)
{
	char addr[64], c;
	int ready[2], go[2], status;
	struct tconn *tc = &cli.conns[0];
	pid_t pid;
	unsigned i;

	peer_destroy(&srv); /* the child makes its own */
	shm_name(addr, sizeof(addr), "xp");
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* Child: no ck_assert here; the exit status tells. */
		struct peer lst;
		struct timespec d;
		ssize_t n;

		if (peer_create(&lst, "shm", "child listener") || ops->listen(lst.tp, addr))
			_exit(2);
		if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(3);
		/* Progress until the parent is done lingering, then a bit more. */
		fcntl(go[0], F_SETFL, O_NONBLOCK);
		d = deadline_in(TIMEOUT_MS);
		while ((n = read(go[0], &c, 1)) < 0 && !passed(&d))
			ops->progress(lst.tp);
		d = deadline_in(100);
		while (!passed(&d))
			ops->progress(lst.tp);
		ops->destroy(lst.tp);
		_exit(n == 1 ? 0 : 4);
	}
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	tc->p = &cli;
	ck_assert_int_eq(ops->connect(cli.tp, addr, tc, &tc->conn), 0);
	for (i = 0; i < 10; i++)
		progress2(NULL, &cli); /* CONNECT goes out; the listener sleeps */
	ops->close(cli.tp, tc->conn);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	PUMP_UNTIL(NULL, &cli, ops->trywait(cli.tp) == 0);
	ck_assert_int_eq(write(go[1], "d", 1), 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "listener process: %s %d", WIFSIGNALED(status) ? "signal" : "exit",
		      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	ck_assert_uint_eq(shm_files_of(pid), 0);
}
END_TEST

START_TEST(shm_listen_in_use)
{
	char addr[64];

	listen_shm(&srv, "u", addr, sizeof(addr));
	ck_assert_int_eq(ops->listen(cli.tp, addr), -EADDRINUSE);
}
END_TEST

START_TEST(shm_bad_addresses)
{
	static const char *bad[] = {
		"", "a/b", "has space", "x:1", "../etc",
		"0123456789012345678901234567890123456789012345678901234567890123456789",
	};
	struct rmr_conn *conn = (struct rmr_conn *)&conn;
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(ops->listen(srv.tp, bad[i]) == -EINVAL, "listen \"%s\"", bad[i]);
		ck_assert_msg(ops->connect(cli.tp, bad[i], NULL, &conn) == -EINVAL,
			      "connect \"%s\"", bad[i]);
		ck_assert_ptr_null(conn);
	}
}
END_TEST

/* --- main ------------------------------------------------------------------- */

static bool provider_available(const char *prov)
{
	struct peer p;
	int ret = peer_create(&p, prov, "probe");

	if (ret) {
		/* Anything but -ENODEV is for the test cases to report. */
		if (ret != -ENODEV)
			fprintf(stderr, "creating a %s instance: %s\n", prov, strerror(-ret));
		return ret != -ENODEV;
	}
	peer_destroy(&p);
	return true;
}

/* A bundle's framing, and every way a peer could get it wrong. */
static size_t bundle_put(uint8_t *p, uint32_t len, uint32_t reserved, uint8_t fillc)
{
	size_t padded = (len + 7u) & ~7u;

	for (unsigned i = 0; i < 4; i++) {
		p[i] = (uint8_t)(len >> (8 * i));
		p[4 + i] = (uint8_t)(reserved >> (8 * i));
	}
	memset(p + 8, fillc, len);
	memset(p + 8 + len, 0, padded - len);
	return 8 + padded;
}

static int bundle_walk(const uint8_t *buf, size_t len, size_t max_msg, unsigned *count)
{
	size_t off = 0, mlen;
	const void *msg;
	int ret;

	*count = 0;
	while ((ret = rmr_fabric_bundle_next(buf, len, &off, max_msg, &msg, &mlen)) == 1) {
		ck_assert_ptr_eq(msg, buf + off - ((mlen + 7u) & ~(size_t)7u));
		ck_assert_uint_le(off, len);
		(*count)++;
	}
	return ret;
}

START_TEST(bundle_framing)
{
	uint8_t good[256], bad[64];
	size_t len = 0, off, mlen;
	const void *msg;
	unsigned n;

	len += bundle_put(good + len, 1, 0, 'a');
	len += bundle_put(good + len, 13, 0, 'b');
	len += bundle_put(good + len, 64, 0, 'c');
	ck_assert_int_eq(bundle_walk(good, len, 4096, &n), 0);
	ck_assert_uint_eq(n, 3);
	off = 16;
	ck_assert_int_eq(rmr_fabric_bundle_next(good, len, &off, 4096, &msg, &mlen), 1);
	ck_assert_uint_eq(mlen, 13);
	ck_assert_int_eq(((const uint8_t *)msg)[12], 'b');
	/* Cut anywhere: it ends cleanly at a message boundary, else it is malformed. */
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);
		int ret;

		memcpy(copy, good, cut);
		ret = bundle_walk(copy, cut, 4096, &n);
		if (cut == 0 || cut == 16 || cut == 40)
			ck_assert_int_eq(ret, 0);
		else
			ck_assert_int_eq(ret, -EPROTO);
		free(copy);
	}
	/* A message above the receiver's max_msg. */
	ck_assert_int_eq(bundle_walk(good, len, 63, &n), -EPROTO);
	ck_assert_uint_eq(n, 2);
	/* Length 0, a reserved field set, a length past the end, a huge length. */
	ck_assert_int_eq(bundle_walk(bad, bundle_put(bad, 0, 0, 0), 4096, &n), -EPROTO);
	ck_assert_int_eq(bundle_walk(bad, bundle_put(bad, 8, 1, 'x'), 4096, &n), -EPROTO);
	bundle_put(bad, 40, 0, 'y');
	ck_assert_int_eq(bundle_walk(bad, 24, 4096, &n), -EPROTO);
	memset(bad, 0xff, 8);
	ck_assert_int_eq(bundle_walk(bad, sizeof(bad), UINT32_MAX, &n), -EPROTO);
	/* An offset past the end is refused, not read. */
	off = len + 1;
	ck_assert_int_eq(rmr_fabric_bundle_next(good, len, &off, 4096, &msg, &mlen), -EPROTO);
}
END_TEST

START_TEST(bad_params)
{
	struct rmr_transport_params params = {
		.size = sizeof(params), .provider = "nope", .max_msg = 4096,
		.rx_depth = 4, .tx_depth = 4,
	};
	void *tp = NULL;

	ck_assert_int_eq(ops->create(&params, &events, NULL, &tp), -EINVAL);
	params.provider = "tcp";
	params.rx_depth = 0;
	ck_assert_int_eq(ops->create(&params, &events, NULL, &tp), -EINVAL);
	ck_assert_ptr_null(tp);
}
END_TEST

static void quiet_log(void *ctx, enum rmr_log_level level, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "rmr[%d]: %s\n", level, msg);
}

int main(void)
{
	bool tcp, shm;
	Suite *s = suite_create("transport_fabric");
	TCase *tc;
	int failed;

	rmr_log_set_sink(quiet_log, NULL, getenv("RMR_TEST_DEBUG") ? RMR_LOG_DEBUG : RMR_LOG_WARN);
	shm_clean_stale();
	tcp = provider_available("tcp");
	shm = provider_available("shm");
	if (!tcp && !shm) {
		fprintf(stderr, "libfabric providers tcp and shm unavailable: skipping\n");
		return 77;
	}

	tc = tcase_create("params");
	tcase_add_test(tc, bad_params);
	tcase_add_test(tc, bundle_framing);
	suite_add_tcase(s, tc);
	if (tcp) {
		tc = tcase_create("tcp");
		tcase_add_checked_fixture(tc, setup_tcp, teardown);
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, tcp_exchange);
		tcase_add_test(tc, tcp_two_connections);
		tcase_add_test(tc, tcp_peer_destroyed);
		tcase_add_test(tc, tcp_inflight_on_close);
		tcase_add_test(tc, tcp_connect_refused);
		tcase_add_test(tc, tcp_refused_by_core);
		tcase_add_test(tc, tcp_listen_in_use);
		tcase_add_test(tc, tcp_bad_addresses);
		tcase_add_test(tc, tcp_wait_fd);
		tcase_add_test(tc, tcp_bundle_small_sends);
		tcase_add_test(tc, tcp_bundle_backpressure);
		tcase_add_test(tc, tcp_bundle_peer_gone);
		tcase_add_test(tc, tcp_bundle_closed_with_small_sends);
		tcase_add_test(tc, tcp_bundle_small_peer);
		tcase_add_test(tc, tcp_bundle_empty_message);
		tcase_add_test(tc, tcp_bundle_stuck_when_peer_dies);
		suite_add_tcase(s, tc);
	} else {
		fprintf(stderr, "libfabric tcp provider unavailable: tcp cases skipped\n");
	}
	if (shm) {
		tc = tcase_create("shm");
		tcase_add_checked_fixture(tc, setup_shm, teardown_shm);
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, shm_exchange);
		tcase_add_test(tc, shm_close_by_listener_side);
		tcase_add_test(tc, shm_connect_refused);
		tcase_add_test(tc, shm_refused_by_core);
		tcase_add_test(tc, shm_close_while_connecting);
		tcase_add_test(tc, shm_close_while_connecting_other_process);
		tcase_add_test(tc, shm_listen_in_use);
		tcase_add_test(tc, shm_bad_addresses);
		suite_add_tcase(s, tc);
	} else {
		fprintf(stderr, "libfabric shm provider unavailable: shm cases skipped\n");
	}

	failed = unit_run(s);
	shm_clean_stale();
	return failed;
}
