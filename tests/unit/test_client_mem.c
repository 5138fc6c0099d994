/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A client and three members in one process over the in-process transport,
 * with in-memory stores: write fan-out, round-robin reads, ordering of
 * overlapping writes, member loss under load, store errors, and the return
 * of a member that missed writes: it takes the dirty maps from a peer, copies
 * what it missed from its peers (never through the client), and never
 * serves a stale read.
 */
#include "memstore.h"
#include "unit.h"
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <rmr/client.h>
#include <rmr/server.h>

#define POOL_SIZE (4u << 20)
#define CHUNK (128u * 1024)
/* One member's bitmap in the dirty-map area: a bit per chunk, in 4 KiB. */
#define MAP_BITMAP_BYTES 4096u
#define NMEMBERS 3
/* Polls of 10 ms before a wait fails: a hang detector, generous because the
 * sanitizer run shares two CPUs with the other tests in CI. */
#define POLLS 2000

struct member {
	char addr[32];
	struct memstore store;
	struct rmr_server *srv;
	struct rmr_server_pool *pool;
};

/* members[NMEMBERS] is a spare (id 4) that membership tests add at run time. */
#define SPARE NMEMBERS
static struct member members[NMEMBERS + 1];

/* What the recovery callbacks told, client and members (any thread). */
static struct {
	atomic_uint client_tracking[NMEMBERS + 1][2]; /* [id][started] */
	atomic_uint client_map_update_ok, client_map_update_err, client_map_update_eio;
	atomic_uint member_cleared[NMEMBERS + 1][NMEMBERS + 2]; /* [member idx][id] */
	atomic_uint resync_complete[NMEMBERS + 1];
	_Atomic uint64_t resync_complete_total[NMEMBERS + 1];
	/* Member id 4's last state change to NORMAL: its entry and address. */
	pthread_mutex_t lock;
	unsigned normal4_index;
	char normal4_addr[64];
} ev = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void ev_client_member_state(void *priv, unsigned index, uint16_t id, const char *addr,
				   enum rmr_member_state from, enum rmr_member_state to,
				   const char *reason)
{
	(void)priv;
	(void)from;
	ck_assert_ptr_nonnull(addr);
	ck_assert_ptr_nonnull(reason);
	if (id != 4 || to != RMR_MEMBER_NORMAL)
		return;
	pthread_mutex_lock(&ev.lock);
	ev.normal4_index = index;
	snprintf(ev.normal4_addr, sizeof(ev.normal4_addr), "%s", addr);
	pthread_mutex_unlock(&ev.lock);
}

static void ev_client_tracking(void *priv, uint16_t id, bool tracking)
{
	(void)priv;
	if (id <= NMEMBERS)
		atomic_fetch_add(&ev.client_tracking[id][tracking], 1);
}

static void ev_client_map_update(void *priv, uint16_t id, uint16_t source, int status)
{
	(void)priv;
	(void)id;
	(void)source;
	atomic_fetch_add(status ? &ev.client_map_update_err : &ev.client_map_update_ok, 1);
	if (status == -EIO)
		atomic_fetch_add(&ev.client_map_update_eio, 1);
}

static const struct rmr_client_ops client_ops = {
	.size = sizeof(client_ops),
	.member_state = ev_client_member_state,
	.dirty_tracking = ev_client_tracking,
	.map_update = ev_client_map_update,
};

static void ev_member_dirty(void *priv, const char *pool, uint16_t id, bool dirty)
{
	unsigned idx = (unsigned)(uintptr_t)priv;

	ck_assert_str_eq(pool, "vol");
	if (!dirty && id <= NMEMBERS + 1)
		atomic_fetch_add(&ev.member_cleared[idx][id], 1);
}

static void ev_member_resync(void *priv, const char *pool, uint64_t done, uint64_t total,
			     uint64_t bytes)
{
	unsigned idx = (unsigned)(uintptr_t)priv;

	(void)pool;
	(void)bytes;
	ck_assert_uint_le(done, total);
	if (done == total) {
		atomic_fetch_add(&ev.resync_complete[idx], 1);
		atomic_store(&ev.resync_complete_total[idx], total);
	}
}

static const struct rmr_server_events member_events = {
	.size = sizeof(member_events),
	.dirty_tracking = ev_member_dirty,
	.resync_progress = ev_member_resync,
};
static rmr_uuid pool_uuid;
static int test_round;

/* Start member @i of a pool of the ids in @mask, with a resync rate limit (0 = none). */
static void member_start_in(unsigned i, uint64_t mask, uint64_t rate)
{
	struct rmr_peer peers[NMEMBERS];
	unsigned npeers = 0;
	struct rmr_server_opts so = {
		.size = sizeof(so),
		.listen_addr = members[i].addr,
		.transport = "mem",
		.events = &member_events,
		.priv = (void *)(uintptr_t)i,
	};
	struct rmr_pool_params pp = {
		.size = sizeof(pp),
		.name = "vol",
		.uuid = pool_uuid,
		.pool_size = POOL_SIZE,
		.chunk_size = CHUNK,
		.member_id = (uint16_t)(i + 1),
		.members_mask = mask,
		.peers = peers,
		.resync_rate = rate,
		/* Logged ranges of one chunk: the cases count exactly which
		 * chunks a member copies, also when its own log of a writer
		 * that left meanwhile adds to them (4 MiB would be the pool). */
		.al_extent_size = CHUNK,
	};

	for (unsigned k = 0; k <= NMEMBERS; k++)
		if (k != i && (mask & (1ull << (k + 1))))
			peers[npeers++] = (struct rmr_peer){ .member_id = (uint16_t)(k + 1),
							     .addr = members[k].addr };
	pp.npeers = npeers;
	ck_assert_int_eq(rmr_server_create(&so, &members[i].srv), 0);
	ck_assert_int_eq(rmr_server_add_pool(members[i].srv, &pp, &memstore_ops, &members[i].store,
					     &members[i].pool), 0);
}

static void member_start_rate(unsigned i, uint64_t rate)
{
	member_start_in(i, 0xe /* ids 1..3 */, rate);
}

static void member_start(unsigned i)
{
	member_start_rate(i, 0);
}

static void member_stop(unsigned i)
{
	if (!members[i].srv)
		return;
	rmr_server_remove_pool(members[i].pool);
	rmr_server_destroy(members[i].srv);
	members[i].srv = NULL;
}

static void setup(void)
{
	rmr_log_set_sink(NULL, NULL, getenv("RMR_TEST_DEBUG") ? RMR_LOG_DEBUG : RMR_LOG_WARN);
	ck_assert_int_eq(rmr_uuid_generate(&pool_uuid), 0);
	test_round++;
	memset(&ev, 0, sizeof(ev));
	for (unsigned i = 0; i <= SPARE; i++) {
		snprintf(members[i].addr, sizeof(members[i].addr), "t%d-m%u", test_round, i + 1);
		memstore_init(&members[i].store, POOL_SIZE, CHUNK);
	}
	for (unsigned i = 0; i < NMEMBERS; i++)
		member_start(i);
}

static void teardown(void)
{
	for (unsigned i = 0; i <= SPARE; i++) {
		member_stop(i);
		memstore_destroy(&members[i].store);
	}
}

static int open_with(unsigned min_legs, unsigned poll_us, struct rmr_client **c)
{
	const char *addrs[NMEMBERS];
	struct rmr_client_opts o = {
		.size = sizeof(o),
		.pool_name = "vol",
		.transport = "mem",
		.nmembers = NMEMBERS,
		.members = addrs,
		.queue_depth = 64,
		.heartbeat_ms = 50,
		.failure_timeout_ms = 500,
		.reconnect_min_ms = 50,
		.reconnect_max_ms = 200,
		.open_timeout_ms = 2000,
		.min_legs = min_legs,
		.ops = &client_ops,
		.poll_us = poll_us,
	};

	for (unsigned i = 0; i < NMEMBERS; i++)
		addrs[i] = members[i].addr;
	*c = NULL;
	return rmr_client_open(&o, c);
}

static struct rmr_client *open_client(unsigned min_legs)
{
	struct rmr_client *c;

	ck_assert_int_eq(open_with(min_legs, 0, &c), 0);
	return c;
}

/* Synchronous request helper. */
struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
	int status;
	int calls;
};

static void waiter_cb(void *priv, int status)
{
	struct waiter *w = priv;

	pthread_mutex_lock(&w->lock);
	w->status = status;
	w->calls++;
	w->done = 1;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Submit @io (its callback is set here) and wait for it: its completion status. */
static int submit_wait(struct rmr_client *c, struct rmr_io *io)
{
	struct waiter w = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	int ret;

	io->cb = waiter_cb;
	io->priv = &w;
	ret = rmr_client_submit(c, io, RMR_SUBMIT_WAIT);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	ck_assert_int_eq(w.calls, 1);
	return w.status;
}

static int do_io(struct rmr_client *c, enum rmr_io_kind kind, uint64_t addr, void *buf,
		 uint32_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct rmr_io io = {
		.kind = kind, .op = 1, .addr = addr, .len = len, .iov = &iov, .iovcnt = 1,
	};
	int status = submit_wait(c, &io);

	/* A read answers with the bytes it returned: all of them here. */
	return kind == RMR_IO_READ && status == (int)len ? 0 : status;
}

/* A read-like request with an argument, to one member (0: any). */
static int do_lookup(struct rmr_client *c, uint16_t member_id, const char *arg, void *buf,
		     uint32_t len)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct rmr_io io = {
		.kind = RMR_IO_READ, .op = MEMSTORE_OP_REVERSE, .addr = CHUNK, .len = len,
		.iov = &iov, .iovcnt = 1, .arg = arg, .arg_len = (uint32_t)strlen(arg),
		.member_id = member_id,
	};

	return submit_wait(c, &io);
}

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}


static enum rmr_member_state member_state(struct rmr_client *c, unsigned i)
{
	struct rmr_pool_status st = { .size = sizeof(st) };

	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	return st.members[i].state;
}

/* Poll (bounded) until member @i reaches @want. */
static void wait_state(struct rmr_client *c, unsigned i, enum rmr_member_state want)
{
	for (int n = 0; n < POLLS && member_state(c, i) != want; n++)
		usleep(10000);
	ck_assert_str_eq(rmr_member_state_name(member_state(c, i)), rmr_member_state_name(want));
}

/*
 * Member 2 (index 1) goes away and misses @nchunks writes of @len bytes at
 * @off into chunks 0, 1, ... (contents from @seed on); @buf holds a chunk.
 */
static void member2_misses(struct rmr_client *c, unsigned nchunks, uint64_t off, uint32_t len,
			   unsigned seed, uint8_t *buf)
{
	member_stop(1);
	wait_state(c, 1, RMR_MEMBER_FAILED);
	for (unsigned n = 0; n < nchunks; n++) {
		fill(buf, CHUNK, seed + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK + off, buf, len), 0);
	}
}

static void pool_status(unsigned i, struct rmr_server_pool_status *ps)
{
	static struct rmr_server_status ss;

	ss.size = sizeof(ss);
	ck_assert_int_eq(rmr_server_status(members[i].srv, &ss), 0);
	ck_assert_uint_eq(ss.npools, 1);
	*ps = ss.pools[0];
}

/* Poll (bounded) until no member records a dirty chunk for anyone. */
static void wait_clean(void)
{
	uint64_t dirty = 0;

	for (int n = 0; n < POLLS; n++) {
		dirty = 0;
		for (unsigned i = 0; i < NMEMBERS; i++) {
			struct rmr_server_pool_status ps;

			pool_status(i, &ps);
			for (unsigned id = 1; id <= NMEMBERS; id++)
				dirty += ps.dirty_chunks[id];
		}
		if (!dirty)
			return;
		usleep(10000);
	}
	ck_assert_uint_eq(dirty, 0);
}

static void assert_stores_identical(void)
{
	for (unsigned i = 1; i < NMEMBERS; i++)
		ck_assert(memcmp(members[0].store.data, members[i].store.data, POOL_SIZE) == 0);
}

START_TEST(write_fans_out_and_reads_back)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);
	struct rmr_pool_status st = { .size = sizeof(st) };

	for (unsigned n = 0; n < 24; n++) {
		fill(buf, CHUNK, n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK, buf, CHUNK), 0);
	}
	for (unsigned n = 0; n < 24; n++) {
		fill(buf, CHUNK, n);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)n * CHUNK, back, CHUNK), 0);
		ck_assert_mem_eq(buf, back, CHUNK);
	}
	for (unsigned i = 1; i < NMEMBERS; i++)
		ck_assert_mem_eq(members[0].store.data, members[i].store.data, POOL_SIZE);

	/* Reads were spread over every member. */
	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	ck_assert_uint_eq(st.normal_members, NMEMBERS);
	for (unsigned i = 0; i < NMEMBERS; i++) {
		ck_assert_uint_eq(st.members[i].writes, 24);
		ck_assert_uint_ge(st.members[i].reads, 6);
		ck_assert_uint_eq(st.members[i].member_id, i + 1);
	}
	rmr_client_close(c);
	free(buf);
	free(back);
}
END_TEST

/*
 * A consumer serving its own descriptor on the event-loop thread: each byte
 * in a pipe asks for one write, submitted from the callback (where waiting
 * for a slot would deadlock, so it never waits), completed on the same
 * thread, whose kick calls the consumer again with nothing to read; status
 * answers at once there; unwatched, the callback stops.
 */
struct watcher {
	struct rmr_client *c;
	int rfd;
	pthread_t thread;
	atomic_int calls, submitted, done, foreign_thread, errors, busy, empty_calls, kick_errors;
	int status_ret, unwatch_ret, again_ret, kick_other_ret;
	uint8_t buf[4096];
};

static void watcher_done(void *priv, int status)
{
	struct watcher *w = priv;

	if (!pthread_equal(pthread_self(), w->thread))
		atomic_fetch_add(&w->foreign_thread, 1);
	if (status != 0)
		atomic_fetch_add(&w->errors, 1);
	/* The consumer's turn after this callback, with nothing to read. */
	if (rmr_client_kick_fd(w->c, w->rfd) != 0)
		atomic_fetch_add(&w->kick_errors, 1);
	w->kick_other_ret = rmr_client_kick_fd(w->c, w->rfd + 100);
	atomic_fetch_add(&w->done, 1);
}

static void watcher_fn(void *priv)
{
	struct watcher *w = priv;
	struct iovec iov = { .iov_base = w->buf, .iov_len = sizeof(w->buf) };
	struct rmr_pool_status st = { .size = sizeof(st) };
	uint8_t asks[64];
	ssize_t n;

	w->thread = pthread_self();
	atomic_fetch_add(&w->calls, 1);
	w->status_ret = rmr_client_status(w->c, &st); /* at once: no loop_call to itself */
	w->unwatch_ret = rmr_client_unwatch_fd(w->c, w->rfd);
	w->again_ret = rmr_client_watch_fd(w->c, w->rfd, watcher_fn, w);
	n = read(w->rfd, asks, sizeof(asks));
	if (n < 0 && errno == EAGAIN)
		atomic_fetch_add(&w->empty_calls, 1);
	for (ssize_t k = 0; k < n; k++) {
		struct rmr_io io = {
			.kind = RMR_IO_WRITE, .op = 1, .addr = (uint64_t)asks[k] * CHUNK,
			.len = sizeof(w->buf), .iov = &iov, .iovcnt = 1, .cb = watcher_done,
			.priv = w,
		};
		int ret = rmr_client_submit(w->c, &io, RMR_SUBMIT_WAIT);

		if (ret == -EAGAIN)
			atomic_fetch_add(&w->busy, 1);
		else if (ret == 0)
			atomic_fetch_add(&w->submitted, 1);
		else
			atomic_fetch_add(&w->errors, 1);
	}
}

START_TEST(consumer_descriptor_is_served_on_the_loop_thread)
{
	struct rmr_client *c = open_client(1);
	static struct watcher w;
	int p[2];
	uint8_t asks[24];

	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	w.c = c;
	w.rfd = p[0];
	memset(w.buf, 0x5c, sizeof(w.buf));
	ck_assert_int_eq(rmr_client_watch_fd(c, -1, watcher_fn, &w), -EINVAL);
	ck_assert_int_eq(rmr_client_watch_fd(c, p[0], NULL, &w), -EINVAL);
	ck_assert_int_eq(rmr_client_unwatch_fd(c, p[0]), -ENOENT);
	ck_assert_int_eq(rmr_client_watch_fd(c, p[0], watcher_fn, &w), 0);
	ck_assert_int_eq(rmr_client_watch_fd(c, p[0], watcher_fn, &w), -EEXIST);

	for (unsigned k = 0; k < sizeof(asks); k++)
		asks[k] = (uint8_t)k;
	ck_assert_int_eq(write(p[1], asks, sizeof(asks)), (ssize_t)sizeof(asks));
	for (int n = 0; n < POLLS && atomic_load(&w.done) < (int)sizeof(asks); n++)
		usleep(10000);
	ck_assert_int_eq(atomic_load(&w.done), (int)sizeof(asks));
	ck_assert_int_eq(atomic_load(&w.submitted), (int)sizeof(asks));
	ck_assert_int_eq(atomic_load(&w.busy), 0); /* 24 writes, 64 slots */
	ck_assert_int_eq(atomic_load(&w.errors), 0);
	ck_assert_int_eq(atomic_load(&w.foreign_thread), 0);
	ck_assert_int_ge(atomic_load(&w.calls), 1);
	ck_assert_int_eq(w.status_ret, 0);
	ck_assert_int_eq(w.unwatch_ret, -EDEADLK);
	ck_assert_int_eq(w.again_ret, -EEXIST);
	/* Kicked from the completions: called with nothing readable. */
	ck_assert_int_eq(atomic_load(&w.kick_errors), 0);
	ck_assert_int_eq(w.kick_other_ret, -ENOENT);
	for (int n = 0; n < POLLS && atomic_load(&w.empty_calls) == 0; n++)
		usleep(10000);
	ck_assert_int_ge(atomic_load(&w.empty_calls), 1);
	ck_assert_int_eq(rmr_client_kick_fd(c, p[0]), -EPERM); /* not the loop thread */
	for (unsigned i = 0; i < NMEMBERS; i++)
		for (unsigned k = 0; k < sizeof(asks); k++)
			ck_assert_uint_eq(members[i].store.data[(size_t)k * CHUNK + 4095], 0x5c);

	/*
	 * Idle with a watched descriptor, the loop sleeps: before it arms the
	 * transport for a sleep it looks at the consumers' descriptors once
	 * without sleeping, and that look must not turn into a spin. A spin
	 * would burn the whole 300 ms; a sleeping loop spends next to nothing.
	 */
	struct rusage ru0, ru1;

	ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru0), 0);
	usleep(300000);
	ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru1), 0);
	long used_us = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1000000L +
		       (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) +
		       (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1000000L +
		       (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
	ck_assert_msg(used_us < 100000, "idle loop used %ld us of CPU in 300 ms", used_us);

	/*
	 * Unwatched: a byte in the pipe stays there. A status call runs on the
	 * loop thread after an epoll_wait that saw the pipe readable with the
	 * wake-up: were the pipe still watched, its callback would have run.
	 */
	ck_assert_int_eq(rmr_client_unwatch_fd(c, p[0]), 0);
	int calls = atomic_load(&w.calls);
	struct rmr_pool_status st = { .size = sizeof(st) };

	ck_assert_int_eq(write(p[1], asks, 1), 1);
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(rmr_client_status(c, &st), 0);
	int calls_after = atomic_load(&w.calls);
	ck_assert_int_eq(calls_after, calls);
	ck_assert_int_eq(read(p[0], asks, sizeof(asks)), 1);
	close(p[0]);
	close(p[1]);
	rmr_client_close(c);
}
END_TEST

/* An activity log extent must be a power of two from the chunk size to 1 GiB. */
START_TEST(bad_activity_log_extents_are_refused)
{
	const uint32_t bad[] = { CHUNK / 2, 3 * CHUNK, CHUNK + 4096, 1u << 31 };
	const uint32_t good[] = { 0, CHUNK, 2 * CHUNK, 1u << 30 };
	struct rmr_server_opts so = { .size = sizeof(so), .listen_addr = members[SPARE].addr,
				      .transport = "mem" };
	struct rmr_pool_params pp = { .size = sizeof(pp), .name = "vol", .uuid = pool_uuid,
				      .pool_size = POOL_SIZE, .chunk_size = CHUNK,
				      .member_id = SPARE + 1, .members_mask = 0x1e };
	struct rmr_server_pool *pool;
	struct rmr_server *srv;

	ck_assert_int_eq(rmr_server_create(&so, &srv), 0);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pp.al_extent_size = bad[i];
		ck_assert_int_eq(rmr_server_add_pool(srv, &pp, &memstore_ops,
						     &members[SPARE].store, &pool), -EINVAL);
	}
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		pp.al_extent_size = good[i];
		ck_assert_int_eq(rmr_server_add_pool(srv, &pp, &memstore_ops,
						     &members[SPARE].store, &pool), 0);
		rmr_server_remove_pool(pool);
	}
	rmr_server_destroy(srv);
}
END_TEST

START_TEST(bad_requests_are_refused_without_callback)
{
	struct rmr_client *c = open_client(1);
	struct waiter w = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	static uint8_t buf[8192];
	struct iovec iov = { .iov_base = buf, .iov_len = 4096 };
	struct rmr_io io = { .kind = RMR_IO_WRITE, .op = 1, .iov = &iov, .iovcnt = 1,
			     .cb = waiter_cb, .priv = &w };

	io.addr = POOL_SIZE - 2048;
	io.len = 4096;
	ck_assert_int_eq(rmr_client_submit(c, &io, 0), -EINVAL); /* beyond the end */
	io.addr = 0;
	io.len = 8192;
	ck_assert_int_eq(rmr_client_submit(c, &io, 0), -EINVAL); /* iov sum differs */
	io.kind = RMR_IO_READ;
	io.iovcnt = 0;
	io.len = 4096;
	ck_assert_int_eq(rmr_client_submit(c, &io, 0), -EINVAL); /* read without buffer */
	io.kind = 7;
	ck_assert_int_eq(rmr_client_submit(c, &io, 0), -EINVAL);
	{
		/* Lengths whose sum wraps around to io.len: refused, nothing copied. */
		struct iovec wrap[2] = { { buf, 8192 }, { buf, SIZE_MAX - 4095 } };

		io.kind = RMR_IO_WRITE;
		io.iov = wrap;
		io.iovcnt = 2;
		io.len = 4096;
		ck_assert_int_eq(rmr_client_submit(c, &io, 0), -EINVAL);
	}
	{
		/* A flush is write-like, without data or range. */
		struct rmr_io fl = { .kind = RMR_IO_WRITE, .op = 1, .flags = RMR_IO_FLUSH,
				     .cb = waiter_cb, .priv = &w };

		fl.len = 4096;
		ck_assert_int_eq(rmr_client_submit(c, &fl, 0), -EINVAL);
		fl.len = 0;
		fl.iov = &iov;
		fl.iovcnt = 1;
		ck_assert_int_eq(rmr_client_submit(c, &fl, 0), -EINVAL);
		fl.iovcnt = 0;
		fl.kind = RMR_IO_READ;
		ck_assert_int_eq(rmr_client_submit(c, &fl, 0), -EINVAL);
		fl.kind = RMR_IO_WRITE;
		fl.flags = RMR_IO_FLUSH | RMR_IO_PATCH;
		ck_assert_int_eq(rmr_client_submit(c, &fl, 0), -EINVAL);
		fl.flags = 1u << 5;
		ck_assert_int_eq(rmr_client_submit(c, &fl, 0), -EINVAL);
	}
	rmr_client_close(c);
	ck_assert_int_eq(w.calls, 0);
}
END_TEST

/*
 * Members grant 128 slots (their default): a client with more would end a
 * session the first time it used one beyond, so it refuses them at the
 * hello, and the open finds no member.
 */
START_TEST(members_with_a_smaller_queue_depth_are_refused)
{
	const char *addrs[NMEMBERS];
	struct rmr_client_opts o = { .size = sizeof(o), .pool_name = "vol", .transport = "mem",
				     .nmembers = NMEMBERS, .members = addrs, .queue_depth = 256,
				     .heartbeat_ms = 50, .failure_timeout_ms = 500,
				     .open_timeout_ms = 500 };
	struct rmr_client *c = NULL;

	for (unsigned i = 0; i < NMEMBERS; i++)
		addrs[i] = members[i].addr;
	ck_assert_int_lt(rmr_client_open(&o, &c), 0);
	ck_assert_ptr_null(c);
	o.queue_depth = 128;
	ck_assert_int_eq(rmr_client_open(&o, &c), 0);
	rmr_client_close(c);
}
END_TEST

START_TEST(poll_option_is_checked_and_off_works)
{
	static uint8_t in[4096], out[4096];
	struct rmr_client *c;

	ck_assert_int_eq(open_with(1, 1001, &c), -EINVAL);
	ck_assert_ptr_null(c);
	ck_assert_int_eq(open_with(1, 1000, &c), 0);
	rmr_client_close(c);
	/* Never polling: every wait sleeps, and requests still complete. */
	ck_assert_int_eq(open_with(1, RMR_POLL_OFF, &c), 0);
	memset(in, 0x5a, sizeof(in));
	for (unsigned i = 0; i < 64; i++) {
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, i * 4096ull, in, sizeof(in)), 0);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, i * 4096ull, out, sizeof(out)), 0);
		ck_assert_mem_eq(in, out, sizeof(in));
	}
	rmr_client_close(c);
}
END_TEST

/*
 * A consumer that submits on the loop thread (as nbd-brmr's reader does),
 * one request at a time, with pauses between them longer than the poll
 * window: the loop's status says whether it slept between a request and
 * its answer, the clock how soon the answer came.
 */
struct lone_reader {
	struct rmr_client *c;
	int pipe[2];               /* a byte asks for the next read */
	uint8_t buf[4096];
	uint64_t sent_sleeps;      /* loop_sleeps when the read went out */
	uint64_t sent_ns;
	unsigned reads;            /* answered so far */
	bool prev_fast;            /* the answer before came soon */
	unsigned soon, soon_unslept; /* answers that came soon after one that did; without a sleep */
	atomic_int done, errors;
};

/* An answer this soon comes well within the 1 ms window, by the loop's clock too. */
#define LONE_SOON_NS 400000ull
/* Requests alone before the loop takes the consumer for one that waits (POLL_LONE_RUN). */
#define LONE_WARMUP 8

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t loop_sleeps_now(struct rmr_client *c)
{
	struct rmr_pool_status st = { .size = sizeof(st) };

	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	return st.loop_sleeps;
}

static void lone_read_done(void *priv, int status)
{
	struct lone_reader *r = priv;
	bool fast = now_ns() - r->sent_ns < LONE_SOON_NS;

	if (status != (int)sizeof(r->buf))
		atomic_fetch_add(&r->errors, 1);
	/*
	 * After the warm-up (POLL_LONE_RUN requests alone) and an answer that
	 * came soon, the loop polls for this one's: if it came soon too, the
	 * loop did not sleep meanwhile.
	 */
	r->reads++;
	if (fast && r->prev_fast && r->reads > LONE_WARMUP) {
		r->soon++;
		r->soon_unslept += loop_sleeps_now(r->c) == r->sent_sleeps;
	}
	r->prev_fast = fast;
	atomic_store(&r->done, 1);
}

static void lone_read_send(void *priv)
{
	struct lone_reader *r = priv;
	struct iovec iov = { .iov_base = r->buf, .iov_len = sizeof(r->buf) };
	struct rmr_io io = { .kind = RMR_IO_READ, .op = 1, .len = sizeof(r->buf), .iov = &iov,
			     .iovcnt = 1, .cb = lone_read_done, .priv = r };
	char byte;

	if (read(r->pipe[0], &byte, 1) != 1)
		return;
	r->sent_sleeps = loop_sleeps_now(r->c);
	r->sent_ns = now_ns();
	if (rmr_client_submit(r->c, &io, 0) < 0) {
		atomic_fetch_add(&r->errors, 1);
		atomic_store(&r->done, 1);
	}
}

/*
 * With the poll window @poll_us, one read at a time until @want answers came
 * soon after one that did (at most 200 reads): of those, how many without
 * a sleep of the loop (*@soon: how many there were).
 */
static unsigned lone_reads_unslept(unsigned poll_us, unsigned want, unsigned *soon,
				   uint64_t *polls)
{
	struct lone_reader *r = calloc(1, sizeof(*r));
	struct rmr_pool_status st = { .size = sizeof(st) };
	unsigned unslept;

	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(open_with(1, poll_us, &r->c), 0);
	ck_assert_int_eq(pipe(r->pipe), 0);
	ck_assert_int_eq(rmr_client_watch_fd(r->c, r->pipe[0], lone_read_send, r), 0);
	for (unsigned i = 0; i < 200 && r->soon < want; i++) {
		/* Longer than any window: the loop stops polling for the next request. */
		usleep(3000);
		atomic_store(&r->done, 0);
		ck_assert_int_eq(write(r->pipe[1], "r", 1), 1);
		for (int k = 0; k < POLLS * 100 && !atomic_load(&r->done); k++)
			usleep(100);
		ck_assert_int_eq(atomic_load(&r->done), 1);
	}
	ck_assert_int_eq(atomic_load(&r->errors), 0);
	ck_assert_int_eq(rmr_client_unwatch_fd(r->c, r->pipe[0]), 0);
	ck_assert_int_eq(rmr_client_status(r->c, &st), 0);
	*polls = st.loop_polls;
	rmr_client_close(r->c);
	close(r->pipe[0]);
	close(r->pipe[1]);
	*soon = r->soon;
	unslept = r->soon_unslept;
	free(r);
	return unslept;
}

/*
 * A request sent while none is in flight, by a consumer that waits for each
 * answer: the loop polls for its answer instead of sleeping (a member
 * answers within microseconds; the wake-up would cost as much again), as
 * long as the answer before came within the window. Without polling it
 * never polls (its status counts no polling turn). The share of answers
 * without a sleep is judged only on answers that came soon after one that
 * did, so that a busy host (a member thread waiting for a CPU) does not
 * decide it; nor is it judged without polling, where an answer can beat
 * the loop to its sleep when the host preempts the loop.
 */
START_TEST(lone_request_answer_is_polled_for)
{
	uint64_t polls, polls_off;
	unsigned soon, polled = lone_reads_unslept(1000, 24, &soon, &polls);
	unsigned soon_off;

	lone_reads_unslept(RMR_POLL_OFF, 24, &soon_off, &polls_off);
	ck_assert_msg(polls_off == 0, "polling off, yet the loop polled %" PRIu64 " times",
		      polls_off);
	if (soon < 8) {
		fprintf(stderr, "lone_request_answer_is_polled_for: not judged, the host is too busy "
			"(%u answers came soon)\n", soon);
		return;
	}
	ck_assert_uint_gt(polls, 0);
	ck_assert_msg(polled * 10 >= soon * 9, "polling: %u of %u answers came without a sleep",
		      polled, soon);
}
END_TEST

struct burst {
	struct rmr_client *c;
	atomic_int pending, errors;
	uint8_t bufs[64][4096];
};

static void burst_cb(void *priv, int status)
{
	struct burst *b = priv;

	if (status)
		atomic_fetch_add(&b->errors, 1);
	atomic_fetch_sub(&b->pending, 1);
}

START_TEST(overlapping_writes_apply_in_order_everywhere)
{
	struct rmr_client *c = open_client(1);
	struct burst *b = calloc(1, sizeof(*b));

	/* 64 writes in flight on 4 overlapping ranges: the last one per range wins everywhere. */
	for (unsigned n = 0; n < 64; n++) {
		struct iovec iov = { .iov_base = b->bufs[n], .iov_len = 4096 };
		struct rmr_io io = { .kind = RMR_IO_WRITE, .op = 1, .addr = (n % 4) * 2048,
				     .len = 4096, .iov = &iov, .iovcnt = 1, .cb = burst_cb,
				     .priv = b };

		memset(b->bufs[n], (int)n + 1, 4096);
		atomic_fetch_add(&b->pending, 1);
		ck_assert_int_eq(rmr_client_submit(c, &io, RMR_SUBMIT_WAIT), 0);
	}
	for (int n = 0; n < POLLS && atomic_load(&b->pending); n++)
		usleep(10000);
	ck_assert_int_eq(atomic_load(&b->pending), 0);
	ck_assert_int_eq(atomic_load(&b->errors), 0);
	for (unsigned i = 1; i < NMEMBERS; i++)
		ck_assert_mem_eq(members[0].store.data, members[i].store.data, 16384);
	/* Range 3 (bytes 6144..10239) was last written by write 63. */
	ck_assert_uint_eq(members[0].store.data[6144], 64);
	rmr_client_close(c);
	free(b);
}
END_TEST

START_TEST(member_loss_keeps_io_going_and_is_recorded)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);
	struct rmr_pool_status st = { .size = sizeof(st) };

	fill(buf, CHUNK, 1);
	ck_assert_int_eq(do_io(c, RMR_IO_WRITE, 0, buf, CHUNK), 0);
	member_stop(1);
	/* Every write and read keeps succeeding while members 1 and 3 are up. */
	for (unsigned n = 0; n < 16; n++) {
		fill(buf, CHUNK, 100 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK, buf, CHUNK), 0);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)n * CHUNK, back, CHUNK), 0);
		ck_assert_mem_eq(buf, back, CHUNK);
	}
	wait_state(c, 1, RMR_MEMBER_FAILED);
	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	ck_assert_uint_eq(st.normal_members, 2);
	ck_assert(st.missed_mask & (1u << 2));
	ck_assert_mem_eq(members[0].store.data, members[2].store.data, POOL_SIZE);
	rmr_client_close(c);

	/* The survivors remember durably that member 2 missed writes. */
	{
		struct rmr_server_status ss = { .size = sizeof(ss) };

		for (unsigned i = 0; i < NMEMBERS; i += 2) {
			ck_assert_int_eq(rmr_server_status(members[i].srv, &ss), 0);
			ck_assert(ss.pools[0].missed_mask & (1u << 2));
			ck_assert_uint_ge(ss.pools[0].meta_saves, 1);
			/* Exactly the 16 chunks written while member 2 was away. */
			ck_assert_uint_eq(ss.pools[0].dirty_chunks[2], 16);
			ck_assert_uint_eq(ss.pools[0].dirty_chunks[i == 0 ? 3 : 1], 0);
		}
	}

	/*
	 * Member 2 comes back: it takes the dirty maps from a peer, copies the
	 * 16 chunks it missed from its peers and serves again. The client
	 * carries none of that data.
	 */
	member_start(1);
	c = open_client(1);
	wait_state(c, 1, RMR_MEMBER_NORMAL);
	for (unsigned n = 0; n < 16; n++) {
		fill(buf, CHUNK, 100 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)n * CHUNK, back, CHUNK), 0);
		ck_assert_mem_eq(buf, back, CHUNK);
	}
	wait_clean();
	assert_stores_identical();
	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	ck_assert_uint_eq(st.members[1].resync_bytes, 0);
	ck_assert_uint_eq(st.members[1].map_updates, 1);
	ck_assert_uint_eq(st.missed_mask, 0);
	{
		struct rmr_server_pool_status ps, p1, p3;

		pool_status(1, &ps);
		pool_status(0, &p1);
		pool_status(2, &p3);
		/* Exactly the chunks it missed, once each, served by its peers. */
		ck_assert_uint_eq(ps.resync_bytes, 16 * CHUNK);
		ck_assert_uint_eq(p1.served_sync_bytes + p3.served_sync_bytes, 16 * CHUNK);
		/* Round-robin over the peers that hold the chunks: both serve. */
		ck_assert_uint_gt(p1.served_sync_bytes, 0);
		ck_assert_uint_gt(p3.served_sync_bytes, 0);
		ck_assert_uint_eq(ps.map_pulls, 1);
		ck_assert_uint_eq(ps.resync_done, 16);
		ck_assert_uint_eq(ps.resync_total, 16);
	}
	/* The callbacks told the same story, without any polling. */
	ck_assert_uint_ge(atomic_load(&ev.client_tracking[2][1]), 1);
	ck_assert_uint_eq(atomic_load(&ev.client_tracking[2][0]), 1);
	ck_assert_uint_eq(atomic_load(&ev.client_map_update_ok), 1);
	ck_assert_uint_eq(atomic_load(&ev.resync_complete[1]), 1);
	ck_assert_uint_eq(atomic_load(&ev.resync_complete_total[1]), 16);
	ck_assert_uint_ge(atomic_load(&ev.member_cleared[0][2]), 1);
	ck_assert_uint_ge(atomic_load(&ev.member_cleared[2][2]), 1);
	rmr_client_close(c);
	free(buf);
	free(back);
}
END_TEST

START_TEST(whole_chunk_writes_clear_without_copy)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);
	struct rmr_server_pool_status ps;

	member2_misses(c, 6, 0, CHUNK, 40, buf);
	rmr_client_close(c);

	/* Background resync stalled by a rate limit of 1 byte/s: only I/O copies. */
	member_start_rate(1, 1);
	c = open_client(1);
	wait_state(c, 1, RMR_MEMBER_NORMAL);
	for (unsigned n = 0; n < 4; n++) {
		fill(buf, CHUNK, 60 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK, buf, CHUNK), 0);
	}
	pool_status(1, &ps);
	ck_assert_uint_eq(ps.resync_bytes, 0);
	ck_assert_uint_eq(ps.dirty_chunks[2], 2);
	/* A partial write copies its chunk first, then applies on top. */
	fill(buf, 4096, 99);
	ck_assert_int_eq(do_io(c, RMR_IO_WRITE, 4 * CHUNK + 8192, buf, 4096), 0);
	pool_status(1, &ps);
	ck_assert_uint_eq(ps.resync_bytes, CHUNK);
	ck_assert_uint_eq(ps.dirty_chunks[2], 1);
	/* Reads of chunk 5 reach member 2 in turn: it copies before it serves. */
	fill(buf, CHUNK, 45);
	for (unsigned n = 0; n < 3; n++) {
		ck_assert_int_eq(do_io(c, RMR_IO_READ, 5 * CHUNK, back, CHUNK), 0);
		ck_assert_mem_eq(buf, back, CHUNK);
	}
	pool_status(1, &ps);
	ck_assert_uint_eq(ps.resync_bytes, 2 * CHUNK);
	ck_assert_uint_eq(ps.dirty_chunks[2], 0);
	ck_assert_uint_eq(ps.resync_done, 6);
	wait_clean();
	assert_stores_identical();
	rmr_client_close(c);
	free(buf);
	free(back);
}
END_TEST

/* Append a memstore patch record: @len bytes of fill(@seed) at @off of the range. */
static uint32_t patch_rec(uint8_t *p, uint32_t off, uint32_t len, unsigned seed)
{
	uint32_t le_off = htole32(off), le_len = htole32(len);

	memcpy(p, &le_off, 4);
	memcpy(p + 4, &le_len, 4);
	fill(p + 8, len, seed);
	return 8 + len;
}

static int do_patch(struct rmr_client *c, uint64_t addr, uint32_t len, void *patch,
		    uint32_t plen)
{
	struct iovec iov = { .iov_base = patch, .iov_len = plen };
	struct rmr_io io = {
		.kind = RMR_IO_WRITE, .op = 1, .addr = addr, .len = len, .iov = &iov,
		.iovcnt = 1, .flags = RMR_IO_PATCH,
	};

	return submit_wait(c, &io);
}

/*
 * A patch changes chunks in part, however long its range: a member that
 * misses one has its whole range marked, and one that missed chunks of the
 * range copies every one of them before it applies the patch (a plain write
 * of the same range would have overwritten them whole, without a copy).
 */
START_TEST(patch_writes_copy_the_chunks_they_change_in_part)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK + 1), *back = malloc(CHUNK), patch[256];
	struct iovec iov = { .iov_base = patch, .iov_len = 16 };
	struct rmr_io bad = {
		.kind = RMR_IO_READ, .op = 1, .addr = 0, .len = 16, .iov = &iov, .iovcnt = 1,
		.cb = waiter_cb, .flags = RMR_IO_PATCH,
	};
	struct rmr_server_pool_status ps;
	uint32_t n;

	/* Refused: a read-like patch, a patch without data, an unknown flag. */
	ck_assert_int_eq(rmr_client_submit(c, &bad, 0), -EINVAL);
	bad.kind = RMR_IO_WRITE;
	bad.iov = NULL;
	bad.iovcnt = 0;
	ck_assert_int_eq(rmr_client_submit(c, &bad, 0), -EINVAL);
	bad.iov = &iov;
	bad.iovcnt = 1;
	bad.flags = 1u << 7;
	ck_assert_int_eq(rmr_client_submit(c, &bad, 0), -EINVAL);
	/* Data longer than max io (CHUNK here) is refused; a range longer than it is not. */
	ck_assert_int_eq(do_patch(c, 0, 2 * CHUNK, buf, CHUNK + 1), -EINVAL);

	member2_misses(c, 10, 0, CHUNK, 40, buf);
	/* Member 2 misses a patch of chunks 10..13 that changes two of them: all four marked. */
	n = patch_rec(patch, 100, 16, 7);
	n += patch_rec(patch + n, 3 * CHUNK + 5, 8, 8);
	ck_assert_int_eq(do_patch(c, 10 * CHUNK, 4 * CHUNK, patch, n), 0);
	pool_status(0, &ps);
	ck_assert_uint_eq(ps.dirty_chunks[2], 14);
	rmr_client_close(c);

	/* Background resync stalled by a rate limit of 1 byte/s: only I/O copies. */
	member_start_rate(1, 1);
	c = open_client(1);
	wait_state(c, 1, RMR_MEMBER_NORMAL);
	n = patch_rec(patch, 10, 32, 9);
	n += patch_rec(patch + n, 4 * CHUNK - 32, 32, 10);
	ck_assert_int_eq(do_patch(c, 0, 4 * CHUNK, patch, n), 0);
	pool_status(1, &ps);
	ck_assert_uint_eq(ps.resync_bytes, 4 * CHUNK);
	ck_assert_uint_eq(ps.dirty_chunks[2], 10);
	/* What a store refuses, every member refuses alike: nobody fails. */
	memset(patch, 0xff, 8);
	ck_assert_int_eq(do_patch(c, 0, 4 * CHUNK, patch, 12), -EINVAL);
	ck_assert_int_eq(member_state(c, 1), RMR_MEMBER_NORMAL);

	ck_assert_int_eq(rmr_server_resync_rate(members[1].pool, 0), 0);
	wait_clean();
	assert_stores_identical();
	/* Chunk 0: its old bytes with the patch's 32 at 10; chunk 3: the patch's last 32. */
	fill(buf, CHUNK, 40);
	fill(buf + 10, 32, 9);
	ck_assert_int_eq(do_io(c, RMR_IO_READ, 0, back, CHUNK), 0);
	ck_assert_mem_eq(buf, back, CHUNK);
	fill(buf, CHUNK, 43);
	fill(buf + CHUNK - 32, 32, 10);
	ck_assert_int_eq(do_io(c, RMR_IO_READ, 3 * CHUNK, back, CHUNK), 0);
	ck_assert_mem_eq(buf, back, CHUNK);
	fill(buf, 8, 8);
	ck_assert_mem_eq(members[1].store.data + 13 * CHUNK + 5, buf, 8);
	rmr_client_close(c);
	free(buf);
	free(back);
}
END_TEST

START_TEST(maintenance_takes_member_out_and_back)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);
	struct rmr_pool_status st = { .size = sizeof(st) };
	struct rmr_server_pool_status ps;
	uint64_t reads;

	ck_assert_int_eq(rmr_client_set_maintenance(c, 2, true), 0);
	ck_assert_int_eq(member_state(c, 1), RMR_MEMBER_MAINTENANCE);
	ck_assert_int_eq(rmr_client_set_maintenance(c, 2, true), -EALREADY);
	ck_assert_int_eq(rmr_client_set_maintenance(c, 9, true), -ENOENT);
	ck_assert_int_eq(rmr_client_set_maintenance(c, 1, true), 0);
	/* Never the last member that holds current data. */
	ck_assert_int_eq(rmr_client_set_maintenance(c, 3, true), -EBUSY);
	ck_assert_int_eq(rmr_client_set_maintenance(c, 1, false), 0);
	wait_state(c, 0, RMR_MEMBER_NORMAL);

	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	reads = st.members[1].reads;
	for (unsigned n = 0; n < 4; n++) {
		fill(buf, CHUNK, 80 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK + 4096, buf, 8192), 0);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)n * CHUNK + 4096, back, 8192), 0);
		ck_assert_mem_eq(buf, back, 8192);
	}
	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	ck_assert_uint_eq(st.members[1].reads, reads);
	pool_status(0, &ps);
	ck_assert_uint_eq(ps.dirty_chunks[2], 4);
	ck_assert_int_eq(rmr_client_set_maintenance(c, 2, false), 0);
	ck_assert_int_eq(rmr_client_set_maintenance(c, 2, false), -EALREADY);
	wait_state(c, 1, RMR_MEMBER_NORMAL);
	wait_clean();
	assert_stores_identical();
	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	ck_assert_uint_eq(st.members[1].map_updates, 1);
	ck_assert_uint_eq(st.members[1].resync_bytes, 0);
	pool_status(1, &ps);
	ck_assert_uint_eq(ps.resync_bytes, 4 * CHUNK);
	rmr_client_close(c);
	free(buf);
	free(back);
}
END_TEST

/*
 * A returning member flushes the chunks it copied in before it records them
 * clean and tells its peers; the peers then clear their bits for it without
 * a flush of their own stores. A flush there would write back every page
 * the client dirtied, on the event loop: with a busy disk, for longer than
 * the heartbeat timeout (a soak saw every member failed at once).
 */
START_TEST(a_peers_resync_does_not_flush_the_healthy_members)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK);
	unsigned flushes[NMEMBERS];

	member2_misses(c, 8, 0, CHUNK / 2, 40, buf);
	for (unsigned i = 0; i < NMEMBERS; i++)
		flushes[i] = atomic_load(&members[i].store.flushes);
	member_start(1);
	wait_state(c, 1, RMR_MEMBER_NORMAL);
	wait_clean();
	assert_stores_identical();
	/* Cleared in memory first, on disk at a later tick: wait for the disk. */
	for (unsigned i = 0; i < NMEMBERS; i += 2) {
		const uint8_t *bits = members[i].store.map + MAP_BITMAP_BYTES; /* member id 2 */
		int n = 0;

		while (n++ < POLLS && memcmp(bits, bits + 1, MAP_BITMAP_BYTES - 1))
			usleep(10000);
		ck_assert_uint_eq(bits[0], 0);
		ck_assert_mem_eq(bits, bits + 1, MAP_BITMAP_BYTES - 1);
	}
	for (unsigned i = 0; i < NMEMBERS; i++) {
		unsigned now = atomic_load(&members[i].store.flushes);

		if (i == 1)
			ck_assert_msg(now > flushes[i], "the returning member did not flush");
		else
			ck_assert_msg(now == flushes[i], "member %u flushed %u times for a peer",
				      i + 1, now - flushes[i]);
	}
	rmr_client_close(c);
	free(buf);
}
END_TEST

/*
 * @n 4 KiB writes from chunk 16 on (contents from @seed on), each read
 * back, @pause_us apart: I/O to chunks no member misses goes on.
 */
static void io_goes_on(struct rmr_client *c, unsigned n, unsigned seed, unsigned pause_us)
{
	uint8_t buf[4096], back[4096];

	for (unsigned i = 0; i < n; i++) {
		fill(buf, sizeof(buf), seed + i);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, 16ull * CHUNK + i * 4096ull, buf, 4096), 0);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, 16ull * CHUNK + i * 4096ull, back, 4096), 0);
		ck_assert_mem_eq(buf, back, 4096);
		usleep(pause_us);
	}
}

/*
 * A returning member checks its store (a read and a flush) before it takes
 * the maps, while the client holds the pool's writes back. On a slow disk
 * the flush outlasts the failure timeout: the member must keep answering
 * meanwhile (the check runs off its loop), refuse the pull after a while
 * so that the writes go on, and take the maps once the check ended. Here
 * the slow flush ends in a failure, which a file reports once: the next
 * pull must fail on it, not start a check that passes.
 */
START_TEST(a_slow_store_check_holds_the_pull_not_the_writes)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK);
	struct rmr_pool_status st = { .size = sizeof(st) };
	struct rmr_server_pool_status ps;
	struct timespec t0, t1;
	unsigned eio;

	member2_misses(c, 4, 0, CHUNK / 2, 120, buf);
	atomic_store(&members[1].store.flush_hold, true);
	member_start(1);
	for (int n = 0; n < POLLS && !strstr(st.members[1].reason, "map"); n++) {
		usleep(10000);
		ck_assert_int_eq(rmr_client_status(c, &st), 0);
	}
	ck_assert_msg(strstr(st.members[1].reason, "map"), "member 2 does not take the maps: %s",
		      st.members[1].reason);
	/*
	 * Three failure timeouts of writes while the check is held: all go on,
	 * held back a second at most now and then (not for the client's 30 s
	 * timeout of a map pull).
	 */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	io_goes_on(c, 30, 300, 50000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 20);
	/* Its loop answers (a status is taken on it), and it has not taken the maps. */
	pool_status(1, &ps);
	ck_assert_uint_eq(ps.map_pulls, 0);
	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	ck_assert_int_ne(st.members[1].state, RMR_MEMBER_NORMAL);
	ck_assert_msg(!strstr(st.members[1].reason, "heartbeat"), "member 2: %s",
		      st.members[1].reason);
	eio = atomic_load(&ev.client_map_update_eio);
	ck_assert_uint_eq(eio, 0);
	atomic_store(&members[1].store.flush_fails, 1);
	atomic_store(&members[1].store.flush_hold, false);
	wait_state(c, 1, RMR_MEMBER_NORMAL);
	eio = atomic_load(&ev.client_map_update_eio);
	ck_assert_msg(eio >= 1, "the failed store check was not told");
	wait_clean();
	assert_stores_identical();
	rmr_client_close(c);
	free(buf);
}
END_TEST

static void verify_run(unsigned i, bool repair, struct rmr_server_pool_status *ps);

/* Member @i holds every chunk, in memory. */
static void wait_own_clean(unsigned i)
{
	struct rmr_server_pool_status ps;

	for (int n = 0; n < POLLS; n++) {
		pool_status(i, &ps);
		if (!ps.dirty_chunks[i + 1])
			break;
		usleep(10000);
	}
	ck_assert_uint_eq(ps.dirty_chunks[i + 1], 0);
}

/* Member @i's own bits on its store's disk, for chunks 0..7 (member id i + 1). */
static uint8_t own_bits_on_disk(unsigned i)
{
	return members[i].store.map[(size_t)i * MAP_BITMAP_BYTES];
}

/*
 * The returning member's flush runs off its event loop: while a slow disk
 * holds it, the member keeps serving (longer than the failure timeout),
 * and neither its own record of the chunks it copied in nor its peers'
 * record of them goes clean, their data not being durable yet. Once the
 * flush ends, both do.
 */
START_TEST(a_slow_flush_holds_the_clean_record_not_the_member)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK);
	struct rmr_server_pool_status ps;

	member2_misses(c, 8, 0, CHUNK / 2, 60, buf);
	/* Its first flush, the store check before it takes the maps, passes. */
	atomic_store(&members[1].store.flush_pass, 1);
	atomic_store(&members[1].store.flush_hold, true);
	member_start(1);
	wait_state(c, 1, RMR_MEMBER_NORMAL);
	wait_own_clean(1); /* copied in, clean in memory */
	/* Twice the failure timeout of I/O to other chunks: all of it served. */
	io_goes_on(c, 100, 200, 10000);
	ck_assert_int_eq(member_state(c, 1), RMR_MEMBER_NORMAL);
	ck_assert_uint_eq(own_bits_on_disk(1), 0xff);
	for (unsigned i = 0; i < NMEMBERS; i += 2) {
		pool_status(i, &ps);
		ck_assert_uint_eq(ps.dirty_chunks[2], 8);
	}
	/*
	 * Meanwhile a verify marks chunk 24 dirty for it (its disk rotted
	 * there) and it copies it again: that rewrites the same block of its
	 * own bitmap, which must still show chunks 0..7 dirty.
	 */
	members[1].store.data[24 * CHUNK + 5] ^= 0x10;
	verify_run(0, true, &ps);
	ck_assert_uint_eq(ps.verify_repaired, 1);
	wait_own_clean(1);
	ck_assert_uint_eq(own_bits_on_disk(1), 0xff);
	/*
	 * The held flush ends: it covers chunks 0..7, not chunk 24, copied
	 * after it began, which waits for the next one (held too).
	 */
	atomic_store(&members[1].store.flush_pass, 1);
	for (int n = 0; n < POLLS; n++) {
		pool_status(0, &ps);
		if (ps.dirty_chunks[2] <= 1)
			break;
		usleep(10000);
	}
	ck_assert_uint_eq(ps.dirty_chunks[2], 1);
	ck_assert_uint_eq(own_bits_on_disk(1), 0);
	ck_assert_uint_eq(members[1].store.map[MAP_BITMAP_BYTES + 3], 0x01); /* chunk 24 */
	atomic_store(&members[1].store.flush_hold, false);
	wait_clean();
	for (int n = 0; n < POLLS && own_bits_on_disk(1); n++)
		usleep(10000);
	ck_assert_uint_eq(own_bits_on_disk(1), 0);
	assert_stores_identical();
	rmr_client_close(c);
	free(buf);
}
END_TEST

START_TEST(second_failure_during_resync)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);
	struct rmr_server_pool_status ps;

	member2_misses(c, 12, 4096, 8192, 120, buf);
	/* Member 2 returns and resyncs slowly (4 chunks/s) from members 1 and 3... */
	member_start_rate(1, 4 * CHUNK);
	wait_state(c, 1, RMR_MEMBER_NORMAL);
	pool_status(1, &ps);
	ck_assert_uint_gt(ps.dirty_chunks[2], 0);
	/* ...when member 3 dies: writes go on, now missing member 3. */
	member_stop(2);
	for (unsigned n = 0; n < 12; n++) {
		fill(buf, CHUNK, 140 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK + 65536, buf, 4096), 0);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)n * CHUNK + 65536, back, 4096), 0);
		ck_assert_mem_eq(buf, back, 4096);
	}
	wait_state(c, 2, RMR_MEMBER_FAILED);
	/* Member 3 returns too: both finish, from whichever peer holds each chunk. */
	member_start(2);
	wait_state(c, 2, RMR_MEMBER_NORMAL);
	wait_clean();
	assert_stores_identical();
	for (unsigned n = 0; n < 12; n++) {
		fill(buf, CHUNK, 120 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)n * CHUNK + 4096, back, 8192), 0);
		ck_assert_mem_eq(buf, back, 8192);
	}
	rmr_client_close(c);
	free(buf);
	free(back);
}
END_TEST

START_TEST(store_error_heals_once_cleared)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);
	struct rmr_pool_status st = { .size = sizeof(st) };

	atomic_store(&members[2].store.fail, true);
	for (unsigned n = 0; n < 8; n++) {
		fill(buf, CHUNK, 17 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK + 512, buf, 4096), 0);
	}
	ck_assert_int_ne(member_state(c, 2), RMR_MEMBER_NORMAL);
	/* While the store fails, the member cannot prove it works: it stays out. */
	usleep(300000);
	ck_assert_int_ne(member_state(c, 2), RMR_MEMBER_NORMAL);
	atomic_store(&members[2].store.fail, false);
	wait_state(c, 2, RMR_MEMBER_NORMAL);
	wait_clean();
	assert_stores_identical();
	for (unsigned n = 0; n < 8; n++) {
		fill(buf, CHUNK, 17 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)n * CHUNK + 512, back, 4096), 0);
		ck_assert_mem_eq(buf, back, 4096);
	}
	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	ck_assert_uint_eq(st.members[2].resync_bytes, 0);
	rmr_client_close(c);
	free(buf);
	free(back);
}
END_TEST

START_TEST(store_error_fails_member_not_request)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);

	atomic_store(&members[2].store.fail, true);
	for (unsigned n = 0; n < 8; n++) {
		fill(buf, CHUNK, 7 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK, buf, CHUNK), 0);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)n * CHUNK, back, CHUNK), 0);
		ck_assert_mem_eq(buf, back, CHUNK);
	}
	/* Out of service: failed, or already reconnecting (and failing again
	 * while its store does), never normal. */
	ck_assert_int_ne(member_state(c, 2), RMR_MEMBER_NORMAL);
	ck_assert_mem_eq(members[0].store.data, members[1].store.data, POOL_SIZE);
	rmr_client_close(c);
	free(buf);
	free(back);
}
END_TEST

/*
 * A member whose store says it may have lost acknowledged data (a failed
 * write-back) refuses the client's hello: it is never admitted again, not
 * even when no record names it as having missed writes (none here: it
 * missed nothing), and the pool goes on with the others.
 */
START_TEST(a_store_that_lost_data_is_refused)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);
	struct rmr_pool_status *st = calloc(1, sizeof(*st));

	ck_assert_ptr_nonnull(st);
	atomic_store(&members[2].store.lost, true);
	member_stop(2);
	member_start(2);
	wait_state(c, 2, RMR_MEMBER_FAILED);
	for (int k = 0; k < 400; k++) {
		st->size = sizeof(*st);
		ck_assert_int_eq(rmr_client_status(c, st), 0);
		if (strstr(st->members[2].reason, "may have lost data"))
			break;
		usleep(10000);
	}
	ck_assert_msg(strstr(st->members[2].reason, "may have lost data"),
		      "member 3: '%s'", st->members[2].reason);
	for (unsigned n = 0; n < 4; n++) {
		fill(buf, CHUNK, 3 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK, buf, CHUNK), 0);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)n * CHUNK, back, CHUNK), 0);
		ck_assert_mem_eq(buf, back, CHUNK);
	}
	usleep(300000); /* reconnects keep being refused */
	ck_assert_int_ne(member_state(c, 2), RMR_MEMBER_NORMAL);
	rmr_client_close(c);
	free(st);
	free(buf);
	free(back);
}
END_TEST

START_TEST(all_members_lost_fails_requests)
{
	struct rmr_client *c = open_client(1);
	uint8_t buf[4096] = { 1 };

	for (unsigned i = 0; i < NMEMBERS; i++)
		member_stop(i);
	for (unsigned i = 0; i < NMEMBERS; i++)
		wait_state(c, i, RMR_MEMBER_FAILED);
	ck_assert_int_eq(do_io(c, RMR_IO_WRITE, 0, buf, sizeof(buf)), -EIO);
	ck_assert_int_eq(do_io(c, RMR_IO_READ, 0, buf, sizeof(buf)), -EIO);
	rmr_client_close(c);
}
END_TEST

/*
 * The operator pauses a member's background resync: it copies nothing by
 * itself, yet a read of a chunk it misses still gets that chunk copied
 * first; a new rate and a resume finish the job.
 */
START_TEST(resync_pauses_and_resumes)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);
	struct rmr_server_pool_status ps;

	ck_assert_int_eq(rmr_client_set_maintenance(c, 2, true), 0);
	for (unsigned n = 0; n < 8; n++) {
		fill(buf, CHUNK, 40 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK + 4096, buf, 8192), 0);
	}
	ck_assert_int_eq(rmr_server_resync_pause(members[1].pool, true), 0);
	ck_assert_int_eq(rmr_server_resync_pause(members[1].pool, true), -EALREADY);
	ck_assert_int_eq(rmr_client_set_maintenance(c, 2, false), 0);
	wait_state(c, 1, RMR_MEMBER_NORMAL);
	for (unsigned n = 0; n < 20; n++)
		usleep(10000);
	pool_status(1, &ps);
	ck_assert(ps.resync_paused && !ps.resync_running);
	ck_assert_uint_eq(ps.dirty_chunks[2], 8);
	ck_assert_uint_eq(ps.resync_bytes, 0);
	/* Reads round-robin: one of them lands on member 2 and copies that chunk. */
	for (unsigned r = 0; r < 3; r++) {
		ck_assert_int_eq(do_io(c, RMR_IO_READ, 4096, back, 8192), 0);
		fill(buf, CHUNK, 40);
		ck_assert_mem_eq(buf, back, 8192);
	}
	pool_status(1, &ps);
	ck_assert_uint_eq(ps.dirty_chunks[2], 7);
	ck_assert_uint_eq(ps.resync_bytes, CHUNK);
	ck_assert_int_eq(rmr_server_resync_rate(members[1].pool, 4 * CHUNK), 0);
	ck_assert_int_eq(rmr_server_resync_pause(members[1].pool, false), 0);
	pool_status(1, &ps);
	ck_assert_uint_eq(ps.resync_rate_limit, 4 * CHUNK);
	wait_clean();
	assert_stores_identical();
	rmr_client_close(c);
	free(buf);
	free(back);
}
END_TEST

/* Poll (bounded) until member @i has a session to each of its peers. */
static void wait_peers_up(unsigned i)
{
	struct rmr_server_pool_status ps;
	unsigned up = 0;

	for (int n = 0; n < POLLS; n++) {
		pool_status(i, &ps);
		up = 0;
		for (unsigned k = 0; k < ps.npeers; k++)
			up += ps.peers[k].connected;
		if (ps.npeers && up == ps.npeers)
			return;
		usleep(10000);
	}
	ck_abort_msg("member %u: %u of %u peer sessions up", i + 1, up, ps.npeers);
}

/* Run a verify on member @i to its end; returns its status. */
static void verify_run(unsigned i, bool repair, struct rmr_server_pool_status *ps)
{
	struct rmr_verify_opts vo = { .size = sizeof(vo), .repair = repair };

	wait_peers_up(i);
	ck_assert_int_eq(rmr_server_verify(members[i].pool, &vo), 0);
	for (int n = 0; n < POLLS; n++) {
		pool_status(i, ps);
		if (!ps->verify_running)
			break;
		usleep(10000);
	}
	ck_assert(!ps->verify_running);
	ck_assert_uint_eq(ps->verify_total, POOL_SIZE / CHUNK);
	ck_assert_uint_eq(ps->verify_done, POOL_SIZE / CHUNK);
}

/*
 * Bytes changed behind the pool's back in one member's store: a verify on
 * another member finds exactly those chunks, storage to storage; with
 * repair they are copied from the verifying member and all stores agree.
 */
START_TEST(verify_finds_and_repairs_divergence)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK);
	struct rmr_server_pool_status ps;
	struct rmr_verify_opts bad = { .size = sizeof(bad), .first_chunk = POOL_SIZE / CHUNK };

	for (unsigned n = 0; n < POOL_SIZE / CHUNK; n++) {
		fill(buf, CHUNK, 60 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK, buf, CHUNK), 0);
	}
	ck_assert_int_eq(rmr_server_verify(members[0].pool, &bad), -EINVAL);
	verify_run(0, false, &ps);
	ck_assert_uint_eq(ps.verify_mismatches, 0);
	ck_assert_int_eq(rmr_server_verify_stop(members[0].pool), -EALREADY);

	/* Member 3's disk rots in chunks 2 and 5, member 2's in chunk 5. */
	members[2].store.data[2 * CHUNK + 100] ^= 0xff;
	members[2].store.data[5 * CHUNK + 7] ^= 0x01;
	members[1].store.data[5 * CHUNK + CHUNK - 1] ^= 0x80;
	verify_run(0, false, &ps);
	ck_assert_uint_eq(ps.verify_mismatches, 2);
	ck_assert_uint_eq(ps.verify_nfound, 2);
	ck_assert_uint_eq(ps.verify_found[0], 2);
	ck_assert_uint_eq(ps.verify_found_ids[0], 1u << 3);
	ck_assert_uint_eq(ps.verify_found[1], 5);
	ck_assert_uint_eq(ps.verify_found_ids[1], (1u << 2) | (1u << 3));
	ck_assert_uint_eq(ps.verify_repaired, 0);
	/* Found, not repaired: nothing is dirty. */
	ck_assert_uint_eq(ps.dirty_chunks[3], 0);

	verify_run(0, true, &ps);
	ck_assert_uint_eq(ps.verify_mismatches, 2);
	ck_assert_uint_eq(ps.verify_repaired, 2);
	wait_clean();
	assert_stores_identical();
	verify_run(1, false, &ps);
	ck_assert_uint_eq(ps.verify_mismatches, 0);
	rmr_client_close(c);
	free(buf);
}
END_TEST

static uint64_t member_reads(unsigned i)
{
	struct rmr_server_pool_status ps;

	pool_status(i, &ps);
	return ps.reads;
}

/*
 * A read-like request may carry an argument, get fewer bytes back than its
 * buffer holds, and be addressed to one member: what a key-value consumer
 * needs for a lookup and for a per-member digest.
 */
START_TEST(read_with_argument_short_answer_and_one_member)
{
	struct rmr_client *c = open_client(1);
	char out[4096], big[8192];
	struct iovec iov = { .iov_base = big, .iov_len = sizeof(big) };
	struct rmr_io bad = {
		.kind = RMR_IO_WRITE, .op = 1, .addr = 0, .len = sizeof(big), .iov = &iov,
		.iovcnt = 1, .cb = waiter_cb, .arg = "k", .arg_len = 1,
	};
	uint64_t before;

	memset(out, 0, sizeof(out));
	ck_assert_int_eq(do_lookup(c, 0, "hello", out, sizeof(out)), 5);
	ck_assert_mem_eq(out, "olleh", 5);
	/* Arguments and member ids belong to read-like requests only. */
	ck_assert_int_eq(rmr_client_submit(c, &bad, 0), -EINVAL);
	bad.arg = NULL;
	bad.arg_len = 0;
	bad.member_id = 2;
	ck_assert_int_eq(rmr_client_submit(c, &bad, 0), -EINVAL);
	/* The argument and the answer share the member's buffer. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(do_lookup(c, 0, big, out, (128u * 1024) - 4096), -EINVAL);
	/* Every lookup to member 2 lands there, none elsewhere. */
	for (unsigned n = 0; n < 8; n++) {
		before = member_reads(1);
		ck_assert_int_eq(do_lookup(c, 2, "ab", out, sizeof(out)), 2);
		ck_assert_uint_eq(member_reads(1), before + 1);
	}
	ck_assert_int_eq(do_lookup(c, 9, "ab", out, sizeof(out)), -ENXIO);
	member_stop(1);
	wait_state(c, 1, RMR_MEMBER_FAILED);
	ck_assert_int_eq(do_lookup(c, 2, "ab", out, sizeof(out)), -ENXIO);
	ck_assert_int_eq(do_lookup(c, 3, "abc", out, sizeof(out)), 3);
	ck_assert_mem_eq(out, "cba", 3);
	rmr_client_close(c);
}
END_TEST

/* The client's state for member @id, or -1 if the pool has no such member. */
static int id_state(struct rmr_client *c, uint16_t id)
{
	struct rmr_pool_status st = { .size = sizeof(st) };

	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	for (unsigned k = 0; k < st.nmembers; k++)
		if (st.members[k].member_id == id)
			return (int)st.members[k].state;
	return -1;
}

static void wait_id_state(struct rmr_client *c, uint16_t id, int want)
{
	for (int n = 0; n < POLLS && id_state(c, id) != want; n++)
		usleep(10000);
	ck_assert_int_eq(id_state(c, id), want);
}

/* Poll (bounded) until no running member records a dirty chunk for anyone. */
static void wait_all_clean(void)
{
	uint64_t dirty = 0;

	for (int n = 0; n < POLLS; n++) {
		dirty = 0;
		for (unsigned i = 0; i <= SPARE; i++) {
			struct rmr_server_pool_status ps;

			if (!members[i].srv)
				continue;
			pool_status(i, &ps);
			for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
				dirty += ps.dirty_chunks[id];
		}
		if (!dirty)
			return;
		usleep(10000);
	}
	ck_assert_uint_eq(dirty, 0);
}

/* Write chunks [first, first + n) with patterns of @seed. */
static void write_chunks(struct rmr_client *c, unsigned first, unsigned n, unsigned seed)
{
	uint8_t *buf = malloc(CHUNK);

	for (unsigned k = first; k < first + n; k++) {
		fill(buf, CHUNK, seed + k);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)k * CHUNK, buf, CHUNK), 0);
	}
	free(buf);
}

/* A new member joins under I/O, copies everything from its peers, serves reads; then it
 * is detached (its misses tracked), attached again (copies only those), and deleted. */
START_TEST(member_added_detached_attached_and_deleted)
{
	struct rmr_client *c = open_client(1);
	struct rmr_server_pool_status ps;
	uint64_t spare_reads = 0;
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);

	write_chunks(c, 0, 32, 1);
	member_start_in(SPARE, 0x1e, 0);
	/* Bad requests change nothing. */
	ck_assert_int_eq(rmr_client_add_member(c, 4, NULL), -EINVAL); /* a new one needs an address */
	ck_assert_int_eq(rmr_client_add_member(c, 0, members[SPARE].addr), -EINVAL);
	ck_assert_int_eq(rmr_client_add_member(c, RMR_MAX_MEMBER_ID + 1, "x"), -EINVAL);
	ck_assert_int_eq(rmr_client_add_member(c, 5, "two words"), -EINVAL);
	ck_assert_int_eq(rmr_client_add_member(c, 2, members[SPARE].addr), -EEXIST);
	ck_assert_int_eq(rmr_client_add_member(c, 5, members[0].addr), -EADDRINUSE);
	ck_assert_int_eq(rmr_client_add_member(c, 5, "?"), -EINVAL); /* "not known" */
	ck_assert_int_eq(rmr_client_remove_member(c, 7, false), -ENOENT);
	ck_assert_int_eq(id_state(c, 4), -1);

	ck_assert_int_eq(rmr_client_add_member(c, 4, members[SPARE].addr), 0);
	for (unsigned i = 0; i < NMEMBERS; i++) {
		pool_status(i, &ps);
		ck_assert_uint_eq(ps.members_mask, 0x1e);
		ck_assert_uint_eq(ps.membership_ver, 1);
	}
	write_chunks(c, 8, 8, 100); /* while it copies */
	wait_id_state(c, 4, RMR_MEMBER_NORMAL);
	/* Its state change names it by its own address, not by a position in the open's list. */
	pthread_mutex_lock(&ev.lock);
	ck_assert_uint_eq(ev.normal4_index, NMEMBERS);
	ck_assert_str_eq(ev.normal4_addr, members[SPARE].addr);
	pthread_mutex_unlock(&ev.lock);
	wait_all_clean();
	ck_assert(memcmp(members[0].store.data, members[SPARE].store.data, POOL_SIZE) == 0);
	assert_stores_identical();
	/* It serves its share of the reads, and they are right. */
	pool_status(SPARE, &ps);
	spare_reads = ps.reads;
	for (unsigned k = 0; k < 32; k++) {
		fill(buf, CHUNK, (k >= 8 && k < 16 ? 100 : 1) + k);
		ck_assert_int_eq(do_io(c, RMR_IO_READ, (uint64_t)k * CHUNK, back, CHUNK), 0);
		ck_assert(memcmp(buf, back, CHUNK) == 0);
	}
	pool_status(SPARE, &ps);
	ck_assert_uint_gt(ps.reads, spare_reads);

	/* Detached: out of I/O, the others record what it misses. */
	ck_assert_int_eq(rmr_client_remove_member(c, 4, true), 0);
	ck_assert_int_eq(id_state(c, 4), RMR_MEMBER_DETACHED);
	ck_assert_int_eq(rmr_client_remove_member(c, 4, true), -EALREADY);
	write_chunks(c, 20, 3, 200);
	pool_status(0, &ps);
	ck_assert_uint_eq(ps.dirty_chunks[4], 3);
	ck_assert_uint_eq(ps.detached_mask, 0x10);
	/* Attached again: it copies those three chunks only. */
	atomic_store(&ev.resync_complete_total[SPARE], 0);
	ck_assert_int_eq(rmr_client_add_member(c, 4, NULL), 0);
	wait_id_state(c, 4, RMR_MEMBER_NORMAL);
	wait_all_clean();
	ck_assert_uint_eq(atomic_load(&ev.resync_complete_total[SPARE]), 3);
	ck_assert(memcmp(members[0].store.data, members[SPARE].store.data, POOL_SIZE) == 0);

	/* Deleted: the members forget it; writes no longer count it as missing. */
	ck_assert_int_eq(rmr_client_remove_member(c, 4, false), 0);
	ck_assert_int_eq(id_state(c, 4), -1);
	write_chunks(c, 24, 2, 300);
	for (unsigned i = 0; i < NMEMBERS; i++) {
		pool_status(i, &ps);
		ck_assert_uint_eq(ps.members_mask, 0xe);
		ck_assert_uint_eq(ps.membership_ver, 4);
		ck_assert_uint_eq(ps.dirty_chunks[4], 0);
	}
	assert_stores_identical();
	free(buf);
	free(back);
	rmr_client_close(c);
}
END_TEST

/* A member that was down during a change learns it when it comes back, and a member
 * restarted afterwards keeps the changed membership (it is in its metadata). */
START_TEST(membership_survives_restarts_and_reaches_late_members)
{
	struct rmr_client *c = open_client(1);
	struct rmr_server_pool_status ps;

	write_chunks(c, 0, 4, 1);
	member_stop(2);
	wait_state(c, 2, RMR_MEMBER_FAILED);
	member_start_in(SPARE, 0x1e, 0);
	ck_assert_int_eq(rmr_client_add_member(c, 4, members[SPARE].addr), 0);
	wait_id_state(c, 4, RMR_MEMBER_NORMAL);
	write_chunks(c, 4, 4, 50);
	/* Member 3 restarts from its store with the formatted member list (1..3). */
	member_start(2);
	wait_state(c, 2, RMR_MEMBER_NORMAL);
	pool_status(2, &ps);
	ck_assert_uint_eq(ps.members_mask, 0x1e);
	ck_assert_uint_eq(ps.membership_ver, 1);
	wait_all_clean();
	assert_stores_identical();
	ck_assert(memcmp(members[0].store.data, members[SPARE].store.data, POOL_SIZE) == 0);
	/* Member 1 restarts too: its metadata names member 4. */
	member_stop(0);
	member_start(0);
	pool_status(0, &ps);
	ck_assert_uint_eq(ps.members_mask, 0x1e);
	wait_state(c, 0, RMR_MEMBER_NORMAL);
	rmr_client_close(c);

	/* A new client learns the membership from the members. */
	c = open_client(1);
	wait_id_state(c, 4, RMR_MEMBER_NORMAL);
	rmr_client_close(c);
}
END_TEST

/* Removals that could lose data or break min_legs are refused. */
START_TEST(unsafe_removals_are_refused)
{
	struct rmr_client *c = open_client(3);

	ck_assert_int_eq(rmr_client_remove_member(c, 1, false), -EBUSY); /* fewer than min_legs */
	ck_assert_int_eq(rmr_client_remove_member(c, 1, true), -EBUSY);
	rmr_client_close(c);

	c = open_client(1);
	write_chunks(c, 0, 4, 1);
	member_stop(1);
	wait_state(c, 1, RMR_MEMBER_FAILED);
	write_chunks(c, 0, 2, 9); /* member 2 misses these */
	member_stop(2);
	wait_state(c, 2, RMR_MEMBER_FAILED);
	/* Member 1 is the last NORMAL one. */
	ck_assert_int_eq(rmr_client_remove_member(c, 1, false), -EBUSY);
	ck_assert_int_eq(id_state(c, 1), RMR_MEMBER_NORMAL);
	/* Removing a failed member is fine: member 1 holds everything. */
	ck_assert_int_eq(rmr_client_remove_member(c, 3, false), 0);
	ck_assert_int_eq(id_state(c, 3), -1);
	rmr_client_close(c);
}
END_TEST

START_TEST(status_renders_as_text_and_json)
{
	struct rmr_client *c = open_client(1);
	struct rmr_pool_status st = { .size = sizeof(st) };
	char out[8192], want[64];

	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	ck_assert_int_gt(rmr_pool_status_format(&st, RMR_FORMAT_TEXT, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "normal"));
	snprintf(want, sizeof(want), "event loop slept %" PRIu64 " times", st.loop_sleeps);
	ck_assert_ptr_nonnull(strstr(out, want));
	ck_assert_int_gt(rmr_pool_status_format(&st, RMR_FORMAT_JSON, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"state\":\"normal\""));
	ck_assert_ptr_nonnull(strstr(out, ",\"loop_sleeps\":"));
	ck_assert_int_eq(rmr_pool_status_format(&st, RMR_FORMAT_JSON, out, 16), -ENOSPC);
	rmr_client_close(c);
}
END_TEST

/* Member @i's store as it starts (its metadata blob as it is): rmr_server_add_pool's result. */
static int member_try_start(unsigned i)
{
	struct rmr_peer peers[NMEMBERS - 1];
	struct rmr_server_opts so = { .size = sizeof(so), .listen_addr = members[i].addr,
				      .transport = "mem" };
	struct rmr_pool_params pp = {
		.size = sizeof(pp), .name = "vol", .uuid = pool_uuid, .pool_size = POOL_SIZE,
		.chunk_size = CHUNK, .member_id = (uint16_t)(i + 1), .members_mask = 0xe,
		.peers = peers, .npeers = NMEMBERS - 1,
	};
	int ret;

	for (unsigned k = 0, n = 0; k < NMEMBERS; k++)
		if (k != i)
			peers[n++] = (struct rmr_peer){ .member_id = (uint16_t)(k + 1),
							.addr = members[k].addr };
	ck_assert_int_eq(rmr_server_create(&so, &members[i].srv), 0);
	ret = rmr_server_add_pool(members[i].srv, &pp, &memstore_ops, &members[i].store,
				  &members[i].pool);
	if (ret < 0) {
		rmr_server_destroy(members[i].srv);
		members[i].srv = NULL;
	}
	return ret;
}

static uint64_t blob_u64(const struct memstore *st, size_t off)
{
	uint64_t v;

	memcpy(&v, st->meta + off, sizeof(v));
	return le64toh(v);
}

static void blob_set(struct memstore *st, size_t off, uint64_t v, size_t size)
{
	uint64_t le = htole64(v);

	memcpy(st->meta + off, &le, size); /* little-endian: the low bytes first */
}

/* A version 4 or 5 blob's records section at offset 32: @n entries written from @e. */
static void blob_records(struct memstore *st, const uint8_t *good, size_t good_len, uint32_t n,
			 const uint8_t (*e)[16])
{
	uint32_t count = htole32(n), old;

	memcpy(&old, good + 32, 4);
	old = le32toh(old);
	memcpy(st->meta, good, 32);
	memcpy(st->meta + 32, &count, 4);
	memset(st->meta + 36, 0, 4);
	memcpy(st->meta + 40, e, n * 16u);
	memcpy(st->meta + 40 + n * 16u, good + 40 + old * 16u, good_len - 40 - old * 16u);
	st->meta_len = good_len - old * 16u + n * 16u;
}

/*
 * A version 5 blob's boots section at @at (after @nrec records), holding
 * @nboot entries in @good: @n entries written from @e instead.
 */
static void blob_boots(struct memstore *st, const uint8_t *good, size_t good_len, size_t nrec,
		       size_t nboot, uint32_t n, const uint8_t (*e)[16])
{
	size_t at = 40 + nrec * 16, tail = at + 8 + nboot * 16;
	uint32_t count = htole32(n);

	memcpy(st->meta, good, at);
	memcpy(st->meta + at, &count, 4);
	memset(st->meta + at + 4, 0, 4);
	memcpy(st->meta + at + 8, e, n * 16u);
	memcpy(st->meta + at + 8 + n * 16u, good + tail, good_len - tail);
	st->meta_len = good_len - nboot * 16u + n * 16u;
}

/*
 * An entry of the blob's records or boots section (16 bytes each): a
 * record says member @id may have lost chunks [@wide, @wide + @mid) (@flags:
 * META_RECORD_OLD); a boot entry has @mid reserved and its boot in @wide.
 */
struct blob_entry {
	uint16_t id, flags;
	uint32_t mid;
	uint64_t wide;
};

static void blob_entry_encode(uint8_t *e, const struct blob_entry *b)
{
	uint16_t i = htole16(b->id), f = htole16(b->flags);
	uint32_t m = htole32(b->mid);
	uint64_t w = htole64(b->wide);

	memcpy(e, &i, 2);
	memcpy(e + 2, &f, 2);
	memcpy(e + 4, &m, 4);
	memcpy(e + 8, &w, 8);
}

/*
 * librmr's metadata blob (docs/disk-format.md), version 5: it keeps the
 * version of the member's last map pull (a gather leaves older records of
 * it out), the records of chunks members may have lost to a power loss and
 * the boots they were made in, and a blob breaking the rules is refused at
 * start.
 */
START_TEST(meta_blob_keeps_pull_version_and_refuses_bad_ones)
{
	struct rmr_client *c = open_client(1);
	struct memstore *st = &members[1].store;
	uint8_t *buf = malloc(CHUNK), good[sizeof(st->meta)];
	size_t good_len, nrec, boots, nboot;
	uint64_t map_ver, pulled;

	fill(buf, CHUNK, 7);
	member_stop(1);
	ck_assert_int_eq(do_io(c, RMR_IO_WRITE, 0, buf, CHUNK), 0);
	member_start(1);
	wait_state(c, 1, RMR_MEMBER_NORMAL); /* through a map pull */
	wait_clean();
	rmr_client_close(c);
	member_stop(1);

	ck_assert_uint_eq(blob_u64(st, 0) >> 32, 5); /* version */
	map_ver = blob_u64(st, 8);
	pulled = blob_u64(st, 24);
	ck_assert_uint_gt(pulled, 0);
	ck_assert_uint_le(pulled, map_ver);
	/* Records: none of others; of its own at most the chunks it copied in. */
	nrec = blob_u64(st, 32) & 0xffffffffu;
	ck_assert_uint_le(nrec, 8);
	/* Their boots: ours at most (it copied them in this boot). */
	boots = 40 + nrec * 16;
	nboot = blob_u64(st, boots) & 0xffffffffu;
	ck_assert_uint_le(nboot, 1);
	good_len = st->meta_len;
	memcpy(good, st->meta, good_len);

	blob_set(st, 24, map_ver + 1, 8);
	ck_assert_int_eq(member_try_start(1), -EBADMSG); /* pulled beyond what it saw */
	/* Version 4: no boots section, the membership right after the records. */
	memcpy(st->meta, good, boots);
	memcpy(st->meta + boots, good + boots + 8 + nboot * 16, good_len - boots - 8 - nboot * 16);
	st->meta_len = good_len - 8 - nboot * 16;
	blob_set(st, 4, 4, 4);
	ck_assert_int_eq(member_try_start(1), 0); /* a version 4 blob still loads */
	member_stop(1);
	/* Version 3: no records section either, the membership right after the header. */
	memcpy(st->meta, good, 32);
	memcpy(st->meta + 32, good + boots + 8 + nboot * 16, good_len - boots - 8 - nboot * 16);
	st->meta_len = good_len - 16 - nrec * 16 - nboot * 16;
	blob_set(st, 4, 3, 4);
	ck_assert_int_eq(member_try_start(1), 0); /* a version 3 blob still loads */
	member_stop(1);
	blob_set(st, 4, 2, 4);
	ck_assert_int_eq(member_try_start(1), -EBADMSG); /* version 2 kept pulled_ver zero */
	blob_set(st, 24, 0, 8);
	ck_assert_int_eq(member_try_start(1), 0); /* a version 2 blob still loads */
	member_stop(1);
	memcpy(st->meta, good, good_len);
	st->meta_len = good_len;
	blob_set(st, 4, 6, 4);
	ck_assert_int_eq(member_try_start(1), -EBADMSG); /* a version from the future */

	/* The boots section: a bad entry, too many, or more than the blob holds. */
	{
		static const struct blob_entry bad[] = {
			{ 0, 0, 0, 1 },       /* no member id 0 */
			{ RMR_MAX_MEMBER_ID + 1, 0, 0, 1 },
			{ 3, 1, 0, 1 },       /* reserved bits set */
			{ 3, 0, 1, 1 },
			{ 3, 0, 0, 0 },       /* no boot */
			{ 3, 0, 0, 7 },       /* good, but twice below */
		};
		const unsigned nbad = sizeof(bad) / sizeof(bad[0]);
		uint8_t e[2][16];

		for (unsigned i = 0; i < nbad; i++) {
			bool twice = i == nbad - 1; /* one member twice */

			blob_entry_encode(e[0], &bad[i]);
			memcpy(e[1], e[0], 16);
			blob_boots(st, good, good_len, nrec, nboot, twice ? 2 : 1, e);
			ck_assert_msg(member_try_start(1) == -EBADMSG, "bad boot %u loaded", i);
		}
		blob_boots(st, good, good_len, nrec, nboot, 0, e);
		blob_set(st, boots, RMR_MAX_MEMBER_ID + 1, 4);
		ck_assert_int_eq(member_try_start(1), -EBADMSG);
		/* (Capped at the most a section may hold: beyond, the count alone is refused.) */
		blob_set(st, boots, (st->meta_len - boots - 8) / 16 + 1 < 63
					    ? (st->meta_len - boots - 8) / 16 + 1 : 63, 4);
		ck_assert_int_eq(member_try_start(1), -EBADMSG);
		blob_set(st, boots + 4, 1, 4);
		blob_set(st, boots, 0, 4);
		ck_assert_int_eq(member_try_start(1), -EBADMSG);
		/* A good one loads. */
		blob_entry_encode(e[0], &(struct blob_entry){ 3, 0, 0, 0x1234 });
		blob_boots(st, good, good_len, nrec, nboot, 1, e);
		ck_assert_int_eq(member_try_start(1), 0);
		member_stop(1);
	}

	{
		uint8_t e[2][16];
		struct rmr_server_pool_status ps;
		static const struct blob_entry bad[] = {
			{ 0, 0, 1, 0 },             /* no member id 0 */
			{ RMR_MAX_MEMBER_ID + 1, 0, 1, 0 },
			{ 3, 2, 1, 0 },             /* an unknown flag */
			{ 3, 0, 0, 0 },             /* empty */
			{ 3, 0, 1, POOL_SIZE / CHUNK }, /* beyond the pool */
			{ 3, 0, 2, POOL_SIZE / CHUNK - 1 },
		};

		for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			blob_entry_encode(e[0], &bad[i]);
			blob_records(st, good, good_len, 1, e);
			ck_assert_msg(member_try_start(1) == -EBADMSG, "bad record %u loaded", i);
		}
		/* More than the section may hold, and a count the blob does not hold. */
		blob_records(st, good, good_len, 0, e);
		blob_set(st, 32, 257, 4);
		ck_assert_int_eq(member_try_start(1), -EBADMSG);
		blob_set(st, 32, 200, 4);
		ck_assert_int_eq(member_try_start(1), -EBADMSG);
		/*
		 * Good ones load as records; where the bitmap says missed, a miss
		 * stays. One of its own (member 2's) counts only where its bitmap
		 * says missed: what it holds needs no copy.
		 */
		/* (The first of an older boot: a record all the same.) */
		blob_entry_encode(e[0], &(struct blob_entry){ 3, 1, 2, 5 });
		blob_entry_encode(e[1], &(struct blob_entry){ 2, 0, 1, 0 });
		blob_records(st, good, good_len, 2, e);
		ck_assert_int_eq(member_try_start(1), 0);
		pool_status(1, &ps);
		ck_assert_uint_eq(ps.record_chunks[3], 2);
		ck_assert_uint_eq(ps.dirty_chunks[3], 2);
		ck_assert_uint_eq(ps.record_chunks[2], 0);
		ck_assert_uint_eq(ps.dirty_chunks[2], 0);
		member_stop(1);
		/* And again after another start. */
		ck_assert_int_eq(member_try_start(1), 0);
		pool_status(1, &ps);
		ck_assert_uint_eq(ps.record_chunks[3], 2);
		member_stop(1);
	}
	memcpy(st->meta, good, good_len);
	st->meta_len = good_len;
	ck_assert_int_eq(member_try_start(1), 0);
	free(buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_mem");
	TCase *tc = tcase_create("pool");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, write_fans_out_and_reads_back);
	tcase_add_test(tc, meta_blob_keeps_pull_version_and_refuses_bad_ones);
	tcase_add_test(tc, bad_requests_are_refused_without_callback);
	tcase_add_test(tc, members_with_a_smaller_queue_depth_are_refused);
	tcase_add_test(tc, poll_option_is_checked_and_off_works);
	tcase_add_test(tc, lone_request_answer_is_polled_for);
	tcase_add_test(tc, bad_activity_log_extents_are_refused);
	tcase_add_test(tc, consumer_descriptor_is_served_on_the_loop_thread);
	tcase_add_test(tc, overlapping_writes_apply_in_order_everywhere);
	tcase_add_test(tc, member_loss_keeps_io_going_and_is_recorded);
	tcase_add_test(tc, store_error_fails_member_not_request);
	tcase_add_test(tc, whole_chunk_writes_clear_without_copy);
	tcase_add_test(tc, patch_writes_copy_the_chunks_they_change_in_part);
	tcase_add_test(tc, store_error_heals_once_cleared);
	tcase_add_test(tc, maintenance_takes_member_out_and_back);
	tcase_add_test(tc, a_peers_resync_does_not_flush_the_healthy_members);
	tcase_add_test(tc, a_slow_store_check_holds_the_pull_not_the_writes);
	tcase_add_test(tc, a_slow_flush_holds_the_clean_record_not_the_member);
	tcase_add_test(tc, second_failure_during_resync);
	tcase_add_test(tc, a_store_that_lost_data_is_refused);
	tcase_add_test(tc, all_members_lost_fails_requests);
	tcase_add_test(tc, resync_pauses_and_resumes);
	tcase_add_test(tc, verify_finds_and_repairs_divergence);
	tcase_add_test(tc, read_with_argument_short_answer_and_one_member);
	tcase_add_test(tc, status_renders_as_text_and_json);
	tcase_add_test(tc, member_added_detached_attached_and_deleted);
	tcase_add_test(tc, membership_survives_restarts_and_reaches_late_members);
	tcase_add_test(tc, unsafe_removals_are_refused);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
