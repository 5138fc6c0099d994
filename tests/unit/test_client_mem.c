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
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rmr/client.h>
#include <rmr/server.h>

#define POOL_SIZE (4u << 20)
#define CHUNK (128u * 1024)
#define NMEMBERS 3

struct member {
	char addr[32];
	struct memstore store;
	struct rmr_server *srv;
	struct rmr_server_pool *pool;
};

static struct member members[NMEMBERS];

/* What the recovery callbacks told, client and members (any thread). */
static struct {
	atomic_uint client_tracking[NMEMBERS + 1][2]; /* [id][started] */
	atomic_uint client_map_update_ok, client_map_update_err;
	atomic_uint member_cleared[NMEMBERS][NMEMBERS + 1]; /* [member idx][id] */
	atomic_uint resync_complete[NMEMBERS];
	_Atomic uint64_t resync_complete_total[NMEMBERS];
} ev;

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
}

static const struct rmr_client_ops client_ops = {
	.size = sizeof(client_ops),
	.dirty_tracking = ev_client_tracking,
	.map_update = ev_client_map_update,
};

static void ev_member_dirty(void *priv, const char *pool, uint16_t id, bool dirty)
{
	unsigned idx = (unsigned)(uintptr_t)priv;

	ck_assert_str_eq(pool, "vol");
	if (!dirty && id <= NMEMBERS)
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

/* Start member @i with a resync rate limit (0 = none). */
static void member_start_rate(unsigned i, uint64_t rate)
{
	struct rmr_peer peers[NMEMBERS - 1];
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
		.members_mask = 0xe, /* ids 1..3 */
		.peers = peers,
		.resync_rate = rate,
	};

	for (unsigned k = 0; k < NMEMBERS; k++)
		if (k != i)
			peers[npeers++] = (struct rmr_peer){ .member_id = (uint16_t)(k + 1),
							     .addr = members[k].addr };
	pp.npeers = npeers;
	ck_assert_int_eq(rmr_server_create(&so, &members[i].srv), 0);
	ck_assert_int_eq(rmr_server_add_pool(members[i].srv, &pp, &memstore_ops, &members[i].store,
					     &members[i].pool), 0);
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
	for (unsigned i = 0; i < NMEMBERS; i++) {
		snprintf(members[i].addr, sizeof(members[i].addr), "t%d-m%u", test_round, i + 1);
		memstore_init(&members[i].store, POOL_SIZE, CHUNK);
	}
	for (unsigned i = 0; i < NMEMBERS; i++)
		member_start(i);
}

static void teardown(void)
{
	for (unsigned i = 0; i < NMEMBERS; i++) {
		member_stop(i);
		memstore_destroy(&members[i].store);
	}
}

static struct rmr_client *open_client(unsigned min_legs)
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
	};
	struct rmr_client *c = NULL;

	for (unsigned i = 0; i < NMEMBERS; i++)
		addrs[i] = members[i].addr;
	ck_assert_int_eq(rmr_client_open(&o, &c), 0);
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

static int do_io(struct rmr_client *c, enum rmr_io_kind kind, uint64_t addr, void *buf,
		 uint32_t len)
{
	struct waiter w = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct rmr_io io = {
		.kind = kind, .op = 1, .addr = addr, .len = len, .iov = &iov, .iovcnt = 1,
		.cb = waiter_cb, .priv = &w,
	};
	int ret = rmr_client_submit(c, &io, RMR_SUBMIT_WAIT);

	if (ret < 0)
		return ret;
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	ck_assert_int_eq(w.calls, 1);
	return w.status;
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
	for (int n = 0; n < 500 && member_state(c, i) != want; n++)
		usleep(10000);
	ck_assert_str_eq(rmr_member_state_name(member_state(c, i)), rmr_member_state_name(want));
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

	for (int n = 0; n < 1000; n++) {
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
	rmr_client_close(c);
	ck_assert_int_eq(w.calls, 0);
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
	for (int n = 0; n < 1000 && atomic_load(&b->pending); n++)
		usleep(5000);
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

	member_stop(1);
	wait_state(c, 1, RMR_MEMBER_FAILED);
	for (unsigned n = 0; n < 6; n++) {
		fill(buf, CHUNK, 40 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK, buf, CHUNK), 0);
	}
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

START_TEST(second_failure_during_resync)
{
	struct rmr_client *c = open_client(1);
	uint8_t *buf = malloc(CHUNK), *back = malloc(CHUNK);
	struct rmr_server_pool_status ps;

	member_stop(1);
	wait_state(c, 1, RMR_MEMBER_FAILED);
	for (unsigned n = 0; n < 12; n++) {
		fill(buf, CHUNK, 120 + n);
		ck_assert_int_eq(do_io(c, RMR_IO_WRITE, (uint64_t)n * CHUNK + 4096, buf, 8192), 0);
	}
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
	ck_assert_str_eq(rmr_member_state_name(member_state(c, 2)), "failed");
	ck_assert_mem_eq(members[0].store.data, members[1].store.data, POOL_SIZE);
	rmr_client_close(c);
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

START_TEST(status_renders_as_text_and_json)
{
	struct rmr_client *c = open_client(1);
	struct rmr_pool_status st = { .size = sizeof(st) };
	char out[8192];

	ck_assert_int_eq(rmr_client_status(c, &st), 0);
	ck_assert_int_gt(rmr_pool_status_format(&st, RMR_FORMAT_TEXT, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "normal"));
	ck_assert_int_gt(rmr_pool_status_format(&st, RMR_FORMAT_JSON, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"state\":\"normal\""));
	ck_assert_int_eq(rmr_pool_status_format(&st, RMR_FORMAT_JSON, out, 16), -ENOSPC);
	rmr_client_close(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("client_mem");
	TCase *tc = tcase_create("pool");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, write_fans_out_and_reads_back);
	tcase_add_test(tc, bad_requests_are_refused_without_callback);
	tcase_add_test(tc, overlapping_writes_apply_in_order_everywhere);
	tcase_add_test(tc, member_loss_keeps_io_going_and_is_recorded);
	tcase_add_test(tc, store_error_fails_member_not_request);
	tcase_add_test(tc, whole_chunk_writes_clear_without_copy);
	tcase_add_test(tc, store_error_heals_once_cleared);
	tcase_add_test(tc, maintenance_takes_member_out_and_back);
	tcase_add_test(tc, second_failure_during_resync);
	tcase_add_test(tc, all_members_lost_fails_requests);
	tcase_add_test(tc, status_renders_as_text_and_json);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
