/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Deterministic simulation of recovery: a client and three members over the
 * in-process transport, all stepped on this thread against a virtual clock
 * (loop_sim_*), with a seeded random workload and a model of every
 * acknowledged write. Each case injects a fault (a member killed and
 * restarted, a store failing then healed, maintenance, a cut client link, a
 * cut member-to-member link during resync, a second failure during resync,
 * a member back after the client's backoff grew long, a member's answers
 * made to break the session's rules on their way),
 * keeps writing, and then checks: every read returns the model, the pool
 * heals by itself, all stores equal the model, the client carried no resync
 * bytes and the returning member copied at most its dirty chunks.
 *
 * Each case runs over SIM_SEEDS seeds (default 16, fewer for the heaviest
 * case); SIM_SEED=N runs one seed, SIM_CASE=NAME one case (RMR_TEST_DEBUG=1
 * adds librmr's debug log). Every seed prints the command that replays it.
 */
#include "memstore.h"
#include "unit.h"

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <rmr/client.h>
#include <rmr/server.h>

#include "activity_log.h"
#include "loop.h"
#include "transports.h"
#include "wire.h"

#define POOL_SIZE (8u << 20)         /* unless a case asks for another size */
#define CHUNK (64u * 1024)           /* unless a case asks for another size */
#define NCHUNKS (POOL_SIZE / CHUNK)
#define NMEMBERS 3
#define BLK 4096u
#define MS 1000000ull

struct member {
	char addr[32];
	struct memstore store;
	struct rmr_server *srv;
	struct rmr_server_pool *pool;
};

/* What a case may change about the world (see SIM_CASE_WITH). */
struct world_cfg {
	uint64_t pool_size;
	uint32_t chunk;
	uint32_t max_io;             /* 0: librmr's default */
	unsigned seeds;              /* seeds per run unless SIM_SEEDS says (0: 16) */
	unsigned reconnect_max_ms;   /* the client's backoff limit (0: 400) */
	uint32_t al_extent;          /* activity log extent (0: librmr's 4 MiB) */
	unsigned min_legs;           /* the client's (0: 1) */
	bool volatile_writes;        /* volatile stores, the client's volatile_writes */
};

static struct {
	uint64_t seed, rng;
	struct world_cfg cfg;
	struct member m[NMEMBERS];
	struct rmr_client *c;
	uint8_t *model;
	uint8_t *maybe;              /* bytes of writes that failed: either value is right */
	bool replace;                /* member_start: the store is a blank replacement */
	bool patches;                /* write_some: half of the writes are patches */
	uint64_t open_without;       /* the client's rmr_client_opts.open_without */
	const struct rmr_close_record *last_close; /* ... and its last_close */
	unsigned inflight;
	uint64_t acked, failed;
} w;

/* --- the world ---------------------------------------------------------------- */

static uint64_t rnd(void)
{
	w.rng ^= w.rng >> 12;
	w.rng ^= w.rng << 25;
	w.rng ^= w.rng >> 27;
	return w.rng * 0x2545f4914f6cdd1dull;
}

static const rmr_uuid pool_uuid = { { 0x51, 0x4d, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 } };

static void member_start(unsigned i, uint64_t rate)
{
	struct rmr_server_opts so = {
		.size = sizeof(so),
		.listen_addr = w.m[i].addr,
		.transport = "mem",
		.max_io_size = w.cfg.max_io,
		.heartbeat_ms = 50,
		.failure_timeout_ms = 500,
	};
	struct rmr_peer peers[NMEMBERS - 1];
	struct rmr_pool_params pp = {
		.size = sizeof(pp),
		.name = "vol",
		.uuid = pool_uuid,
		.pool_size = w.cfg.pool_size,
		.chunk_size = w.cfg.chunk,
		.al_extent_size = w.cfg.al_extent,
		.member_id = (uint16_t)(i + 1),
		.members_mask = 0xe,
		.peers = peers,
		.npeers = NMEMBERS - 1,
		.sync_queue_depth = 4,
		.resync_rate = rate,
		.replace = w.replace,
		.boot_id = w.m[i].store.boot,
	};

	for (unsigned k = 0, n = 0; k < NMEMBERS; k++)
		if (k != i)
			peers[n++] = (struct rmr_peer){ .member_id = (uint16_t)(k + 1),
							.addr = w.m[k].addr };
	ck_assert_int_eq(rmr_server_create(&so, &w.m[i].srv), 0);
	ck_assert_int_eq(rmr_server_add_pool(w.m[i].srv, &pp, &memstore_ops, &w.m[i].store,
					     &w.m[i].pool), 0);
}

/* A crash: the process is gone, its store stays. */
static void member_kill(unsigned i)
{
	rmr_server_remove_pool(w.m[i].pool);
	rmr_server_destroy(w.m[i].srv);
	w.m[i].srv = NULL;
}

static int client_open_as(bool takeover, struct rmr_client **out)
{
	const char *addrs[NMEMBERS];
	struct rmr_client_opts o = {
		.size = sizeof(o),
		.pool_name = "vol",
		.transport = "mem",
		.nmembers = NMEMBERS,
		.members = addrs,
		.queue_depth = 32,
		.max_io_size = w.cfg.max_io,
		.heartbeat_ms = 50,
		.failure_timeout_ms = 500,
		.reconnect_min_ms = 50,
		.reconnect_max_ms = w.cfg.reconnect_max_ms ? w.cfg.reconnect_max_ms : 400,
		.open_timeout_ms = 2000,
		.min_legs = w.cfg.min_legs ? w.cfg.min_legs : 1,
		.takeover = takeover,
		.open_without = w.open_without,
		.volatile_writes = w.cfg.volatile_writes,
		.last_close = w.last_close,
	};

	for (unsigned i = 0; i < NMEMBERS; i++)
		addrs[i] = w.m[i].addr;
	return rmr_client_open(&o, out);
}

static void client_open(void)
{
	ck_assert_int_eq(client_open_as(false, &w.c), 0);
}

static void world_begin(uint64_t seed, struct world_cfg cfg)
{
	memset(&w, 0, sizeof(w));
	w.seed = seed;
	w.cfg = cfg;
	w.rng = seed * 0x9e3779b97f4a7c15ull + 7;
	rmr_log_set_sink(NULL, NULL, getenv("RMR_TEST_DEBUG") ? RMR_LOG_DEBUG : RMR_LOG_ERR);
	loop_sim_begin(seed);
	w.model = calloc(1, cfg.pool_size);
	w.maybe = calloc(1, cfg.pool_size);
	ck_assert_ptr_nonnull(w.model);
	ck_assert_ptr_nonnull(w.maybe);
	for (unsigned i = 0; i < NMEMBERS; i++) {
		snprintf(w.m[i].addr, sizeof(w.m[i].addr), "sim-m%u", i + 1);
		memstore_init(&w.m[i].store, cfg.pool_size, cfg.chunk);
		memstore_set_host(&w.m[i].store, i + 1);
		if (cfg.volatile_writes)
			memstore_make_volatile(&w.m[i].store);
	}
	for (unsigned i = 0; i < NMEMBERS; i++)
		member_start(i, 0);
	client_open();
}

static void world_end(void)
{
	rmr_client_close(w.c);
	for (unsigned i = 0; i < NMEMBERS; i++) {
		if (w.m[i].srv)
			member_kill(i);
		rmr_mem_link_cut("vol", w.m[i].addr, false);
		for (unsigned k = 0; k < NMEMBERS; k++)
			rmr_mem_link_cut(w.m[i].addr, w.m[k].addr, false);
		memstore_destroy(&w.m[i].store);
	}
	free(w.model);
	free(w.maybe);
	loop_sim_end();
}

/* --- workload and model -------------------------------------------------------- */

struct wreq {
	uint64_t addr;
	uint32_t len;
	struct iovec iov;
	uint8_t data[];
};

static void write_done(void *priv, int status)
{
	struct wreq *r = priv;

	w.inflight--;
	if (status == 0) {
		memcpy(w.model + r->addr, r->data, r->len);
		memset(w.maybe + r->addr, 0, r->len);
		w.acked++;
	} else {
		memset(w.maybe + r->addr, 1, r->len);
		w.failed++;
	}
	free(r);
}

static void submit_write_at(uint64_t addr, uint32_t len)
{
	struct wreq *r = malloc(sizeof(*r) + len);
	struct rmr_io io = { .kind = RMR_IO_WRITE, .op = 1, .addr = addr, .len = len,
			     .iovcnt = 1, .cb = write_done };
	uint8_t v = (uint8_t)rnd();

	ck_assert_ptr_nonnull(r);
	r->addr = addr;
	r->len = len;
	for (uint32_t i = 0; i < len; i++)
		r->data[i] = (uint8_t)(v + i * 13 + (i >> 8));
	r->iov = (struct iovec){ .iov_base = r->data, .iov_len = len };
	io.iov = &r->iov;
	io.priv = r;
	ck_assert_int_eq(rmr_client_submit(w.c, &io, 0), 0);
	w.inflight++;
}

/* A patch (RMR_IO_PATCH): up to three blocks at @off[] of its range, in this order. */
struct preq {
	uint64_t addr;
	unsigned n;
	uint32_t off[3];
	struct iovec iov;
	uint8_t data[3 * (8 + BLK)];  /* memstore's patch records: le32 offset, le32 length, bytes */
};

static void patch_done(void *priv, int status)
{
	struct preq *r = priv;

	w.inflight--;
	for (unsigned k = 0; k < r->n; k++) {
		uint64_t at = r->addr + r->off[k];

		if (status == 0) {
			memcpy(w.model + at, r->data + k * (8 + BLK) + 8, BLK);
			memset(w.maybe + at, 0, BLK);
		} else {
			memset(w.maybe + at, 1, BLK);
		}
	}
	if (status == 0)
		w.acked++;
	else
		w.failed++;
	free(r);
}

/* A patch over 1..4 chunks that changes 1..3 blocks of them. */
static void submit_patch(void)
{
	uint64_t nchunks = w.cfg.pool_size / w.cfg.chunk, span = 1 + rnd() % 4;
	uint64_t first = rnd() % (nchunks - span + 1);
	struct preq *r = malloc(sizeof(*r));
	uint32_t len = (uint32_t)(span * w.cfg.chunk);
	struct rmr_io io = { .kind = RMR_IO_WRITE, .op = 1, .addr = first * w.cfg.chunk,
			     .len = len, .iovcnt = 1, .cb = patch_done, .flags = RMR_IO_PATCH };

	ck_assert_ptr_nonnull(r);
	r->addr = io.addr;
	r->n = 1 + (unsigned)(rnd() % 3);
	for (unsigned k = 0; k < r->n; k++) {
		uint8_t *rec = r->data + k * (8 + BLK), v = (uint8_t)rnd();
		uint32_t off = (uint32_t)(rnd() % (len / BLK)) * BLK, le_off = htole32(off);
		uint32_t le_len = htole32(BLK);

		r->off[k] = off;
		memcpy(rec, &le_off, 4);
		memcpy(rec + 4, &le_len, 4);
		for (uint32_t i = 0; i < BLK; i++)
			rec[8 + i] = (uint8_t)(v + i * 7);
	}
	r->iov = (struct iovec){ .iov_base = r->data, .iov_len = r->n * (8 + BLK) };
	io.iov = &r->iov;
	io.priv = r;
	ck_assert_int_eq(rmr_client_submit(w.c, &io, 0), 0);
	w.inflight++;
}

static void submit_write(void)
{
	uint32_t len = (uint32_t)(1 + rnd() % 16) * BLK;

	if (w.patches && rnd() % 2) {
		submit_patch();
		return;
	}
	submit_write_at(rnd() % ((w.cfg.pool_size - len) / BLK + 1) * BLK, len);
}

/* Step the world until every write sent is answered. */
static void settle(void)
{
	while (w.inflight)
		if (loop_sim_step() == 0)
			loop_sim_run(MS);
}

/* @n random writes, @qd at a time, the world stepping in between. */
static void write_some(unsigned n)
{
	for (unsigned sent = 0; sent < n || w.inflight;) {
		while (sent < n && w.inflight < 16) {
			submit_write();
			sent++;
		}
		if (loop_sim_step() == 0)
			loop_sim_run(MS);
	}
	/* A member is always NORMAL in these cases: no write may fail. */
	ck_assert_msg(w.failed == 0, "seed %llu: %llu writes failed", (unsigned long long)w.seed,
		      (unsigned long long)w.failed);
}

struct rreq {
	int status;
	bool done;
};

static void read_done(void *priv, int status)
{
	struct rreq *r = priv;

	r->status = status;
	r->done = true;
}

/* Read the whole pool through the client (round-robin over the members). */
static void read_all_matches_model(void)
{
	static uint8_t buf[CHUNK];

	for (uint64_t off = 0; off < w.cfg.pool_size; off += sizeof(buf) / 2) {
		struct rreq r = { 0 };
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) / 2 };
		struct rmr_io io = { .kind = RMR_IO_READ, .op = 0, .addr = off,
				     .len = sizeof(buf) / 2, .iov = &iov, .iovcnt = 1,
				     .cb = read_done, .priv = &r };

		ck_assert_int_eq(rmr_client_submit(w.c, &io, 0), 0);
		while (!r.done)
			if (loop_sim_step() == 0)
				loop_sim_run(MS);
		/* A read answers with the bytes it returned. */
		ck_assert_msg(r.status == (int)sizeof(buf) / 2 &&
				      !memcmp(buf, w.model + off, sizeof(buf) / 2),
			      "seed %llu: read at %llu: status %d or data differs from the model",
			      (unsigned long long)w.seed, (unsigned long long)off, r.status);
	}
}

static enum rmr_member_state state_of(unsigned i)
{
	struct rmr_pool_status st = { .size = sizeof(st) };

	ck_assert_int_eq(rmr_client_status(w.c, &st), 0);
	return st.members[i].state;
}

/* Step the world until member @i is in @want (within @ms of virtual time). */
static void wait_state(unsigned i, enum rmr_member_state want, unsigned ms)
{
	for (unsigned t = 0; t < ms && state_of(i) != want; t += 10)
		loop_sim_run(10 * MS);
	ck_assert_msg(state_of(i) == want, "seed %llu: member %u is %s, expected %s",
		      (unsigned long long)w.seed, i + 1, rmr_member_state_name(state_of(i)),
		      rmr_member_state_name(want));
}

static struct rmr_server_pool_status pool_status(unsigned i)
{
	static struct rmr_server_status ss;

	ss.size = sizeof(ss);
	ck_assert_int_eq(rmr_server_status(w.m[i].srv, &ss), 0);
	return ss.pools[0];
}

static uint64_t dirty_total(void)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < NMEMBERS; i++) {
		struct rmr_server_pool_status ps = pool_status(i);

		for (unsigned id = 1; id <= NMEMBERS; id++)
			n += ps.dirty_chunks[id];
	}
	return n;
}

/* Chunks member index @on records as missed by member id @id. */
static uint64_t dirty_for(unsigned id, unsigned on)
{
	return pool_status(on).dirty_chunks[id];
}

/*
 * The end of every case: all members NORMAL, the pool heals within 60 s of
 * virtual time, reads and stores equal the model, the client carried no
 * resync bytes, and member @ret copied at most @dirty chunks.
 */
static void check_healed(unsigned ret, uint64_t dirty)
{
	struct rmr_pool_status st = { .size = sizeof(st) };
	uint64_t copied;

	for (unsigned i = 0; i < NMEMBERS; i++)
		wait_state(i, RMR_MEMBER_NORMAL, 20000);
	read_all_matches_model();
	for (unsigned t = 0; t < 60000 && dirty_total(); t += 10)
		loop_sim_run(10 * MS);
	ck_assert_msg(dirty_total() == 0, "seed %llu: still %llu dirty chunks after 60 s",
		      (unsigned long long)w.seed, (unsigned long long)dirty_total());
	for (unsigned i = 0; i < NMEMBERS; i++)
		ck_assert_msg(!memcmp(w.m[i].store.data, w.model, w.cfg.pool_size),
			      "seed %llu: member %u's store differs from the model",
			      (unsigned long long)w.seed, i + 1);
	ck_assert_int_eq(rmr_client_status(w.c, &st), 0);
	for (unsigned i = 0; i < NMEMBERS; i++)
		ck_assert_uint_eq(st.members[i].resync_bytes, 0);
	copied = pool_status(ret).resync_bytes;
	ck_assert_msg(copied <= dirty * w.cfg.chunk,
		      "seed %llu: member %u copied %llu bytes for %llu dirty chunks",
		      (unsigned long long)w.seed, ret + 1, (unsigned long long)copied,
		      (unsigned long long)dirty);
}

/* Cut (@cut) or restore the client's links to the members in @mask (bit i: index i). */
static void client_links(unsigned mask, bool cut)
{
	for (unsigned i = 0; i < NMEMBERS; i++)
		if (mask & (1u << i))
			ck_assert_int_eq(rmr_mem_link_cut("vol", w.m[i].addr, cut), 0);
}

/* Member @i's host loses power: its process is gone, its store keeps what was flushed. */
static void lose_power(unsigned i)
{
	member_kill(i);
	memstore_power_loss(&w.m[i].store);
}

/* --- the cases ------------------------------------------------------------------- */

/* Member 2 killed between writes and held failed: @return the chunks member 1 records it missed. */
static uint64_t kill_member_2_under_writes(void)
{
	uint64_t dirty;

	write_some(200);
	member_kill(1);
	write_some(300);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	dirty = dirty_for(2, 0);
	ck_assert_uint_gt(dirty, 0);
	return dirty;
}

static void case_kill_restart(void)
{
	uint64_t dirty = kill_member_2_under_writes();

	member_start(1, 0);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	write_some(100);
	check_healed(1, dirty);
}

/*
 * Patches and plain writes, half and half, while member 2 is down and after
 * it is back with its background resync stalled: a patch covers every chunk
 * of its range in part, so the returning member copies each one it missed
 * before applying it (were it taken as overwriting them whole, the bytes
 * it does not change would stay stale and the stores differ at the end).
 */
static void case_patch_kill_restart(void)
{
	uint64_t dirty, copied;

	w.patches = true;
	dirty = kill_member_2_under_writes();
	member_start(1, 1); /* 1 byte/s: only requests copy */
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	write_some(200);
	copied = pool_status(1).resync_bytes;
	ck_assert_msg(copied > 0, "seed %llu: no request made member 2 copy a chunk",
		      (unsigned long long)w.seed);
	ck_assert_int_eq(rmr_server_resync_rate(w.m[1].pool, 0), 0);
	check_healed(1, dirty);
}

/*
 * The background resync copies at most sync_queue_depth (4 here) chunks at
 * once, and does use that many: member 2 comes back with many dirty chunks
 * and no rate limit.
 */
static void case_resync_queue_bound(void)
{
	uint64_t dirty = kill_member_2_under_writes();
	struct rmr_server_pool_status ps;

	ck_assert_uint_gt(dirty, 8);
	member_start(1, 0);
	check_healed(1, dirty);
	ps = pool_status(1);
	ck_assert_uint_eq(ps.sync_queue_depth, 4);
	ck_assert_uint_eq(ps.resync_inflight, 0);
	ck_assert_msg(ps.resync_inflight_peak == 4,
		      "seed %llu: at most %u chunks copied at once, expected 4",
		      (unsigned long long)w.seed, ps.resync_inflight_peak);
}

/*
 * Overlapping writes reach every member in the order they were submitted,
 * even one whose store applies what it holds newest first: the client sends
 * a write only once every earlier overlapping one finished everywhere. A
 * write to other blocks never waits for them.
 */
static void case_overlapping_writes_ordered(void)
{
	uint64_t a = (rnd() % NCHUNKS) * CHUNK, b = (a + CHUNK) % (NCHUNKS * CHUNK);

	write_some(20);
	w.m[0].store.hold = true;
	submit_write_at(a, BLK);
	submit_write_at(a, BLK); /* over the first */
	submit_write_at(b, BLK); /* elsewhere */
	loop_sim_run(10 * MS);
	/* The first and the one elsewhere wait in member 1's store; the second in the client. */
	ck_assert_uint_eq(w.m[0].store.nheld, 2);
	ck_assert_uint_eq(w.inflight, 3);
	memstore_release_reversed(&w.m[0].store);
	settle();
	ck_assert_uint_eq(w.inflight, 0);
	for (unsigned i = 0; i < NMEMBERS; i++)
		ck_assert_msg(!memcmp(w.m[i].store.data, w.model, w.cfg.pool_size),
			      "seed %llu: member %u's store differs from the model",
			      (unsigned long long)w.seed, i + 1);
}

/*
 * Answers that break a rule of the session, made so on their way from
 * @from (NULL: anyone) to @to (rmr_mem_tamper): the first answer of @type after arming
 * is changed as @change says (every one if @every); @fired counts them.
 */
enum bad_answer {
	BAD_SHORT_READ,     /* fewer bytes than the read asked for */
	BAD_READ_LEN,       /* a length that is not the read's */
	BAD_SLOT,           /* a slot beyond the queue depth */
	BAD_SEQ,            /* another request's sequence number */
	BAD_TYPE,           /* the answer of another kind of request */
	BAD_SENDER,         /* another member's id */
	BAD_REQUEST,        /* a member-to-member request instead */
	BAD_TRUNCATED,      /* less than a header */
	BAD_ADDR,           /* another range (and other bytes) */
};

static struct {
	const char *from, *to;
	unsigned type;
	enum bad_answer change;
	bool armed, every;
	unsigned fired;
} bad;

static size_t bad_answer(void *ctx, const char *from, const char *to, void *buf, size_t len)
{
	struct rmr_msg m;
	char why[128];

	(void)ctx;
	if (!bad.armed || (bad.from && strcmp(from, bad.from)) || strcmp(to, bad.to) ||
	    rmr_wire_decode(buf, len, &m, why, sizeof(why)) < 0 || m.type != bad.type)
		return len;
	bad.armed = bad.every;
	bad.fired++;
	switch (bad.change) {
	case BAD_SHORT_READ:
		m.payload_len -= 512;
		len -= 512;
		break;
	case BAD_READ_LEN:
		m.len += BLK;
		break;
	case BAD_SLOT:
		m.slot = 1000;
		break;
	case BAD_SEQ:
		m.seq ^= 1;
		break;
	case BAD_TYPE:
		m.type = RMR_MSG_MAP_ADD_RSP;
		break;
	case BAD_SENDER:
		m.sender_id = 2;
		break;
	case BAD_REQUEST:
		m.type = RMR_MSG_MAP_CLEAR;
		m.status = 0;
		break;
	case BAD_TRUNCATED:
		return 10;
	case BAD_ADDR:
		/* ...and other bytes, as another range holds. */
		m.addr += BLK;
		for (size_t i = sizeof(struct rmr_wire_hdr); i < len; i++)
			((uint8_t *)buf)[i] ^= 0x5a;
		break;
	}
	rmr_wire_encode(buf, &m);
	return len;
}

/*
 * Each answer of member 3 that breaks a rule (bad_answer) makes the client
 * drop it, with the reason in its status: the request completes once, as
 * if member 3 had failed (a read from another member, with the model's
 * bytes; a write acknowledged by the other two and recorded as missed by
 * member 3), and member 3 comes back and copies what it missed.
 */
static void case_bad_answers_fail_the_member(void)
{
	static const struct {
		unsigned type;
		enum bad_answer change;
		const char *reason;
	} cases[] = {
		{ RMR_MSG_READ_RSP, BAD_SHORT_READ, "read answer of the wrong length" },
		{ RMR_MSG_READ_RSP, BAD_READ_LEN, "read answer of the wrong length" },
		{ RMR_MSG_READ_RSP, BAD_SLOT, "answer for a slot that does not exist" },
		{ RMR_MSG_WRITE_RSP, BAD_SLOT, "answer for a slot that does not exist" },
		{ RMR_MSG_WRITE_RSP, BAD_SEQ, "answer to no request in flight" },
		{ RMR_MSG_WRITE_RSP, BAD_TYPE, "answer to no request in flight" },
		{ RMR_MSG_READ_RSP, BAD_SEQ, "answer to no request in flight" },
		{ RMR_MSG_WRITE_RSP, BAD_SENDER, "malformed message" },
		{ RMR_MSG_WRITE_RSP, BAD_REQUEST, "protocol violation" },
		{ RMR_MSG_READ_RSP, BAD_TRUNCATED, "malformed message" },
	};
	static uint8_t buf[2 * BLK];

	write_some(50);
	rmr_mem_tamper(bad_answer, NULL);
	for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct rmr_pool_status st = { .size = sizeof(st) };

		wait_state(2, RMR_MEMBER_NORMAL, 5000);
		bad = (typeof(bad)){ .from = w.m[2].addr, .to = "vol", .type = cases[k].type,
				     .change = cases[k].change, .armed = true };
		/* Reads go round-robin: within three, one is member 3's. */
		for (unsigned n = 0; n < 6 && bad.armed; n++) {
			uint64_t off = rnd() % (w.cfg.pool_size / BLK - 1) * BLK;
			struct rreq r = { 0 };
			struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
			struct rmr_io io = { .kind = RMR_IO_READ, .addr = off, .len = sizeof(buf),
					     .iov = &iov, .iovcnt = 1, .cb = read_done, .priv = &r,
					     .flags = RMR_IO_WHOLE };

			if (cases[k].type == RMR_MSG_WRITE_RSP) {
				submit_write_at(off, sizeof(buf));
				settle();
				ck_assert_msg(w.failed == 0, "case %u: the write failed", k);
				continue;
			}
			ck_assert_int_eq(rmr_client_submit(w.c, &io, 0), 0);
			while (!r.done)
				if (loop_sim_step() == 0)
					loop_sim_run(MS);
			ck_assert_msg(r.status == (int)sizeof(buf) &&
					      !memcmp(buf, w.model + off, sizeof(buf)),
				      "case %u: read at %llu: status %d or data differs from the model",
				      k, (unsigned long long)off, r.status);
		}
		ck_assert_msg(bad.fired == 1, "case %u: no answer of member 3 was changed", k);
		ck_assert_int_eq(rmr_client_status(w.c, &st), 0);
		ck_assert_msg(st.members[2].state != RMR_MEMBER_NORMAL &&
				      strstr(st.members[2].reason, cases[k].reason),
			      "case %u: member 3 is %s (%s), expected out for '%s'", k,
			      rmr_member_state_name(st.members[2].state), st.members[2].reason,
			      cases[k].reason);
	}
	rmr_mem_tamper(NULL, NULL);
	write_some(50);
	check_healed(2, NCHUNKS);
}

/*
 * A returning member copies what it missed while member 1's answers to its
 * SYNC_READs break a rule (bad_answer): every one carries a short payload,
 * another range or a slot that does not exist, or one carries another
 * sequence number (taken for a late answer: ignored, the request times
 * out). It drops them (or the session) and copies from member 3 instead:
 * its store ends equal to the model, never with bytes those answers
 * carried.
 */
static void case_bad_sync_answers(void)
{
	static const enum bad_answer changes[] = { BAD_SHORT_READ, BAD_ADDR, BAD_SLOT, BAD_SEQ };
	enum bad_answer change = changes[w.seed % 4];
	uint64_t dirty = kill_member_2_under_writes();

	bad = (typeof(bad)){ .from = w.m[0].addr, .to = w.m[1].addr, .type = RMR_MSG_SYNC_READ_RSP,
			     .change = change, .armed = true, .every = change != BAD_SEQ };
	rmr_mem_tamper(bad_answer, NULL);
	member_start(1, 0);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	write_some(100);
	/* A copy waiting for its timeout may hold a write so long that member 2 fails. */
	check_healed(1, change == BAD_SEQ ? NCHUNKS : dirty);
	rmr_mem_tamper(NULL, NULL);
	ck_assert_msg(bad.fired > 0, "seed %llu: no answer of member 1 was changed",
		      (unsigned long long)w.seed);
}

/*
 * A returning member takes the maps while the first page its source sends
 * breaks a rule (bad_answer: a slot that does not exist, another sender,
 * a truncated message, a stale sequence number). The pull fails (or times
 * out) and is tried again: the member still learns every chunk it missed
 * and copies exactly those.
 */
static void case_bad_map_answers(void)
{
	static const enum bad_answer changes[] = { BAD_SLOT, BAD_SENDER, BAD_TRUNCATED, BAD_SEQ };
	uint64_t dirty = kill_member_2_under_writes();

	bad = (typeof(bad)){ .to = w.m[1].addr, .type = RMR_MSG_MAP_GET_RSP,
			     .change = changes[w.seed % 4], .armed = true };
	rmr_mem_tamper(bad_answer, NULL);
	member_start(1, 0);
	wait_state(1, RMR_MEMBER_NORMAL, 30000);
	rmr_mem_tamper(NULL, NULL);
	ck_assert_msg(bad.fired == 1, "seed %llu: no map page was changed",
		      (unsigned long long)w.seed);
	write_some(100);
	check_healed(1, dirty);
}

/*
 * A member down for a minute: the client's reconnect backoff has grown to
 * 20 s. When it starts again it dials its peers, they tell the client in a
 * heartbeat, and the client reconnects at once rather than up to 25 s later.
 */
static void case_member_back_notice(void)
{
	uint64_t dirty, t0;

	write_some(100);
	member_kill(1);
	write_some(100);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	loop_sim_run(60000 * MS);
	dirty = dirty_for(2, 0);
	ck_assert_uint_gt(dirty, 0);
	t0 = loop_clock_ns();
	member_start(1, 0);
	wait_state(1, RMR_MEMBER_NORMAL, 1000);
	ck_assert_msg(loop_clock_ns() - t0 <= 1000 * MS, "seed %llu: back after %llu ms",
		      (unsigned long long)w.seed, (unsigned long long)((loop_clock_ns() - t0) / MS));
	/* So do the peers' dials to it (their backoff has grown as long). */
	for (unsigned i = 0; i < NMEMBERS; i += 2) {
		struct rmr_server_pool_status ps = pool_status(i);
		bool up = false;

		for (unsigned k = 0; k < ps.npeers; k++)
			up |= ps.peers[k].member_id == 2 && ps.peers[k].connected;
		ck_assert_msg(up, "seed %llu: member %u's session to member 2 is not up %llu ms "
			      "after it started", (unsigned long long)w.seed, i + 1,
			      (unsigned long long)((loop_clock_ns() - t0) / MS));
	}
	check_healed(1, dirty);
}

static void case_store_fault(void)
{
	uint64_t dirty;

	write_some(100);
	w.m[2].store.fail = true;
	write_some(300);
	ck_assert_int_ne(state_of(2), RMR_MEMBER_NORMAL);
	loop_sim_run(2000 * MS);
	/* It cannot prove its store works: it never comes back meanwhile. */
	ck_assert_int_ne(state_of(2), RMR_MEMBER_NORMAL);
	dirty = dirty_for(3, 0);
	w.m[2].store.fail = false;
	wait_state(2, RMR_MEMBER_NORMAL, 10000);
	write_some(100);
	check_healed(2, dirty);
}

static void case_maintenance(void)
{
	uint64_t dirty;

	write_some(100);
	ck_assert_int_eq(rmr_client_set_maintenance(w.c, 2, true), 0);
	write_some(300);
	ck_assert_int_eq(state_of(1), RMR_MEMBER_MAINTENANCE);
	dirty = dirty_for(2, 0);
	ck_assert_uint_gt(dirty, 0);
	ck_assert_int_eq(rmr_client_set_maintenance(w.c, 2, false), 0);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	write_some(100);
	check_healed(1, dirty);
}

static void case_client_link_cut(void)
{
	uint64_t dirty;

	write_some(100);
	client_links(0x2, true);
	write_some(300);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	write_some(100);
	dirty = dirty_for(2, 0);
	ck_assert_uint_gt(dirty, 0);
	client_links(0x2, false);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	write_some(100);
	check_healed(1, dirty);
}

/*
 * Recovery case 6: the link between two members breaks while one of them
 * resyncs. Member 2 copies slowly from both peers; its link to member 1 is
 * cut, and it finishes from member 3 alone, under writes, the link still
 * cut; once the link is back, member 1 learns that member 2 holds it all.
 */
static void case_peer_link_cut_during_resync(void)
{
	uint64_t dirty;

	write_some(50);
	member_kill(1);
	write_some(600);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	dirty = dirty_for(2, 0);
	/* Back, but resyncing slowly: 8 chunks a second. */
	member_start(1, 8 * CHUNK);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	loop_sim_run(300 * MS);
	ck_assert_uint_gt(pool_status(1).dirty_chunks[2], 0);
	/*
	 * Member 2 loses member 1; it goes on with member 3 alone, under
	 * writes, to the end of its resync, the link still cut.
	 */
	ck_assert_int_eq(rmr_mem_link_cut(w.m[1].addr, w.m[0].addr, true), 0);
	for (unsigned t = 0; t < 60000 && pool_status(1).dirty_chunks[2]; t += 500) {
		write_some(10);
		loop_sim_run(500 * MS);
	}
	ck_assert_msg(pool_status(1).dirty_chunks[2] == 0,
		      "seed %llu: member 2 did not finish its resync from member 3 alone",
		      (unsigned long long)w.seed);
	ck_assert_int_eq(state_of(1), RMR_MEMBER_NORMAL);
	ck_assert_int_eq(rmr_mem_link_cut(w.m[1].addr, w.m[0].addr, false), 0);
	check_healed(1, dirty);
}

static void case_second_failure_during_resync(void)
{
	uint64_t dirty;

	write_some(50);
	member_kill(1);
	write_some(500);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	dirty = dirty_for(2, 0);
	member_start(1, 8 * CHUNK);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	ck_assert_uint_gt(pool_status(1).dirty_chunks[2], 0);
	member_kill(2);
	write_some(200);
	wait_state(2, RMR_MEMBER_FAILED, 2000);
	member_start(2, 0);
	write_some(100);
	check_healed(1, dirty);
}

/* A member killed in the middle of its resync resumes from the bits left. */
static void case_resync_interrupted(void)
{
	uint64_t dirty, left;

	write_some(50);
	member_kill(1);
	write_some(500);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	dirty = dirty_for(2, 0);
	member_start(1, 16 * CHUNK);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	loop_sim_run(1000 * MS);
	left = pool_status(1).dirty_chunks[2];
	ck_assert_uint_gt(left, 0);
	ck_assert_uint_lt(left, dirty);
	member_kill(1);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	member_start(1, 0);
	/* What it copied before the kill is not copied again (give or take the
	 * chunks whose clean bits were not yet on disk). */
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	ck_assert_uint_le(pool_status(1).dirty_chunks[2], left + 2 * 4);
	write_some(100);
	check_healed(1, dirty);
}

/*
 * Every process restarts while the pool is degraded: the members' dirty maps
 * come back from their stores, a new client learns from the hellos who
 * missed writes, and the member that missed them still copies exactly those.
 */
static void case_all_restart_while_degraded(void)
{
	uint64_t dirty;

	write_some(100);
	member_kill(1);
	write_some(300);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	dirty = dirty_for(2, 0);
	ck_assert_uint_eq(dirty, dirty_for(2, 2));
	rmr_client_close(w.c);
	loop_sim_run(10 * MS); /* the goodbyes arrive */
	member_kill(0);
	member_kill(2);
	for (unsigned i = 0; i < NMEMBERS; i++)
		member_start(i, 0);
	/* Before anyone is admitted, the record is back from the stores. */
	ck_assert_uint_eq(dirty_for(2, 0), dirty);
	ck_assert_uint_eq(dirty_for(2, 2), dirty);
	/* The others heard the client's goodbye, member 2 did not: it copies
	 * the ranges of its activity log as well. */
	ck_assert(!pool_status(0).al_stale && !pool_status(2).al_stale);
	ck_assert(pool_status(1).al_stale);
	dirty += pool_status(1).al_chunks;
	client_open();
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	write_some(100);
	check_healed(1, dirty);
}

/*
 * A whole-chunk write that made a dirty chunk clean is still in the store
 * when the member is failed and takes the maps again: a write that missed it
 * in between marked that chunk, so the late completion must not make it
 * clean (the resync epoch), nor tell the peers so.
 */
static void case_whole_write_across_pull(void)
{
	uint64_t last = (uint64_t)(NCHUNKS - 1) * CHUNK, dirty;

	write_some(50);
	member_kill(1);
	write_some(300);
	submit_write_at(last + BLK, BLK); /* the last chunk is dirty for member 2 */
	settle();
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	dirty = dirty_for(2, 0);
	/* One chunk a second from the first: the last one stays dirty a while. */
	member_start(1, CHUNK);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	w.m[1].store.hold = true;
	submit_write_at(last, CHUNK); /* W0: makes the chunk clean, once done */
	while (!w.m[1].store.nheld)
		if (loop_sim_step() == 0)
			loop_sim_run(MS);
	client_links(0x2, true);
	settle();
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	submit_write_at(last + 2 * BLK, BLK); /* W1 misses member 2 */
	settle();
	client_links(0x2, false);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	memstore_release(&w.m[1].store); /* W0 completes after the pull */
	write_some(50);
	check_healed(1, dirty + 1);
}

/*
 * Chunks much smaller than a write: each 1 MiB write claims 256 whole dirty
 * chunks, and 32 of them at once want far more than the sync index holds.
 * Requests that find no room hold no claims while they wait, so the member
 * never stalls.
 */
static void case_many_small_chunks(void)
{
	const uint32_t len = 1u << 20;
	unsigned nranges = (unsigned)(w.cfg.pool_size / len), order[64];
	uint64_t dirty;

	ck_assert_uint_le(nranges, 64);
	member_kill(1);
	for (uint64_t off = 0; off < w.cfg.pool_size; off += len)
		submit_write_at(off, len);
	settle();
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	dirty = dirty_for(2, 0);
	ck_assert_uint_eq(dirty, w.cfg.pool_size / w.cfg.chunk);
	member_start(1, 64 * w.cfg.chunk);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	/* Every range once, in a random order, all together; the store
	 * completes writes a step late, so many are in it at once. */
	for (unsigned i = 0; i < nranges; i++)
		order[i] = i;
	for (unsigned i = nranges - 1; i > 0; i--) {
		unsigned j = (unsigned)(rnd() % (i + 1)), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	w.m[1].store.hold = true;
	for (unsigned i = 0; i < nranges; i++)
		submit_write_at((uint64_t)order[i] * len, len);
	for (unsigned t = 0; w.inflight && t < 20000; t++) {
		memstore_release(&w.m[1].store);
		w.m[1].store.hold = true;
		if (loop_sim_step() == 0)
			loop_sim_run(MS);
	}
	memstore_release(&w.m[1].store);
	ck_assert_msg(w.inflight == 0 && w.failed == 0, "seed %llu: %u writes stuck, %llu failed",
		      (unsigned long long)w.seed, w.inflight, (unsigned long long)w.failed);
	ck_assert_int_eq(state_of(1), RMR_MEMBER_NORMAL);
	check_healed(1, dirty);
}

/* Where member index @on's store records chunk @c as missed by member id @id. */
static bool on_disk_dirty(unsigned on, unsigned id, uint64_t c)
{
	const struct memstore *st = &w.m[on].store;
	uint64_t bitmap = (st->map_size - 2 * AL_RECORD_BYTES) / RMR_MAX_MEMBER_ID;

	/* One bitmap per member id, id 1 first. */
	return st->map[(id - 1) * bitmap + c / 8] & (1u << (c % 8));
}

/*
 * A member cannot write down that a chunk was missed: it fails that write,
 * and a second write to the same chunk, which finds the bit set in memory,
 * must not take it as recorded.
 */
static void case_failed_mark(void)
{
	const uint64_t c = 5;
	struct rmr_server_pool_status ps;
	uint64_t dirty;

	write_some(50);
	member_kill(1);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	ck_assert(!on_disk_dirty(0, 2, c));
	w.m[0].store.map_write_fails = 1;
	submit_write_at(c * CHUNK, BLK);
	submit_write_at(c * CHUNK + BLK, BLK);
	settle();
	ps = pool_status(0);
	/* Every write member 1 applied has its miss on member 1's disk. */
	ck_assert_msg(on_disk_dirty(0, 2, c) || ps.errors >= 2,
		      "seed %llu: member 1 applied a write whose miss it never recorded",
		      (unsigned long long)w.seed);
	write_some(100);
	dirty = dirty_for(2, 2);
	member_start(1, 0);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	write_some(50);
	check_healed(1, dirty);
}

/* --- client crash (activity log) ---------------------------------------------- */

/*
 * The client dies with writes in flight that reached only member index
 * @got, and no one recorded that the others missed them: all links of the
 * client are cut before it could tell anyone, so from the members' side it
 * is a crash (no goodbye; the writes are never acknowledged).
 */
static void crash_client_mid_write(unsigned got)
{
	unsigned other = (got + 1) % NMEMBERS;

	write_some(100);
	for (unsigned i = 0; i < NMEMBERS; i++)
		if (i != got)
			ck_assert_int_eq(rmr_mem_link_cut("vol", w.m[i].addr, true), 0);
	for (unsigned i = 0; i < 16; i++)
		submit_write_at((uint64_t)(rnd() % NCHUNKS) * CHUNK + (rnd() % 8) * BLK, BLK);
	loop_sim_run(2 * MS); /* member @got applies them */
	rmr_mem_link_cut("vol", w.m[got].addr, true);
	settle(); /* the writes fail on the client */
	ck_assert_uint_ge(w.failed, 1);
	rmr_client_close(w.c); /* its goodbyes are lost */
	loop_sim_run(1000 * MS); /* the members see the sessions die */
	for (unsigned i = 0; i < NMEMBERS; i++)
		rmr_mem_link_cut("vol", w.m[i].addr, false);
	/* The divergence is real, and nobody has it on record as dirty. */
	ck_assert_msg(memcmp(w.m[got].store.data, w.m[other].store.data, w.cfg.pool_size),
		      "seed %llu: member %u got the in-flight writes after all",
		      (unsigned long long)w.seed, other + 1);
	ck_assert_uint_eq(dirty_total(), 0);
	for (unsigned i = 0; i < NMEMBERS; i++)
		ck_assert(pool_status(i).al_stale);
	w.failed = 0;
}

/*
 * After healing: no dirty chunk left, every member equal to the first, and
 * equal to the model wherever a write was acknowledged last.
 */
static void check_converged(void)
{
	for (unsigned i = 0; i < NMEMBERS; i++)
		wait_state(i, RMR_MEMBER_NORMAL, 20000);
	for (unsigned t = 0; t < 60000 && dirty_total(); t += 10)
		loop_sim_run(10 * MS);
	ck_assert_msg(dirty_total() == 0, "seed %llu: still %llu dirty chunks after 60 s",
		      (unsigned long long)w.seed, (unsigned long long)dirty_total());
	for (unsigned i = 1; i < NMEMBERS; i++)
		ck_assert_msg(!memcmp(w.m[i].store.data, w.m[0].store.data, w.cfg.pool_size),
			      "seed %llu: member %u differs from member 1 after healing",
			      (unsigned long long)w.seed, i + 1);
	for (uint64_t b = 0; b < w.cfg.pool_size; b++)
		expect(w.maybe[b] || w.m[0].store.data[b] == w.model[b]);
	for (unsigned i = 0; i < NMEMBERS; i++)
		ck_assert(!pool_status(i).al_stale);
	/* From here on the model is exact again. */
	memcpy(w.model, w.m[0].store.data, w.cfg.pool_size);
	memset(w.maybe, 0, w.cfg.pool_size);
}

/*
 * Seed by seed, the writes reach member 1 (the source the others converge
 * on: its log becomes their dirty marks), member 2 or member 3 (the source
 * lacks them: the member's own log becomes its dirty marks).
 */
static void case_client_crash(void)
{
	crash_client_mid_write((unsigned)(w.seed % NMEMBERS));
	client_open(); /* a new writer: the members reconcile before any I/O */
	check_converged();
	write_some(100);
	check_healed(0, 0);
}

/*
 * The same, and member 3, the only one holding the in-flight writes, dies
 * too. Members 1 and 2 cannot show that member 3 holds nothing newer (it
 * missed nothing they know of): no open until the operator gives it up.
 */
static void case_client_and_member_crash(void)
{
	crash_client_mid_write(2);
	member_kill(2);
	ck_assert_int_eq(client_open_as(false, &w.c), -EHOSTUNREACH);
	w.open_without = 1ull << 3;
	client_open();
	w.open_without = 0;
	wait_state(0, RMR_MEMBER_NORMAL, 10000);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	write_some(100);
	member_start(2, 0);
	check_converged();
	write_some(50);
	check_healed(2, 2 * NCHUNKS); /* the bound is not the point here */
}

/*
 * The member crashes in the middle of writing an activity log record of
 * several blocks: it starts again from the record before (the data write of
 * the new range never went to the store) and reports the right dirty state.
 */
static void case_torn_activity_log(void)
{
	uint64_t dirty;

	/* 254 ranges, a record of two blocks: chunks 0..126 alone, and each
	 * with the next one (writes across the boundary). */
	for (unsigned i = 0; i < 2 * (NCHUNKS - 1); i++) {
		uint64_t c = i % (NCHUNKS - 1);

		if (i < NCHUNKS - 1)
			submit_write_at(c * CHUNK, BLK);
		else
			submit_write_at(c * CHUNK + CHUNK - BLK, 2 * BLK);
		if (w.inflight >= 16)
			settle();
	}
	settle();
	ck_assert_uint_eq(pool_status(0).al_ranges, 2 * (NCHUNKS - 1));
	w.m[0].store.map_tear_blocks = 1;
	submit_write_at((uint64_t)(NCHUNKS - 1) * CHUNK + 10 * BLK, BLK);
	settle();
	ck_assert_uint_eq(w.m[0].store.map_tear_blocks, 0); /* it did tear */
	member_kill(0);
	member_start(0, 0); /* must start: the older record is whole */
	ck_assert_uint_eq(pool_status(0).al_ranges, 2 * (NCHUNKS - 1));
	/* The others recorded that member 1 missed the write it failed. */
	dirty = dirty_for(1, 1);
	ck_assert_uint_ge(dirty, 1);
	wait_state(0, RMR_MEMBER_NORMAL, 10000);
	write_some(50);
	check_healed(0, NCHUNKS);
}

/* --- member replacement ----------------------------------------------------- */

/*
 * Member 2's disk is replaced by a blank one: it serves again at once, every
 * read it gets for a chunk not copied in yet waits for the copy (reads of
 * the whole pool through the client match the model while the resync runs
 * slowly), and it ends identical. A second start of the same store is not a
 * replacement any more: --replace on it is refused.
 */
static void case_replace_member(void)
{
	struct rmr_server_pool *pool;

	write_some(200);
	member_kill(1);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	memstore_destroy(&w.m[1].store);
	memstore_init(&w.m[1].store, w.cfg.pool_size, w.cfg.chunk);
	memstore_set_host(&w.m[1].store, 2);
	w.replace = true;
	member_start(1, CHUNK); /* a chunk a second: most reads find theirs dirty */
	w.replace = false;
	ck_assert_uint_eq(dirty_for(2, 1), NCHUNKS);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	read_all_matches_model();
	ck_assert_uint_gt(pool_status(1).reads, 0);
	/* Restarted halfway: it resumes from the chunks left, it does not start over. */
	loop_sim_run(500 * MS); /* the clean bits reach the disk */
	ck_assert_uint_lt(dirty_for(2, 1), NCHUNKS);
	member_kill(1);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	member_start(1, CHUNK);
	ck_assert_uint_lt(dirty_for(2, 1), NCHUNKS);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	write_some(100);
	read_all_matches_model();
	check_healed(1, 2 * NCHUNKS);
	/* The store served the pool: it cannot be "replaced" by mistake again. */
	member_kill(1);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	{
		struct rmr_server_opts so = { .size = sizeof(so), .listen_addr = w.m[1].addr,
					      .transport = "mem" };
		struct rmr_pool_params pp = { .size = sizeof(pp), .name = "vol",
					      .uuid = pool_uuid, .pool_size = w.cfg.pool_size,
					      .chunk_size = w.cfg.chunk, .member_id = 2,
					      .al_extent_size = w.cfg.al_extent,
					      .members_mask = 0xe, .replace = true };

		ck_assert_int_eq(rmr_server_create(&so, &w.m[1].srv), 0);
		ck_assert_int_eq(rmr_server_add_pool(w.m[1].srv, &pp, &memstore_ops,
						     &w.m[1].store, &pool), -EEXIST);
		rmr_server_destroy(w.m[1].srv);
		w.m[1].srv = NULL;
	}
	member_start(1, 0);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
}

/* --- two writers (fencing) --------------------------------------------------- */

static int fenced_status;

static void fenced_done(void *priv, int status)
{
	(void)priv;
	fenced_status = status;
}

/*
 * A second writer is refused while the first is attached, and the first goes
 * on. A takeover then fences the first writer: its requests fail with
 * -ESTALE and none of its data reaches a store.
 */
static void case_two_writers(void)
{
	static uint8_t data[BLK], before[NMEMBERS][BLK];
	const uint64_t addr = 7 * CHUNK;
	struct rmr_client *second = NULL, *first;
	struct iovec iov = { .iov_base = data, .iov_len = BLK };
	struct rmr_io io = { .kind = RMR_IO_WRITE, .op = 1, .addr = addr, .len = BLK,
			     .iov = &iov, .iovcnt = 1, .cb = fenced_done };
	struct rmr_pool_status st = { .size = sizeof(st) };

	write_some(50);
	ck_assert_int_eq(client_open_as(false, &second), -EBUSY);
	write_some(50);
	for (unsigned i = 0; i < NMEMBERS; i++)
		ck_assert_int_eq(state_of(i), RMR_MEMBER_NORMAL);
	ck_assert_int_eq(rmr_client_status(w.c, &st), 0);
	ck_assert(!st.fenced);
	ck_assert_uint_ge(st.writer_epoch, 1);

	first = w.c;
	ck_assert_int_eq(client_open_as(true, &w.c), 0);
	for (unsigned i = 0; i < NMEMBERS; i++) {
		ck_assert_uint_gt(pool_status(i).writer_epoch, st.writer_epoch);
		memcpy(before[i], w.m[i].store.data + addr, BLK);
	}
	memset(data, 0xa5, sizeof(data));
	fenced_status = 1;
	ck_assert_int_eq(rmr_client_submit(first, &io, 0), 0);
	for (unsigned t = 0; t < 5000 && fenced_status == 1; t++)
		loop_sim_run(MS);
	ck_assert_int_eq(fenced_status, -ESTALE);
	for (unsigned i = 0; i < NMEMBERS; i++)
		ck_assert_msg(!memcmp(w.m[i].store.data + addr, before[i], BLK),
			      "seed %llu: a fenced write reached member %u's store",
			      (unsigned long long)w.seed, i + 1);
	ck_assert_int_eq(rmr_client_status(first, &st), 0);
	ck_assert(st.fenced);
	/* Every request from then on fails the same way. */
	fenced_status = 1;
	io.kind = RMR_IO_READ;
	ck_assert_int_eq(rmr_client_submit(first, &io, 0), 0);
	for (unsigned t = 0; t < 5000 && fenced_status == 1; t++)
		loop_sim_run(MS);
	ck_assert_int_eq(fenced_status, -ESTALE);
	rmr_client_close(first);
	write_some(100);
	check_healed(0, NCHUNKS);
}

/*
 * Member 2 misses writes, the writer closes, members 1 and 3 stop and
 * member 2 comes back first: it cannot tell it missed anything (only 1 and
 * 3 record it), so a new writer must not open with it alone (it would serve
 * its old bytes and, as the only member, be the source 1 and 3 converge
 * on). With 1 and 3 back and 2 away again the open waits for 2 too (their
 * records of it prove nothing by themselves: see case_mutual_records)
 * until the operator gives 2 up. Then 2 returns, takes the maps and copies.
 */
static void case_stale_member_alone(void)
{
	static uint8_t before[POOL_SIZE];
	uint64_t dirty;

	write_some(100);
	member_kill(1);
	memcpy(before, w.m[1].store.data, POOL_SIZE);
	write_some(300);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	dirty = dirty_for(2, 0);
	ck_assert_uint_gt(dirty, 0);
	rmr_client_close(w.c);
	w.c = NULL;
	loop_sim_run(10 * MS); /* the goodbyes land: a clean close */
	member_kill(0);
	member_kill(2);
	member_start(1, 0);
	ck_assert_int_eq(client_open_as(false, &w.c), -EHOSTUNREACH);
	ck_assert_ptr_null(w.c);
	ck_assert_msg(!memcmp(before, w.m[1].store.data, POOL_SIZE),
		      "seed %llu: the stale member's store changed", (unsigned long long)w.seed);
	ck_assert_uint_eq(pool_status(1).writes, 0);

	member_kill(1);
	member_start(0, 0);
	member_start(2, 0);
	ck_assert_int_eq(client_open_as(false, &w.c), -EHOSTUNREACH);
	w.open_without = 1ull << 2;
	client_open();
	w.open_without = 0;
	member_start(1, 0);
	check_healed(1, NCHUNKS); /* its own log of the writer it missed the goodbye of, too */
}

/*
 * Records both ways: members 2 and 3 miss writes that member 1 takes alone,
 * come back and take the maps from 1, but 1 dies before they copied (their
 * resync paused), so 1's records of them stay. Writes go on to 2 and 3,
 * which record 1. Everything stops and 1 comes back alone: its records name
 * both others, yet it is the stale one. No open with it alone; with all
 * three back the pool opens and converges on every acknowledged write.
 */
static void case_mutual_records(void)
{
	const uint64_t half = POOL_SIZE / 2;

	write_some(50);
	member_kill(1);
	member_kill(2);
	for (unsigned k = 0; k < 40; k++) {
		submit_write_at((rnd() % (half / BLK - 16)) * BLK, 4 * BLK);
		if (k % 10 == 9)
			settle();
	}
	settle();
	ck_assert_uint_eq(w.failed, 0);
	ck_assert_uint_gt(dirty_for(2, 0), 0);
	ck_assert_uint_gt(dirty_for(3, 0), 0);
	member_start(1, 0);
	ck_assert_int_eq(rmr_server_resync_pause(w.m[1].pool, true), 0);
	member_start(2, 0);
	ck_assert_int_eq(rmr_server_resync_pause(w.m[2].pool, true), 0);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	wait_state(2, RMR_MEMBER_NORMAL, 10000);
	member_kill(0);
	for (unsigned k = 0; k < 40; k++) {
		submit_write_at(half + (rnd() % (half / BLK - 16)) * BLK, 4 * BLK);
		if (k % 10 == 9)
			settle();
	}
	settle();
	ck_assert_uint_eq(w.failed, 0);
	ck_assert_uint_gt(dirty_for(1, 1), 0);
	rmr_client_close(w.c);
	w.c = NULL;
	loop_sim_run(10 * MS);
	member_kill(1);
	member_kill(2);
	member_start(0, 0);
	ck_assert_uint_gt(pool_status(0).dirty_chunks[2] + pool_status(0).dirty_chunks[3], 0);
	ck_assert_int_eq(client_open_as(false, &w.c), -EHOSTUNREACH);
	ck_assert_ptr_null(w.c);

	member_start(1, 0);
	member_start(2, 0);
	client_open();
	check_converged();
}

/*
 * min_legs 2 and two members down: writes fail, yet member 1 applied them
 * and recorded the other two as having missed them. Back, those two must
 * take the maps and copy the chunks, not serve their older bytes as
 * current (they did, when only acknowledged writes counted as missed).
 */
static void case_min_legs_failed_writes(void)
{
	write_some(50);
	member_kill(1);
	member_kill(2);
	w.failed = 0;
	for (unsigned b = 0; b < 5; b++) {
		for (unsigned k = 0; k < 10; k++)
			submit_write();
		settle();
	}
	ck_assert_uint_gt(w.failed, 0);
	ck_assert_uint_gt(dirty_for(2, 0), 0);
	member_start(1, 0);
	member_start(2, 0);
	check_converged();
	w.failed = 0;
	write_some(50);
	check_converged();
}

static void flush_done(void *priv, int status)
{
	int *st = priv;

	*st = status;
	w.inflight--;
}

/* A flush (RMR_IO_FLUSH) that the world steps around; @status gets its end (1 before). */
static void submit_flush(int *status)
{
	struct rmr_io io = { .kind = RMR_IO_WRITE, .op = MEMSTORE_OP_FLUSH, .flags = RMR_IO_FLUSH,
			     .cb = flush_done, .priv = status };

	*status = 1;
	ck_assert_int_eq(rmr_client_submit(w.c, &io, 0), 0);
	w.inflight++;
}

static void flush_all(void)
{
	int status;

	submit_flush(&status);
	settle();
	ck_assert_int_eq(status, 0);
}

/*
 * Member 2's host loses power: the writes it acknowledged after the last
 * flush are gone from its store, and it cannot tell. The others recorded
 * exactly their chunks as missed by it when it left: it copies them back
 * and never serves an old byte (before, it came back NORMAL with them).
 */
static void case_member_power_loss(void)
{
	uint8_t seen[NCHUNKS] = { 0 };
	uint64_t after = 0;

	write_some(200);
	flush_all();
	for (unsigned k = 0; k < 6; k++) {
		uint64_t chunk = rnd() % NCHUNKS;

		submit_write_at(chunk * CHUNK + (rnd() % (CHUNK / BLK)) * BLK, BLK);
		after += !seen[chunk];
		seen[chunk] = 1;
	}
	settle();
	member_kill(1);
	memstore_power_loss(&w.m[1].store);
	ck_assert_msg(memcmp(w.m[1].store.data, w.model, POOL_SIZE) != 0,
		      "seed %llu: the power loss lost nothing", (unsigned long long)w.seed);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	for (unsigned t = 0; t < 2000 && dirty_for(2, 0) < after; t += 10)
		loop_sim_run(10 * MS);
	ck_assert_uint_eq(dirty_for(2, 0), after);
	ck_assert_uint_eq(dirty_for(2, 2), after);
	/* Writes and a flush go on while it is away. */
	write_some(100);
	flush_all();
	member_start(1, 0);
	check_healed(1, dirty_for(2, 0));
}

/*
 * The same under load: flushes among the writes, the power loss while
 * writes are in flight, more chunks than one record holds ranges. Whatever
 * member 2 lost is copied back; writes that failed may read either way.
 */
static void case_power_loss_under_load(void)
{
	int flushed[8];

	write_some(100);
	for (unsigned k = 0; k < 8; k++) {
		for (unsigned n = 0; n < 40; n++) {
			submit_write();
			if (loop_sim_step() == 0)
				loop_sim_run(MS / 4);
		}
		submit_flush(&flushed[k]);
	}
	member_kill(1);
	memstore_power_loss(&w.m[1].store);
	settle();
	for (unsigned k = 0; k < 8; k++)
		ck_assert_int_eq(flushed[k], 0);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	write_some(100);
	member_start(1, 0);
	check_healed(1, NCHUNKS);
}

/* Six one-block writes after a flush; @return the chunks they touch. */
static uint64_t unflushed_writes(void)
{
	uint8_t seen[NCHUNKS] = { 0 };
	uint64_t n = 0;

	for (unsigned k = 0; k < 6; k++) {
		uint64_t chunk = rnd() % NCHUNKS;

		submit_write_at(chunk * CHUNK + (rnd() % (CHUNK / BLK)) * BLK, BLK);
		n += !seen[chunk];
		seen[chunk] = 1;
	}
	settle();
	return n;
}

/*
 * Member 2's host loses power while the client loses members 1 and 3 for a
 * moment: nobody is up to take its record. The record waits (it was
 * dropped, and member 2 came back serving old bytes). Members 1 and 3 come
 * back as the same processes: their page caches kept every write no flush
 * covered, so what was queued to record about them goes, and they serve
 * again at once (seed 11908 of the pair: with those records a member
 * looked no surer a holder than one whose host did lose power). They take
 * member 2's record, and member 2 copies those chunks back.
 */
static void case_power_loss_nobody_up(void)
{
	struct rmr_pool_status st = { .size = sizeof(st) };
	uint64_t n;

	write_some(200);
	flush_all();
	n = unflushed_writes();
	/* The status says what a power loss could take from each. */
	ck_assert_int_eq(rmr_client_status(w.c, &st), 0);
	for (unsigned i = 0; i < NMEMBERS; i++) {
		ck_assert_uint_eq(st.members[i].unflushed_chunks, n);
		ck_assert_uint_eq(st.members[i].record_chunks_queued, 0);
	}
	client_links(0x5, true);
	lose_power(1);
	wait_state(0, RMR_MEMBER_FAILED, 3000);
	wait_state(2, RMR_MEMBER_FAILED, 3000);
	wait_state(1, RMR_MEMBER_FAILED, 3000);
	/* Nobody is up to take the records: queued, covering at least those chunks. */
	ck_assert_int_eq(rmr_client_status(w.c, &st), 0);
	for (unsigned i = 0; i < NMEMBERS; i++) {
		ck_assert_uint_ge(st.members[i].record_chunks_queued, n);
		ck_assert_uint_eq(st.members[i].unflushed_chunks, 0);
	}
	client_links(0x5, false);
	wait_state(0, RMR_MEMBER_NORMAL, 3000);
	wait_state(2, RMR_MEMBER_NORMAL, 3000);
	/* Back as the same processes: not lost, still unflushed; member 2's went out. */
	ck_assert_int_eq(rmr_client_status(w.c, &st), 0);
	ck_assert_uint_eq(st.members[0].record_chunks_queued, 0);
	ck_assert_uint_eq(st.members[2].record_chunks_queued, 0);
	ck_assert_uint_ge(st.members[0].unflushed_chunks, n);
	ck_assert_uint_ge(st.members[2].unflushed_chunks, n);
	for (unsigned t = 0; t < 2000 && dirty_for(2, 0) < n; t += 10)
		loop_sim_run(10 * MS);
	ck_assert_uint_ge(dirty_for(2, 0), n);
	ck_assert_uint_ge(dirty_for(2, 2), n);
	ck_assert_int_ne(state_of(1), RMR_MEMBER_NORMAL);
	write_some(50);
	member_start(1, 0);
	check_healed(1, NCHUNKS);
}

/*
 * The client loses every member for a moment (nobody is up to take any
 * record), and they come back as the same processes: the writes no flush
 * covered on them are not lost, but at risk until a flush. Member 2's host
 * then loses power before one: those writes are recorded as maybe lost by
 * it, and it copies them back (SIM_POWER=1 SIM_MEMBERS=2 seed 34921: they
 * were forgotten at its return, and then lost unrecorded).
 */
static void case_power_loss_after_return(void)
{
	write_some(200);
	flush_all();
	unflushed_writes();
	client_links(0x7, true);
	for (unsigned i = 0; i < NMEMBERS; i++)
		wait_state(i, RMR_MEMBER_FAILED, 3000);
	client_links(0x7, false);
	for (unsigned i = 0; i < NMEMBERS; i++)
		wait_state(i, RMR_MEMBER_NORMAL, 3000);
	/* (A flush of librmr's own, for a resync, may have made them durable.) */
	lose_power(1);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	write_some(50);
	member_start(1, 0);
	check_healed(1, NCHUNKS);
}

/*
 * Member 2's host loses power while nobody is up to take its record; it
 * comes back (a new process in a new boot: the record stays queued), its
 * session drops before it serves, and it comes back once more as that
 * same new process. That is not the process it left from: the record
 * still stands, and it copies back what it lost (before, the second hello
 * matched the first one's process and the record was taken as void).
 */
static void case_power_loss_return_twice(void)
{
	write_some(200);
	flush_all();
	unflushed_writes();
	client_links(0x5, true);
	lose_power(1);
	wait_state(0, RMR_MEMBER_FAILED, 3000);
	wait_state(1, RMR_MEMBER_FAILED, 3000);
	wait_state(2, RMR_MEMBER_FAILED, 3000);
	member_start(1, 0);
	wait_state(1, RMR_MEMBER_RECONNECTING, 3000);
	client_links(0x2, true);
	wait_state(1, RMR_MEMBER_FAILED, 3000);
	client_links(0x2, false);
	wait_state(1, RMR_MEMBER_RECONNECTING, 3000);
	client_links(0x5, false);
	check_healed(1, NCHUNKS);
}

/*
 * Member 2 is away (its link cut, nothing unflushed on it) while writes
 * go to members 1 and 3; then the client loses them both at once (their
 * records queue: nobody is up) and member 1's host loses power. All come
 * back. Member 3, the same process, holds every write: it serves at once
 * (its records kept back, its chunks still unflushed), takes member 1's
 * queued records, and members 1 and 2 take the maps from it: member 1
 * copies back what it lost, member 2 what it missed, neither from member
 * 1's rolled-back store.
 */
static void case_power_loss_two_away(void)
{
	write_some(100);
	flush_all();
	client_links(0x2, true);
	wait_state(1, RMR_MEMBER_FAILED, 3000);
	write_some(100);
	client_links(0x5, true);
	lose_power(0);
	wait_state(0, RMR_MEMBER_FAILED, 3000);
	wait_state(2, RMR_MEMBER_FAILED, 3000);
	client_links(0x7, false);
	member_start(0, 0);
	check_healed(0, NCHUNKS);
}

/*
 * Records delivered about members that lost nothing: member 3's client
 * link drops (members 1 and 2 record what it may lose), then member 2's
 * (member 1 records it), then member 1's host loses power, with nobody up
 * to take its record. All come back; members 2 and 3 in the same boot of
 * their hosts: their records are void (rmr_pool_params.boot_id, carried
 * with each record), they hold those chunks for sure, and member 1 copies
 * back what it lost from them, while they copy nothing. (Before, the
 * records made members 2 and 3 look as unsure as member 1, whose own
 * record was still queued: the pool converged on member 1's rolled-back
 * store.)
 */
static void case_power_loss_after_records(void)
{
	write_some(200);
	flush_all();
	unflushed_writes();
	client_links(0x4, true);
	wait_state(2, RMR_MEMBER_FAILED, 3000);
	loop_sim_run(200 * MS);
	client_links(0x2, true);
	wait_state(1, RMR_MEMBER_FAILED, 3000);
	loop_sim_run(200 * MS);
	lose_power(0);
	wait_state(0, RMR_MEMBER_FAILED, 3000);
	client_links(0x6, false);
	member_start(0, 0);
	check_healed(0, NCHUNKS);
	/* Their records void, members 2 and 3 copied nothing; every record is cleared. */
	ck_assert_uint_eq(pool_status(1).resync_bytes, 0);
	ck_assert_uint_eq(pool_status(2).resync_bytes, 0);
}

/*
 * A record that waited (nobody up to take it) reaches the maps of a
 * member that takes them from the first one back. Member 2 is away and
 * misses writes; then member 1's link drops too and member 3's host loses
 * power: nobody is up to take member 3's record. Members 1 and 2 come back
 * at once: member 1, the same process, serves at once and takes the
 * record; member 2 takes the maps from it. Member 1's process then
 * crashes, and member 3 comes back to member 2 alone: the record must be
 * in member 2's maps, or member 3 copies nothing and serves what it lost.
 * (Two things keep the record ahead of that pull: a pull waits for records
 * not yet sent, and a record sent during a pull makes the pull outdated;
 * here the record goes out as member 1 turns NORMAL, before either is
 * needed, so this case does not fail with them disabled.)
 */
static void case_record_reaches_later_pull(void)
{
	write_some(200);
	flush_all();
	client_links(0x2, true);
	wait_state(1, RMR_MEMBER_FAILED, 3000);
	write_some(50);
	unflushed_writes();
	client_links(0x1, true);
	lose_power(2);
	wait_state(0, RMR_MEMBER_FAILED, 3000);
	wait_state(2, RMR_MEMBER_FAILED, 3000);
	client_links(0x3, false);
	wait_state(0, RMR_MEMBER_NORMAL, 5000);
	wait_state(1, RMR_MEMBER_NORMAL, 5000);
	member_kill(0);
	wait_state(0, RMR_MEMBER_FAILED, 3000);
	member_start(2, 0);
	wait_state(2, RMR_MEMBER_NORMAL, 10000);
	member_start(0, 0);
	check_healed(2, NCHUNKS);
}

/*
 * The same, but the other two members' processes crash too, while their
 * hosts keep power (the member that loses power is the seed's pick; the
 * lowest id is the holder of last resort, so it matters which). They come
 * back in the same boot of their hosts (rmr_pool_params.boot_id): their
 * page caches kept every write no flush covered, they serve at once, and
 * the member whose host lost power copies those chunks back. (Were they
 * taken as maybe lost too, nobody would hold those chunks for sure, and
 * member 1 would be the holder of last resort: after its own power loss,
 * the pool converged on the bytes it lost.)
 */
static void case_power_loss_all_restart(void)
{
	unsigned lost = (unsigned)(w.seed % NMEMBERS), a = (lost + 1) % NMEMBERS,
		 b = (lost + 2) % NMEMBERS;

	write_some(200);
	flush_all();
	unflushed_writes();
	client_links(1u << a | 1u << b, true);
	lose_power(lost);
	wait_state(a, RMR_MEMBER_FAILED, 3000);
	wait_state(b, RMR_MEMBER_FAILED, 3000);
	member_kill(a);
	member_kill(b);
	client_links(1u << a | 1u << b, false);
	member_start(a, 0);
	member_start(b, 0);
	wait_state(a, RMR_MEMBER_NORMAL, 3000);
	wait_state(b, RMR_MEMBER_NORMAL, 3000);
	write_some(50);
	member_start(lost, 0);
	check_healed(lost, NCHUNKS);
}

/*
 * The record of what member 2 may have lost is a record on member 1's disk
 * too: member 1 restarts before member 2 is back, and the record comes
 * back as one (counted apart from misses: a miss would make member 2 no
 * holder of last resort), and member 2 copies exactly those chunks back.
 */
static void case_record_survives_restart(void)
{
	uint64_t after;

	write_some(200);
	flush_all();
	after = unflushed_writes();
	member_kill(1);
	memstore_power_loss(&w.m[1].store);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	for (unsigned t = 0; t < 2000 && pool_status(0).record_chunks[2] < after; t += 10)
		loop_sim_run(10 * MS);
	ck_assert_uint_eq(pool_status(0).record_chunks[2], after);
	ck_assert_uint_eq(dirty_for(2, 0), after);
	member_kill(0);
	member_start(0, 0);
	ck_assert_uint_eq(pool_status(0).record_chunks[2], after);
	ck_assert_uint_eq(dirty_for(2, 0), after);
	wait_state(0, RMR_MEMBER_NORMAL, 5000);
	write_some(50);
	member_start(1, 0);
	check_healed(1, NCHUNKS);
	ck_assert_uint_eq(pool_status(0).record_chunks[2], 0);
}

/*
 * Every member goes while writes are unflushed: their records have nobody
 * to go to, and the close does not wait for them (it waited for ever).
 */
static void case_close_with_nobody_up(void)
{
	write_some(100);
	for (unsigned i = 0; i < NMEMBERS; i++)
		member_kill(i);
	for (unsigned i = 0; i < NMEMBERS; i++)
		wait_state(i, RMR_MEMBER_FAILED, 3000);
	rmr_client_close(w.c);
	w.c = NULL;
	for (unsigned i = 0; i < NMEMBERS; i++)
		member_start(i, 0);
	client_open();
	check_converged();
}

/*
 * The flush fails on member 2 (its store's I/O error), which leaves: the
 * flush is acknowledged only once member 2's unflushed chunks are on the
 * others (it was acknowledged before, and lost with them when members 1
 * and 3 went down right after).
 */
static void case_flush_waits_for_record(void)
{
	uint64_t after;
	int st;

	write_some(200);
	flush_all();
	after = unflushed_writes();
	atomic_store(&w.m[1].store.fail, true);
	submit_flush(&st);
	while (st == 1)
		if (loop_sim_step() == 0)
			loop_sim_run(MS / 10);
	ck_assert_int_eq(st, 0);
	ck_assert_uint_eq(dirty_for(2, 0), after);
	ck_assert_uint_eq(dirty_for(2, 2), after);
	member_kill(0);
	member_kill(2);
	memstore_power_loss(&w.m[0].store);
	memstore_power_loss(&w.m[2].store);
	member_kill(1);
	memstore_power_loss(&w.m[1].store);
	atomic_store(&w.m[1].store.fail, false);
	loop_sim_run(100 * MS);
	member_start(0, 0);
	member_start(2, 0);
	wait_state(0, RMR_MEMBER_NORMAL, 10000);
	wait_state(2, RMR_MEMBER_NORMAL, 10000);
	member_start(1, 0);
	check_healed(1, NCHUNKS);
}

/*
 * Writes in flight when member 2 goes into maintenance are acknowledged
 * after it left NORMAL (its session stays up): they go on record at once.
 * Then its host loses power (a maintenance reboot).
 */
static void case_acks_after_maintenance(void)
{
	write_some(100);
	flush_all();
	w.m[1].store.hold = true;
	for (unsigned k = 0; k < 6; k++)
		submit_write_at((uint64_t)k * 3 * CHUNK + (rnd() % 3) * CHUNK, BLK);
	while (w.m[1].store.nheld < 6)
		if (loop_sim_step() == 0)
			loop_sim_run(MS);
	ck_assert_int_eq(rmr_client_set_maintenance(w.c, 2, true), 0);
	memstore_release(&w.m[1].store);
	settle();
	ck_assert_int_eq(state_of(1), RMR_MEMBER_MAINTENANCE);
	loop_sim_run(200 * MS);
	member_kill(1);
	memstore_power_loss(&w.m[1].store);
	ck_assert_int_eq(rmr_client_set_maintenance(w.c, 2, false), 0);
	member_start(1, 0);
	check_healed(1, NCHUNKS);
}

/* Close the client with a record of what it proves; the goodbyes land. */
static void close_recorded(struct rmr_close_record *rec)
{
	rmr_client_close_and_record(w.c, rec);
	w.c = NULL;
	loop_sim_run(10 * MS);
}

/* An open refused for a member away; its goodbyes give the epoch back. */
static void open_refused(void)
{
	ck_assert_int_eq(client_open_as(false, &w.c), -EHOSTUNREACH);
	loop_sim_run(10 * MS);
}

/*
 * A planned client restart while member 3 is away: the record of the clean
 * close (members 1 and 2 current, flushed) lets the next open go without
 * member 3, which missed writes; without the record it may not. A record
 * that no longer holds opens nothing: a writer came since (the epoch moved
 * on), a member it names current is away, or the flush did not cover the
 * last writes. Member 3 back takes the maps and heals.
 */
static void case_clean_close_record(void)
{
	struct rmr_close_record rec, stale, unflushed;

	write_some(100);
	member_kill(2);
	write_some(100);
	wait_state(2, RMR_MEMBER_FAILED, 2000);
	/* The last writes were not flushed: the close proves nothing. */
	close_recorded(&unflushed);
	ck_assert_uint_eq(unflushed.writer_epoch, 0);
	w.open_without = 1ull << 3;
	client_open();
	w.open_without = 0;
	write_some(50);
	flush_all();
	close_recorded(&rec);
	ck_assert_uint_gt(rec.writer_epoch, 0);
	ck_assert_uint_eq(rec.current_ids, (1ull << 1) | (1ull << 2));

	open_refused();
	/* Refused opens leave no epoch behind, wherever it was granted or adopted. */
	ck_assert_uint_eq(pool_status(0).writer_epoch, rec.writer_epoch);
	ck_assert_uint_eq(pool_status(1).writer_epoch, rec.writer_epoch);
	w.last_close = &unflushed;
	open_refused();
	/* A current member away: the record does not prove the one left. */
	w.last_close = &rec;
	member_kill(1);
	open_refused();
	member_start(1, 0);
	client_open();
	write_some(50);
	flush_all();
	/* Used once: the next open's epoch is past it. */
	stale = rec;
	close_recorded(&rec);
	w.last_close = &stale;
	open_refused();
	w.last_close = &rec;
	client_open();
	w.last_close = NULL;
	write_some(50);
	member_start(2, 0);
	check_healed(2, NCHUNKS);
}

/*
 * A writer that opened after the record and wrote only on members 2 and 3
 * (member 1 in maintenance) keeps its epoch on member 1 too: the record
 * of the writer before it, naming member 1 alone, no longer opens the pool
 * without them (member 1 gave the epoch back, and granted the next one
 * again).
 */
static void case_record_after_another_writer(void)
{
	struct rmr_close_record rec;

	write_some(100);
	member_kill(1);
	member_kill(2);
	write_some(100);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	wait_state(2, RMR_MEMBER_FAILED, 2000);
	flush_all();
	close_recorded(&rec);
	ck_assert_uint_eq(rec.current_ids, 1ull << 1);
	member_start(1, 0);
	member_start(2, 0);
	client_open();
	for (unsigned i = 0; i < NMEMBERS; i++)
		wait_state(i, RMR_MEMBER_NORMAL, 10000);
	for (unsigned t = 0; t < 60000 && dirty_total(); t += 10)
		loop_sim_run(10 * MS);
	ck_assert_uint_eq(dirty_total(), 0);
	ck_assert_int_eq(rmr_client_set_maintenance(w.c, 1, true), 0);
	write_some(100);
	flush_all();
	close_recorded(NULL);
	member_kill(1);
	member_kill(2);
	w.last_close = &rec;
	ck_assert_int_eq(client_open_as(false, &w.c), -EHOSTUNREACH);
	loop_sim_run(10 * MS);
	w.last_close = NULL;
	member_start(1, 0);
	member_start(2, 0);
	client_open();
	check_healed(0, NCHUNKS);
}

/*
 * A member's own metadata blob keeps its held chunks (copied in or
 * overwritten whole, no finished flush yet) as records, in at most 256
 * ranges: with more runs they are covered by wider ranges, over the chunks
 * it missed between them. Member 2 has 600 misses and, its flushes failing,
 * 300 held runs between them; after a process crash in the same boot,
 * those widened ranges must not count as records of that boot (they would
 * be void, and a gather took member 2 as a sure holder of chunks it never
 * had: 300 acknowledged chunks stale on the others). Found by a review.
 */
static void case_own_records_widened(void)
{
	const uint64_t n = 300;

	member_kill(1);
	for (uint64_t k = 0; k < 2 * n; k++) {
		submit_write_at(2 * k * BLK, BLK);
		if (k % 16 == 15)
			settle();
	}
	settle();
	ck_assert_uint_eq(w.failed, 0);
	wait_state(1, RMR_MEMBER_FAILED, 2000);
	member_start(1, 0);
	ck_assert_int_eq(rmr_server_resync_pause(w.m[1].pool, true), 0);
	wait_state(1, RMR_MEMBER_NORMAL, 10000);
	/* Its flushes fail: what it overwrites whole stays held, dirty on disk. */
	atomic_store(&w.m[1].store.flush_fails, 1000000);
	for (uint64_t k = 0; k < n; k++) {
		submit_write_at(4 * k * BLK, BLK);
		if (k % 16 == 15)
			settle();
	}
	settle();
	ck_assert_uint_eq(w.failed, 0);
	loop_sim_run(300 * MS);
	/* Members 1 and 3 each miss a write: the pool must gather every map. */
	member_kill(0);
	submit_write_at(8000ull * BLK, BLK);
	settle();
	wait_state(0, RMR_MEMBER_FAILED, 2000);
	member_kill(2);
	submit_write_at(8001ull * BLK, BLK);
	settle();
	wait_state(2, RMR_MEMBER_FAILED, 2000);
	ck_assert_uint_eq(w.failed, 0);
	rmr_client_close(w.c);
	w.c = NULL;
	loop_sim_run(10 * MS);
	atomic_store(&w.m[1].store.flush_fails, 0);
	member_kill(1);
	for (unsigned i = 0; i < NMEMBERS; i++)
		member_start(i, 0);
	client_open();
	for (unsigned i = 0; i < NMEMBERS; i++)
		wait_state(i, RMR_MEMBER_NORMAL, 20000);
	for (unsigned t = 0; t < 60000 && dirty_total(); t += 10)
		loop_sim_run(10 * MS);
	check_converged();
}

/*
 * Records cover whole spans of the pool (the client sends at most 32
 * ranges per member): a member back in the same boot keeps every chunk of
 * them, each ending inside its own start. With the stack held to 1 MiB
 * they are walked in a loop: a recursion as deep as the chunks are many
 * overflowed it (8192 chunks here; a 512 MiB pool of 4 KiB chunks overflowed
 * the default 8 MiB). Found by a review.
 */
static void case_void_records_many(void)
{
	uint64_t nch = w.cfg.pool_size / w.cfg.chunk;
	struct rlimit old, small;

	flush_all();
	for (uint64_t c = 0; c < nch; c += 64) {
		submit_write_at(c * w.cfg.chunk, BLK);
		if ((c / 64) % 16 == 15)
			settle();
	}
	settle();
	client_links(0x2, true);
	wait_state(1, RMR_MEMBER_FAILED, 3000);
	for (unsigned t = 0; t < 2000 && pool_status(0).record_chunks[2] < nch / 2; t += 10)
		loop_sim_run(10 * MS);
	ck_assert_uint_ge(pool_status(0).record_chunks[2], nch / 2);
	ck_assert_int_eq(getrlimit(RLIMIT_STACK, &old), 0);
	small = old;
	small.rlim_cur = 1u << 20;
	ck_assert_int_eq(setrlimit(RLIMIT_STACK, &small), 0);
	client_links(0x2, false);
	wait_state(1, RMR_MEMBER_NORMAL, 5000);
	for (unsigned t = 0; t < 3000 && dirty_total(); t += 10)
		loop_sim_run(10 * MS);
	ck_assert_int_eq(setrlimit(RLIMIT_STACK, &old), 0);
	check_healed(1, nch);
	ck_assert_uint_eq(pool_status(1).resync_bytes, 0);
}

/*
 * Member 1's host loses power and it comes back in a new boot; then it
 * acknowledges writes no flush covers, its client link drops (members 2
 * and 3 record them, made in its second boot, which it still runs in),
 * and the hosts of members 2 and 3 lose power together (their own records
 * queue: nobody is up). Member 1 gathers: its records of its second boot
 * are void, it keeps those chunks, and members 2 and 3 copy them back.
 * With @first_boot_left, its resync is paused meanwhile, so that the
 * records of what it lost in its first boot are still on the others:
 * those are of an older boot and still count. (When one boot stood for
 * all of a member's records, the mix made its new records count too;
 * members 2 and 3 looked sure, and member 1 copied their rolled-back
 * chunks over the writes it held: found by a review.)
 */
static void records_of_two_boots(bool first_boot_left)
{
	write_some(200);
	flush_all();
	unflushed_writes();
	lose_power(0);
	wait_state(0, RMR_MEMBER_FAILED, 3000);
	loop_sim_run(200 * MS);
	member_start(0, 0);
	if (first_boot_left)
		ck_assert_int_eq(rmr_server_resync_pause(w.m[0].pool, true), 0);
	wait_state(0, RMR_MEMBER_NORMAL, 5000);
	flush_all();
	for (unsigned t = 0; !first_boot_left && t < 5000 && dirty_total(); t += 10)
		loop_sim_run(10 * MS);
	ck_assert(first_boot_left ? dirty_total() > 0 : dirty_total() == 0);
	unflushed_writes();
	client_links(0x1, true);
	wait_state(0, RMR_MEMBER_FAILED, 3000);
	loop_sim_run(200 * MS);
	lose_power(1);
	lose_power(2);
	wait_state(1, RMR_MEMBER_FAILED, 3000);
	wait_state(2, RMR_MEMBER_FAILED, 3000);
	if (first_boot_left)
		ck_assert_int_eq(rmr_server_resync_pause(w.m[0].pool, false), 0);
	member_start(1, 0);
	member_start(2, 0);
	client_links(0x1, false);
	check_healed(0, NCHUNKS);
}

static void case_records_of_two_boots(void)
{
	records_of_two_boots(true);
}

static void case_records_of_one_boot_again(void)
{
	records_of_two_boots(false);
}

/* --- seeds ----------------------------------------------------------------------- */

static void run_seeds(const char *name, void (*fn)(void), struct world_cfg cfg)
{
	const char *one = getenv("SIM_SEED"), *n = getenv("SIM_SEEDS"), *only = getenv("SIM_CASE");
	uint64_t first = one ? strtoull(one, NULL, 0) : 1;
	uint64_t count = one ? 1 : (n ? strtoull(n, NULL, 0) : (cfg.seeds ? cfg.seeds : 16));

	if (only && strcmp(only, name))
		return;
	for (uint64_t seed = first; seed < first + count; seed++) {
		fprintf(stderr, "sim %s: seed %llu (replay: SIM_CASE=%s SIM_SEED=%llu "
				"build/tests/test_sim_recovery)\n",
			name, (unsigned long long)seed, name, (unsigned long long)seed);
		world_begin(seed, cfg);
		fn();
		world_end();
	}
}

#define SIM_CASE_WITH(fn, ...)                                          \
	START_TEST(fn##_seeds)                                          \
	{                                                               \
		run_seeds(#fn, fn, (struct world_cfg){ __VA_ARGS__ });  \
	}                                                               \
	END_TEST
#define SIM_CASE(fn) SIM_CASE_WITH(fn, .pool_size = POOL_SIZE, .chunk = CHUNK)
/* Volatile stores and the client's volatile_writes. */
#define SIM_CASE_POWER(fn) \
	SIM_CASE_WITH(fn, .pool_size = POOL_SIZE, .chunk = CHUNK, .volatile_writes = true)

SIM_CASE(case_kill_restart)
SIM_CASE(case_patch_kill_restart)
SIM_CASE(case_store_fault)
SIM_CASE_WITH(case_member_back_notice, .pool_size = POOL_SIZE, .chunk = CHUNK,
	      .reconnect_max_ms = 20000)
SIM_CASE(case_maintenance)
SIM_CASE(case_resync_queue_bound)
SIM_CASE(case_overlapping_writes_ordered)
SIM_CASE(case_bad_answers_fail_the_member)
SIM_CASE(case_bad_sync_answers)
SIM_CASE(case_bad_map_answers)
SIM_CASE(case_client_link_cut)
SIM_CASE(case_peer_link_cut_during_resync)
SIM_CASE(case_second_failure_during_resync)
SIM_CASE(case_all_restart_while_degraded)
SIM_CASE(case_resync_interrupted)
SIM_CASE(case_whole_write_across_pull)
/* Eight times the others' work per seed: fewer seeds keep CI's budget. */
SIM_CASE_WITH(case_many_small_chunks, .pool_size = 32u << 20, .chunk = 4096,
	      .max_io = 1u << 20, .seeds = 6)
SIM_CASE(case_failed_mark)
SIM_CASE(case_client_crash)
SIM_CASE(case_client_and_member_crash)
/* Extents of one chunk: enough distinct ranges for a record of two blocks. */
SIM_CASE_WITH(case_torn_activity_log, .pool_size = POOL_SIZE, .chunk = CHUNK, .al_extent = CHUNK)
SIM_CASE(case_two_writers)
SIM_CASE(case_replace_member)
SIM_CASE(case_stale_member_alone)
SIM_CASE(case_mutual_records)
SIM_CASE_WITH(case_own_records_widened, .pool_size = 32u << 20, .chunk = 4096, .seeds = 2)
SIM_CASE_WITH(case_void_records_many, .pool_size = 32u << 20, .chunk = 4096, .seeds = 2,
	      .volatile_writes = true)
SIM_CASE_WITH(case_min_legs_failed_writes, .pool_size = POOL_SIZE, .chunk = CHUNK, .min_legs = 2)
SIM_CASE_POWER(case_member_power_loss)
SIM_CASE_POWER(case_power_loss_under_load)
SIM_CASE_POWER(case_clean_close_record)
SIM_CASE_POWER(case_power_loss_nobody_up)
SIM_CASE_POWER(case_power_loss_all_restart)
SIM_CASE_POWER(case_power_loss_after_return)
SIM_CASE_POWER(case_power_loss_return_twice)
SIM_CASE_POWER(case_power_loss_two_away)
SIM_CASE_POWER(case_power_loss_after_records)
SIM_CASE_POWER(case_record_reaches_later_pull)
SIM_CASE_POWER(case_close_with_nobody_up)
SIM_CASE_POWER(case_flush_waits_for_record)
SIM_CASE_POWER(case_acks_after_maintenance)
SIM_CASE_POWER(case_record_after_another_writer)
SIM_CASE_POWER(case_record_survives_restart)
SIM_CASE_POWER(case_records_of_two_boots)
SIM_CASE_POWER(case_records_of_one_boot_again)

/* The same seed gives the same run: same virtual time, same counters. */
START_TEST(same_seed_same_run)
{
	struct rmr_pool_status a = { .size = sizeof(a) }, b = { .size = sizeof(b) };
	uint64_t ta, tb;

	world_begin(42, (struct world_cfg){ .pool_size = POOL_SIZE, .chunk = CHUNK });
	case_kill_restart();
	ck_assert_int_eq(rmr_client_status(w.c, &a), 0);
	ta = loop_clock_ns();
	world_end();
	world_begin(42, (struct world_cfg){ .pool_size = POOL_SIZE, .chunk = CHUNK });
	case_kill_restart();
	ck_assert_int_eq(rmr_client_status(w.c, &b), 0);
	tb = loop_clock_ns();
	world_end();
	ck_assert_uint_eq(ta, tb);
	ck_assert_uint_eq(a.map_ver, b.map_ver);
	for (unsigned i = 0; i < NMEMBERS; i++) {
		ck_assert_uint_eq(a.members[i].reads, b.members[i].reads);
		ck_assert_uint_eq(a.members[i].writes, b.members[i].writes);
		ck_assert_uint_eq(a.members[i].tx_bytes, b.members[i].tx_bytes);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sim_recovery");
	TCase *tc = tcase_create("sim");

	/* Keep freed memory: each run's stores and buffers cost page faults again otherwise. */
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
	mallopt(M_MMAP_THRESHOLD, 64 << 20);

	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, case_kill_restart_seeds);
	tcase_add_test(tc, case_patch_kill_restart_seeds);
	tcase_add_test(tc, case_store_fault_seeds);
	tcase_add_test(tc, case_member_back_notice_seeds);
	tcase_add_test(tc, case_resync_queue_bound_seeds);
	tcase_add_test(tc, case_overlapping_writes_ordered_seeds);
	tcase_add_test(tc, case_bad_answers_fail_the_member_seeds);
	tcase_add_test(tc, case_bad_sync_answers_seeds);
	tcase_add_test(tc, case_bad_map_answers_seeds);
	tcase_add_test(tc, case_maintenance_seeds);
	tcase_add_test(tc, case_client_link_cut_seeds);
	tcase_add_test(tc, case_peer_link_cut_during_resync_seeds);
	tcase_add_test(tc, case_second_failure_during_resync_seeds);
	tcase_add_test(tc, case_all_restart_while_degraded_seeds);
	tcase_add_test(tc, case_resync_interrupted_seeds);
	tcase_add_test(tc, case_whole_write_across_pull_seeds);
	tcase_add_test(tc, case_many_small_chunks_seeds);
	tcase_add_test(tc, case_failed_mark_seeds);
	tcase_add_test(tc, case_client_crash_seeds);
	tcase_add_test(tc, case_client_and_member_crash_seeds);
	tcase_add_test(tc, case_torn_activity_log_seeds);
	tcase_add_test(tc, case_two_writers_seeds);
	tcase_add_test(tc, case_replace_member_seeds);
	tcase_add_test(tc, case_stale_member_alone_seeds);
	tcase_add_test(tc, case_mutual_records_seeds);
	tcase_add_test(tc, case_min_legs_failed_writes_seeds);
	tcase_add_test(tc, case_member_power_loss_seeds);
	tcase_add_test(tc, case_power_loss_under_load_seeds);
	tcase_add_test(tc, case_clean_close_record_seeds);
	tcase_add_test(tc, case_power_loss_nobody_up_seeds);
	tcase_add_test(tc, case_power_loss_all_restart_seeds);
	tcase_add_test(tc, case_power_loss_after_return_seeds);
	tcase_add_test(tc, case_power_loss_return_twice_seeds);
	tcase_add_test(tc, case_power_loss_two_away_seeds);
	tcase_add_test(tc, case_power_loss_after_records_seeds);
	tcase_add_test(tc, case_record_reaches_later_pull_seeds);
	tcase_add_test(tc, case_close_with_nobody_up_seeds);
	tcase_add_test(tc, case_flush_waits_for_record_seeds);
	tcase_add_test(tc, case_acks_after_maintenance_seeds);
	tcase_add_test(tc, case_record_after_another_writer_seeds);
	tcase_add_test(tc, case_record_survives_restart_seeds);
	tcase_add_test(tc, case_own_records_widened_seeds);
	tcase_add_test(tc, case_void_records_many_seeds);
	tcase_add_test(tc, case_records_of_two_boots_seeds);
	tcase_add_test(tc, case_records_of_one_boot_again_seeds);
	tcase_add_test(tc, same_seed_same_run);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
