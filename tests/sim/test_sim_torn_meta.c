/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Torn metadata writes on a real brmr store: a member dies in the middle of
 * one of its metadata writes (a dirty-map block, an activity-log record, the
 * metadata blob), at every such write of a scenario in turn, with 0, 512,
 * half or all but 512 bytes of it on disk. Afterwards
 *  - the store opens and serves again (it never refuses to start);
 *  - its dirty state is not wrong: every chunk where its data differs from
 *    the other member's is marked dirty on disk, for the member that lacks
 *    it (a missing mark would never be copied; an extra one costs a copy);
 *  - the pool heals by itself to identical data that holds every
 *    acknowledged write.
 * Member 1 serves a libbrmr store file (with libbrmr's crash drill,
 * store_crash_at), member 2 an in-memory store; a client writes through the
 * in-process transport, all stepped on this thread against a virtual clock.
 *
 * Two scenarios: "survivor" (member 2 is away, member 1 records what it
 * misses and dies) and "returner" (member 1 was away, takes the maps and
 * copies chunks in, and dies doing so). TORN_CASE=survivor|returner and
 * TORN_WRITE=N replay one case.
 */
#include "memstore.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rmr/brmr.h>
#include <rmr/client.h>
#include <rmr/server.h>

#include "activity_log.h"
#include "loop.h"
#include "store.h"
#include "transports.h"

#define POOL_SIZE (8u << 20)
#define CHUNK (128u * 1024)
#define NCHUNKS (POOL_SIZE / CHUNK)
#define BLK 4096u
#define MS 1000000ull
#define MEMBERS_MASK 0x6ull /* ids 1 and 2 */

static const rmr_uuid pool_uuid = { { 0x70, 0x72, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 } };

static struct {
	char dir[96], path[128];
	uint64_t rng;
	/* member 1: a libbrmr store file */
	struct brmr_store *store;
	struct rmr_server *srv1;
	struct rmr_server_pool *pool1;
	/* member 2: in memory */
	struct memstore mem;
	struct rmr_server *srv2;
	struct rmr_server_pool *pool2;
	struct rmr_client *c;
	uint8_t model[POOL_SIZE];
	uint8_t maybe[POOL_SIZE];     /* bytes of writes that failed: either value is right */
	unsigned inflight;
	uint64_t failed;
} w;

static uint64_t rnd(void)
{
	w.rng ^= w.rng >> 12;
	w.rng ^= w.rng << 25;
	w.rng ^= w.rng >> 27;
	return w.rng * 0x2545f4914f6cdd1dull;
}

/* --- the two members and the client --------------------------------------------- */

static struct rmr_server *server_on(const char *addr)
{
	struct rmr_server_opts so = {
		.size = sizeof(so), .listen_addr = addr, .transport = "mem",
		.heartbeat_ms = 50, .failure_timeout_ms = 500,
	};
	struct rmr_server *s;

	ck_assert_int_eq(rmr_server_create(&so, &s), 0);
	return s;
}

static void start1(void)
{
	/* Extents of one chunk: many log records to tear (one per new chunk). */
	struct brmr_serve_opts so = { .size = sizeof(so), .sync_queue_depth = 4,
				      .al_extent_size = CHUNK };
	char why[160] = "";
	int ret = brmr_store_open(w.path, &w.store, why, sizeof(why));

	ck_assert_msg(ret == 0, "the store refuses to open: %s", why);
	w.srv1 = server_on("torn-m1");
	ret = brmr_store_serve(w.store, w.srv1, &so, &w.pool1);
	ck_assert_msg(ret == 0, "the store refuses to serve: %s", strerror(-ret));
}

static void stop1(void)
{
	rmr_server_remove_pool(w.pool1);
	rmr_server_destroy(w.srv1);
	brmr_store_close(w.store);
	w.srv1 = NULL;
	w.store = NULL;
}

static void start2(void)
{
	struct rmr_peer peer = { .member_id = 1, .addr = "torn-m1" };
	struct rmr_pool_params pp = {
		.size = sizeof(pp), .name = "torn", .uuid = pool_uuid, .pool_size = POOL_SIZE,
		.chunk_size = CHUNK, .member_id = 2, .members_mask = MEMBERS_MASK, .npeers = 1,
		.peers = &peer, .sync_queue_depth = 4, .al_extent_size = CHUNK,
	};

	w.srv2 = server_on("torn-m2");
	ck_assert_int_eq(rmr_server_add_pool(w.srv2, &pp, &memstore_ops, &w.mem, &w.pool2), 0);
}

static void stop2(void)
{
	rmr_server_remove_pool(w.pool2);
	rmr_server_destroy(w.srv2);
	w.srv2 = NULL;
}

/*
 * The directory the worlds keep their stores in, made by main() and removed
 * by it after every case: a case that fails exits at once (check's child),
 * leaving its store behind.
 */
static char base_dir[64];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 ? -1 : 0;
}

static void world_begin(uint64_t seed)
{
	struct brmr_member members[2] = { { .id = 1, .addr = "torn-m1" },
					  { .id = 2, .addr = "torn-m2" } };
	struct brmr_format_params fp = {
		.size = sizeof(fp), .pool_name = "torn", .pool_uuid = pool_uuid,
		.pool_size = POOL_SIZE, .chunk_size = CHUNK, .member_id = 1,
	};
	const char *addrs[2] = { "torn-m1", "torn-m2" };
	struct rmr_client_opts o = {
		.size = sizeof(o), .pool_name = "torn", .transport = "mem", .nmembers = 2,
		.members = addrs, .queue_depth = 16, .heartbeat_ms = 50, .failure_timeout_ms = 500,
		.reconnect_min_ms = 50, .reconnect_max_ms = 200, .open_timeout_ms = 2000,
	};
	char why[160] = "";

	memset(&w, 0, sizeof(w));
	w.rng = seed * 0x9e3779b97f4a7c15ull + 11;
	snprintf(w.dir, sizeof(w.dir), "%s/w.XXXXXX", base_dir);
	ck_assert_ptr_nonnull(mkdtemp(w.dir));
	snprintf(w.path, sizeof(w.path), "%s/m1.store", w.dir);
	ck_assert_msg(brmr_store_format_pool(w.path, &fp, members, 2, 0, why, sizeof(why)) == 0,
		      "format: %s", why);
	memstore_init(&w.mem, POOL_SIZE, CHUNK);
	rmr_log_set_sink(NULL, NULL, getenv("RMR_TEST_DEBUG") ? RMR_LOG_DEBUG : RMR_LOG_ERR);
	loop_sim_begin(seed);
	start1();
	start2();
	ck_assert_int_eq(rmr_client_open(&o, &w.c), 0);
}

static void world_end(void)
{
	rmr_client_close(w.c);
	if (w.srv1)
		stop1();
	if (w.srv2)
		stop2();
	loop_sim_end();
	memstore_destroy(&w.mem);
	unlink(w.path);
	rmdir(w.dir);
}

/* --- workload ------------------------------------------------------------------- */

struct wreq {
	uint64_t addr;
	struct iovec iov;
	uint8_t data[BLK];
};

static void write_done(void *priv, int status)
{
	struct wreq *r = priv;

	w.inflight--;
	if (status == 0) {
		memcpy(w.model + r->addr, r->data, BLK);
		memset(w.maybe + r->addr, 0, BLK);
	} else {
		memset(w.maybe + r->addr, 1, BLK);
		w.failed++;
	}
	free(r);
}

static void submit_write(void)
{
	struct wreq *r = malloc(sizeof(*r));
	struct rmr_io io = { .kind = RMR_IO_WRITE, .op = BRMR_OP_WRITE, .len = BLK, .iovcnt = 1,
			     .cb = write_done };
	uint8_t v = (uint8_t)rnd();

	ck_assert_ptr_nonnull(r);
	r->addr = rnd() % (POOL_SIZE / BLK) * BLK;
	for (uint32_t i = 0; i < BLK; i++)
		r->data[i] = (uint8_t)(v + i * 7);
	r->iov = (struct iovec){ .iov_base = r->data, .iov_len = BLK };
	io.addr = r->addr;
	io.iov = &r->iov;
	io.priv = r;
	ck_assert_int_eq(rmr_client_submit(w.c, &io, 0), 0);
	w.inflight++;
}

static void step(void)
{
	if (loop_sim_step() == 0)
		loop_sim_run(MS);
}

/* @n random 4 KiB writes, four at a time, until every one is answered. */
static void write_some(unsigned n)
{
	for (unsigned sent = 0; sent < n || w.inflight;) {
		while (sent < n && w.inflight < 4) {
			submit_write();
			sent++;
		}
		step();
	}
}

static enum rmr_member_state state_of(unsigned id)
{
	struct rmr_pool_status st = { .size = sizeof(st) };

	ck_assert_int_eq(rmr_client_status(w.c, &st), 0);
	return st.members[id - 1].state;
}

static void wait_state(unsigned id, enum rmr_member_state want)
{
	for (unsigned t = 0; t < 20000 && state_of(id) != want; t++)
		step();
	ck_assert_str_eq(rmr_member_state_name(state_of(id)), rmr_member_state_name(want));
}

static uint64_t dirty_on(struct rmr_server *s)
{
	static struct rmr_server_status st;
	uint64_t n = 0;

	st.size = sizeof(st);
	ck_assert_int_eq(rmr_server_status(s, &st), 0);
	for (unsigned id = 1; id <= 2; id++)
		n += st.pools[0].dirty_chunks[id];
	return n;
}

/* Both members NORMAL and no dirty chunk left anywhere: healed. */
static void wait_healed(void)
{
	for (unsigned t = 0; t < 60000; t++) {
		if (state_of(1) == RMR_MEMBER_NORMAL && state_of(2) == RMR_MEMBER_NORMAL &&
		    !dirty_on(w.srv1) && !dirty_on(w.srv2))
			return;
		step();
	}
	{
		struct rmr_pool_status st = { .size = sizeof(st) };

		ck_assert_int_eq(rmr_client_status(w.c, &st), 0);
		ck_abort_msg("the pool did not heal (member 1 %s: %s; member 2 %s: %s; missed 0x%llx; dirty %llu + %llu)",
			     rmr_member_state_name(st.members[0].state), st.members[0].reason,
			     rmr_member_state_name(st.members[1].state), st.members[1].reason,
			     (unsigned long long)st.missed_mask, (unsigned long long)dirty_on(w.srv1),
			     (unsigned long long)dirty_on(w.srv2));
	}
}

/* --- what is on disk ------------------------------------------------------------- */

/* Member 1's data and its on-disk dirty bits, read from the file as a restart would. */
struct disk {
	uint8_t data[POOL_SIZE];
	uint8_t own[NCHUNKS / 8], other[NCHUNKS / 8]; /* dirty for member 1, for member 2 */
};

static void read_disk(struct disk *d)
{
	struct brmr_store *s;
	struct brmr_store_info info = { .size = sizeof(info) };
	uint64_t bitmap = (uint64_t)((NCHUNKS / 8 + 4095) / 4096 * 4096);
	char why[160] = "";
	int fd;

	ck_assert_msg(brmr_store_open(w.path, &s, why, sizeof(why)) == 0, "reopen: %s", why);
	ck_assert_int_eq(brmr_store_info(s, &info), 0);
	brmr_store_close(s);
	fd = open(w.path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, d->data, POOL_SIZE, (off_t)info.data_offset), POOL_SIZE);
	/* One bitmap per member id, id 1 first. */
	ck_assert_int_eq(pread(fd, d->own, sizeof(d->own), (off_t)info.map_offset),
			 (ssize_t)sizeof(d->own));
	ck_assert_int_eq(pread(fd, d->other, sizeof(d->other), (off_t)(info.map_offset + bitmap)),
			 (ssize_t)sizeof(d->other));
	close(fd);
}

static bool bit(const uint8_t *map, uint64_t c)
{
	return map[c / 8] & (1u << (c % 8));
}

/* Member 2's on-disk dirty bit for member @id (the memstore's map area). */
static bool mem_bit(unsigned id, uint64_t c)
{
	uint64_t bitmap = (w.mem.map_size - 2 * AL_RECORD_BYTES) / RMR_MAX_MEMBER_ID;

	return bit(w.mem.map + (id - 1) * bitmap, c);
}

static bool chunk_differs(const struct disk *d, uint64_t c)
{
	return memcmp(d->data + c * CHUNK, w.mem.data + c * CHUNK, CHUNK) != 0;
}

/* Every acknowledged write is in both stores, and they are identical. */
static void check_converged(const char *what)
{
	static struct disk d;

	wait_healed();
	stop1(); /* a clean stop: the file holds what member 1 holds */
	read_disk(&d);
	ck_assert_msg(!memcmp(d.data, w.mem.data, POOL_SIZE), "%s: the members differ", what);
	for (uint64_t i = 0; i < POOL_SIZE; i++)
		if (!w.maybe[i] && d.data[i] != w.model[i])
			ck_abort_msg("%s: byte %llu lost an acknowledged write", what,
				     (unsigned long long)i);
}

/* --- scenarios ------------------------------------------------------------------- */

/*
 * Member 2 is away; member 1 records each chunk it misses, and dies at
 * metadata write @nth. Returns false if the scenario made fewer writes.
 */
static bool survivor(uint64_t nth, size_t keep)
{
	static struct disk d;

	write_some(20);
	stop2();
	wait_state(2, RMR_MEMBER_FAILED);
	store_crash_at(w.store, nth, keep);
	write_some(40);
	if (!store_crashed(w.store))
		return false;
	stop1();
	read_disk(&d);
	for (uint64_t c = 0; c < NCHUNKS; c++)
		if (chunk_differs(&d, c) && !bit(d.other, c))
			ck_abort_msg("chunk %llu differs but member 1 has no mark for member 2 on disk",
				     (unsigned long long)c);
	start1();
	start2();
	check_converged("survivor");
	return true;
}

/*
 * Member 1 was away; it comes back, takes the maps from member 2 and copies
 * chunks in while writes go on, and dies at metadata write @nth.
 */
static bool returner(uint64_t nth, size_t keep)
{
	static struct disk d;

	write_some(20);
	stop1();
	wait_state(1, RMR_MEMBER_FAILED);
	write_some(40);
	start1();
	store_crash_at(w.store, nth, keep);
	for (uint64_t end = loop_clock_ns() + 20000 * MS;
	     loop_clock_ns() < end && !store_crashed(w.store) &&
	     (state_of(1) != RMR_MEMBER_NORMAL || dirty_on(w.srv1) || dirty_on(w.srv2));) {
		/* A write now and then, the clock moving: the member's return takes time. */
		if (w.inflight < 2)
			submit_write();
		loop_sim_run(MS);
	}
	write_some(0);
	if (!store_crashed(w.store))
		return false;
	stop1();
	read_disk(&d);
	/* A chunk member 1 lacks is on record: in its own map, or member 2's map for it. */
	for (uint64_t c = 0; c < NCHUNKS; c++)
		if (chunk_differs(&d, c) && !bit(d.own, c) && !mem_bit(1, c))
			ck_abort_msg("chunk %llu differs and no map on disk says so",
				     (unsigned long long)c);
	write_some(10);
	start1();
	check_converged("returner");
	return true;
}

static void run_case(const char *name, bool (*fn)(uint64_t, size_t), unsigned min_runs)
{
	const char *only = getenv("TORN_CASE"), *one = getenv("TORN_WRITE");
	uint64_t first = one ? strtoull(one, NULL, 0) : 1;
	unsigned runs = 0;

	if (only && strcmp(only, name))
		return;
	for (uint64_t nth = first;; nth++) {
		/* How much of the torn write lands cycles with its number. */
		size_t keeps[] = { 0, 512, 2048, 4096 - 512 };
		size_t keep = keeps[nth % 4];
		bool fired;

		fprintf(stderr, "torn %s: metadata write %llu keeps %zu bytes (replay: TORN_CASE=%s "
				"TORN_WRITE=%llu build/tests/test_sim_torn_meta)\n",
			name, (unsigned long long)nth, keep, name, (unsigned long long)nth);
		world_begin(nth);
		fired = fn(nth, keep);
		world_end();
		if (!fired || one)
			break;
		runs++;
	}
	/* The scenario must reach well into its metadata writes, or it proves little. */
	ck_assert_msg(one || runs >= min_runs, "%s: only %u metadata writes to tear", name, runs);
}

START_TEST(torn_survivor)
{
	run_case("survivor", survivor, 40);
}
END_TEST

START_TEST(torn_returner)
{
	run_case("returner", returner, 15);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sim_torn_meta");
	TCase *tc = tcase_create("torn");
	int ret;

	snprintf(base_dir, sizeof(base_dir), "%s/rmr-torn.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(base_dir)) {
		perror(base_dir);
		return 1;
	}
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, torn_survivor);
	tcase_add_test(tc, torn_returner);
	suite_add_tcase(s, tc);
	ret = unit_run(s);
	nftw(base_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
	return ret;
}
