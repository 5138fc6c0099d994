/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A store on tmpfs served through a mapping of its data area (store_mem.h):
 * which requests the map serves (only extents allocated through and
 * through), that the bytes land in the file either way, that a trim takes
 * its extents off the map, that a restart finds the allocated extents
 * again, and that a full tmpfs answers ENOSPC instead of killing the
 * member with SIGBUS. Stores live in /dev/shm (skipped where it is not
 * tmpfs); the full-tmpfs case mounts a small tmpfs of its own (root only).
 */
#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <ftw.h>
#include <limits.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rmr/brmr.h>
#include <rmr/server.h>

#include "store.h"
#include "store_mem.h"

#define MiB (1024ull * 1024)
#define EXTENT (1ull << STORE_MEM_EXTENT_SHIFT)
#define POOL (4 * EXTENT)
#define PIECE (128u * 1024)

/* Made by main(), removed by it after every test (a failed check skips teardowns). */
static char shm_root[128], cwd_root[384];
static char dir[512];
static char path[600];
static bool on_tmpfs;

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static bool is_tmpfs(const char *p)
{
	struct statfs sfs;

	return statfs(p, &sfs) == 0 && sfs.f_type == TMPFS_MAGIC;
}

static void make_dir(const char *base)
{
	snprintf(dir, sizeof(dir), "%s/brmr-mem-XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/store", dir);
}

static void remove_tree(char *p)
{
	if (p[0])
		nftw(p, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	p[0] = '\0';
}

static void remove_dir(void)
{
	remove_tree(dir);
}

static void setup(void)
{
	on_tmpfs = shm_root[0] != '\0';
	if (on_tmpfs)
		make_dir(shm_root);
}

static void teardown(void)
{
	remove_dir();
}

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int last_status;
static unsigned completions;
static pthread_t done_thread;

static void done(struct rmr_store_io *io, int status)
{
	(void)io;
	pthread_mutex_lock(&done_lock);
	last_status = status;
	done_thread = pthread_self();
	completions++;
	pthread_cond_broadcast(&done_cond);
	pthread_mutex_unlock(&done_lock);
}

static int try_format(uint64_t pool_size)
{
	struct brmr_format_params p = {
		.size = sizeof(p),
		.pool_name = "mem",
		.pool_size = pool_size,
		.chunk_size = PIECE,
		.member_id = 1,
	};

	p.pool_uuid.b[0] = 1;
	return brmr_store_format(path, &p);
}

static void format(uint64_t pool_size)
{
	int ret = try_format(pool_size);

	ck_assert_msg(ret == 0, "format %s: %s", path, strerror(-ret));
}

static struct brmr_store *open_store(void)
{
	struct brmr_store *s = NULL;
	char why[256] = "";

	ck_assert_msg(brmr_store_open(path, &s, why, sizeof(why)) == 0, "open: %s", why);
	store_set_done(s, done);
	ck_assert_int_eq(store_workers_start(s), 0);
	return s;
}

static bool is_mapped(struct brmr_store *s)
{
	struct brmr_store_info info = { .size = sizeof(info) };

	ck_assert_int_eq(brmr_store_info(s, &info), 0);
	return info.mapped;
}

/*
 * Run one request and wait for it. The store's workers run, as when it is
 * served: on a mapped store every request, trims and flushes too, must
 * still complete on the calling thread (the loop), where no trim can race
 * a copy through the map.
 */
/* open_store(), its data area mapped (the store is on tmpfs). */
static struct brmr_store *open_mapped(void)
{
	struct brmr_store *s = open_store();

	ck_assert_int_eq(store_map_memory(s), 1);
	return s;
}

static int io(struct brmr_store *s, uint16_t op, uint64_t addr, uint32_t len, void *data)
{
	struct rmr_store_io r = {
		.kind = op == BRMR_OP_READ ? RMR_IO_READ : RMR_IO_WRITE,
		.op = op,
		.addr = addr,
		.len = len,
		.data = data,
		.data_len = data ? len : 0,
	};
	unsigned before;
	int status;

	pthread_mutex_lock(&done_lock);
	before = completions;
	pthread_mutex_unlock(&done_lock);
	store_ops.io(s, &r);
	pthread_mutex_lock(&done_lock);
	while (completions == before)
		pthread_cond_wait(&done_cond, &done_lock);
	ck_assert_uint_eq(completions, before + 1);
	if (is_mapped(s))
		ck_assert_msg(pthread_equal(done_thread, pthread_self()),
			      "op %u on a mapped store completed on another thread", op);
	status = last_status;
	pthread_mutex_unlock(&done_lock);
	return status;
}

static uint64_t data_offset(struct brmr_store *s)
{
	struct brmr_store_info info = { .size = sizeof(info) };

	ck_assert_int_eq(brmr_store_info(s, &info), 0);
	return info.data_offset;
}

/* The bytes as the file holds them, read past the store. */
static void file_bytes(struct brmr_store *s, uint64_t addr, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, (off_t)(data_offset(s) + addr)), (ssize_t)len);
	close(fd);
}

static void fill(uint8_t *buf, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed + i * 7);
}

/* Write [from, to) in PIECE pieces going forward, as a sequential writer does. */
static void write_forward(struct brmr_store *s, uint64_t from, uint64_t to, uint8_t seed)
{
	static uint8_t buf[PIECE];

	for (uint64_t a = from; a < to; a += PIECE) {
		fill(buf, PIECE, (uint8_t)(seed + a / PIECE));
		ck_assert_int_eq(io(s, BRMR_OP_WRITE, a, PIECE, buf), 0);
	}
}

START_TEST(writes_into_holes_go_through_pwrite_until_an_extent_is_full)
{
	static uint8_t buf[4096], back[4096], big[EXTENT], back_big[PIECE];
	struct brmr_store *s;
	struct brmr_store_info info = { .size = sizeof(info) };

	if (!on_tmpfs)
		return;
	format(POOL);
	s = open_mapped();
	ck_assert_int_eq(brmr_store_info(s, &info), 0);
	ck_assert(info.mapped);

	/* A fresh store is all holes: nothing goes through the map. */
	fill(buf, sizeof(buf), 1);
	ck_assert_int_eq(io(s, BRMR_OP_WRITE, 8192, sizeof(buf), buf), 0);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 8192, sizeof(back), back), 0);
	ck_assert_mem_eq(back, buf, sizeof(buf));
	ck_assert_uint_eq(store_mapped_ios(s), 0);

	/* Filled going forward: the piece that reaches the extent's end maps it. */
	write_forward(s, 0, EXTENT, 10);
	ck_assert_uint_eq(store_mapped_ios(s), 0);
	fill(buf, sizeof(buf), 2);
	ck_assert_int_eq(io(s, BRMR_OP_WRITE, 4096, sizeof(buf), buf), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 1);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 4096, sizeof(back), back), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 2);
	ck_assert_mem_eq(back, buf, sizeof(buf));
	file_bytes(s, 4096, back, sizeof(back));
	ck_assert_mem_eq(back, buf, sizeof(buf)); /* in the file, not only in the map */

	/* One write over a whole extent maps it at once. */
	fill(big, sizeof(big), 3);
	ck_assert_int_eq(io(s, BRMR_OP_WRITE, EXTENT, EXTENT, big), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 2);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 2 * EXTENT - 4096, 4096, back), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 3);
	ck_assert_mem_eq(back, big + EXTENT - 4096, 4096);

	/* Large requests take the map too. */
	ck_assert_int_eq(io(s, BRMR_OP_READ, EXTENT, PIECE, back_big), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 4);
	ck_assert_mem_eq(back_big, big, PIECE);

	/* Across a mapped and an unmapped extent: the plain path. */
	ck_assert_int_eq(io(s, BRMR_OP_READ, 2 * EXTENT - 2048, 4096, back), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 4);
	ck_assert_mem_eq(back, big + EXTENT - 2048, 2048);
	brmr_store_close(s);
}
END_TEST

START_TEST(a_trim_takes_its_extent_off_the_map)
{
	static uint8_t buf[4096], back[4096], zero[4096];
	struct brmr_store *s;
	uint64_t n;

	if (!on_tmpfs)
		return;
	format(POOL);
	s = open_mapped();
	write_forward(s, 0, EXTENT, 20);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 0, 4096, back), 0);
	n = store_mapped_ios(s);
	ck_assert_uint_eq(n, 1);

	ck_assert_int_eq(io(s, BRMR_OP_TRIM, 65536, 65536, NULL), 0);
	/* The hole is there, and reads and writes of the extent take the plain path. */
	ck_assert_int_eq(io(s, BRMR_OP_READ, 65536, 4096, back), 0);
	ck_assert_mem_eq(back, zero, sizeof(zero));
	fill(buf, sizeof(buf), 4);
	ck_assert_int_eq(io(s, BRMR_OP_WRITE, 0, 4096, buf), 0);
	ck_assert_uint_eq(store_mapped_ios(s), n);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 0, 4096, back), 0);
	ck_assert_mem_eq(back, buf, sizeof(buf));

	/* Written whole again, it is mapped again. */
	write_forward(s, 0, EXTENT, 30);
	ck_assert_int_eq(io(s, BRMR_OP_WRITE_ZEROES, 3 * 4096, 4096, NULL), 0);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 3 * 4096, 4096, back), 0);
	ck_assert_mem_eq(back, zero, sizeof(zero));
	write_forward(s, 0, EXTENT, 40);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 0, 4096, back), 0);
	ck_assert_uint_eq(store_mapped_ios(s), n + 1);
	brmr_store_close(s);
}
END_TEST

/* Bytes the store file has allocated. */
static uint64_t allocated_bytes(void)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return (uint64_t)st.st_blocks * 512;
}

/*
 * Write-zeroes leaves its range allocated (NBD's NO_HOLE: a later write
 * there cannot fail for space), a trim frees it; both read back as zeroes.
 * tmpfs has no FALLOC_FL_ZERO_RANGE, so this is the fallback's case.
 */
START_TEST(write_zeroes_keeps_the_space_a_trim_frees)
{
	static uint8_t back[PIECE], zero[PIECE];
	struct brmr_store *s;
	uint64_t full;

	if (!on_tmpfs)
		return;
	format(POOL);
	s = open_mapped();
	write_forward(s, 0, EXTENT, 50);
	full = allocated_bytes();
	ck_assert_uint_ge(full, EXTENT);

	ck_assert_int_eq(io(s, BRMR_OP_WRITE_ZEROES, PIECE, 2 * PIECE, NULL), 0);
	ck_assert_uint_eq(allocated_bytes(), full);
	ck_assert_int_eq(io(s, BRMR_OP_READ, PIECE, PIECE, back), 0);
	ck_assert_mem_eq(back, zero, PIECE);
	file_bytes(s, 2 * PIECE, back, PIECE);
	ck_assert_mem_eq(back, zero, PIECE);

	ck_assert_int_eq(io(s, BRMR_OP_TRIM, PIECE, 2 * PIECE, NULL), 0);
	ck_assert_uint_eq(allocated_bytes(), full - 2 * PIECE);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 2 * PIECE, PIECE, back), 0);
	ck_assert_mem_eq(back, zero, PIECE);
	brmr_store_close(s);
}
END_TEST

START_TEST(a_restart_finds_the_allocated_extents)
{
	static uint8_t back[4096], want[PIECE], zero[4096];
	struct brmr_store *s;

	if (!on_tmpfs)
		return;
	format(POOL);
	s = open_mapped();
	write_forward(s, 2 * EXTENT, 3 * EXTENT, 50);
	ck_assert_int_eq(io(s, BRMR_OP_WRITE, 4096, 4096, want), 0); /* extent 0: one page */
	brmr_store_close(s);

	s = open_mapped();
	ck_assert_int_eq(io(s, BRMR_OP_READ, 2 * EXTENT + PIECE, 4096, back), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 1);
	fill(want, PIECE, (uint8_t)(50 + (2 * EXTENT + PIECE) / PIECE));
	ck_assert_mem_eq(back, want, 4096);
	/* Extents with holes stay off the map: reading them allocates nothing. */
	ck_assert_int_eq(io(s, BRMR_OP_READ, 3 * EXTENT, 4096, back), 0);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 8192, 4096, back), 0);
	ck_assert_mem_eq(back, zero, sizeof(zero));
	ck_assert_uint_eq(store_mapped_ios(s), 1);
	brmr_store_close(s);
}
END_TEST

/* Is the page at @p p in this process's page tables (/proc/self/pagemap)? */
static bool in_page_tables(const void *p)
{
	uint64_t entry = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	n = pread(fd, &entry, sizeof(entry), (off_t)((uintptr_t)p / 4096 * sizeof(entry)));
	close(fd);
	ck_assert_int_eq(n, (ssize_t)sizeof(entry));
	return entry >> 63; /* "present" */
}

/* Is @p line of /proc/self/maps or smaps a mapping of the store file? */
static bool maps_store(const char *line, const char *real)
{
	size_t n = strcspn(line, "\n"), r = strlen(real);

	return n > r && line[n - r - 1] == ' ' && !strncmp(line + n - r, real, r);
}

/* Where this process maps the store's data area (/proc/self/maps). */
static const uint8_t *mapped_base(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024], real[PATH_MAX];
	unsigned long start = 0;

	ck_assert_ptr_nonnull(realpath(path, real)); /* maps shows /dev/shm resolved */
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		if (maps_store(line, real) && sscanf(line, "%lx-", &start) == 1)
			break;
		start = 0;
	}
	fclose(f);
	ck_assert_uint_ne(start, 0);
	return (const uint8_t *)start;
}

/* Does the store's mapping hold huge pages (tmpfs huge=, THP forced)? */
static bool store_pmd_mapped(void)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[1024], real[PATH_MAX];
	bool in = false;
	unsigned long kb = 0;

	ck_assert_ptr_nonnull(realpath(path, real));
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, '-') < strchr(line, ' '))
			in = maps_store(line, real); /* a mapping's first line */
		else if (in && sscanf(line, "FilePmdMapped: %lu kB", &kb) == 1 && kb)
			break;
		kb = 0;
	}
	fclose(f);
	return kb != 0;
}

/* Can madvise(MADV_POPULATE_WRITE) fill page tables here (Linux >= 5.14)? */
static bool populate_works(void)
{
#ifdef MADV_POPULATE_WRITE
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool ok;

	ck_assert(p != MAP_FAILED);
	ok = madvise(p, 4096, MADV_POPULATE_WRITE) == 0;
	munmap(p, 4096);
	return ok;
#else
	return false;
#endif
}

START_TEST(a_large_copy_faults_its_extents_in_first)
{
	static uint8_t back[PIECE], want[PIECE];
	bool populate = populate_works(), huge;
	struct brmr_store *s;
	const uint8_t *base;

	if (!on_tmpfs)
		return;
	format(POOL);
	s = open_mapped();
	write_forward(s, 0, 2 * EXTENT, 60);
	brmr_store_close(s);

	/* Known from the scan at start, not yet in the page tables. Where the
	 * map holds huge pages, a fault maps 2 MiB and there is nothing to see;
	 * where madvise cannot fill page tables, faults do it. */
	s = open_mapped();
	base = mapped_base();
	ck_assert(!in_page_tables(base + EXTENT - 4096));
	ck_assert(!in_page_tables(base + 2 * EXTENT - 4096));
	fill(want, PIECE, 60);

	/* A small request faults in only what it touches. */
	ck_assert_int_eq(io(s, BRMR_OP_READ, 0, 4096, back), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 1);
	ck_assert_mem_eq(back, want, 4096);
	huge = store_pmd_mapped();
	ck_assert(huge || !in_page_tables(base + EXTENT - 4096));

	/* A large one fills its extent's page tables first, then copies. */
	ck_assert_int_eq(io(s, BRMR_OP_READ, EXTENT, PIECE, back), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 2);
	fill(want, PIECE, (uint8_t)(60 + EXTENT / PIECE));
	ck_assert_mem_eq(back, want, PIECE);
	ck_assert(!populate || in_page_tables(base + 2 * EXTENT - 4096));

	fill(want, PIECE, 70);
	ck_assert_int_eq(io(s, BRMR_OP_WRITE, PIECE, PIECE, want), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 3);
	ck_assert(!populate || in_page_tables(base + EXTENT - 4096));
	file_bytes(s, PIECE, back, PIECE);
	ck_assert_mem_eq(back, want, PIECE);

	/* A trim unmaps what it punches: the extent is off the map until known again. */
	ck_assert_int_eq(io(s, BRMR_OP_TRIM, 0, 4096, NULL), 0);
	ck_assert_int_eq(io(s, BRMR_OP_READ, PIECE, PIECE, back), 0);
	ck_assert_uint_eq(store_mapped_ios(s), 3);
	ck_assert_mem_eq(back, want, PIECE);
	brmr_store_close(s);
}
END_TEST

START_TEST(a_store_elsewhere_is_not_mapped)
{
	static uint8_t buf[4096], back[4096];
	char cwd[256];
	struct brmr_store *s;
	struct brmr_store_info info = { .size = sizeof(info) };

	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	if (is_tmpfs(cwd) || !cwd_root[0])
		return; /* the build directory is on tmpfs here: nothing to compare */
	remove_dir();
	make_dir(cwd_root);
	format(POOL);
	s = open_store();
	ck_assert_int_eq(store_map_memory(s), 0);
	fill(buf, sizeof(buf), 5);
	write_forward(s, 0, EXTENT, 60);
	ck_assert_int_eq(io(s, BRMR_OP_WRITE, 0, 4096, buf), 0);
	ck_assert_int_eq(io(s, BRMR_OP_READ, 0, 4096, back), 0);
	ck_assert_mem_eq(back, buf, sizeof(buf));
	ck_assert_uint_eq(store_mapped_ios(s), 0);
	ck_assert_int_eq(brmr_store_info(s, &info), 0);
	ck_assert(!info.mapped);
	brmr_store_close(s);
}
END_TEST

/*
 * In a child with a mount namespace of its own: a 3 MiB tmpfs under a
 * store whose pool is larger. Writes fill it until tmpfs is full; every
 * write after that must fail with ENOSPC (a write through the map into a
 * hole would die of SIGBUS), while the extents already allocated still work.
 */
static int full_tmpfs_child(void)
{
	static uint8_t buf[PIECE], back[PIECE];
	struct brmr_store *s;
	uint64_t addr;
	int ret = 0;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("brmr-test", dir, "tmpfs", 0, "size=3m") < 0)
		return 77;
	if (try_format(16 * MiB) < 0 || brmr_store_open(path, &s, NULL, 0) < 0)
		return 2;
	store_set_done(s, done);
	if (store_map_memory(s) != 1)
		return 2;
	for (addr = 0; addr < 16 * MiB; addr += PIECE) {
		fill(buf, PIECE, (uint8_t)addr);
		ret = io(s, BRMR_OP_WRITE, addr, PIECE, buf);
		if (ret < 0)
			break;
	}
	if (ret != -ENOSPC || addr < EXTENT)
		return 3; /* the store should have filled an extent first */
	/* Full: more writes into holes fail the same way, mapped extents still take them. */
	if (io(s, BRMR_OP_WRITE, 15 * MiB, PIECE, buf) != -ENOSPC)
		return 4;
	fill(buf, 4096, 99);
	if (io(s, BRMR_OP_WRITE, 0, 4096, buf) != 0 || store_mapped_ios(s) != 1)
		return 5;
	if (io(s, BRMR_OP_READ, 0, 4096, back) != 0 || memcmp(back, buf, 4096))
		return 6;
	brmr_store_close(s);
	/*
	 * Unmapped, a FUA write into a hole is refused for space at its write:
	 * nothing was lost, so the store is not marked (data_lost would keep
	 * every member of a full file system out for good).
	 */
	if (brmr_store_open(path, &s, NULL, 0) < 0)
		return 2;
	store_set_done(s, done);
	{
		struct rmr_store_io r = {
			.kind = RMR_IO_WRITE, .op = BRMR_OP_WRITE, .op_flags = BRMR_F_FUA,
			.addr = 15 * MiB, .len = PIECE, .data = buf, .data_len = PIECE,
		};
		struct brmr_store_info info = { .size = sizeof(info) };
		int st;

		pthread_mutex_lock(&done_lock);
		st = (int)completions;
		pthread_mutex_unlock(&done_lock);
		store_ops.io(s, &r); /* no workers: it runs here */
		if ((int)completions != st + 1 || last_status != -ENOSPC)
			return 7;
		if (brmr_store_info(s, &info) < 0 || info.data_lost)
			return 8;
	}
	brmr_store_close(s);
	return 0;
}

START_TEST(a_full_tmpfs_answers_enospc)
{
	pid_t pid;
	int status;

	if (!on_tmpfs || geteuid() != 0) {
		fprintf(stderr, "a_full_tmpfs_answers_enospc: skipped (needs root and /dev/shm)\n");
		return;
	}
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		fflush(stderr);
		_exit(full_tmpfs_child());
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "the store died of signal %d", WTERMSIG(status));
	if (WEXITSTATUS(status) == 77) {
		fprintf(stderr, "a_full_tmpfs_answers_enospc: skipped (cannot mount a tmpfs)\n");
		return;
	}
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store_mem");
	int ret;
	TCase *tc = tcase_create("store_mem");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, writes_into_holes_go_through_pwrite_until_an_extent_is_full);
	tcase_add_test(tc, a_trim_takes_its_extent_off_the_map);
	tcase_add_test(tc, write_zeroes_keeps_the_space_a_trim_frees);
	tcase_add_test(tc, a_restart_finds_the_allocated_extents);
	tcase_add_test(tc, a_large_copy_faults_its_extents_in_first);
	tcase_add_test(tc, a_store_elsewhere_is_not_mapped);
	tcase_add_test(tc, a_full_tmpfs_answers_enospc);
	suite_add_tcase(s, tc);
	if (is_tmpfs("/dev/shm") && access("/dev/shm", W_OK) == 0) {
		snprintf(shm_root, sizeof(shm_root), "/dev/shm/brmr-mem-XXXXXX");
		if (!mkdtemp(shm_root))
			shm_root[0] = '\0';
	}
	if (!shm_root[0])
		fprintf(stderr, "store_mem: no tmpfs at /dev/shm here: the mapped cases are skipped\n");
	if (getcwd(cwd_root, sizeof(cwd_root) - 20)) {
		strcat(cwd_root, "/brmr-mem-XXXXXX");
		if (!mkdtemp(cwd_root))
			cwd_root[0] = '\0';
	} else {
		cwd_root[0] = '\0';
	}
	ret = unit_run(s);
	remove_tree(shm_root);
	remove_tree(cwd_root);
	return ret;
}
