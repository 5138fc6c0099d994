/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libbrmr's block client over two in-process members whose stores are sparse
 * temp files: requests are split at chunk boundaries and at the largest
 * request size, every op reaches the store as itself, offsets above 4 GiB
 * work, and bad requests are refused without a callback.
 */
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <rmr/brmr.h>

#define POOL_SIZE (16ull << 30) /* sparse: checks 64-bit offsets */
#define CHUNK (128u * 1024)
#define MAX_IO (64u * 1024)

struct filestore {
	int fd;
	atomic_int crossing;  /* requests that crossed a chunk boundary */
	atomic_int too_big;   /* data requests above MAX_IO */
	atomic_int flushes, trims, zeroes;
};

static void fs_io(void *arg, struct rmr_store_io *io)
{
	struct filestore *fs = arg;
	static const char zero[CHUNK];
	ssize_t n = 0;

	if (io->len && io->addr / CHUNK != (io->addr + io->len - 1) / CHUNK)
		atomic_fetch_add(&fs->crossing, 1);
	if (io->data_len > MAX_IO)
		atomic_fetch_add(&fs->too_big, 1);
	switch ((enum brmr_op)io->op) {
	case BRMR_OP_READ:
		n = pread(fs->fd, io->data, io->len, (off_t)io->addr);
		break;
	case BRMR_OP_WRITE:
		n = pwrite(fs->fd, io->data, io->len, (off_t)io->addr);
		break;
	case BRMR_OP_FLUSH:
		atomic_fetch_add(&fs->flushes, 1);
		n = fdatasync(fs->fd) == 0 ? 0 : -1;
		break;
	case BRMR_OP_TRIM:
	case BRMR_OP_WRITE_ZEROES:
		atomic_fetch_add(io->op == BRMR_OP_TRIM ? &fs->trims : &fs->zeroes, 1);
		n = pwrite(fs->fd, zero, io->len, (off_t)io->addr);
		break;
	}
	rmr_store_io_done(io, n < 0 ? -errno : 0);
}

static int fs_export(void *arg, uint64_t addr, void *buf, uint32_t len)
{
	struct filestore *fs = arg;

	return pread(fs->fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EIO;
}

static int fs_import(void *arg, uint64_t addr, const void *buf, uint32_t len)
{
	struct filestore *fs = arg;

	return pwrite(fs->fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EIO;
}

static const struct rmr_store_ops fs_ops = {
	.size = sizeof(struct rmr_store_ops),
	.io = fs_io,
	.chunk_export = fs_export,
	.chunk_import = fs_import,
};

static struct filestore stores[2];
static struct rmr_server *srvs[2];
static struct rmr_server_pool *pools[2];
static struct brmr_dev *dev;
static char names[2][32];
static const char *addrs[2];
static int round_no;

static void open_dev(unsigned queue_depth)
{
	struct rmr_client_opts co = { .size = sizeof(co), .pool_name = "blk", .transport = "mem",
				      .nmembers = 2, .members = addrs, .queue_depth = queue_depth,
				      .max_io_size = MAX_IO };

	ck_assert_int_eq(brmr_open(&co, &dev), 0);
}

static void setup(void)
{
	rmr_uuid uuid;

	rmr_log_set_sink(NULL, NULL, RMR_LOG_WARN);
	ck_assert_int_eq(rmr_uuid_generate(&uuid), 0);
	round_no++;
	for (int i = 0; i < 2; i++) {
		char path[] = "/tmp/brmr-split-XXXXXX";
		struct rmr_server_opts so = { .size = sizeof(so), .transport = "mem",
					      .max_io_size = MAX_IO };
		struct rmr_pool_params pp = { .size = sizeof(pp), .name = "blk", .uuid = uuid,
					      .pool_size = POOL_SIZE, .chunk_size = CHUNK,
					      .member_id = (uint16_t)(i + 1), .members_mask = 0x6 };

		memset(&stores[i], 0, sizeof(stores[i]));
		stores[i].fd = mkstemp(path);
		ck_assert_int_ge(stores[i].fd, 0);
		unlink(path);
		ck_assert_int_eq(ftruncate(stores[i].fd, (off_t)POOL_SIZE), 0);
		snprintf(names[i], sizeof(names[i]), "split%d-%d", round_no, i);
		so.listen_addr = names[i];
		ck_assert_int_eq(rmr_server_create(&so, &srvs[i]), 0);
		ck_assert_int_eq(rmr_server_add_pool(srvs[i], &pp, &fs_ops, &stores[i], &pools[i]), 0);
		addrs[i] = names[i];
	}
	open_dev(16);
}

static void teardown(void)
{
	brmr_close(dev);
	for (int i = 0; i < 2; i++) {
		rmr_server_remove_pool(pools[i]);
		rmr_server_destroy(srvs[i]);
		close(stores[i].fd);
	}
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int calls, status;
};

static void waiter_cb(void *priv, int status)
{
	struct waiter *w = priv;

	pthread_mutex_lock(&w->lock);
	w->calls++;
	w->status = status;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static int run(enum brmr_op op, unsigned flags, uint64_t off, uint64_t len,
	       const struct iovec *iov, unsigned iovcnt)
{
	struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	int ret = brmr_submit(dev, op, flags, off, len, iov, iovcnt, waiter_cb, &w);

	if (ret < 0) {
		ck_assert_int_eq(w.calls, 0);
		return ret;
	}
	pthread_mutex_lock(&w.lock);
	while (!w.calls)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	ck_assert_int_eq(w.calls, 1);
	return w.status;
}

static void pattern(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 13 + (i >> 11));
}

START_TEST(unaligned_request_is_split_and_reassembled)
{
	const uint64_t off = (5ull << 30) + 100000; /* above 4 GiB, not chunk aligned */
	const size_t len = 700000;
	uint8_t *src = malloc(len), *dst = malloc(len), *disk = malloc(len);
	struct iovec wv[3] = { { src, 1000 }, { src + 1000, 300000 }, { src + 301000, len - 301000 } };
	struct iovec rv[2] = { { dst, 4096 }, { dst + 4096, len - 4096 } };

	pattern(src, len, 3);
	ck_assert_int_eq(run(BRMR_OP_WRITE, BRMR_F_FUA, off, len, wv, 3), 0);
	ck_assert_int_eq(run(BRMR_OP_READ, 0, off, len, rv, 2), 0);
	ck_assert_mem_eq(src, dst, len);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(pread(stores[i].fd, disk, len, (off_t)off), (ssize_t)len);
		ck_assert_mem_eq(src, disk, len);
		ck_assert_int_eq(atomic_load(&stores[i].crossing), 0);
		ck_assert_int_eq(atomic_load(&stores[i].too_big), 0);
	}
	free(src);
	free(dst);
	free(disk);
}
END_TEST

START_TEST(trim_zeroes_and_flush_reach_the_stores)
{
	const uint64_t off = POOL_SIZE - 3 * CHUNK - 512;
	uint8_t *buf = malloc(3 * CHUNK), *back = malloc(3 * CHUNK);
	struct iovec v = { buf, 3 * CHUNK };

	memset(buf, 0x5a, 3 * CHUNK);
	ck_assert_int_eq(run(BRMR_OP_WRITE, 0, off, 3 * CHUNK, &v, 1), 0);
	ck_assert_int_eq(run(BRMR_OP_TRIM, 0, off + 512, CHUNK + 1024, NULL, 0), 0);
	ck_assert_int_eq(run(BRMR_OP_WRITE_ZEROES, 0, off + 2 * CHUNK, 4096, NULL, 0), 0);
	ck_assert_int_eq(run(BRMR_OP_FLUSH, 0, 0, 0, NULL, 0), 0);
	v.iov_base = back;
	ck_assert_int_eq(run(BRMR_OP_READ, 0, off, 3 * CHUNK, &v, 1), 0);
	for (size_t i = 0; i < 3 * CHUNK; i++) {
		bool zero = (i >= 512 && i < 512 + CHUNK + 1024) ||
			    (i >= 2 * CHUNK && i < 2 * CHUNK + 4096);

		ck_assert_uint_eq(back[i], zero ? 0 : 0x5a);
	}
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(atomic_load(&stores[i].flushes), 1);
		ck_assert_int_ge(atomic_load(&stores[i].trims), 2); /* spans a chunk boundary */
		ck_assert_int_eq(atomic_load(&stores[i].zeroes), 2); /* 512 bytes before a boundary */
		ck_assert_int_eq(atomic_load(&stores[i].crossing), 0);
	}
	free(buf);
	free(back);
}
END_TEST

/* Closing flushes every member: nothing stays only in their page caches. */
START_TEST(close_flushes_every_member)
{
	static uint8_t buf[4096];
	struct iovec v = { buf, sizeof(buf) };

	ck_assert_int_eq(run(BRMR_OP_WRITE, 0, CHUNK, sizeof(buf), &v, 1), 0);
	ck_assert_int_eq(atomic_load(&stores[0].flushes) + atomic_load(&stores[1].flushes), 0);
	brmr_close(dev);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(atomic_load(&stores[i].flushes), 1);
	open_dev(16);
}
END_TEST

START_TEST(bad_requests_are_refused)
{
	static uint8_t buf[4096];
	struct iovec v = { buf, sizeof(buf) };

	ck_assert_uint_eq(brmr_size(dev), POOL_SIZE);
	ck_assert_uint_eq(brmr_chunk_size(dev), CHUNK);
	ck_assert_int_eq(run(BRMR_OP_WRITE, 0, POOL_SIZE - 2048, 4096, &v, 1), -EINVAL);
	ck_assert_int_eq(run(BRMR_OP_READ, 0, UINT64_MAX - 100, 4096, &v, 1), -EINVAL);
	ck_assert_int_eq(run(BRMR_OP_WRITE, 0, 0, 8192, &v, 1), -EINVAL);
	ck_assert_int_eq(run(BRMR_OP_WRITE, 0x80, 0, 4096, &v, 1), -EINVAL);
	ck_assert_int_eq(run((enum brmr_op)42, 0, 0, 4096, &v, 1), -EINVAL);
	ck_assert_int_eq(run(BRMR_OP_FLUSH, 0, 4096, 0, NULL, 0), -EINVAL);
	ck_assert_int_eq(run(BRMR_OP_TRIM, 0, 0, 0, NULL, 0), -EINVAL);
	ck_assert_int_eq(run(BRMR_OP_READ, 0, 0, 0, NULL, 0), -EINVAL);
}
END_TEST

/*
 * Submissions from librmr's loop thread (a watched descriptor's callback):
 * a request of more pieces than the queue has slots goes out part by part
 * as pieces complete, a request behind it is refused with -EAGAIN (no
 * callback) until the rest went out, and both callbacks run once.
 */
#define ON_LOOP_BIG (32 * MAX_IO) /* 32 pieces, on 16 slots or 1 */

struct on_loop {
	int efd;
	uint8_t *big, *small;
	int big_ret, small_ret, small_retry_ret;
	struct waiter big_w, small_w;
};

static void submit_on_loop(void *priv)
{
	struct on_loop *t = priv;
	uint64_t v;
	struct iovec big = { t->big, ON_LOOP_BIG };
	struct iovec small = { t->small, 4096 };

	ck_assert_int_eq(read(t->efd, &v, sizeof(v)), (ssize_t)sizeof(v));
	ck_assert(rmr_client_on_loop_thread(brmr_client(dev)));
	t->big_ret = brmr_submit(dev, BRMR_OP_WRITE, 0, 3 * CHUNK, big.iov_len, &big, 1,
				 waiter_cb, &t->big_w);
	t->small_ret = brmr_submit(dev, BRMR_OP_WRITE, 0, 0, 4096, &small, 1, waiter_cb,
				   &t->small_w);
}

static void retry_on_loop(void *priv)
{
	struct on_loop *t = priv;
	uint64_t v;
	struct iovec small = { t->small, 4096 };

	ck_assert_int_eq(read(t->efd, &v, sizeof(v)), (ssize_t)sizeof(v));
	t->small_retry_ret = brmr_submit(dev, BRMR_OP_WRITE, 0, 0, 4096, &small, 1, waiter_cb,
					 &t->small_w);
}

static void wait_calls(struct waiter *w)
{
	pthread_mutex_lock(&w->lock);
	while (!w->calls)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

static void on_loop_init(struct on_loop *t, unsigned seed)
{
	*t = (struct on_loop){
		.big_w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 },
		.small_w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 },
		.small_retry_ret = 1,
	};
	t->big = malloc(ON_LOOP_BIG);
	t->small = malloc(4096);
	ck_assert(t->big && t->small);
	pattern(t->big, ON_LOOP_BIG, seed);
	pattern(t->small, 4096, seed + 4);
	t->efd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_ge(t->efd, 0);
}

/* Run @p fn on the loop thread, then wait for @p w's callback. */
static void on_loop_run(struct on_loop *t, void (*fn)(void *priv), struct waiter *w)
{
	uint64_t one = 1;

	ck_assert_int_eq(rmr_client_watch_fd(brmr_client(dev), t->efd, fn, t), 0);
	ck_assert_int_eq(write(t->efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	wait_calls(w);
	ck_assert_int_eq(rmr_client_unwatch_fd(brmr_client(dev), t->efd), 0);
}

/* The big write reads back as written. */
static void on_loop_check_big(struct on_loop *t)
{
	uint8_t *back = malloc(ON_LOOP_BIG);
	struct iovec v = { back, ON_LOOP_BIG };

	ck_assert_int_eq(run(BRMR_OP_READ, 0, 3 * CHUNK, ON_LOOP_BIG, &v, 1), 0);
	ck_assert_mem_eq(back, t->big, ON_LOOP_BIG);
	free(back);
}

static void on_loop_free(struct on_loop *t)
{
	close(t->efd);
	free(t->big);
	free(t->small);
}

START_TEST(loop_thread_submission_never_waits)
{
	struct on_loop t;
	uint8_t back[4096];
	struct iovec v = { back, sizeof(back) };

	ck_assert(!rmr_client_on_loop_thread(brmr_client(dev)));
	on_loop_init(&t, 7);
	on_loop_run(&t, submit_on_loop, &t.big_w);
	ck_assert_int_eq(t.big_ret, 0);
	ck_assert_int_eq(t.big_w.status, 0);
	ck_assert_int_eq(t.small_ret, -EAGAIN); /* the big one's rest went first */

	/* Now there is room: the small one goes through from the loop too. */
	on_loop_run(&t, retry_on_loop, &t.small_w);
	ck_assert_int_eq(t.small_retry_ret, 0);
	ck_assert_int_eq(t.small_w.status, 0);
	ck_assert_int_eq(t.big_w.calls, 1);
	ck_assert_int_eq(t.small_w.calls, 1);

	on_loop_check_big(&t);
	ck_assert_int_eq(run(BRMR_OP_READ, 0, 0, 4096, &v, 1), 0);
	ck_assert_mem_eq(back, t.small, 4096);
	on_loop_free(&t);
}
END_TEST

/* With one slot, each piece's completion must find its own slot free. */
START_TEST(loop_thread_submission_with_one_slot)
{
	struct on_loop t;

	brmr_close(dev);
	open_dev(1);
	on_loop_init(&t, 5);
	on_loop_run(&t, submit_on_loop, &t.big_w);
	ck_assert_int_eq(t.big_ret, 0);
	ck_assert_int_eq(t.big_w.status, 0);
	ck_assert_int_eq(t.small_ret, -EAGAIN);
	on_loop_check_big(&t);
	on_loop_free(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("block_split");
	TCase *tc = tcase_create("block");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, unaligned_request_is_split_and_reassembled);
	tcase_add_test(tc, trim_zeroes_and_flush_reach_the_stores);
	tcase_add_test(tc, close_flushes_every_member);
	tcase_add_test(tc, bad_requests_are_refused);
	tcase_add_test(tc, loop_thread_submission_never_waits);
	tcase_add_test(tc, loop_thread_submission_with_one_slot);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
