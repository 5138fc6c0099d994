/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Random schedules: a client and three members (or SIM_MEMBERS, with the ids
 * SIM_IDS lists: world_members) over the fault transport
 * (fault_transport.h), stepped on one thread against the virtual clock. Each
 * seed draws a schedule of phases; in each phase the network misbehaves in
 * a random way (delays, lost messages that reset or half-open a connection,
 * replies lost after a request was applied, refused connections), and one
 * more fault may strike: a member crashes or comes back, a link is cut or
 * restored, a store fails or heals, a metadata write tears. A random
 * workload of writes and reads runs throughout against a model of every
 * acknowledged write. Checked:
 *   - every request completes exactly once, and none is left hanging;
 *   - a read returns the model (bytes of failed writes may hold either);
 *   - once the faults stop, the pool heals by itself: every member NORMAL,
 *     no dirty chunk left, all stores byte-identical and equal to the model,
 *     and the client carried no resync bytes.
 * Stores survive crashes here, so no acknowledged write may ever be lost.
 * With SIM_POWER=1 the stores are volatile (memstore_make_volatile), the
 * client has volatile_writes, a tenth of the writes are flushes, and a
 * crash of a member while the pool is whole loses what no flush covered on
 * it (a power loss): still no acknowledged write may be lost.
 *
 * SIM_FIRST and SIM_COUNT choose the seeds (default 1 and 1000), SIM_SEED=N
 * runs one, SIM_SEED_LIST="N M ..." a list (CI: the seeds that once
 * failed); a failure prints the command that replays it. scripts/sim-campaign
 * runs thousands, one process per seed.
 * RMR_TEST_DEBUG=1 adds librmr's debug log and prints the schedule.
 */
#include "fault_transport.h"
#include "memstore.h"
#include "unit.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rmr/client.h>
#include <rmr/server.h>

#include "loop.h"
#include "transports.h"

#define MAX_MEMBERS 16
#define POOL_SIZE (512u * 1024)
#define CHUNK (16u * 1024)
#define BLK 4096u
#define MAX_IO (64u * 1024)
#define QD 8
#define MS 1000000ull
#define NBLK (POOL_SIZE / BLK)

struct member {
	char addr[16];
	struct memstore store;
	struct rmr_server *srv;
	struct rmr_server_pool *pool;
	bool cut_client;             /* the client's link to it is cut */
};

struct req {
	uint64_t addr;
	uint32_t len;
	bool write;
	uint32_t seq;                /* writes submitted before it */
	uint8_t *raced;              /* read: blocks a write was in flight over at submission */
	unsigned done;               /* completions seen: must end at exactly 1 */
	int status;
	uint64_t t_submit, t_done;   /* virtual ns, for the history of a failing byte */
	struct iovec iov;
	uint8_t data[];
};

static struct {
	uint64_t seed, rng;
	bool debug;
	unsigned n;                  /* members: SIM_MEMBERS, default 3 */
	uint16_t id[MAX_MEMBERS];    /* their ids: SIM_IDS, default 1..n */
	uint64_t mask;               /* of those ids */
	struct member m[MAX_MEMBERS];
	bool cut_peer[MAX_MEMBERS];  /* link between member i and member (i + 1) % n */
	struct rmr_client *c;
	uint8_t model[POOL_SIZE];
	/* Per block: every request covers whole blocks (BLK). */
	uint8_t maybe[NBLK];         /* blocks of failed writes: any value seen there is right */
	uint8_t pending[NBLK];       /* writes in flight over each block */
	uint32_t wseq[NBLK];         /* the last write submitted over each block */
	uint32_t seq;                /* writes submitted */
	unsigned inflight;
	uint64_t acked, failed, reads, bad_reads;
	bool power;                  /* SIM_POWER: volatile stores, flushes, power losses */
	char replay_env[128];        /* SIM_POWER, SIM_MEMBERS, SIM_IDS as set, for a replay */
} w;

static void sim_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void sim_fail(const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	ck_abort_msg("seed %llu: %s (replay: %sSIM_SEED=%llu RMR_TEST_DEBUG=1 "
		     "build/tests/test_sim_random)",
		     (unsigned long long)w.seed, why, w.replay_env, (unsigned long long)w.seed);
}

#define sim_check(cond, ...)                \
	do {                                \
		if (!(cond))                \
			sim_fail(__VA_ARGS__);  \
	} while (0)

static uint64_t rnd(void)
{
	w.rng ^= w.rng >> 12;
	w.rng ^= w.rng << 25;
	w.rng ^= w.rng >> 27;
	return w.rng * 0x2545f4914f6cdd1dull;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	va_list ap;

	if (!w.debug)
		return;
	va_start(ap, fmt);
	printf("sim %8.3f s: ", (double)loop_clock_ns() / 1e9);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
}

/* --- the world ----------------------------------------------------------------------- */

static const rmr_uuid pool_uuid = { { 0x52, 0x4e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 } };

static void member_start(unsigned i)
{
	struct rmr_server_opts so = {
		.size = sizeof(so),
		.listen_addr = w.m[i].addr,
		.transport = "fault",
		.max_io_size = MAX_IO,
		.heartbeat_ms = 50,
		.failure_timeout_ms = 500,
	};
	struct rmr_peer peers[MAX_MEMBERS - 1];
	struct rmr_pool_params pp = {
		.size = sizeof(pp),
		.name = "vol",
		.uuid = pool_uuid,
		.pool_size = POOL_SIZE,
		.chunk_size = CHUNK,
		.member_id = w.id[i],
		.members_mask = w.mask,
		.peers = peers,
		.npeers = w.n - 1,
		.sync_queue_depth = 4,
		.boot_id = w.m[i].store.boot,
	};
	int ret;

	for (unsigned k = 0, n = 0; k < w.n; k++)
		if (k != i)
			peers[n++] = (struct rmr_peer){ .member_id = w.id[k],
							.addr = w.m[k].addr };
	ret = rmr_server_create(&so, &w.m[i].srv);
	sim_check(ret == 0, "member %u: rmr_server_create: %d", w.id[i], ret);
	ret = rmr_server_add_pool(w.m[i].srv, &pp, &memstore_ops, &w.m[i].store, &w.m[i].pool);
	sim_check(ret == 0, "member %u: rmr_server_add_pool: %d", w.id[i], ret);
}

/* A crash: the process is gone, its store stays. */
static void member_kill(unsigned i)
{
	rmr_server_remove_pool(w.m[i].pool);
	rmr_server_destroy(w.m[i].srv);
	w.m[i].srv = NULL;
}

static unsigned members_up(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < w.n; i++)
		n += w.m[i].srv != NULL;
	return n;
}

static void client_open(void)
{
	const char *addrs[MAX_MEMBERS];
	struct rmr_client_opts o = {
		.size = sizeof(o),
		.pool_name = "vol",
		.transport = "fault",
		.nmembers = w.n,
		.members = addrs,
		.queue_depth = 16,
		.max_io_size = MAX_IO,
		.heartbeat_ms = 50,
		.failure_timeout_ms = 500,
		.reconnect_min_ms = 50,
		.reconnect_max_ms = 400,
		.open_timeout_ms = 2000,
		.request_timeout_ms = 2000,
		.min_legs = 1,
		.volatile_writes = w.power,
	};
	int ret;

	for (unsigned i = 0; i < w.n; i++)
		addrs[i] = w.m[i].addr;
	ret = rmr_client_open(&o, &w.c);
	sim_check(ret == 0, "rmr_client_open: %d", ret);
}

static void quiet(void *ctx, enum rmr_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	(void)msg;
}

/* A replay's librmr log, stamped with virtual time like the schedule. */
static void log_virtual(void *ctx, enum rmr_log_level level, const char *msg)
{
	(void)ctx;
	printf("sim %8.3f s: rmr %d: %s\n", (double)loop_clock_ns() / 1e9, (int)level, msg);
}

/*
 * The pool: SIM_MEMBERS members (2..16, default 3) with ids 1..n, or the ids
 * SIM_IDS lists ("7 40 63": any of 1..63, each once; n is their count).
 * Member i's peer link is the one to member (i + 1) % n.
 */
static void world_members(void)
{
	const char *n = getenv("SIM_MEMBERS"), *ids = getenv("SIM_IDS");
	size_t len = 0;

	/* What a replay of a failing seed must set again (w.power is known). */
	if (w.power)
		len += (size_t)snprintf(w.replay_env, sizeof(w.replay_env), "SIM_POWER=1 ");
	w.n = 3;
	if (n && *n) {
		char *end;
		unsigned long v = strtoul(n, &end, 10);

		ck_assert_msg(!*end && v >= 2 && v <= MAX_MEMBERS,
			      "SIM_MEMBERS: '%s' is not a number of members from 2 to %u", n,
			      MAX_MEMBERS);
		w.n = (unsigned)v;
		len += (size_t)snprintf(w.replay_env + len, sizeof(w.replay_env) - len,
					"SIM_MEMBERS=%s ", n);
	}
	for (unsigned i = 0; i < w.n; i++)
		w.id[i] = (uint16_t)(i + 1);
	if (ids && *ids) {
		unsigned k = 0;

		for (char *end;; ids = end) {
			unsigned long v;

			ids += strspn(ids, " ,");
			if (!*ids)
				break;
			v = strtoul(ids, &end, 10);
			ck_assert_msg(end != ids && v >= 1 && v <= RMR_MAX_MEMBER_ID &&
					      !(w.mask & (1ull << v)) && k < MAX_MEMBERS,
				      "SIM_IDS: want up to %u distinct ids from 1 to %u, at '%s'",
				      MAX_MEMBERS, RMR_MAX_MEMBER_ID, ids);
			w.id[k++] = (uint16_t)v;
			w.mask |= 1ull << v;
		}
		ck_assert_msg(k >= 2 && (!n || !*n || k == w.n),
			      "SIM_IDS: want 2 or more ids, as many as SIM_MEMBERS says");
		w.n = k;
		snprintf(w.replay_env + len, sizeof(w.replay_env) - len, "SIM_IDS='%s' ",
			 getenv("SIM_IDS"));
	}
	w.mask = 0;
	for (unsigned i = 0; i < w.n; i++)
		w.mask |= 1ull << w.id[i];
}

static void world_begin(uint64_t seed)
{
	memset(&w, 0, sizeof(w));
	w.seed = seed;
	w.rng = seed * 0x9e3779b97f4a7c15ull + 11;
	w.debug = getenv("RMR_TEST_DEBUG") != NULL;
	w.power = getenv("SIM_POWER") && *getenv("SIM_POWER") == '1';
	world_members();
	if (w.debug)
		setvbuf(stdout, NULL, _IONBF, 0);
	/* Faults make librmr log errors by the thousand: only a replay shows them. */
	rmr_log_set_sink(w.debug ? log_virtual : quiet, NULL, w.debug ? RMR_LOG_DEBUG : RMR_LOG_ERR);
	fault_set(&(struct fault_cfg){ 0 });
	fault_reset_stats();
	loop_sim_begin(seed);
	for (unsigned i = 0; i < w.n; i++) {
		snprintf(w.m[i].addr, sizeof(w.m[i].addr), "r-m%u", w.id[i]);
		memstore_init(&w.m[i].store, POOL_SIZE, CHUNK);
		memstore_set_host(&w.m[i].store, w.id[i]);
		if (w.power)
			memstore_make_volatile(&w.m[i].store);
	}
	for (unsigned i = 0; i < w.n; i++)
		member_start(i);
	client_open();
}

static void world_end(void)
{
	rmr_client_close(w.c);
	for (unsigned i = 0; i < w.n; i++) {
		if (w.m[i].srv)
			member_kill(i);
		rmr_mem_link_cut("vol", w.m[i].addr, false);
		rmr_mem_link_cut(w.m[i].addr, w.m[(i + 1) % w.n].addr, false);
		memstore_destroy(&w.m[i].store);
	}
	loop_sim_end();
}

/* Step once; when nothing happened, let 1 ms of virtual time pass. */
static void step(void)
{
	if (loop_sim_step() == 0)
		loop_sim_run(MS);
}

/* --- workload and model ---------------------------------------------------------------- */

/* Requests of this schedule, freed at its end. */
static struct req **reqs;
static size_t nreqs, reqs_cap;

/* Debug: every write over byte @b so far, to tell which one a bad read shows. */
static void byte_history(uint64_t b, uint8_t seen)
{
	char stores[MAX_MEMBERS * 8] = "";

	for (unsigned i = 0; i < w.n; i++)
		snprintf(stores + strlen(stores), sizeof(stores) - strlen(stores), " %#x",
			 w.m[i].store.data[b]);
	say("byte %llu: read %#x, model %#x; stores now%s; writes over it:",
	    (unsigned long long)b, seen, w.model[b], stores);
	for (size_t k = 0; k < nreqs; k++) {
		const struct req *r = reqs[k];

		if (!r->write || b < r->addr || b >= r->addr + r->len)
			continue;
		say("  write [%llu, +%u) byte %#x: submitted %.3f s, %s %.3f s, status %d",
		    (unsigned long long)r->addr, r->len, r->data[b - r->addr], r->t_submit / 1e9,
		    r->done ? "done" : "pending", r->t_done / 1e9, r->status);
	}
}

static void req_done(void *priv, int status)
{
	struct req *r = priv;

	sim_check(++r->done == 1, "a %s at %llu completed twice", r->write ? "write" : "read",
	      (unsigned long long)r->addr);
	r->status = status;
	r->t_done = loop_clock_ns();
	w.inflight--;
	if (r->write)
		for (uint32_t i = 0; i < r->len / BLK; i++)
			w.pending[r->addr / BLK + i]--;
	if (r->write)
		say("write [%llu, +%u) chunks %llu..%llu: %d", (unsigned long long)r->addr, r->len,
		    (unsigned long long)(r->addr / CHUNK),
		    (unsigned long long)((r->addr + r->len - 1) / CHUNK), status);
	if (r->write && status == 0) {
		memcpy(w.model + r->addr, r->data, r->len);
		memset(w.maybe + r->addr / BLK, 0, r->len / BLK);
		w.acked++;
	} else if (r->write) {
		memset(w.maybe + r->addr / BLK, 1, r->len / BLK);
		w.failed++;
	} else if (status == (int)r->len) {
		/* Bytes a write raced with may hold either value. */
		for (uint32_t off = 0; off < r->len; off += BLK) {
			uint64_t blk = (r->addr + off) / BLK;

			if (w.maybe[blk] || r->raced[off / BLK] || w.pending[blk] ||
			    w.wseq[blk] > r->seq || !memcmp(r->data + off, w.model + r->addr + off, BLK))
				continue;
			for (uint32_t i = off; i < off + BLK; i++)
				if (r->data[i] != w.model[r->addr + i]) {
					byte_history(r->addr + i, r->data[i]);
					sim_fail("a read at %llu returned a byte at %llu that no "
						 "acknowledged write left", (unsigned long long)r->addr,
						 (unsigned long long)(r->addr + i));
				}
		}
		w.reads++;
	} else {
		sim_check(status < 0, "a read of %u bytes returned %d", r->len, status);
		w.bad_reads++;
	}
	/* Kept until the end of the schedule: a second completion must find it. */
}


/* A request at @addr, or NULL if every slot is busy. */
static struct req *submit_at(bool write, uint64_t addr, uint32_t len)
{
	/* Not zeroed: a write fills its data, a read gets it filled (memset dominated the run). */
	struct req *r = malloc(sizeof(*r) + len + len / BLK);
	struct rmr_io io = { .kind = write ? RMR_IO_WRITE : RMR_IO_READ, .op = write, .addr = addr,
			     .len = len, .iovcnt = 1, .cb = req_done };
	int ret;

	sim_check(r != NULL, "out of memory");
	memset(r, 0, sizeof(*r));
	r->addr = addr;
	r->len = len;
	r->write = write;
	if (write) {
		uint8_t v = (uint8_t)rnd();

		for (uint32_t i = 0; i < len; i++)
			r->data[i] = (uint8_t)(v + i * 13 + (i >> 8));
	}
	r->raced = r->data + len;
	for (uint32_t i = 0; !write && i < len / BLK; i++)
		r->raced[i] = w.pending[addr / BLK + i] != 0;
	r->iov = (struct iovec){ .iov_base = r->data, .iov_len = len };
	io.iov = &r->iov;
	io.priv = r;
	ret = rmr_client_submit(w.c, &io, 0);
	if (ret) {
		sim_check(ret == -EAGAIN, "rmr_client_submit: %d", ret);
		free(r);
		return NULL;
	}
	if (nreqs == reqs_cap) {
		reqs_cap = reqs_cap ? 2 * reqs_cap : 256;
		reqs = realloc(reqs, reqs_cap * sizeof(*reqs));
		sim_check(reqs != NULL, "out of memory");
	}
	reqs[nreqs++] = r;
	r->t_submit = loop_clock_ns();
	w.inflight++;
	r->seq = w.seq;
	if (write) {
		w.seq++;
		for (uint32_t i = 0; i < len / BLK; i++) {
			w.pending[addr / BLK + i]++;
			w.wseq[addr / BLK + i] = w.seq;
		}
	}
	return r;
}

static void flush_done(void *priv, int status)
{
	(void)priv;
	(void)status; /* fails with the members it reached: nothing to check */
	w.inflight--;
}

/* SIM_POWER: a flush (RMR_IO_FLUSH) among the writes. */
static void submit_flush(void)
{
	struct rmr_io io = { .kind = RMR_IO_WRITE, .op = MEMSTORE_OP_FLUSH, .flags = RMR_IO_FLUSH,
			     .cb = flush_done };
	int ret = rmr_client_submit(w.c, &io, 0);

	sim_check(ret == 0 || ret == -EAGAIN, "rmr_client_submit (flush): %d", ret);
	w.inflight += ret == 0;
}

static void submit(bool write)
{
	uint32_t len = (uint32_t)(1 + rnd() % 8) * BLK;

	if (w.power && write && rnd() % 10 == 0) {
		submit_flush();
		return;
	}
	submit_at(write, rnd() % ((POOL_SIZE - len) / BLK + 1) * BLK, len);
}

/* @n requests (a quarter of them reads), QD at a time, the world stepping. */
static void workload(unsigned n)
{
	for (unsigned sent = 0; sent < n;) {
		while (sent < n && w.inflight < QD) {
			submit(rnd() % 4 != 0);
			sent++;
		}
		step();
	}
}

/* Every request answered within @ms of virtual time. */
static void settle(unsigned ms)
{
	uint64_t end = loop_clock_ns() + (uint64_t)ms * MS;

	while (w.inflight && loop_clock_ns() < end)
		step();
	sim_check(w.inflight == 0, "%u requests still unanswered after %u ms", w.inflight, ms);
}

/* Every request so far completed exactly once. */
static void reqs_check(void)
{
	for (size_t i = 0; i < nreqs; i++)
		sim_check(reqs[i]->done == 1, "a request completed %u times", reqs[i]->done);
}

/* At the end of a schedule (kept until then for byte_history). */
static void reqs_free(void)
{
	reqs_check();
	for (size_t i = 0; i < nreqs; i++)
		free(reqs[i]);
	nreqs = 0;
}

/* --- faults ---------------------------------------------------------------------------------- */

/* A network that misbehaves in one or two ways for this phase, or not at all. */
static void network_faults(void)
{
	struct fault_cfg f = { 0 };

	switch (rnd() % 6) {
	case 0:
		break;
	case 1:
		f.delay_max_us = (uint32_t)(1 + rnd() % 20) * 1000;
		break;
	case 2:
		f.reset_ppm = 2000;
		f.delay_max_us = 2000;
		break;
	case 3:
		f.deaf_ppm = 1000;
		break;
	case 4:
		f.reply_lost_ppm = 3000;
		f.refuse_ppm = 100000;
		break;
	default:
		f.reset_ppm = 500;
		f.deaf_ppm = 300;
		f.reply_lost_ppm = 500;
		f.refuse_ppm = 50000;
		f.delay_max_us = 5000;
		break;
	}
	say("network: reset %u deaf %u reply-lost %u refuse %u ppm, delay <= %u us", f.reset_ppm,
	    f.deaf_ppm, f.reply_lost_ppm, f.refuse_ppm, f.delay_max_us);
	fault_set(&f);
}

static void cut_client(unsigned i, bool cut)
{
	rmr_mem_link_cut("vol", w.m[i].addr, cut);
	w.m[i].cut_client = cut;
}

static void cut_peer(unsigned i, bool cut)
{
	rmr_mem_link_cut(w.m[i].addr, w.m[(i + 1) % w.n].addr, cut);
	w.cut_peer[i] = cut;
}

/* One more fault, or the end of one. */
static uint64_t dirty_total(void);
static bool all_normal(void);

static void strike(void)
{
	unsigned i = (unsigned)(rnd() % w.n);

	switch (rnd() % 8) {
	case 0:
		/* Two down at most: the workload goes on with one. */
		if (w.m[i].srv && members_up() > 1) {
			/*
			 * A power loss only while the pool is whole: then the
			 * others hold every acknowledged write it may lose.
			 */
			bool power = w.power && members_up() == w.n && all_normal() &&
				     !dirty_total() && rnd() % 2;

			say("member %u crashes%s", w.id[i], power ? ": its host lost power" : "");
			member_kill(i);
			if (power)
				memstore_power_loss(&w.m[i].store);
		}
		break;
	case 1:
		if (!w.m[i].srv) {
			say("member %u restarts", w.id[i]);
			member_start(i);
		}
		break;
	case 2:
		say("client link to member %u %s", w.id[i], w.m[i].cut_client ? "restored" : "cut");
		cut_client(i, !w.m[i].cut_client);
		break;
	case 3:
		say("link member %u - member %u %s", w.id[i], w.id[(i + 1) % w.n],
		    w.cut_peer[i] ? "restored" : "cut");
		cut_peer(i, !w.cut_peer[i]);
		break;
	case 4:
		say("member %u's store %s", w.id[i], w.m[i].store.fail ? "heals" : "fails");
		w.m[i].store.fail = !w.m[i].store.fail;
		break;
	case 5:
		/* A torn dirty-map write, then the crash that tears it for real. */
		if (w.m[i].srv && members_up() > 1) {
			say("member %u tears its next map write", w.id[i]);
			w.m[i].store.map_tear_blocks = 1;
		}
		break;
	default:
		break; /* the network alone */
	}
}

/* --- the end: heal and check ------------------------------------------------------------------- */

static enum rmr_member_state state_of(unsigned i)
{
	struct rmr_pool_status st = { .size = sizeof(st) };

	sim_check(rmr_client_status(w.c, &st) == 0, "rmr_client_status failed");
	return st.members[i].state;
}

static uint64_t dirty_total(void)
{
	static struct rmr_server_status ss;
	uint64_t n = 0;

	for (unsigned i = 0; i < w.n; i++) {
		ss.size = sizeof(ss);
		sim_check(rmr_server_status(w.m[i].srv, &ss) == 0, "rmr_server_status failed");
		for (unsigned k = 0; k < w.n; k++)
			n += ss.pools[0].dirty_chunks[w.id[k]];
	}
	return n;
}

static bool all_normal(void)
{
	for (unsigned i = 0; i < w.n; i++)
		if (state_of(i) != RMR_MEMBER_NORMAL)
			return false;
	return true;
}

/* Read the whole pool through the client: every byte the model's. */
static void read_all(void)
{
	for (uint64_t off = 0; off < POOL_SIZE; off += MAX_IO) {
		struct req *r = submit_at(false, off, MAX_IO);

		sim_check(r != NULL, "a read of the whole pool found no free slot");
		settle(15000); /* a read may wait out a deadline on each member */
		sim_check(w.bad_reads == 0, "a read at %llu failed after healing",
		      (unsigned long long)off);
	}
}

static void heal_and_check(void)
{
	fault_set(&(struct fault_cfg){ 0 });
	say("faults stop");
	for (unsigned i = 0; i < w.n; i++) {
		cut_client(i, false);
		cut_peer(i, false);
		w.m[i].store.fail = false;
		w.m[i].store.map_tear_blocks = 0;
	}
	settle(20000);
	reqs_check();
	for (unsigned i = 0; i < w.n; i++)
		if (!w.m[i].srv)
			member_start(i);
	for (unsigned t = 0; t < 30000 && !all_normal(); t += 10)
		loop_sim_run(10 * MS);
	if (!all_normal()) {
		struct rmr_pool_status st = { .size = sizeof(st) };
		char states[MAX_MEMBERS * 160] = "";

		for (uint64_t ch = 0; w.debug && ch < POOL_SIZE / CHUNK; ch++) {
			char who[4 * MAX_MEMBERS] = { 0 };

			for (unsigned i = 0; i < w.n; i++) {
				bool same = true;

				for (uint64_t b = ch * CHUNK; b < (ch + 1) * CHUNK; b++)
					if (!w.maybe[b / BLK] && w.m[i].store.data[b] != w.model[b])
						same = false;
				if (same)
					snprintf(who + strlen(who), sizeof(who) - strlen(who), " %u",
						 w.id[i]);
				else
					strcat(who, " -");
			}
			say("chunk %llu: stores holding the model:%s", (unsigned long long)ch, who);
		}

		sim_check(rmr_client_status(w.c, &st) == 0, "rmr_client_status failed");
		for (unsigned i = 0; i < w.n; i++)
			snprintf(states + strlen(states), sizeof(states) - strlen(states),
				 "%s%u %s (%s)", i ? ", " : "", w.id[i],
				 rmr_member_state_name(st.members[i].state), st.members[i].reason);
		sim_fail("not all members NORMAL 30 s after the faults stopped: %s; missed 0x%llx",
			 states, (unsigned long long)st.missed_mask);
	}
	w.bad_reads = 0;
	read_all();
	reqs_check();
	for (unsigned t = 0; t < 60000 && dirty_total(); t += 10)
		loop_sim_run(10 * MS);
	for (unsigned i = 0; i < w.n && w.debug; i++) {
		static struct rmr_server_status ss;
		char dirty[MAX_MEMBERS * 24] = "";

		ss.size = sizeof(ss);
		rmr_server_status(w.m[i].srv, &ss);
		for (unsigned k = 0; k < w.n; k++)
			snprintf(dirty + strlen(dirty), sizeof(dirty) - strlen(dirty), " %u: %llu",
				 w.id[k], (unsigned long long)ss.pools[0].dirty_chunks[w.id[k]]);
		say("member %u: dirty chunks for members%s; map version %llu", w.id[i], dirty,
		    (unsigned long long)ss.pools[0].map_ver);
	}
	sim_check(dirty_total() == 0, "%llu dirty chunks left 60 s after the faults stopped",
	      (unsigned long long)dirty_total());
	for (uint64_t b = 0; b < POOL_SIZE; b++) {
		const uint8_t v = w.m[0].store.data[b];

		for (unsigned i = 1; i < w.n; i++)
			if (w.m[i].store.data[b] != v) {
				byte_history(b, v);
				sim_fail("members %u and %u differ at byte %llu", w.id[0], w.id[i],
					 (unsigned long long)b);
			}
		if (!w.maybe[b / BLK] && v != w.model[b])
			sim_fail("byte %llu of an acknowledged write is lost", (unsigned long long)b);
	}
	{
		struct rmr_pool_status st = { .size = sizeof(st) };

		sim_check(rmr_client_status(w.c, &st) == 0, "rmr_client_status failed");
		for (unsigned i = 0; i < w.n; i++)
			sim_check(st.members[i].resync_bytes == 0, "the client carried resync bytes");
	}
}

/* --- schedules --------------------------------------------------------------------------------- */

static void run_schedule(uint64_t seed)
{
	unsigned phases;

	world_begin(seed);
	phases = (unsigned)(3 + rnd() % 6);
	for (unsigned p = 0; p < phases; p++) {
		network_faults();
		strike();
		workload((unsigned)(10 + rnd() % 40));
		loop_sim_run((rnd() % 800) * MS);
	}
	heal_and_check();
	reqs_free();
	if (w.debug) {
		struct fault_stats fs = fault_get_stats();

		say("done: %llu writes acknowledged, %llu failed, %llu reads checked; "
		    "%llu messages, %llu delayed, %llu resets, %llu deaf, %llu replies lost, %llu refused",
		    (unsigned long long)w.acked, (unsigned long long)w.failed,
		    (unsigned long long)w.reads, (unsigned long long)fs.delivered,
		    (unsigned long long)fs.delayed, (unsigned long long)fs.resets,
		    (unsigned long long)fs.deaf, (unsigned long long)fs.replies_lost,
		    (unsigned long long)fs.refused);
	}
	world_end();
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 10) : dflt;
}

START_TEST(random_schedules)
{
	uint64_t first = env_u64("SIM_FIRST", 1), count = env_u64("SIM_COUNT", 1000);

	const char *list = getenv("SIM_SEED_LIST");

	fault_transport_register();
	if (getenv("SIM_SEED")) {
		first = env_u64("SIM_SEED", 1);
		count = 1;
	} else if (list) {
		/* Seeds that once failed, replayed as regressions. */
		for (char *end;; list = end) {
			uint64_t s;

			list += strspn(list, " ,");
			if (!*list)
				break;
			s = strtoull(list, &end, 10);
			ck_assert_msg(end != list, "SIM_SEED_LIST: not a number at '%s'", list);
			run_schedule(s);
			printf("sim_random: seed %llu passed\n", (unsigned long long)s);
		}
		count = 0;
	}
	for (uint64_t s = first; s < first + count; s++)
		run_schedule(s);
	free(reqs);
	if (count)
		printf("sim_random: seeds %llu..%llu passed\n", (unsigned long long)first,
		       (unsigned long long)(first + count - 1));
}
END_TEST

/* The fault transport must bite: a schedule with faults sees them happen. */
START_TEST(faults_are_injected)
{
	struct fault_stats fs;

	fault_transport_register();
	world_begin(7);
	fault_set(&(struct fault_cfg){ .reset_ppm = 5000, .deaf_ppm = 2000, .reply_lost_ppm = 5000,
				       .refuse_ppm = 200000, .delay_max_us = 5000 });
	workload(400);
	loop_sim_run(2000 * MS);
	fs = fault_get_stats();
	ck_assert_uint_gt(fs.delayed, 0);
	ck_assert_uint_gt(fs.resets + fs.deaf + fs.replies_lost, 0);
	heal_and_check();
	reqs_free();
	world_end();
	free(reqs);
	reqs = NULL;
	reqs_cap = 0;
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sim_random");

	/*
	 * Keep freed memory: every schedule allocates and frees the same again,
	 * and giving it back to the kernel cost a page fault per page each time.
	 */
	mallopt(M_TRIM_THRESHOLD, 512 << 20);
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	TCase *faults = tcase_create("faults"), *tc = tcase_create("sim");

	/* Separate cases: scripts/sim-campaign runs only "sim" (CK_RUN_CASE). */
	tcase_add_test(faults, faults_are_injected);
	suite_add_tcase(s, faults);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, random_schedules);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
