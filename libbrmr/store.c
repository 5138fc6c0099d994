/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A member's backing store: a regular file (sparse) or a block device with a
 * brmr superblock, a metadata area and the pool's data. This file formats
 * and opens stores and implements the rmr store callbacks on them.
 *
 * Plain writes and the reads the page cache holds run on librmr's event
 * loop; reads that would wait for the disk, flushes, FUA writes, trims and
 * zeroing run on a few worker threads: a disk read stalls for a seek and an
 * fdatasync can take longer than the heartbeat timeout, and the loop must
 * keep serving other requests and answering heartbeats meanwhile. A store on
 * tmpfs is served through a mapping of its data area (store_mem.h), and all
 * of its requests run on the loop. The client never has two overlapping
 * writes in flight, so requests may complete in any order. A failed
 * write-back marks the store's data lost for good (store_data_lost).
 */
#include "brmr_internal.h"
#include "crc32c.h"
#include "store.h"
#include "store_mem.h"
#include <rmr/brmr.h>
#include "superblock.h"


#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define STORE_WORKERS 4
/* Requests queued for the workers; beyond it a request runs inline. */
#define STORE_QUEUE_LEN 1024
/* Bytes at the start of a target that must be zero to format it without force. */
#define FORMAT_BLANK_CHECK (1u << 20)

struct brmr_store {
	int fd;
	bool read_only;       /* opened O_RDONLY: can be inspected, not served */
	bool locked;          /* holds the exclusive flock of a served store */
	uint64_t dev_size;
	struct superblock sb;
	atomic_bool fail_io;  /* brmr_store_inject_fault() */
	store_done_fn done;
	bool no_nowait;       /* reads cannot ask the page cache alone (RWF_NOWAIT) */
	unsigned sb_slot;     /* the superblock slot that holds the newest copy */
	atomic_bool data_lost; /* a write-back failed (SB_F_DATA_LOST): every request fails */
	atomic_int fail_next_sync; /* store_fail_next_sync(): errno for the next sync */
	atomic_uint_fast64_t worker_reads; /* reads the page cache did not hold */

	/* Crash drill (store_crash_at): the metadata write that tears, and after it nothing. */
	uint64_t meta_writes; /* metadata writes so far (loop thread) */
	uint64_t crash_at;    /* tear the metadata write with this number; 0 = never */
	size_t crash_keep;    /* bytes of it that land */
	atomic_bool crashed;  /* every write fails from then on */

	struct store_mem mem;  /* on tmpfs: the data area mapped (store_map_memory) */

	pthread_mutex_t meta_lock;
	bool meta_known;      /* meta_seq is valid */
	uint64_t meta_seq;    /* sequence of the newest valid blob, 0 if none */

	pthread_mutex_t q_lock;
	pthread_cond_t q_cond;
	struct rmr_store_io *q_ring[STORE_QUEUE_LEN];
	unsigned q_head, q_count;
	bool q_stop;
	unsigned nworkers;
	pthread_t workers[STORE_WORKERS];
};


/* --- plain I/O helpers ------------------------------------------------------ */

/* Size of a regular file or block device; -ENODEV for anything else. */
static int fd_size(int fd, bool *blkdev, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	*blkdev = S_ISBLK(st.st_mode);
	if (*blkdev)
		return ioctl(fd, BLKGETSIZE64, size) < 0 ? -errno : 0;
	if (!S_ISREG(st.st_mode))
		return -ENODEV;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* Read exactly @p len bytes; a read that ends early (store shrunk) is -EIO. */
static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

/*
 * Write exactly @p len bytes. With @p dsync the data is durable on return:
 * RWF_DSYNC where the kernel has it (one round trip), else fdatasync after.
 */
static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off, bool dsync)
{
	static atomic_bool no_rwf_dsync;
	bool use_rwf = dsync && !atomic_load(&no_rwf_dsync);
	size_t done = 0;

	while (done < len) {
		struct iovec iov = { (char *)buf + done, len - done };
		ssize_t n = use_rwf ? pwritev2(fd, &iov, 1, (off_t)(off + done), RWF_DSYNC)
				    : pwrite(fd, iov.iov_base, iov.iov_len, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && use_rwf && (errno == EOPNOTSUPP || errno == ENOSYS)) {
			atomic_store(&no_rwf_dsync, true);
			use_rwf = false;
			continue;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	if (dsync && !use_rwf && fdatasync(fd) < 0)
		return -errno;
	return 0;
}

static bool fallocate_unsupported(int err)
{
	/* EINVAL: the file system or device cannot do it for this range. */
	return err == EOPNOTSUPP || err == ENOSYS || err == EINVAL;
}

/* Write zeroes over [off, off + len), plainly: works on anything. */
static int write_zeroes(int fd, uint64_t off, uint64_t len)
{
	static const uint8_t zeroes[64 * 1024];

	while (len) {
		size_t n = len < sizeof(zeroes) ? (size_t)len : sizeof(zeroes);
		int ret = pwrite_full(fd, zeroes, n, off, false);

		if (ret < 0)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

/*
 * Make [off, off + len) read as zeroes. @p punch (TRIM) prefers releasing the
 * space; otherwise (WRITE_ZEROES) keep it allocated where the system can.
 * Falls back to writing zeroes, so it works on any file system and device.
 */
static int zero_range(int fd, uint64_t off, uint64_t len, bool punch)
{
	if (!punch) {
		if (fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			      (off_t)len) == 0)
			return 0;
		if (!fallocate_unsupported(errno))
			return -errno;
	}
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
		      (off_t)len) < 0)
		return fallocate_unsupported(errno) ? write_zeroes(fd, off, len) : -errno;
	/*
	 * Zeroes that must stay allocated (tmpfs has no ZERO_RANGE): allocate
	 * the hole again, so that a later write there cannot fail for space
	 * (NBD's NO_HOLE; ENOSPC is told, the range reads as zeroes either way).
	 */
	if (!punch && fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
		return fallocate_unsupported(errno) ? write_zeroes(fd, off, len) : -errno;
	return 0;
}

/* --- write-back failures ------------------------------------------------------------ */

/*
 * A write-back failed: pages the store acknowledged may never reach the
 * disk, and Linux reports that once (to one fdatasync) and marks them clean,
 * so a later flush passes and a read after eviction returns the old bytes.
 * From now on every request fails and the member refuses clients
 * (store_health), and the superblock says so (best effort: the disk is
 * failing), so that a restarted server refuses the store too.
 */
static void store_data_lost(struct brmr_store *s)
{
	struct superblock sb = s->sb;
	struct sb_disk d;
	unsigned slot = s->sb_slot ^ 1u;

	if (atomic_exchange(&s->data_lost, true))
		return;
	sb.flags |= SB_F_DATA_LOST;
	sb.sequence++;
	superblock_encode(&sb, &d);
	if (pwrite_full(s->fd, &d, sizeof(d), (uint64_t)slot * SB_SLOT_SIZE, true) == 0)
		s->sb_slot = slot;
}

/*
 * Write @p buf at @p off durably: first a plain write (its failure, say
 * ENOSPC into a hole, loses nothing: the write is refused), then the same
 * bytes again synchronously (RWF_DSYNC: that range alone), whose failure is
 * a write-back failure, which may be of any part of the file.
 */
static int write_durable(struct brmr_store *s, const void *buf, size_t len, uint64_t off)
{
	int ret = pwrite_full(s->fd, buf, len, off, false);
	int err;

	if (ret < 0)
		return ret;
	err = atomic_exchange(&s->fail_next_sync, 0);
	ret = err ? -err : pwrite_full(s->fd, buf, len, off, true);
	if (ret < 0)
		store_data_lost(s);
	return ret;
}

/* fdatasync, and a failure marks the store's data lost. @return 0 or -errno. */
static int store_sync(struct brmr_store *s)
{
	int err = atomic_exchange(&s->fail_next_sync, 0);

	if (!err && fdatasync(s->fd) < 0)
		err = errno;
	if (!err)
		return 0;
	store_data_lost(s);
	return -err;
}

/*
 * Write a piece of metadata (a dirty-map block, a metadata blob). Under a
 * crash drill the chosen one lands only in part, as if power failed in the
 * middle of it, and nothing written after it lands at all.
 */
static int meta_pwrite(struct brmr_store *s, const void *buf, size_t len, uint64_t off,
		       bool dsync)
{
	if (atomic_load(&s->crashed))
		return -EIO;
	if (s->crash_at && ++s->meta_writes == s->crash_at) {
		size_t keep = s->crash_keep < len ? s->crash_keep : len;

		if (keep)
			pwrite_full(s->fd, buf, keep, off, true);
		atomic_store(&s->crashed, true);
		return -EIO;
	}
	if (!s->crash_at)
		s->meta_writes++;
	return dsync ? write_durable(s, buf, len, off) : pwrite_full(s->fd, buf, len, off, false);
}

/* --- data requests ----------------------------------------------------------- */

/* Read pool bytes [@p addr, + @p len): through the map where it serves them. */
static int data_read(struct brmr_store *s, uint64_t addr, void *buf, size_t len)
{
	if (store_mem_read(&s->mem, addr, buf, len))
		return 0;
	return pread_full(s->fd, buf, len, s->sb.data_offset + addr);
}

/* Write pool bytes: through the map, or a pwrite that may let the map serve them next time. */
static int data_write(struct brmr_store *s, uint64_t addr, const void *buf, size_t len, bool fua)
{
	int ret;

	/* A mapped store is on tmpfs: there is nothing to make durable for FUA. */
	if (store_mem_write(&s->mem, addr, buf, len))
		return 0;
	ret = fua ? write_durable(s, buf, len, s->sb.data_offset + addr)
		  : pwrite_full(s->fd, buf, len, s->sb.data_offset + addr, false);
	if (ret == 0)
		store_mem_written(&s->mem, addr, len);
	return ret;
}

/* Whether a request is well formed and the store can take it: 0 or -errno.
 * The server checked it too, but the store checks again: it is the last line
 * before the disk. */
static int store_check_io(const struct brmr_store *s, const struct rmr_store_io *io)
{
	bool data_op = io->op == BRMR_OP_READ || io->op == BRMR_OP_WRITE;

	if (io->op_flags & ~(uint32_t)BRMR_F_FUA)
		return -EINVAL;
	if ((io->kind == RMR_IO_READ) != (io->op == BRMR_OP_READ))
		return -EINVAL;
	if (io->op == BRMR_OP_FLUSH) {
		if (io->addr || io->len)
			return -EINVAL;
	} else if (!io->len || io->addr > s->sb.pool_size ||
		   io->len > s->sb.pool_size - io->addr) {
		return -EINVAL;
	}
	if (data_op ? (!io->data || io->data_len != io->len) : io->data_len != 0)
		return -EINVAL;
	if (atomic_load(&s->fail_io) || atomic_load(&s->crashed) || atomic_load(&s->data_lost))
		return -EIO;
	return 0;
}

/* Apply one request; returns its status. */
static int store_do_io(struct brmr_store *s, const struct rmr_store_io *io)
{
	bool fua = io->op_flags & BRMR_F_FUA;
	uint64_t off = s->sb.data_offset + io->addr;
	int ret = store_check_io(s, io);

	if (ret < 0)
		return ret;
	switch (io->op) {
	case BRMR_OP_READ:
		return data_read(s, io->addr, io->data, io->len);
	case BRMR_OP_WRITE:
		return data_write(s, io->addr, io->data, io->len, fua);
	case BRMR_OP_FLUSH:
		return store_sync(s);
	case BRMR_OP_TRIM:
	case BRMR_OP_WRITE_ZEROES:
		store_mem_forget(&s->mem, io->addr, io->len);
		ret = zero_range(s->fd, off, io->len, io->op == BRMR_OP_TRIM);
		if (ret == 0 && fua)
			ret = store_sync(s);
		return ret;
	default:
		return -EOPNOTSUPP;
	}
}

static void *store_worker(void *arg)
{
	struct brmr_store *s = arg;

	pthread_mutex_lock(&s->q_lock);
	for (;;) {
		struct rmr_store_io *io;

		while (!s->q_count && !s->q_stop)
			pthread_cond_wait(&s->q_cond, &s->q_lock);
		if (!s->q_count)
			break; /* stopping and drained */
		io = s->q_ring[s->q_head];
		s->q_head = (s->q_head + 1) % STORE_QUEUE_LEN;
		s->q_count--;
		pthread_mutex_unlock(&s->q_lock);
		if (io->op == BRMR_OP_READ)
			atomic_fetch_add(&s->worker_reads, 1);
		s->done(io, store_do_io(s, io));
		pthread_mutex_lock(&s->q_lock);
	}
	pthread_mutex_unlock(&s->q_lock);
	return NULL;
}

int store_workers_start(struct brmr_store *s)
{
	if (s->nworkers)
		return 0;
	s->q_stop = false;
	for (unsigned i = 0; i < STORE_WORKERS; i++) {
		int ret = pthread_create(&s->workers[i], NULL, store_worker, s);

		if (ret) {
			if (i == 0)
				return -ret;
			break; /* fewer workers still work */
		}
		s->nworkers++;
	}
	return 0;
}

static void store_workers_stop(struct brmr_store *s)
{
	pthread_mutex_lock(&s->q_lock);
	s->q_stop = true;
	pthread_cond_broadcast(&s->q_cond);
	pthread_mutex_unlock(&s->q_lock);
	for (unsigned i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	s->nworkers = 0;
}

/*
 * Serve a read from the page cache alone, here and now; false (nothing done)
 * if part of it is not there, for a worker to read from the disk. The
 * attempt also starts the kernel's read-ahead of what is missing.
 */
static bool read_from_cache(struct brmr_store *s, struct rmr_store_io *io)
{
	struct iovec iov = { io->data, io->len };
	int ret = store_check_io(s, io);
	ssize_t n;

	if (ret < 0) {
		s->done(io, ret);
		return true;
	}
	do {
		n = preadv2(s->fd, &iov, 1, (off_t)(s->sb.data_offset + io->addr), RWF_NOWAIT);
	} while (n < 0 && errno == EINTR);
	if (n == (ssize_t)io->len) {
		s->done(io, 0);
		return true;
	}
	/* Short (partly cached, or past a shrunk end: the worker tells) or not cached. */
	if (n >= 0 || errno == EAGAIN)
		return false;
	if (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS) {
		s->no_nowait = true; /* an old kernel or a file system without it */
		return false;
	}
	s->done(io, -errno);
	return true;
}

static void store_io(void *store, struct rmr_store_io *io)
{
	struct brmr_store *s = store;
	bool plain = !(io->op_flags & BRMR_F_FUA);

	/*
	 * Plain writes go to the page cache and come back in microseconds: run
	 * them right here, which saves two thread hand-offs per request (+40%
	 * IOPS at QD32 on tmpfs); so do the reads the page cache holds. What can
	 * block for long (a read from the disk, flush, FUA, trim, zeroing) goes
	 * to the workers, so that one disk access does not hold up every other
	 * request and the heartbeats; on a mapped store (tmpfs) nothing does,
	 * and everything stays here, where no trim can punch a hole under a
	 * copy through the map.
	 */
	if (store_mem_mapped(&s->mem) || (io->op == BRMR_OP_WRITE && plain) ||
	    (io->op == BRMR_OP_READ && plain && (s->no_nowait || !s->nworkers))) {
		s->done(io, store_do_io(s, io));
		return;
	}
	if (io->op == BRMR_OP_READ && plain && read_from_cache(s, io))
		return;
	pthread_mutex_lock(&s->q_lock);
	if (s->nworkers && !s->q_stop && s->q_count < STORE_QUEUE_LEN) {
		s->q_ring[(s->q_head + s->q_count) % STORE_QUEUE_LEN] = io;
		s->q_count++;
		pthread_cond_signal(&s->q_cond);
		pthread_mutex_unlock(&s->q_lock);
		return;
	}
	pthread_mutex_unlock(&s->q_lock);
	/* No workers (tests) or the queue is full: slower, still correct. */
	s->done(io, store_do_io(s, io));
}

/* --- resync and metadata callbacks --------------------------------------------- */

/*
 * Store offset of the pool bytes [@p addr, @p addr + @p len) that a resync
 * moves: at least one byte, inside the pool and inside one chunk.
 */
static int chunk_range(const struct brmr_store *s, uint64_t addr, uint32_t len,
		       uint64_t *off)
{
	if (!len || addr >= s->sb.pool_size || len > s->sb.pool_size - addr)
		return -EINVAL;
	if (addr / s->sb.chunk_size != (addr + len - 1) / s->sb.chunk_size)
		return -EINVAL;
	*off = s->sb.data_offset + addr;
	return 0;
}

static int store_chunk_export(void *store, uint64_t addr, void *buf, uint32_t len)
{
	struct brmr_store *s = store;
	uint64_t off;
	int ret = chunk_range(s, addr, len, &off);

	if (ret < 0 || !buf)
		return ret < 0 ? ret : -EINVAL;
	if (atomic_load(&s->fail_io) || atomic_load(&s->data_lost))
		return -EIO;
	return data_read(s, addr, buf, len);
}

/* Through the page cache: librmr flushes before it records the range clean. */
static int store_chunk_import(void *store, uint64_t addr, const void *buf, uint32_t len)
{
	struct brmr_store *s = store;
	uint64_t off;
	int ret = chunk_range(s, addr, len, &off);

	if (ret < 0 || !buf)
		return ret < 0 ? ret : -EINVAL;
	if (atomic_load(&s->fail_io) || atomic_load(&s->crashed) || atomic_load(&s->data_lost))
		return -EIO;
	return data_write(s, addr, buf, len, false);
}

/* Store offset of [@p off, @p off + @p len) of the dirty-map area. */
static int map_range(const struct brmr_store *s, uint64_t off, size_t len, uint64_t *pos)
{
	if (!len || off > s->sb.map_size || len > s->sb.map_size - off)
		return -EINVAL;
	*pos = s->sb.map_offset + off;
	return 0;
}

/*
 * The dirty-map area is bookkeeping, not data: fault injection leaves it
 * alone, so a drill that fails data I/O can still record who missed what.
 */
static int store_map_read(void *store, uint64_t off, void *buf, size_t len)
{
	struct brmr_store *s = store;
	uint64_t pos;
	int ret = map_range(s, off, len, &pos);

	if (ret < 0 || !buf)
		return ret < 0 ? ret : -EINVAL;
	return pread_full(s->fd, buf, len, pos);
}

/* Durable on return: a mark must be on disk before the write that needed it is acknowledged. */
static int store_map_write(void *store, uint64_t off, const void *buf, size_t len)
{
	struct brmr_store *s = store;
	uint64_t pos;
	int ret = map_range(s, off, len, &pos);

	if (ret < 0 || !buf || off % SB_MAP_ALIGN || len % SB_MAP_ALIGN)
		return ret < 0 ? ret : -EINVAL;
	return meta_pwrite(s, buf, len, pos, true);
}

/*
 * Find the newest valid metadata blob. On success sets @p idx (or -1 if
 * there is none) and @p seq, @p len of it. A slot is valid when its header
 * checks and the crc over header and blob matches; a torn save fails the crc
 * and the other slot, holding the previous blob, wins.
 */
static int meta_scan(struct brmr_store *s, int *idx, uint64_t *seq, uint64_t *len)
{
	struct meta_hdr_disk h[2];
	bool present[2] = { false, false };
	uint64_t sq[2], ln[2];
	bool valid[2] = { false, false };
	char why[160];

	*idx = -1;
	*seq = 0;
	*len = 0;
	for (unsigned i = 0; i < 2; i++) {
		void *blob;
		int ret = pread_full(s->fd, &h[i], sizeof(h[i]), meta_slot_offset(&s->sb, i));

		if (ret < 0)
			return ret;
		ret = meta_hdr_decode(&s->sb, i, &h[i], &sq[i], &ln[i], why, sizeof(why));
		present[i] = ret != -ENODATA;
		if (ret < 0)
			continue;
		blob = malloc(ln[i] ? ln[i] : 1);
		if (!blob)
			return -ENOMEM;
		ret = pread_full(s->fd, blob, ln[i], meta_slot_offset(&s->sb, i) + META_HDR_SIZE);
		valid[i] = ret == 0 && meta_hdr_crc_ok(&h[i], blob);
		free(blob);
		if (ret < 0)
			return ret;
	}
	for (unsigned i = 0; i < 2; i++)
		if (valid[i] && (*idx < 0 || sq[i] > *seq)) {
			*idx = (int)i;
			*seq = sq[i];
			*len = ln[i];
		}
	if (*idx >= 0)
		return 0;
	/*
	 * Nothing valid. That is a fresh store if nothing was ever written, or
	 * if the only header is the very first save (sequence 1, slot 1), torn.
	 * Anything else means a blob that was durably saved is now unreadable:
	 * refuse rather than start with forgotten state.
	 */
	if (!present[0] && (!present[1] || (sb_le64_to_cpu(h[1].sequence) == 1 &&
					    !memcmp(h[1].magic, META_MAGIC, 8))))
		return 0;
	return -EBADMSG;
}

static int store_meta_load(void *store, void *buf, size_t cap, size_t *len)
{
	struct brmr_store *s = store;
	uint64_t seq, l;
	int idx, ret;

	pthread_mutex_lock(&s->meta_lock);
	ret = meta_scan(s, &idx, &seq, &l);
	if (ret == 0 && idx >= 0 && l > cap)
		ret = -EOVERFLOW;
	if (ret == 0 && idx >= 0)
		ret = pread_full(s->fd, buf, l, meta_slot_offset(&s->sb, (unsigned)idx) +
					      META_HDR_SIZE);
	if (ret == 0) {
		*len = idx >= 0 ? l : 0;
		s->meta_seq = seq;
		s->meta_known = true;
	}
	pthread_mutex_unlock(&s->meta_lock);
	return ret;
}

static int store_meta_save(void *store, const void *buf, size_t len)
{
	struct brmr_store *s = store;
	uint64_t seq, l;
	uint8_t *rec;
	int idx, ret = 0;

	if (len > meta_slot_capacity(&s->sb))
		return -E2BIG;
	if (len && !buf)
		return -EINVAL;
	pthread_mutex_lock(&s->meta_lock);
	if (!s->meta_known) {
		ret = meta_scan(s, &idx, &seq, &l);
		/* A corrupt area is overwritten only by a deliberate save. */
		s->meta_seq = ret == 0 ? seq : 0;
		s->meta_known = true;
		ret = 0;
	}
	seq = s->meta_seq + 1;
	rec = malloc(META_HDR_SIZE + len);
	if (!rec) {
		ret = -ENOMEM;
		goto out;
	}
	/* Header and blob in one write; the slot is the one not holding the newest blob. */
	meta_hdr_encode(&s->sb, seq, buf, len, (struct meta_hdr_disk *)rec);
	if (len)
		memcpy(rec + META_HDR_SIZE, buf, len);
	/*
	 * Durable by a synchronous write of this range alone: an fdatasync
	 * would also flush every data write still in the page cache, which
	 * can stall the event loop (and its heartbeats) for seconds on a busy
	 * disk. librmr flushes data itself where order matters (@c flush).
	 */
	ret = meta_pwrite(s, rec, META_HDR_SIZE + len, meta_slot_offset(&s->sb, seq & 1), true);
	free(rec);
	if (ret == 0)
		s->meta_seq = seq;
out:
	pthread_mutex_unlock(&s->meta_lock);
	return ret;
}

static int store_health(void *store)
{
	struct brmr_store *s = store;

	return atomic_load(&s->data_lost) ? -EIO : 0;
}

static int store_flush(void *store)
{
	struct brmr_store *s = store;

	/* Once lost, lost: a later fdatasync passing proves nothing. */
	if (atomic_load(&s->data_lost))
		return -EIO;
	return store_sync(s);
}

const struct rmr_store_ops store_ops = {
	.size = sizeof(struct rmr_store_ops),
	.io = store_io,
	.chunk_export = store_chunk_export,
	.chunk_import = store_chunk_import,
	.meta_load = store_meta_load,
	.meta_save = store_meta_save,
	.flush = store_flush,
	.health = store_health,
	.map_read = store_map_read,
	.map_write = store_map_write,
};

/* --- format ---------------------------------------------------------------- */

static bool zeroed(const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i])
			return false;
	return true;
}

/* Build the superblock a format writes, or explain why the parameters are bad. */
static int format_superblock(const struct brmr_format_params *p,
			     const struct brmr_member *members, unsigned nmembers,
			     struct superblock *sb, char *why, size_t whylen)
{
	if (!p->pool_name || !superblock_name_valid(p->pool_name))
		return fail(-EINVAL, why, whylen,
			    "bad pool name (1..%u characters of [A-Za-z0-9._-])", RMR_NAME_MAX);
	if (nmembers > RMR_MAX_MEMBERS)
		return fail(-EINVAL, why, whylen, "too many members (most %u)", RMR_MAX_MEMBERS);
	if (nmembers && !members)
		return fail(-EINVAL, why, whylen, "member list missing");
	memset(sb, 0, sizeof(*sb));
	sb->version = SB_VERSION;
	sb->pool_uuid = p->pool_uuid;
	strcpy(sb->pool_name, p->pool_name);
	sb->member_id = p->member_id;
	sb->chunk_size = p->chunk_size;
	sb->pool_size = p->pool_size;
	sb->sequence = 1;
	sb->nmembers = (uint16_t)nmembers;
	for (unsigned i = 0; i < nmembers; i++) {
		size_t n = strnlen(members[i].addr, sizeof(members[i].addr));

		if (n == sizeof(members[i].addr))
			return fail(-EINVAL, why, whylen, "member %u: address too long",
				    members[i].id);
		sb->members[i].id = members[i].id;
		memcpy(sb->members[i].addr, members[i].addr, n);
	}
	/* Sizes are checked before the layout so that it cannot overflow. */
	if (p->chunk_size < BRMR_CHUNK_MIN || p->chunk_size > BRMR_CHUNK_MAX ||
	    (p->chunk_size & (p->chunk_size - 1)))
		return fail(-EINVAL, why, whylen,
			    "chunk size %" PRIu32 " is not a power of two in 128K..1M",
			    p->chunk_size);
	if (!p->pool_size || p->pool_size % 4096 || p->pool_size > (UINT64_MAX >> 2))
		return fail(-EINVAL, why, whylen,
			    "pool size %" PRIu64 " is not a positive multiple of 4096",
			    p->pool_size);
	if (superblock_layout(sb, rmr_server_meta_max()) < 0)
		return fail(-EINVAL, why, whylen,
			    "pool size %" PRIu64 " is too large (more chunks than the dirty maps allow)",
			    p->pool_size);
	/* The decoder's rules are the format's rules. */
	if (superblock_check(sb, UINT64_MAX, why, whylen) < 0)
		return -EINVAL;
	return 0;
}

/* Invalidate both superblock slots: the store is then nobody's. */
static int format_wipe_superblocks(int fd)
{
	static const uint8_t zeroes[SB_AREA_SIZE];
	int ret = pwrite_full(fd, zeroes, sizeof(zeroes), 0, false);

	if (ret == 0 && fdatasync(fd) < 0)
		ret = -errno;
	return ret;
}

/* fsync the directory holding a new file so that the file survives a crash. */
static void fsync_parent(const char *path)
{
	char dir[PATH_MAX];
	char *slash;
	int fd;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return;
	slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

BRMR_EXPORT int brmr_store_format_pool(const char *path, const struct brmr_format_params *p,
				       const struct brmr_member *members, unsigned nmembers,
				       unsigned flags, char *why, size_t whylen)
{
	struct brmr_format_params fp;
	struct superblock sb, old;
	struct sb_disk d;
	uint8_t *head = NULL;
	bool check_only = flags & BRMR_FORMAT_CHECK_ONLY;
	bool blkdev = false, created = false;
	uint64_t size = 0, need;
	int fd, ret;

	if (!path || !*path || !p || (flags & ~(unsigned)BRMR_FORMAT_CHECK_ONLY))
		return fail(-EINVAL, why, whylen, "bad arguments");
	{
		size_t psz;

		memcpy(&psz, p, sizeof(psz));
		if (psz < sizeof(size_t))
			return fail(-EINVAL, why, whylen, "bad format parameters size");
		memset(&fp, 0, sizeof(fp));
		memcpy(&fp, p, psz < sizeof(fp) ? psz : sizeof(fp));
	}
	ret = format_superblock(&fp, members, nmembers, &sb, why, whylen);
	if (ret < 0)
		return ret;
	need = sb.data_offset + sb.pool_size;

	if (check_only) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			/* Will be created: its directory must exist and be writable. */
			char dir[PATH_MAX];
			char *slash;

			snprintf(dir, sizeof(dir), "%s", path);
			slash = strrchr(dir, '/');
			if (slash)
				*(slash == dir ? slash + 1 : slash) = '\0';
			if (access(slash ? dir : ".", W_OK | X_OK) < 0)
				return fail(-errno, why, whylen, "cannot create %s: %s", path,
					    strerror(errno));
			return 0;
		}
	} else {
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			created = fd >= 0;
		}
	}
	if (fd < 0)
		return fail(-errno, why, whylen, "cannot open %s: %s", path, strerror(errno));
	ret = fd_size(fd, &blkdev, &size);
	if (ret < 0) {
		fail(ret, why, whylen, "%s is not a regular file or block device", path);
		goto out;
	}
	/* A store being served is locked by its server: never format under it. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ret = fail(errno == EWOULDBLOCK ? -EBUSY : -errno, why, whylen,
			   "%s is in use (served by a brmr-server?)", path);
		goto out;
	}
	/*
	 * Without force only a blank target is formatted. "Blank" looks at the
	 * first MiB, not just our 8 KiB: other formats start later (a ZFS
	 * label leaves its first 8 KiB empty, for one).
	 */
	head = calloc(1, FORMAT_BLANK_CHECK);
	if (!head) {
		ret = fail(-ENOMEM, why, whylen, "out of memory");
		goto out;
	}
	if (size) {
		ret = pread_full(fd, head, size < FORMAT_BLANK_CHECK ? (size_t)size
								 : FORMAT_BLANK_CHECK, 0);
		if (ret < 0) {
			fail(ret, why, whylen, "reading %s: %s", path, strerror(-ret));
			goto out;
		}
	}
	if (!fp.force && !zeroed(head, FORMAT_BLANK_CHECK)) {
		if (superblock_load(fd, size, &old, NULL, NULL, 0) == 0)
			ret = fail(-EEXIST, why, whylen,
				   "%s already holds member %u of pool %s (use force to overwrite)",
				   path, old.member_id, old.pool_name);
		else
			ret = fail(-EEXIST, why, whylen,
				   "%s holds data that is not a brmr store (use force to overwrite)",
				   path);
		goto out;
	}
	if (blkdev && size < need) {
		ret = fail(-ENOSPC, why, whylen,
			   "%s has %" PRIu64 " bytes, the pool needs %" PRIu64, path, size, need);
		goto out;
	}
	if (check_only && access(path, W_OK) < 0) {
		ret = fail(-errno, why, whylen, "cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	if (check_only) {
		ret = 0;
		goto out;
	}

	/*
	 * Crash-safe order: first make the old superblocks invalid, then clear
	 * metadata and data, then write the new superblock. A crash in between
	 * leaves a store that refuses to open (format again), never an old
	 * superblock over half-cleared state or a new one over stale data.
	 */
	ret = format_wipe_superblocks(fd);
	if (ret == 0 && !blkdev) {
		/*
		 * Dropping every block is the fastest zeroing of a file, the
		 * dirty-map area included (a re-format over an old store too);
		 * sparse after.
		 */
		if (ftruncate(fd, SB_AREA_SIZE) < 0 || ftruncate(fd, (off_t)need) < 0)
			ret = -errno;
	} else if (ret == 0) {
		/*
		 * A device keeps its old bytes. Metadata and data are cleared
		 * the fast way; the dirty-map area, small and read back bit by
		 * bit, gets plain zeroes written so that it never depends on
		 * what a device makes of a discard.
		 */
		uint64_t map_end = sb.map_offset + sb.map_size;

		ret = zero_range(fd, SB_AREA_SIZE, sb.map_offset - SB_AREA_SIZE, true);
		if (ret == 0)
			ret = write_zeroes(fd, sb.map_offset, sb.map_size);
		if (ret == 0)
			ret = zero_range(fd, map_end, need - map_end, true);
	}
	if (ret == 0 && fdatasync(fd) < 0)
		ret = -errno;
	if (ret == 0) {
		superblock_encode(&sb, &d);
		ret = pwrite_full(fd, &d, sizeof(d), 0, true);
	}
	if (ret < 0) {
		fail(ret, why, whylen, "formatting %s: %s", path, strerror(-ret));
		goto out;
	}
	if (created)
		fsync_parent(path);
out:
	free(head);
	close(fd);
	if (ret < 0 && created)
		unlink(path);
	return ret;
}

BRMR_EXPORT int brmr_store_format(const char *path, const struct brmr_format_params *p)
{
	return brmr_store_format_pool(path, p, NULL, 0, 0, NULL, 0);
}

/* --- open, info, serve ------------------------------------------------------------ */

BRMR_EXPORT int brmr_store_open(const char *path, struct brmr_store **out, char *why,
				size_t whylen)
{
	struct brmr_store *s;
	bool blkdev;
	int ret;

	if (!path || !out)
		return fail(-EINVAL, why, whylen, "bad arguments");
	s = calloc(1, sizeof(*s));
	if (!s)
		return fail(-ENOMEM, why, whylen, "out of memory");
	s->fd = open(path, O_RDWR | O_CLOEXEC);
	if (s->fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM)) {
		/* Enough to inspect it; brmr_store_serve() will refuse. */
		s->fd = open(path, O_RDONLY | O_CLOEXEC);
		s->read_only = true;
	}
	if (s->fd < 0) {
		ret = fail(-errno, why, whylen, "cannot open %s: %s", path, strerror(errno));
		free(s);
		return ret;
	}
	ret = fd_size(s->fd, &blkdev, &s->dev_size);
	if (ret < 0) {
		fail(ret, why, whylen, "%s: %s", path,
		     ret == -ENODEV ? "not a regular file or block device" : strerror(-ret));
		goto err;
	}
	ret = superblock_load(s->fd, s->dev_size, &s->sb, &s->sb_slot, why, whylen);
	if (ret < 0)
		goto err;
	atomic_store(&s->data_lost, (s->sb.flags & SB_F_DATA_LOST) != 0);
	pthread_mutex_init(&s->meta_lock, NULL);
	pthread_mutex_init(&s->q_lock, NULL);
	pthread_cond_init(&s->q_cond, NULL);
	s->done = rmr_store_io_done;
	*out = s;
	return 0;
err:
	close(s->fd);
	free(s);
	return ret;
}

BRMR_EXPORT void brmr_store_close(struct brmr_store *s)
{
	if (!s)
		return;
	store_workers_stop(s);
	store_mem_close(&s->mem);
	close(s->fd); /* also drops the flock */
	pthread_mutex_destroy(&s->meta_lock);
	pthread_mutex_destroy(&s->q_lock);
	pthread_cond_destroy(&s->q_cond);
	free(s);
}

BRMR_EXPORT int brmr_store_info(struct brmr_store *s, struct brmr_store_info *caller)
{
	struct brmr_store_info full, *info = &full;
	size_t size;

	/* An older caller's shorter struct (without @mapped) gets what fits. */
	if (!s || !caller || caller->size < offsetof(struct brmr_store_info, mapped))
		return -EINVAL;
	size = caller->size < sizeof(full) ? caller->size : sizeof(full);
	memset(info, 0, sizeof(*info));
	info->size = size;
	memcpy(info->pool_name, s->sb.pool_name, sizeof(info->pool_name));
	info->pool_uuid = s->sb.pool_uuid;
	info->pool_size = s->sb.pool_size;
	info->chunk_size = s->sb.chunk_size;
	info->member_id = s->sb.member_id;
	info->format_version = s->sb.version;
	info->data_offset = s->sb.data_offset;
	info->meta_offset = s->sb.meta_offset;
	info->meta_size = s->sb.meta_size;
	info->sequence = s->sb.sequence;
	info->map_offset = s->sb.map_offset;
	info->map_size = s->sb.map_size;
	info->mapped = store_mem_mapped(&s->mem);
	info->data_lost = atomic_load(&s->data_lost);
	memcpy(caller, info, size);
	return 0;
}

BRMR_EXPORT int brmr_store_members(struct brmr_store *s, struct brmr_member *out,
				   unsigned cap)
{
	if (!s || (cap && !out))
		return -EINVAL;
	for (unsigned i = 0; i < s->sb.nmembers && i < cap; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].id = s->sb.members[i].id;
		memcpy(out[i].addr, s->sb.members[i].addr, sizeof(out[i].addr));
	}
	return s->sb.nmembers;
}

/*
 * This boot of the host (rmr_pool_params.boot_id): a hash of the kernel's
 * boot_id, which a reboot changes; 0 if it cannot be read. The store's
 * writes sit in the page cache until a flush, and only a reboot (or a
 * power loss) takes them away from a member whose process restarted.
 * BRMR_BOOT_ID_FILE names another file to read it from: a test that
 * plays a power loss on a store file starts the member in a "new boot".
 */
static uint64_t host_boot_id(void)
{
	const char *path = getenv("BRMR_BOOT_ID_FILE");
	char buf[64];
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	ssize_t n;
	int fd = open(path && *path ? path : "/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 32)
		return 0;
	for (ssize_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)buf[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

int store_pool_params(const struct brmr_store *s, const struct brmr_serve_opts *opts,
		      struct rmr_pool_params *params, struct rmr_peer peers[RMR_MAX_MEMBERS])
{
	struct brmr_serve_opts so = { .size = sizeof(so) };

	if (opts) {
		/* An older caller's shorter struct: the fields it lacks stay default. */
		if (opts->size < sizeof(opts->size))
			return -EINVAL;
		memcpy(&so, opts, opts->size < sizeof(so) ? opts->size : sizeof(so));
	}
	memset(params, 0, sizeof(*params));
	params->size = sizeof(*params);
	params->name = s->sb.pool_name;
	params->uuid = s->sb.pool_uuid;
	params->pool_size = s->sb.pool_size;
	params->chunk_size = s->sb.chunk_size;
	params->member_id = s->sb.member_id;
	/*
	 * The pool's members come from the superblock's list; every one but
	 * this store is a peer to resync with. A store formatted without a
	 * list (brmr_store_format()) knows only itself and has no peers.
	 */
	params->members_mask = 1ull << s->sb.member_id;
	for (unsigned i = 0; i < s->sb.nmembers; i++) {
		const struct sb_member *m = &s->sb.members[i];

		params->members_mask |= 1ull << m->id;
		if (m->id == s->sb.member_id)
			continue;
		peers[params->npeers].member_id = m->id;
		peers[params->npeers].addr = m->addr;
		params->npeers++;
	}
	params->peers = params->npeers ? peers : NULL;
	params->sync_queue_depth = so.sync_queue_depth;
	params->resync_rate = so.resync_rate;
	params->replace = so.replace;
	params->no_activity_log = so.no_activity_log;
	params->al_extent_size = so.al_extent_size;
	params->key = so.key;
	params->boot_id = host_boot_id();
	return 0;
}

BRMR_EXPORT int brmr_store_serve(struct brmr_store *s, struct rmr_server *srv,
				 const struct brmr_serve_opts *opts,
				 struct rmr_server_pool **out)
{
	struct rmr_peer peers[RMR_MAX_MEMBERS];
	struct rmr_pool_params params;
	bool was_mapped;
	int ret;

	if (!s || !srv || !out)
		return -EINVAL;
	ret = store_pool_params(s, opts, &params, peers);
	if (ret < 0)
		return ret;
	if (s->read_only)
		return -EROFS;
	if (atomic_load(&s->data_lost))
		return -EIO;
	/*
	 * One server per store: a second one would apply writes that the first
	 * does not know about and corrupt the pool's bookkeeping.
	 */
	if (!s->locked) {
		if (flock(s->fd, LOCK_EX | LOCK_NB) < 0)
			return errno == EWOULDBLOCK ? -EBUSY : -errno;
		s->locked = true;
	}
	/* A store served before (and failed to serve again) keeps what it had. */
	was_mapped = store_mem_mapped(&s->mem);
	if (!was_mapped && !(opts && opts->size >= offsetof(struct brmr_serve_opts, no_mmap) +
						sizeof(opts->no_mmap) && opts->no_mmap))
		store_map_memory(s); /* a failure leaves it unmapped, which works */
	/* A mapped store runs every request inline: it needs no workers. */
	ret = store_mem_mapped(&s->mem) ? 0 : store_workers_start(s);
	if (ret == 0)
		ret = rmr_server_add_pool(srv, &params, &store_ops, s, out);
	if (ret < 0) {
		if (!was_mapped)
			store_mem_close(&s->mem);
		store_workers_stop(s);
		flock(s->fd, LOCK_UN);
		s->locked = false;
	}
	return ret;
}

BRMR_EXPORT void brmr_store_inject_fault(struct brmr_store *s, bool fail_io)
{
	if (s)
		atomic_store(&s->fail_io, fail_io);
}

int store_map_memory(struct brmr_store *s)
{
	if (s->read_only || store_mem_mapped(&s->mem))
		return s->read_only ? -EROFS : 1;
	return store_mem_open(&s->mem, s->fd, s->sb.data_offset, s->sb.pool_size);
}

uint64_t store_mapped_ios(const struct brmr_store *s)
{
	return s->mem.mapped_ios;
}

void store_fail_next_sync(struct brmr_store *s, int err)
{
	atomic_store(&s->fail_next_sync, err);
}

uint64_t store_worker_reads(const struct brmr_store *s)
{
	return atomic_load(&s->worker_reads);
}

void store_set_done(struct brmr_store *s, store_done_fn fn)
{
	s->done = fn;
}

void store_crash_at(struct brmr_store *s, uint64_t nth, size_t keep)
{
	s->meta_writes = 0;
	s->crash_at = nth;
	s->crash_keep = keep;
	atomic_store(&s->crashed, false);
}

uint64_t store_meta_writes(const struct brmr_store *s)
{
	return s->meta_writes;
}

bool store_crashed(struct brmr_store *s)
{
	return atomic_load(&s->crashed);
}

const struct superblock *store_superblock(const struct brmr_store *s)
{
	return &s->sb;
}
