/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * An in-memory store for tests that serve pools over the in-process
 * transport: data, metadata blob and dirty-map area in memory, and a switch
 * that makes every data request and chunk copy fail with EIO (the dirty-map
 * area keeps working, as on a real store whose data path broke). Two more
 * for races: @hold parks data writes (applied and completed by
 * memstore_release), @map_write_fails fails that many dirty-map writes, and
 * @map_tear_blocks tears the next multi-block one. A read with opcode
 * MEMSTORE_OP_REVERSE answers with its argument reversed (a short read), as
 * a key-value consumer answers a lookup. Flushes are counted, can be
 * held (@flush_hold) as a slow disk holds them, and can fail once each
 * (@flush_fails) as a file reports a lost write-back. A volatile store
 * (memstore_make_volatile) keeps what a disk would hold apart: a flush, or
 * a write-like request with opcode MEMSTORE_OP_FLUSH, makes the data
 * durable, and memstore_power_loss() goes back to that, as a host that
 * lost power comes back with what its disk held.
 */
#ifndef RMR_TESTS_MEMSTORE_H
#define RMR_TESTS_MEMSTORE_H

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rmr/server.h>

#include "unit.h"

#define MEMSTORE_OP_REVERSE 7
#define MEMSTORE_OP_FLUSH 8

struct memstore {
	uint8_t *data;
	uint64_t size;
	uint8_t *durable;            /* volatile store: the data as of the last flush */
	atomic_bool fail;
	pthread_mutex_t lock;
	uint8_t meta[8192];          /* room for librmr's blob: header and a full membership */
	size_t meta_len;
	uint8_t *map;                /* the dirty-map area */
	uint64_t map_size;
	bool hold;                   /* park data writes until memstore_release */
	struct rmr_store_io *held[64];
	unsigned nheld;
	unsigned map_write_fails;    /* fail the next this many map writes */
	unsigned map_tear_blocks;    /* the next map write of more blocks: only these land, then -EIO */
	atomic_uint flushes;         /* flush calls that succeeded */
	atomic_bool flush_hold;      /* a flush waits while this is set... */
	atomic_uint flush_pass;      /* ...or until it takes one of these */
	atomic_uint flush_fails;     /* fail the next this many flushes (a lost write-back) */
	atomic_bool lost;            /* health: the store may have lost data (-EIO) */
	uint64_t boot;               /* its host's boot (rmr_pool_params.boot_id): a power loss ends it */
};

static inline void memstore_init(struct memstore *st, uint64_t pool_size, uint32_t chunk_size)
{
	memset(st, 0, sizeof(*st));
	st->data = calloc(1, pool_size);
	st->size = pool_size;
	st->map_size = rmr_server_map_area_size(pool_size, chunk_size);
	st->map = calloc(1, st->map_size);
	ck_assert(st->data && st->map);
	pthread_mutex_init(&st->lock, NULL);
	st->boot = 1;
}

/* Put @st on host number @host: boots of other hosts never equal its own. */
static inline void memstore_set_host(struct memstore *st, unsigned host)
{
	st->boot = (uint64_t)host << 32 | 1;
}

static inline void memstore_destroy(struct memstore *st)
{
	free(st->data);
	free(st->durable);
	free(st->map);
	pthread_mutex_destroy(&st->lock);
}

/*
 * A patch (RMR_IO_PATCH) here is a list of records, each le32 offset in the
 * range, le32 length, then that many bytes to put there.
 */
static int memstore_patch(struct memstore *st, const struct rmr_store_io *io)
{
	const uint8_t *p = io->data, *end = p + io->data_len;

	while (p < end) {
		uint32_t off, len;

		if (end - p < 8)
			return -EINVAL;
		memcpy(&off, p, 4);
		memcpy(&len, p + 4, 4);
		off = le32toh(off);
		len = le32toh(len);
		p += 8;
		if (len > (size_t)(end - p) || off > io->len || len > io->len - off)
			return -EINVAL;
		memcpy(st->data + io->addr + off, p, len);
		p += len;
	}
	return 0;
}

static void memstore_apply(struct memstore *st, struct rmr_store_io *io)
{
	int ret = 0;

	if (io->kind == RMR_IO_READ && io->op == MEMSTORE_OP_REVERSE) {
		const uint8_t *arg = io->arg;
		uint8_t *out = io->data;

		if (!io->arg_len || io->arg_len > io->len) {
			rmr_store_io_done(io, -EINVAL);
			return;
		}
		for (uint32_t i = 0; i < io->arg_len; i++)
			out[i] = arg[io->arg_len - 1 - i];
		rmr_store_io_done(io, (int)io->arg_len);
		return;
	}
	pthread_mutex_lock(&st->lock);
	if (io->kind == RMR_IO_WRITE && io->op == MEMSTORE_OP_FLUSH && !io->len) {
		if (st->durable)
			memcpy(st->durable, st->data, st->size);
	} else if (io->kind == RMR_IO_READ)
		memcpy(io->data, st->data + io->addr, io->len);
	else if (io->flags & RMR_IO_PATCH)
		ret = memstore_patch(st, io);
	else if (io->data_len)
		memcpy(st->data + io->addr, io->data, io->len);
	else if (io->len)
		memset(st->data + io->addr, 0, io->len);
	pthread_mutex_unlock(&st->lock);
	rmr_store_io_done(io, ret);
}

static void memstore_io(void *arg, struct rmr_store_io *io)
{
	struct memstore *st = arg;

	if (atomic_load(&st->fail)) {
		rmr_store_io_done(io, -EIO);
		return;
	}
	if (st->hold && io->kind != RMR_IO_READ) {
		ck_assert_uint_lt(st->nheld, sizeof(st->held) / sizeof(st->held[0]));
		st->held[st->nheld++] = io;
		return;
	}
	memstore_apply(st, io);
}

/* Stop parking writes; apply and complete the parked ones, oldest first. */
static inline void memstore_release(struct memstore *st)
{
	st->hold = false;
	for (unsigned i = 0; i < st->nheld; i++)
		memstore_apply(st, st->held[i]);
	st->nheld = 0;
}

/* The same, newest first: a store that reorders what it was given at once. */
static inline void memstore_release_reversed(struct memstore *st)
{
	st->hold = false;
	while (st->nheld)
		memstore_apply(st, st->held[--st->nheld]);
}

static int memstore_export(void *arg, uint64_t addr, void *buf, uint32_t len)
{
	struct memstore *st = arg;

	if (atomic_load(&st->fail))
		return -EIO;
	pthread_mutex_lock(&st->lock);
	memcpy(buf, st->data + addr, len);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

static int memstore_import(void *arg, uint64_t addr, const void *buf, uint32_t len)
{
	struct memstore *st = arg;

	if (atomic_load(&st->fail))
		return -EIO;
	pthread_mutex_lock(&st->lock);
	memcpy(st->data + addr, buf, len);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

/*
 * A flush makes a volatile store's data durable, and counts (and fails with
 * the data path); @flush_hold makes it as slow as a busy disk's.
 */
static int memstore_flush(void *arg)
{
	struct memstore *st = arg;

	while (atomic_load(&st->flush_hold)) {
		unsigned pass = atomic_load(&st->flush_pass);

		if (pass && atomic_compare_exchange_weak(&st->flush_pass, &pass, pass - 1))
			break;
		usleep(1000);
	}
	if (atomic_load(&st->fail))
		return -EIO;
	for (unsigned n = atomic_load(&st->flush_fails); n;)
		if (atomic_compare_exchange_weak(&st->flush_fails, &n, n - 1))
			return -EIO; /* reported once, as a file reports it */
	pthread_mutex_lock(&st->lock);
	if (st->durable)
		memcpy(st->durable, st->data, st->size);
	pthread_mutex_unlock(&st->lock);
	atomic_fetch_add(&st->flushes, 1);
	return 0;
}

/* From now on writes are durable only once flushed. */
static inline void memstore_make_volatile(struct memstore *st)
{
	st->durable = malloc(st->size);
	ck_assert_ptr_nonnull(st->durable);
	memcpy(st->durable, st->data, st->size);
}

/* The host lost power: what no flush covered is gone. */
static inline void memstore_power_loss(struct memstore *st)
{
	pthread_mutex_lock(&st->lock);
	memcpy(st->data, st->durable, st->size);
	st->boot++;
	pthread_mutex_unlock(&st->lock);
}

static int memstore_meta_load(void *arg, void *buf, size_t cap, size_t *len)
{
	struct memstore *st = arg;

	*len = st->meta_len < cap ? st->meta_len : cap;
	memcpy(buf, st->meta, *len);
	return 0;
}

static int memstore_meta_save(void *arg, const void *buf, size_t len)
{
	struct memstore *st = arg;

	if (len > sizeof(st->meta))
		return -ENOSPC;
	memcpy(st->meta, buf, len);
	st->meta_len = len;
	return 0;
}

static int memstore_map_read(void *arg, uint64_t off, void *buf, size_t len)
{
	struct memstore *st = arg;

	expect(off + len <= st->map_size);
	memcpy(buf, st->map + off, len);
	return 0;
}

static int memstore_map_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct memstore *st = arg;

	/* librmr's promise: whole aligned 4 KiB blocks, inside the area. */
	expect(off % 4096 == 0 && len % 4096 == 0 && off + len <= st->map_size);
	if (st->map_write_fails) {
		st->map_write_fails--;
		return -EIO;
	}
	if (st->map_tear_blocks && len > st->map_tear_blocks * 4096ull) {
		/* A crash in the middle: the first blocks are new, the rest old. */
		memcpy(st->map + off, buf, st->map_tear_blocks * 4096ull);
		st->map_tear_blocks = 0;
		return -EIO;
	}
	memcpy(st->map + off, buf, len);
	return 0;
}

static int memstore_health(void *arg)
{
	struct memstore *st = arg;

	return atomic_load(&st->lost) ? -EIO : 0;
}

static const struct rmr_store_ops memstore_ops = {
	.size = sizeof(struct rmr_store_ops),
	.io = memstore_io,
	.chunk_export = memstore_export,
	.chunk_import = memstore_import,
	.meta_load = memstore_meta_load,
	.meta_save = memstore_meta_save,
	.flush = memstore_flush,
	.map_read = memstore_map_read,
	.map_write = memstore_map_write,
	.health = memstore_health,
};

#endif
