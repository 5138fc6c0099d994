/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The brmr store: on-disk format (superblock A/B slots, metadata slots) and
 * the store callbacks, on real files in a temporary directory.
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <ftw.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <rmr/brmr.h>
#include <rmr/server.h>

#include "crc32c.h"
#include "store.h"
#include "superblock.h"

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)
#define TiB (1024ull * GiB)
#define SMALL_POOL (4 * MiB)
#define CHUNK (128u * 1024)

static uint64_t up(uint64_t x, uint64_t align)
{
	return (x + align - 1) / align * align;
}

/* A metadata slot: max(1 MiB, roundup4K(64 + meta_max)). */
static uint64_t meta_slot_size(uint64_t meta_max)
{
	uint64_t slot = up(64 + meta_max, 4096);

	return slot > MiB ? slot : MiB;
}

static char tmpdir[256];
static char path[512];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static void setup(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/brmr-sb-XXXXXX", base ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/store", tmpdir);
}

static void teardown(void)
{
	nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static const struct brmr_member test_members[] = {
	{ .id = 1, .addr = "127.0.0.1:7001" },
	{ .id = 2, .addr = "127.0.0.1:7002" },
	{ .id = 5, .addr = "[::1]:7005" },
};

static struct brmr_format_params params(uint64_t pool_size, uint16_t member_id)
{
	struct brmr_format_params p = {
		.size = sizeof(p),
		.pool_name = "vol-1",
		.pool_size = pool_size,
		.chunk_size = 128 * 1024,
		.member_id = member_id,
	};

	for (unsigned i = 0; i < RMR_UUID_LEN; i++)
		p.pool_uuid.b[i] = (uint8_t)(0xa0 + i);
	return p;
}

static void format_store(uint64_t pool_size)
{
	struct brmr_format_params p = params(pool_size, 2);
	char why[256] = "";
	int ret = brmr_store_format_pool(path, &p, test_members, 3, 0, why, sizeof(why));

	ck_assert_msg(ret == 0, "format: %d %s", ret, why);
}

static void read_slot(unsigned idx, struct sb_disk *d)
{
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, d, sizeof(*d), idx * SB_SLOT_SIZE), (ssize_t)sizeof(*d));
	close(fd);
}

static void write_at(const void *buf, size_t len, off_t off)
{
	int fd = open(path, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void write_slot(unsigned idx, const struct sb_disk *d)
{
	write_at(d, sizeof(*d), (off_t)idx * SB_SLOT_SIZE);
}

/* Open and expect failure @p err with @p reason in the message. */
static void expect_refused(int err, const char *reason)
{
	struct brmr_store *s = NULL;
	char why[512] = "";
	int ret = brmr_store_open(path, &s, why, sizeof(why));

	ck_assert_msg(ret == err, "open returned %d (%s), expected %d (%s)", ret, why, err,
		      reason);
	ck_assert_msg(strstr(why, reason), "reason '%s' does not mention '%s'", why, reason);
	ck_assert_ptr_null(s);
}

static uint8_t *file_bytes(size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	*len = (size_t)st.st_size;
	buf = malloc(*len + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, *len, 0), (ssize_t)*len);
	close(fd);
	return buf;
}

/* One assertion per buffer: check records every assertion it passes. */
static bool is_zero(const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i])
			return false;
	return true;
}

/* --- synchronous store I/O through the io callback ------------------------------- */

struct wait_io {
	struct rmr_store_io io;
	int status;
	int calls;
	bool on_submit; /* completed by the submitting thread, before io() returned */
};

static __thread bool submitting;

static pthread_mutex_t io_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t io_cond = PTHREAD_COND_INITIALIZER;

static void test_done(struct rmr_store_io *io, int status)
{
	struct wait_io *w = (struct wait_io *)io;

	pthread_mutex_lock(&io_lock);
	w->status = status;
	w->calls++;
	w->on_submit = submitting;
	pthread_cond_broadcast(&io_cond);
	pthread_mutex_unlock(&io_lock);
}

/* One request through the io callback, waited for; @p on_submit (may be NULL)
 * tells whether it completed before io() returned, on the caller's thread. */
static int do_io_at(struct brmr_store *s, uint16_t op, uint32_t flags, uint64_t addr,
		    uint32_t len, void *data, bool *on_submit)
{
	struct wait_io w = {
		.io = {
			.kind = op == BRMR_OP_READ ? RMR_IO_READ : RMR_IO_WRITE,
			.op = op,
			.op_flags = flags,
			.addr = addr,
			.len = len,
			.data = data,
			.data_len = data ? len : 0,
		},
	};

	submitting = true;
	store_ops.io(s, &w.io);
	submitting = false;
	pthread_mutex_lock(&io_lock);
	while (!w.calls)
		pthread_cond_wait(&io_cond, &io_lock);
	pthread_mutex_unlock(&io_lock);
	usleep(1000); /* a second completion would show up here */
	ck_assert_int_eq(w.calls, 1);
	if (on_submit)
		*on_submit = w.on_submit;
	return w.status;
}

static int do_io(struct brmr_store *s, uint16_t op, uint32_t flags, uint64_t addr,
		 uint32_t len, void *data)
{
	return do_io_at(s, op, flags, addr, len, data, NULL);
}

static struct brmr_store *open_ok(void)
{
	struct brmr_store *s = NULL;
	char why[256] = "";
	int ret = brmr_store_open(path, &s, why, sizeof(why));

	ck_assert_msg(ret == 0, "open: %d %s", ret, why);
	store_set_done(s, test_done);
	return s;
}

/* --- tests ------------------------------------------------------------------ */

START_TEST(test_crc32c_vectors)
{
	uint8_t zero[32] = { 0 }, ones[32];

	memset(ones, 0xff, sizeof(ones));
	ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xe3069283);
	/* RFC 3720 B.4 */
	ck_assert_uint_eq(crc32c(0, zero, sizeof(zero)), 0x8a9136aa);
	ck_assert_uint_eq(crc32c(0, ones, sizeof(ones)), 0x62a8ab43);
	ck_assert_uint_eq(crc32c(crc32c(0, "1234", 4), "56789", 5), 0xe3069283);
	ck_assert_uint_eq(crc32c_portable(0, "123456789", 9), 0xe3069283);
	ck_assert_uint_eq(crc32c_portable(0, ones, sizeof(ones)), 0x62a8ab43);
}
END_TEST

/* The CPU's crc32 instruction, where used, agrees with the tables at every
 * alignment, length and running value. */
START_TEST(test_crc32c_paths_agree)
{
	static uint8_t buf[40000];
	uint32_t x = 12345;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len < 70; len++)
			ck_assert_uint_eq(crc32c(0x1234567u * (uint32_t)len, buf + off, len),
					  crc32c_portable(0x1234567u * (uint32_t)len, buf + off, len));
	ck_assert_uint_eq(crc32c(0, buf + 3, 32768), crc32c_portable(0, buf + 3, 32768));
	ck_assert_uint_eq(crc32c(crc32c(0, buf, 1000), buf + 1000, sizeof(buf) - 1000),
			  crc32c_portable(0, buf, sizeof(buf)));
	if (!crc32c_hardware())
		fprintf(stderr, "crc32c: no crc32 instruction here, one path checked\n");
}
END_TEST

START_TEST(test_round_trip)
{
	struct brmr_store_info info = { .size = sizeof(info) };
	struct brmr_member m[RMR_MAX_MEMBERS];
	struct brmr_format_params p = params(SMALL_POOL, 2);
	struct superblock sb, back;
	struct sb_disk d;
	struct brmr_store *s;
	struct stat st;

	format_store(SMALL_POOL);
	s = open_ok();
	ck_assert_int_eq(brmr_store_info(s, &info), 0);
	ck_assert_str_eq(info.pool_name, "vol-1");
	ck_assert_mem_eq(info.pool_uuid.b, p.pool_uuid.b, RMR_UUID_LEN);
	ck_assert_uint_eq(info.pool_size, SMALL_POOL);
	ck_assert_uint_eq(info.chunk_size, 128 * 1024);
	ck_assert_uint_eq(info.member_id, 2);
	ck_assert_uint_eq(info.format_version, 1);
	ck_assert_uint_eq(info.sequence, 1);
	/* The layout of docs/disk-format.md, from the real meta_max and map size. */
	ck_assert_uint_eq(info.meta_offset, SB_AREA_SIZE);
	ck_assert_uint_eq(info.meta_size, 2 * meta_slot_size(rmr_server_meta_max()));
	ck_assert_uint_eq(info.map_offset, info.meta_offset + info.meta_size);
	/* 32 chunks: 16 members x one 4 KiB bitmap each. */
	ck_assert_uint_eq(rmr_server_map_area_size(SMALL_POOL, CHUNK), 63 * 4096 + 2 * 32768);
	ck_assert_uint_eq(info.map_size, 63 * 4096 + 2 * 32768);
	ck_assert_uint_eq(info.data_offset, up(info.map_offset + info.map_size, MiB));
	ck_assert_int_eq(brmr_store_members(s, m, RMR_MAX_MEMBERS), 3);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_uint_eq(m[i].id, test_members[i].id);
		ck_assert_str_eq(m[i].addr, test_members[i].addr);
	}
	/* An older caller's struct, without @mapped, gets what fits; a smaller one is refused. */
	memset(&info, 0xee, sizeof(info));
	info.size = offsetof(struct brmr_store_info, mapped);
	ck_assert_int_eq(brmr_store_info(s, &info), 0);
	ck_assert_uint_eq(info.size, offsetof(struct brmr_store_info, mapped));
	ck_assert_uint_eq(info.map_size, 63 * 4096 + 2 * 32768);
	ck_assert_uint_eq(*(uint8_t *)&info.mapped, 0xee); /* not written */
	info.size = offsetof(struct brmr_store_info, mapped) - 1;
	ck_assert_int_eq(brmr_store_info(s, &info), -EINVAL);
	brmr_store_close(s);

	/* Sparse file of exactly data_offset + pool_size bytes. */
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, info.data_offset + SMALL_POOL);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);

	/* Encode/decode is the identity; slot B is left zero by format. */
	read_slot(0, &d);
	ck_assert_int_eq(superblock_decode(&d, UINT64_MAX, &sb, NULL, 0), 0);
	ck_assert_uint_eq(sb.map_offset, info.map_offset);
	ck_assert_uint_eq(sb.map_size, info.map_size);
	/* The new fields sit at bytes 152 and 160, little-endian; reserved1 after them. */
	{
		const uint8_t *raw = (const uint8_t *)&d;
		uint64_t mo = 0, ms = 0;

		for (int i = 7; i >= 0; i--) {
			mo = mo << 8 | raw[152 + i];
			ms = ms << 8 | raw[160 + i];
		}
		ck_assert_uint_eq(mo, info.map_offset);
		ck_assert_uint_eq(ms, info.map_size);
		ck_assert(is_zero(raw + 168, 88));
	}
	superblock_encode(&sb, &d);
	ck_assert_int_eq(superblock_decode(&d, UINT64_MAX, &back, NULL, 0), 0);
	ck_assert_mem_eq(&sb, &back, sizeof(sb));
	read_slot(1, &d);
	ck_assert_int_eq(superblock_decode(&d, UINT64_MAX, &sb, NULL, 0), -ENODATA);

	/* The plain public format call: no member list. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(brmr_store_format(path, &p), 0);
	s = open_ok();
	ck_assert_int_eq(brmr_store_members(s, m, RMR_MAX_MEMBERS), 0);
	brmr_store_close(s);
}
END_TEST

/* One field changed in slot A (crc resealed), and the error it must give. */
struct corruption {
	const char *what;
	void (*mutate)(struct sb_disk *d);
	int err;
	const char *reason;
};

#define MUT(name, body) static void mut_##name(struct sb_disk *d) { body; }
MUT(magic, d->magic[0] = 'X')
MUT(version, d->version = sb_cpu_to_le32(2))
MUT(version0, d->version = sb_cpu_to_le32(0))
MUT(header_size, d->header_size = sb_cpu_to_le32(512))
MUT(uuid_zero, memset(d->pool_uuid, 0, sizeof(d->pool_uuid)))
MUT(name_empty, memset(d->pool_name, 0, sizeof(d->pool_name)))
MUT(name_charset, d->pool_name[1] = ' ')
MUT(name_slash, d->pool_name[0] = '/')
MUT(name_no_nul, memset(d->pool_name, 'a', sizeof(d->pool_name)))
MUT(name_tail, d->pool_name[40] = 'x')
MUT(member_id_0, d->member_id = sb_cpu_to_le16(0))
MUT(member_id_64, d->member_id = sb_cpu_to_le16(RMR_MAX_MEMBER_ID + 1))
MUT(chunk_small, d->chunk_size = sb_cpu_to_le32(64 * 1024))
MUT(chunk_big, d->chunk_size = sb_cpu_to_le32(2 * 1024 * 1024))
MUT(chunk_pow2, d->chunk_size = sb_cpu_to_le32(192 * 1024))
MUT(chunk_zero, d->chunk_size = sb_cpu_to_le32(0))
MUT(pool_zero, d->pool_size = sb_cpu_to_le64(0))
MUT(pool_unaligned, d->pool_size = sb_cpu_to_le64(SMALL_POOL - 512))
MUT(pool_beyond, d->pool_size = sb_cpu_to_le64(SMALL_POOL + 4096))
MUT(pool_huge, d->pool_size = sb_cpu_to_le64(UINT64_MAX - 4095))
MUT(meta_in_sb, d->meta_offset = sb_cpu_to_le64(4096))
MUT(meta_unaligned, d->meta_offset = sb_cpu_to_le64(SB_AREA_SIZE + 512))
MUT(meta_size_zero, d->meta_size = sb_cpu_to_le64(0))
MUT(meta_size_odd, d->meta_size = sb_cpu_to_le64(3 * 4096))
MUT(meta_size_huge, d->meta_size = sb_cpu_to_le64(UINT64_MAX - 8191))
MUT(data_unaligned, d->data_offset = sb_cpu_to_le64(sb_le64_to_cpu(d->data_offset) + 4096))
MUT(data_overlap, d->meta_size = sb_cpu_to_le64(sb_le64_to_cpu(d->data_offset)))
MUT(data_zero, d->data_offset = sb_cpu_to_le64(0))
MUT(data_in_map, d->data_offset = sb_cpu_to_le64(sb_le64_to_cpu(d->data_offset) - MiB))
MUT(data_huge, d->data_offset = sb_cpu_to_le64(UINT64_MAX / MiB * MiB))
MUT(map_zero, d->map_offset = sb_cpu_to_le64(0); d->map_size = sb_cpu_to_le64(0))
MUT(map_unaligned, d->map_offset = sb_cpu_to_le64(sb_le64_to_cpu(d->map_offset) + 512))
MUT(map_in_meta, d->map_offset = sb_cpu_to_le64(sb_le64_to_cpu(d->map_offset) - 4096))
MUT(map_size_zero, d->map_size = sb_cpu_to_le64(0))
MUT(map_size_unaligned, d->map_size = sb_cpu_to_le64(sb_le64_to_cpu(d->map_size) + 512))
MUT(map_size_small, d->map_size = sb_cpu_to_le64(sb_le64_to_cpu(d->map_size) - 4096))
MUT(map_size_huge, d->map_size = sb_cpu_to_le64(UINT64_MAX / 4096 * 4096))
MUT(map_size_past_data, d->map_size = sb_cpu_to_le64(sb_le64_to_cpu(d->data_offset)))
MUT(sequence_zero, d->sequence = sb_cpu_to_le64(0))
MUT(flags, d->flags = sb_cpu_to_le64(1ull << 33))
MUT(reserved1, d->reserved1[7] = 1)
MUT(reserved1_last, d->reserved1[87] = 1)
MUT(reserved2, d->reserved2[2000] = 0x80)
MUT(nmembers_big, d->nmembers = sb_cpu_to_le16(RMR_MAX_MEMBERS + 1))
MUT(member_entry_id0, d->members[1].id = sb_cpu_to_le16(0))
MUT(member_entry_id64, d->members[1].id = sb_cpu_to_le16(64))
MUT(member_dup, d->members[2].id = d->members[0].id)
MUT(member_addr_empty, memset(d->members[2].addr, 0, sizeof(d->members[2].addr)))
MUT(member_addr_space, d->members[0].addr[3] = ' ')
MUT(member_addr_ctrl, d->members[0].addr[3] = '\n')
MUT(member_addr_no_nul, memset(d->members[0].addr, 'a', sizeof(d->members[0].addr)))
MUT(member_addr_tail, d->members[0].addr[100] = 'z')
MUT(member_pad, d->members[0].pad[1] = 1)
MUT(member_unused, d->members[5].id = sb_cpu_to_le16(9))
MUT(member_self_missing, d->member_id = sb_cpu_to_le16(9))
MUT(member_count_short, d->nmembers = sb_cpu_to_le16(2))

static const struct corruption corruptions[] = {
	{ "magic", mut_magic, -EBADMSG, "no brmr superblock" },
	{ "version 2", mut_version, -EPROTONOSUPPORT, "format version 2" },
	{ "version 0", mut_version0, -EPROTONOSUPPORT, "format version 0" },
	{ "header size", mut_header_size, -EBADMSG, "header size 512" },
	{ "uuid zero", mut_uuid_zero, -EBADMSG, "uuid is all zero" },
	{ "name empty", mut_name_empty, -EBADMSG, "bad pool name" },
	{ "name charset", mut_name_charset, -EBADMSG, "bad pool name" },
	{ "name slash", mut_name_slash, -EBADMSG, "bad pool name" },
	{ "name no NUL", mut_name_no_nul, -EBADMSG, "pool name is not NUL-terminated" },
	{ "name tail", mut_name_tail, -EBADMSG, "pool name is not NUL-terminated" },
	{ "member id 0", mut_member_id_0, -EBADMSG, "member id 0 out of range" },
	{ "member id 64", mut_member_id_64, -EBADMSG, "member id 64 out of range" },
	{ "chunk 64K", mut_chunk_small, -EBADMSG, "chunk size 65536" },
	{ "chunk 2M", mut_chunk_big, -EBADMSG, "chunk size 2097152" },
	{ "chunk 192K", mut_chunk_pow2, -EBADMSG, "chunk size 196608" },
	{ "chunk 0", mut_chunk_zero, -EBADMSG, "chunk size 0" },
	{ "pool size 0", mut_pool_zero, -EBADMSG, "pool size 0" },
	{ "pool size unaligned", mut_pool_unaligned, -EBADMSG, "not a positive multiple of 4096" },
	{ "pool beyond device", mut_pool_beyond, -EBADMSG, "truncated store" },
	{ "pool size overflow", mut_pool_huge, -EBADMSG, "than the dirty maps allow" },
	{ "meta in superblocks", mut_meta_in_sb, -EBADMSG, "overlaps the superblocks" },
	{ "meta unaligned", mut_meta_unaligned, -EBADMSG, "not 4K aligned" },
	{ "meta size 0", mut_meta_size_zero, -EBADMSG, "metadata size 0" },
	{ "meta size odd", mut_meta_size_odd, -EBADMSG, "two 4K-aligned slots" },
	{ "meta size overflow", mut_meta_size_huge, -EBADMSG, "metadata area overflows" },
	{ "data unaligned", mut_data_unaligned, -EBADMSG, "not 1 MiB aligned" },
	{ "data overlaps meta", mut_data_overlap, -EBADMSG, "overlaps the metadata area" },
	{ "data offset 0", mut_data_zero, -EBADMSG, "overlaps the dirty-map area" },
	{ "data overlaps maps", mut_data_in_map, -EBADMSG, "overlaps the dirty-map area" },
	{ "data offset overflow", mut_data_huge, -EBADMSG, "data area overflows" },
	{ "map area zero", mut_map_zero, -EBADMSG, "dirty-map offset 0 overlaps the metadata" },
	{ "map unaligned", mut_map_unaligned, -EBADMSG, "is not 4K aligned" },
	{ "map overlaps meta", mut_map_in_meta, -EBADMSG, "overlaps the metadata area" },
	{ "map size 0", mut_map_size_zero, -EBADMSG, "dirty-map size 0 is smaller" },
	{ "map size unaligned", mut_map_size_unaligned, -EBADMSG, "not a multiple of 4096" },
	{ "map size short", mut_map_size_small, -EBADMSG, "smaller than the pool's maps (323584" },
	{ "map size overflow", mut_map_size_huge, -EBADMSG, "dirty-map area overflows" },
	{ "map past data", mut_map_size_past_data, -EBADMSG, "overlaps the dirty-map area" },
	{ "sequence 0", mut_sequence_zero, -EBADMSG, "sequence is zero" },
	{ "flags", mut_flags, -EPROTONOSUPPORT, "unknown flags" },
	{ "reserved1", mut_reserved1, -EBADMSG, "reserved bytes" },
	{ "reserved1 last byte", mut_reserved1_last, -EBADMSG, "reserved bytes" },
	{ "reserved2", mut_reserved2, -EBADMSG, "reserved bytes" },
	{ "nmembers 17", mut_nmembers_big, -EBADMSG, "member list has 17 entries" },
	{ "member entry id 0", mut_member_entry_id0, -EBADMSG, "entry 1: id 0 out of range" },
	{ "member entry id 64", mut_member_entry_id64, -EBADMSG, "entry 1: id 64 out of range" },
	{ "member duplicate", mut_member_dup, -EBADMSG, "listed twice" },
	{ "member addr empty", mut_member_addr_empty, -EBADMSG, "bad address" },
	{ "member addr space", mut_member_addr_space, -EBADMSG, "bad address" },
	{ "member addr control", mut_member_addr_ctrl, -EBADMSG, "bad address" },
	{ "member addr no NUL", mut_member_addr_no_nul, -EBADMSG, "address not NUL-terminated" },
	{ "member addr tail", mut_member_addr_tail, -EBADMSG, "address not NUL-terminated" },
	{ "member pad", mut_member_pad, -EBADMSG, "address not NUL-terminated" },
	{ "unused member entry", mut_member_unused, -EBADMSG, "unused member list entry 5" },
	{ "self not listed", mut_member_self_missing, -EBADMSG, "not in the store's own member list" },
	{ "member count short", mut_member_count_short, -EBADMSG, "unused member list entry 2" },
};

START_TEST(test_single_field_corruption)
{
	const struct corruption *c = &corruptions[_i];
	struct sb_disk d;
	uint8_t *before, *after;
	size_t blen, alen;

	format_store(SMALL_POOL);
	read_slot(0, &d);
	c->mutate(&d);
	superblock_seal(&d);
	write_slot(0, &d);
	before = file_bytes(&blen);
	expect_refused(c->err, c->reason);
	/* Refusing never writes. */
	after = file_bytes(&alen);
	ck_assert_uint_eq(alen, blen);
	ck_assert_msg(!memcmp(before, after, blen), "%s: store changed by open", c->what);
	free(before);
	free(after);
}
END_TEST

/*
 * Random byte mutations of a valid slot, resealed so that the field checks
 * (not the crc) see them: the decoder must never crash, must explain every
 * refusal, and whatever it accepts must re-encode to the same bytes (every
 * byte of the slot is accounted for).
 */
START_TEST(test_decode_random_mutations)
{
	struct sb_disk good, d, again;
	struct superblock sb;
	unsigned seed = 4242, accepted = 0;

	format_store(SMALL_POOL);
	read_slot(0, &good);
	for (int round = 0; round < 20000; round++) {
		unsigned n = 1 + (unsigned)rand_r(&seed) % 4;
		char why[256] = "";
		int ret;

		d = good;
		for (unsigned k = 0; k < n; k++)
			((uint8_t *)&d)[(unsigned)rand_r(&seed) % (SB_SLOT_SIZE - 4)] =
				(uint8_t)rand_r(&seed);
		superblock_seal(&d);
		ret = superblock_decode(&d, UINT64_MAX, &sb, why, sizeof(why));
		if (ret < 0) {
			if (ret != -EBADMSG && ret != -EPROTONOSUPPORT)
				ck_abort_msg("round %d: unexpected %d", round, ret);
			if (!why[0])
				ck_abort_msg("round %d: no reason", round);
			continue;
		}
		accepted++;
		superblock_encode(&sb, &again);
		if (memcmp(&d, &again, sizeof(d)))
			ck_abort_msg("round %d: accepted slot does not re-encode identically", round);
	}
	/* Some mutations are legal (name letters, sizes, sequence). */
	ck_assert_uint_gt(accepted, 0);
}
END_TEST

START_TEST(test_crc_mismatch)
{
	struct sb_disk d;

	format_store(SMALL_POOL);
	read_slot(0, &d);
	d.pool_name[0] ^= 0x20; /* "Vol-1": valid, but not what the crc covers */
	write_slot(0, &d);
	expect_refused(-EBADMSG, "checksum mismatch");

	read_slot(0, &d);
	d.pool_name[0] ^= 0x20;
	d.crc.v ^= 1; /* a flipped bit in the crc itself */
	write_slot(0, &d);
	expect_refused(-EBADMSG, "checksum mismatch");
}
END_TEST

START_TEST(test_truncated)
{
	struct brmr_store_info info = { .size = sizeof(info) };
	struct brmr_store *s;

	format_store(SMALL_POOL);
	s = open_ok();
	brmr_store_info(s, &info);
	brmr_store_close(s);

	/* Data area cut short. */
	ck_assert_int_eq(truncate(path, (off_t)(info.data_offset + SMALL_POOL - 4096)), 0);
	expect_refused(-EBADMSG, "truncated store");
	/* Only slot A and half of B. */
	ck_assert_int_eq(truncate(path, 6000), 0);
	expect_refused(-EBADMSG, "truncated store");
	/* Half a slot A. */
	ck_assert_int_eq(truncate(path, 2000), 0);
	expect_refused(-EBADMSG, "truncated store");
	ck_assert_int_eq(truncate(path, 0), 0);
	expect_refused(-EBADMSG, "truncated store");
}
END_TEST

static void check_foreign(const uint8_t *head, size_t len)
{
	struct brmr_format_params p = params(SMALL_POOL, 2);
	uint8_t *before, *after;
	size_t blen, alen;
	char why[256] = "";
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 16 * MiB), 0);
	ck_assert_int_eq(pwrite(fd, head, len, 0), (ssize_t)len);
	close(fd);
	before = file_bytes(&blen);
	expect_refused(-EBADMSG, "no brmr superblock");
	/* Format without force refuses too, and says why. */
	ck_assert_int_eq(brmr_store_format_pool(path, &p, test_members, 3, 0, why, sizeof(why)),
			 -EEXIST);
	ck_assert_ptr_nonnull(strstr(why, "not a brmr store"));
	ck_assert_int_eq(brmr_store_format(path, &p), -EEXIST);
	after = file_bytes(&alen);
	ck_assert_uint_eq(alen, blen);
	ck_assert(!memcmp(before, after, blen));
	free(before);
	free(after);
}

START_TEST(test_foreign_random)
{
	uint8_t buf[64 * 1024];
	unsigned seed = 12345;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(rand_r(&seed) >> 7);
	check_foreign(buf, sizeof(buf));
}
END_TEST

START_TEST(test_foreign_ext4)
{
	uint8_t buf[8192] = { 0 };

	/* An ext4 superblock lives at byte 1024; its magic 0xEF53 at +56. */
	buf[1024] = 0x00;
	buf[1024 + 4] = 0x00;
	buf[1024 + 5] = 0x10; /* s_blocks_count */
	buf[1024 + 24] = 2;   /* s_log_block_size: 4 KiB */
	buf[1024 + 56] = 0x53;
	buf[1024 + 57] = 0xef;
	memcpy(buf + 1024 + 120, "rootfs", 6); /* s_volume_name */
	check_foreign(buf, sizeof(buf));
}
END_TEST

START_TEST(test_foreign_late_signature)
{
	struct brmr_format_params p = params(SMALL_POOL, 2);
	char why[256] = "";
	int fd = open(path, O_RDWR | O_CREAT, 0600);

	/* Zero superblock area, but data further in (a ZFS label, say). */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 16 * MiB), 0);
	ck_assert_int_eq(pwrite(fd, "\x0c\xb1\xba\x00", 4, 512 * 1024), 4);
	close(fd);
	expect_refused(-EBADMSG, "slots A and B are zero");
	ck_assert_int_eq(brmr_store_format_pool(path, &p, NULL, 0, 0, why, sizeof(why)), -EEXIST);
	ck_assert_ptr_nonnull(strstr(why, "not a brmr store"));
	p.force = true;
	ck_assert_int_eq(brmr_store_format(path, &p), 0);
}
END_TEST

START_TEST(test_foreign_other_types)
{
	struct brmr_store *s = NULL;
	char why[256] = "";

	/* A directory and a character device are not stores. */
	ck_assert_int_lt(brmr_store_open(tmpdir, &s, why, sizeof(why)), 0);
	ck_assert_int_eq(brmr_store_open("/dev/null", &s, why, sizeof(why)), -ENODEV);
	ck_assert_int_eq(brmr_store_open("/nonexistent/store", &s, why, sizeof(why)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(why, "cannot open"));
}
END_TEST

/* Rewrite slot @p idx with sequence @p seq and the name @p name. */
static void put_slot(unsigned idx, uint64_t seq, const char *name)
{
	struct sb_disk d;
	struct superblock sb;

	read_slot(0, &d);
	if (superblock_decode(&d, UINT64_MAX, &sb, NULL, 0) < 0) {
		read_slot(1, &d);
		ck_assert_int_eq(superblock_decode(&d, UINT64_MAX, &sb, NULL, 0), 0);
	}
	sb.sequence = seq;
	snprintf(sb.pool_name, sizeof(sb.pool_name), "%s", name);
	superblock_encode(&sb, &d);
	write_slot(idx, &d);
}

static void expect_chosen(uint64_t seq, const char *name)
{
	struct brmr_store_info info = { .size = sizeof(info) };
	struct brmr_store *s = open_ok();

	brmr_store_info(s, &info);
	ck_assert_uint_eq(info.sequence, seq);
	ck_assert_str_eq(info.pool_name, name);
	brmr_store_close(s);
}

START_TEST(test_ab_selection)
{
	static const size_t cuts[] = { 1, 100, 512, 2048, 4091 };
	struct sb_disk newer, d;

	format_store(SMALL_POOL);
	expect_chosen(1, "vol-1");
	/* B newer than A wins. */
	put_slot(1, 2, "vol-b2");
	expect_chosen(2, "vol-b2");
	/* A newer again. */
	put_slot(0, 3, "vol-a3");
	expect_chosen(3, "vol-a3");
	/* An older slot never wins, whichever it is. */
	put_slot(1, 2, "vol-b2");
	expect_chosen(3, "vol-a3");

	/*
	 * A torn update of B (sequence 4): only the first @cut bytes of the
	 * new slot reach the disk; A (sequence 3) stays in charge.
	 */
	read_slot(0, &d);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		struct superblock sb;

		put_slot(1, 2, "vol-b2");
		ck_assert_int_eq(superblock_decode(&d, UINT64_MAX, &sb, NULL, 0), 0);
		sb.sequence = 4;
		strcpy(sb.pool_name, "vol-b4");
		sb.nmembers = 2; /* a membership change, say */
		superblock_encode(&sb, &newer);
		/* Member 5 dropped: member id 2 is still listed. */
		write_at(&newer, cuts[i], SB_SLOT_SIZE);
		expect_chosen(3, "vol-a3");
	}
	/* The whole write lands: B wins. */
	write_at(&newer, sizeof(newer), SB_SLOT_SIZE);
	expect_chosen(4, "vol-b4");

	/* A torn A with B valid: B. */
	put_slot(0, 5, "vol-a5");
	read_slot(0, &d);
	d.pool_name[4] = '9';
	write_slot(0, &d); /* stale crc: a torn or rotten write */
	expect_chosen(4, "vol-b4");
}
END_TEST

START_TEST(test_ab_conflicts)
{
	struct sb_disk d;

	format_store(SMALL_POOL);
	put_slot(1, 1, "vol-1");
	expect_refused(-EBADMSG, "same sequence");

	/* Slot B of another pool. */
	read_slot(0, &d);
	d.pool_uuid[0] ^= 0xff;
	d.sequence = sb_cpu_to_le64(2);
	superblock_seal(&d);
	write_slot(1, &d);
	expect_refused(-EBADMSG, "different pools");

	/* Slot B of a newer format poisons the store, though A is valid. */
	read_slot(0, &d);
	d.version = sb_cpu_to_le32(2);
	d.sequence = sb_cpu_to_le64(2);
	superblock_seal(&d);
	write_slot(1, &d);
	expect_refused(-EPROTONOSUPPORT, "slot B: format version 2");

	/* Both slots bad: both reasons. */
	memset(&d, 0, sizeof(d));
	memcpy(d.magic, SB_MAGIC, 8);
	d.version = sb_cpu_to_le32(1);
	d.header_size = sb_cpu_to_le32(SB_SLOT_SIZE);
	write_slot(1, &d);
	read_slot(0, &d);
	d.crc.v ^= 0x100;
	write_slot(0, &d);
	expect_refused(-EBADMSG, "slot A: checksum mismatch");
	expect_refused(-EBADMSG, "slot B: checksum mismatch");
}
END_TEST

START_TEST(test_format_refuses_without_force)
{
	struct brmr_format_params p = params(SMALL_POOL, 2);
	struct brmr_store_info info = { .size = sizeof(info) };
	struct brmr_store *s;
	char buf[4096], why[256] = "";

	format_store(SMALL_POOL);
	s = open_ok();
	brmr_store_info(s, &info);
	memset(buf, 0x5a, sizeof(buf));
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, 8192, sizeof(buf), buf), 0);
	brmr_store_close(s);

	ck_assert_int_eq(brmr_store_format_pool(path, &p, test_members, 3, 0, why, sizeof(why)),
			 -EEXIST);
	ck_assert_ptr_nonnull(strstr(why, "already holds member 2 of pool vol-1"));
	ck_assert_int_eq(brmr_store_format(path, &p), -EEXIST);
	/* CHECK_ONLY says the same and writes nothing. */
	ck_assert_int_eq(brmr_store_format_pool(path, &p, test_members, 3,
						BRMR_FORMAT_CHECK_ONLY, why, sizeof(why)),
			 -EEXIST);

	/* With force: a new pool, and its data reads as zeroes. */
	p.force = true;
	p.pool_name = "vol-2";
	p.pool_uuid.b[0] ^= 1;
	ck_assert_int_eq(brmr_store_format(path, &p), 0);
	s = open_ok();
	brmr_store_info(s, &info);
	ck_assert_str_eq(info.pool_name, "vol-2");
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, 8192, sizeof(buf), buf), 0);
	ck_assert(is_zero(buf, sizeof(buf)));
	brmr_store_close(s);
}
END_TEST

START_TEST(test_format_bad_params)
{
	struct brmr_format_params p;
	struct brmr_member dup[2] = { { .id = 2, .addr = "a:1" }, { .id = 2, .addr = "b:1" } };
	struct brmr_member other[1] = { { .id = 3, .addr = "a:1" } };
	char why[256];

#define BAD(mod, reason)                                                                 \
	do {                                                                             \
		p = params(SMALL_POOL, 2);                                                 \
		mod;                                                                     \
		why[0] = '\0';                                                           \
		ck_assert_int_eq(brmr_store_format_pool(path, &p, NULL, 0, 0, why,       \
							sizeof(why)), -EINVAL);          \
		ck_assert_msg(strstr(why, reason), "'%s' lacks '%s'", why, reason);      \
		ck_assert_int_eq(access(path, F_OK), -1);                                \
	} while (0)
	BAD(p.pool_name = "", "bad pool name");
	BAD(p.pool_name = "a/b", "bad pool name");
	BAD(p.pool_name = NULL, "bad pool name");
	BAD(memset(&p.pool_uuid, 0, sizeof(p.pool_uuid)), "uuid is all zero");
	BAD(p.pool_size = 0, "pool size 0");
	BAD(p.pool_size = 4095, "pool size 4095");
	BAD(p.chunk_size = 4096, "chunk size");
	BAD(p.chunk_size = 3 * 128 * 1024, "chunk size");
	BAD(p.member_id = 0, "member id 0");
	BAD(p.member_id = 64, "member id 64");
	BAD(p.pool_size = UINT64_MAX - 4095, "pool size");
#undef BAD
	p = params(SMALL_POOL, 2);
	ck_assert_int_eq(brmr_store_format_pool(path, &p, dup, 2, 0, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "listed twice"));
	ck_assert_int_eq(brmr_store_format_pool(path, &p, other, 1, 0, why, sizeof(why)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "not in the store's own member list"));
	ck_assert_int_eq(brmr_store_format_pool(path, &p, NULL, 0, 0x80, why, sizeof(why)),
			 -EINVAL);
	ck_assert_int_eq(access(path, F_OK), -1);
	/* CHECK_ONLY of a good request creates nothing. */
	ck_assert_int_eq(brmr_store_format_pool(path, &p, NULL, 0, BRMR_FORMAT_CHECK_ONLY, why,
						sizeof(why)), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

START_TEST(test_large_store_io)
{
	const uint64_t pool = 16 * GiB;
	const uint64_t far = 5 * GiB + 12345; /* past 4 GiB, unaligned */
	struct brmr_store_info info = { .size = sizeof(info) };
	struct brmr_store *s;
	static uint8_t buf[256 * 1024], back[256 * 1024];
	struct stat st;
	int fd;

	format_store(pool);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_lt((uint64_t)st.st_blocks * 512, 64 * MiB); /* sparse */
	s = open_ok();
	brmr_store_info(s, &info);
	ck_assert_uint_eq(info.pool_size, pool);
	ck_assert_int_eq(store_workers_start(s), 0);

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 31 + 7);
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, far, 100000, buf), 0);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, far, 100000, back), 0);
	ck_assert(!memcmp(buf, back, 100000));
	/* The bytes are where the format says: data_offset + address. */
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(pread(fd, back, 100000, (off_t)(info.data_offset + far)), 100000);
	close(fd);
	ck_assert(!memcmp(buf, back, 100000));

	/* FUA write at the very end, then flush. */
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, BRMR_F_FUA, pool - 4096, 4096, buf), 0);
	ck_assert_int_eq(do_io(s, BRMR_OP_FLUSH, 0, 0, 0, NULL), 0);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, pool - 4096, 4096, back), 0);
	ck_assert(!memcmp(buf, back, 4096));

	/* TRIM and WRITE_ZEROES read back as zeroes, unaligned edges included. */
	ck_assert_int_eq(do_io(s, BRMR_OP_TRIM, 0, far + 1000, 50000, NULL), 0);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, far, 100000, back), 0);
	ck_assert(!memcmp(back, buf, 1000));
	ck_assert(is_zero(back + 1000, 50000));
	ck_assert(!memcmp(back + 51000, buf + 51000, 100000 - 51000));
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE_ZEROES, BRMR_F_FUA, far, 100000, NULL), 0);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, far, 100000, back), 0);
	ck_assert(is_zero(back, 100000));

	/* Out of range, bad op, flags, kinds, payloads: refused, never applied. */
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, pool - 4096, 8192, buf), -EINVAL);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, pool, 4096, back), -EINVAL);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, UINT64_MAX - 100, 4096, back), -EINVAL);
	ck_assert_int_eq(do_io(s, BRMR_OP_TRIM, 0, pool - 4096, 8192, NULL), -EINVAL);
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, 0, 0, buf), -EINVAL);
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, 0, 4096, NULL), -EINVAL);
	ck_assert_int_eq(do_io(s, BRMR_OP_FLUSH, 0, 4096, 0, NULL), -EINVAL);
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 1u << 7, 0, 4096, buf), -EINVAL);
	ck_assert_int_eq(do_io(s, 99, 0, 0, 4096, NULL), -EOPNOTSUPP);

	/* Fault injection: data I/O fails while on, works after. */
	brmr_store_inject_fault(s, true);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, far, 4096, back), -EIO);
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, far, 4096, buf), -EIO);
	ck_assert_int_eq(do_io(s, BRMR_OP_FLUSH, 0, 0, 0, NULL), -EIO);
	ck_assert_int_eq(store_ops.chunk_export(s, 0, back, 128 * 1024), -EIO);
	ck_assert_int_eq(store_ops.chunk_import(s, 0, buf, 4096), -EIO);
	brmr_store_inject_fault(s, false);
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, far, 4096, buf), 0);
	/* The failed import wrote nothing. */
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, 0, 4096, back), 0);
	ck_assert(is_zero(back, 4096));

	/* Byte ranges of a chunk past 4 GiB: whole, and in pieces. */
	{
		uint64_t base = (far / CHUNK + 1) * CHUNK;

		ck_assert_int_eq(store_ops.chunk_import(s, base, buf, CHUNK), 0);
		memset(back, 0, sizeof(back));
		ck_assert_int_eq(store_ops.chunk_export(s, base, back, CHUNK), 0);
		ck_assert(!memcmp(buf, back, CHUNK));
		ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, base, 4096, back), 0);
		ck_assert(!memcmp(buf, back, 4096));
		/* A piece in the middle, unaligned: only those bytes change. */
		memset(back, 0x3c, 5000);
		ck_assert_int_eq(store_ops.chunk_import(s, base + 777, back, 5000), 0);
		memset(back, 0, sizeof(back));
		ck_assert_int_eq(store_ops.chunk_export(s, base, back, CHUNK), 0);
		ck_assert(!memcmp(back, buf, 777));
		for (unsigned i = 777; i < 777 + 5000; i++)
			expect(back[i] == 0x3c);
		ck_assert(!memcmp(back + 5777, buf + 5777, CHUNK - 5777));
		/* The last byte of the chunk alone; one byte each side of the edge. */
		ck_assert_int_eq(store_ops.chunk_export(s, base + CHUNK - 1, back, 1), 0);
		ck_assert_uint_eq(back[0], buf[CHUNK - 1]);
		/* Ranges crossing a chunk edge, empty, or past the pool: refused. */
		ck_assert_int_eq(store_ops.chunk_export(s, base + 4096, back, CHUNK), -EINVAL);
		ck_assert_int_eq(store_ops.chunk_import(s, base + CHUNK - 1, buf, 2), -EINVAL);
		ck_assert_int_eq(store_ops.chunk_export(s, base - 1, back, 2), -EINVAL);
		ck_assert_int_eq(store_ops.chunk_export(s, base, back, 0), -EINVAL);
		ck_assert_int_eq(store_ops.chunk_export(s, base, back, CHUNK + 4096), -EINVAL);
		ck_assert_int_eq(store_ops.chunk_export(s, pool, back, 4096), -EINVAL);
		ck_assert_int_eq(store_ops.chunk_import(s, pool, buf, 1), -EINVAL);
		ck_assert_int_eq(store_ops.chunk_export(s, UINT64_MAX - 10, back, 4096), -EINVAL);
		ck_assert_int_eq(store_ops.chunk_export(s, base, NULL, 4096), -EINVAL);
		ck_assert_int_eq(store_ops.chunk_import(s, base, NULL, 4096), -EINVAL);
		/* None of the refused calls wrote anything. */
		ck_assert_int_eq(store_ops.chunk_export(s, base + CHUNK - 1, back, 1), 0);
		ck_assert_uint_eq(back[0], buf[CHUNK - 1]);
		ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, base + CHUNK, 4096, back), 0);
		ck_assert(is_zero(back, 4096));
		ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, pool - 4096, 4096, back), 0);
		ck_assert(!memcmp(buf, back, 4096)); /* the FUA write above */
	}
	ck_assert_int_eq(store_ops.flush(s), 0);
	brmr_store_close(s);
}
END_TEST

/* How many pages of [@p off, + @p len) of @p file the page cache holds. */
static size_t pages_cached(const char *file, uint64_t off, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 0;
	unsigned char vec[1024];
	int fd = open(file, O_RDONLY);
	void *m;

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_le(len / page, sizeof(vec));
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(mincore(m, len, vec), 0);
	for (size_t i = 0; i < len / page; i++)
		n += vec[i] & 1;
	munmap(m, len);
	close(fd);
	return n;
}

/*
 * A read the page cache does not hold goes to a worker, and the event loop
 * goes on meanwhile; one it holds is served at once. Needs a file system
 * that can drop a file's pages: not tmpfs, so the store goes next to the
 * test (the build directory) when the temporary directory is one.
 */
START_TEST(test_disk_reads_on_workers)
{
	static uint8_t buf[256 * 1024], back[256 * 1024];
	struct brmr_store_info info = { .size = sizeof(info) };
	char here[64] = "brmr-cold-XXXXXX", file[sizeof(tmpdir) + 8];
	const char *dir = tmpdir;
	struct brmr_store *s;
	struct statfs sfs;
	bool on_submit;
	int fd;

	ck_assert_int_eq(statfs(tmpdir, &sfs), 0);
	if (sfs.f_type == TMPFS_MAGIC) {
		ck_assert_ptr_nonnull(mkdtemp(here));
		dir = here;
	}
	snprintf(file, sizeof(file), "%s/cold", dir);
	snprintf(path, sizeof(path), "%s", file);
	format_store(SMALL_POOL);
	s = open_ok();
	brmr_store_info(s, &info);
	ck_assert_int_eq(store_workers_start(s), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13 + 5);
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, 0, sizeof(buf), buf), 0);
	ck_assert_int_eq(store_ops.flush(s), 0);

	/* Out of the page cache (the pages are clean after the flush). */
	fd = open(file, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	ck_assert_msg(pages_cached(file, info.data_offset, sizeof(buf)) == 0,
		      "the page cache kept the store's pages (file system: %#lx)",
		      (unsigned long)sfs.f_type);

	ck_assert_int_eq(do_io_at(s, BRMR_OP_READ, 0, 0, sizeof(back), back, &on_submit), 0);
	ck_assert_msg(!on_submit, "a read from the disk was served on the submitting thread");
	ck_assert_uint_eq(store_worker_reads(s), 1);
	ck_assert(!memcmp(buf, back, sizeof(buf)));

	/* Now cached: served at once, by the caller. */
	memset(back, 0, sizeof(back));
	ck_assert_int_eq(do_io_at(s, BRMR_OP_READ, 0, 4096, 8192, back, &on_submit), 0);
	ck_assert_msg(on_submit, "a cached read went to a worker");
	ck_assert_uint_eq(store_worker_reads(s), 1);
	ck_assert(!memcmp(buf + 4096, back, 8192));

	/* A bad or failing read is answered at once, cached or not. */
	ck_assert_int_eq(do_io_at(s, BRMR_OP_READ, 0, SMALL_POOL, 4096, back, &on_submit), -EINVAL);
	ck_assert(on_submit);
	brmr_store_inject_fault(s, true);
	ck_assert_int_eq(do_io_at(s, BRMR_OP_READ, 0, 0, 4096, back, &on_submit), -EIO);
	ck_assert(on_submit);
	brmr_store_inject_fault(s, false);
	ck_assert_uint_eq(store_worker_reads(s), 1);

	brmr_store_close(s);
	if (dir == here) {
		ck_assert_int_eq(unlink(file), 0);
		ck_assert_int_eq(rmdir(here), 0);
	}
}
END_TEST

/*
 * A failed write-back (reported once, as Linux does) marks the store's data
 * lost for good: every later request and flush fails although the disk now
 * answers, the superblock says so, and the store is not served again after
 * a restart; brmrctl inspect (brmr_store_info) tells. A fresh format clears it.
 */
START_TEST(test_writeback_failure_is_sticky)
{
	struct rmr_server_opts so = { .size = sizeof(so), .transport = "mem",
				      .listen_addr = "sb-lost" };
	struct brmr_store_info info = { .size = sizeof(info) };
	static uint8_t buf[4096], back[4096];
	struct rmr_server_pool *pool = NULL;
	struct rmr_server *srv;
	struct brmr_store *s;
	uint64_t seq;

	rmr_log_set_sink(NULL, NULL, RMR_LOG_ERR);
	format_store(SMALL_POOL);
	s = open_ok();
	ck_assert_int_eq(store_workers_start(s), 0);
	brmr_store_info(s, &info);
	ck_assert(!info.data_lost);
	seq = info.sequence;
	memset(buf, 0x5a, sizeof(buf));
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, 0, sizeof(buf), buf), 0);

	store_fail_next_sync(s, EIO);
	ck_assert_int_eq(do_io(s, BRMR_OP_FLUSH, 0, 0, 0, NULL), -EIO);
	/* The disk answers again; the store does not. */
	ck_assert_int_eq(do_io(s, BRMR_OP_FLUSH, 0, 0, 0, NULL), -EIO);
	ck_assert_int_eq(store_ops.flush(s), -EIO);
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, 4096, sizeof(buf), buf), -EIO);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, 0, sizeof(back), back), -EIO);
	ck_assert_int_eq(store_ops.chunk_export(s, 0, back, sizeof(back)), -EIO);
	ck_assert_int_eq(store_ops.chunk_import(s, 0, buf, sizeof(buf)), -EIO);
	brmr_store_info(s, &info);
	ck_assert(info.data_lost);
	brmr_store_close(s);

	/* Restarted: the superblock (a newer copy in the other slot) says so. */
	s = open_ok();
	brmr_store_info(s, &info);
	ck_assert(info.data_lost);
	ck_assert_uint_eq(info.sequence, seq + 1);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, 0, sizeof(back), back), -EIO);
	ck_assert_int_eq(rmr_server_create(&so, &srv), 0);
	ck_assert_int_eq(brmr_store_serve(s, srv, NULL, &pool), -EIO);
	ck_assert_ptr_null(pool);
	rmr_server_destroy(srv);
	brmr_store_close(s);

	/* Every synchronous path marks it: a FUA write's sync, a FUA trim's,
	 * a metadata save's (each reports a write-back failure of the file). */
	for (unsigned how = 0; how < 3; how++) {
		static const char blob[] = "meta";

		ck_assert_int_eq(unlink(path), 0);
		format_store(SMALL_POOL);
		s = open_ok();
		brmr_store_info(s, &info);
		ck_assert(!info.data_lost);
		ck_assert_int_eq(store_workers_start(s), 0);
		store_fail_next_sync(s, how == 1 ? ENOSPC : EIO);
		if (how == 0)
			ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, BRMR_F_FUA, 0, sizeof(buf), buf), -EIO);
		else if (how == 1)
			ck_assert_int_eq(do_io(s, BRMR_OP_TRIM, BRMR_F_FUA, 0, 4096, NULL), -ENOSPC);
		else
			ck_assert_int_eq(store_ops.meta_save(s, blob, sizeof(blob)), -EIO);
		ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, 0, sizeof(buf), buf), -EIO);
		brmr_store_info(s, &info);
		ck_assert_msg(info.data_lost, "path %u did not mark the store", how);
		brmr_store_close(s);
	}
}
END_TEST

START_TEST(test_short_last_chunk)
{
	const uint64_t pool = 3 * 128 * 1024 + 8192;
	static uint8_t buf[128 * 1024], back[128 * 1024];
	struct brmr_store *s;

	format_store(pool);
	s = open_ok();
	memset(buf, 0xc3, sizeof(buf));
	/* The last chunk has 8 KiB: all of it, or a piece, but nothing past the pool. */
	ck_assert_int_eq(store_ops.chunk_import(s, 3 * CHUNK, buf, 8192), 0);
	ck_assert_int_eq(store_ops.chunk_export(s, 3 * CHUNK, back, 8192), 0);
	ck_assert(!memcmp(buf, back, 8192));
	ck_assert_int_eq(store_ops.chunk_export(s, 3 * CHUNK + 4096, back, 4096), 0);
	ck_assert(!memcmp(buf, back, 4096));
	ck_assert_int_eq(store_ops.chunk_export(s, 3 * CHUNK, back, 128 * 1024), -EINVAL);
	ck_assert_int_eq(store_ops.chunk_export(s, 3 * CHUNK, back, 8193), -EINVAL);
	ck_assert_int_eq(store_ops.chunk_export(s, 3 * CHUNK + 8192, back, 1), -EINVAL);
	ck_assert_int_eq(store_ops.chunk_export(s, 4 * CHUNK, back, 8192), -EINVAL);
	ck_assert_int_eq(store_ops.chunk_import(s, 2 * CHUNK, buf, 128 * 1024), 0);
	/* From chunk 2 into chunk 3: crosses an edge. */
	ck_assert_int_eq(store_ops.chunk_import(s, 3 * CHUNK - 4096, buf, 8192), -EINVAL);
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, 2 * CHUNK, 128 * 1024, back), 0);
	ck_assert(!memcmp(buf, back, 128 * 1024));
	brmr_store_close(s);
}
END_TEST

static int meta_load(struct brmr_store *s, void *buf, size_t cap, size_t *len)
{
	return store_ops.meta_load(s, buf, cap, len);
}

START_TEST(test_meta_round_trip)
{
	struct brmr_store *s;
	char buf[4096];
	size_t len = 123;

	format_store(SMALL_POOL);
	s = open_ok();
	/* A fresh store has no blob. */
	ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), 0);
	ck_assert_uint_eq(len, 0);
	for (int i = 1; i <= 5; i++) {
		char blob[64];
		int n = snprintf(blob, sizeof(blob), "blob number %d", i);

		ck_assert_int_eq(store_ops.meta_save(s, blob, (size_t)n), 0);
		ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), 0);
		ck_assert_uint_eq(len, (size_t)n);
		ck_assert_mem_eq(buf, blob, (size_t)n);
	}
	brmr_store_close(s);
	/* Survives a reopen, and saving continues the sequence. */
	s = open_ok();
	ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), 0);
	ck_assert_uint_eq(len, strlen("blob number 5"));
	ck_assert_int_eq(store_ops.meta_save(s, "six", 3), 0);
	brmr_store_close(s);
	s = open_ok();
	/* save before load: the store finds the sequence itself */
	ck_assert_int_eq(store_ops.meta_save(s, "seven", 5), 0);
	ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), 0);
	ck_assert_uint_eq(len, 5);
	ck_assert_mem_eq(buf, "seven", 5);
	/* Too small a buffer, too big a blob. */
	ck_assert_int_eq(meta_load(s, buf, 2, &len), -EOVERFLOW);
	{
		const struct superblock *sb = store_superblock(s);
		size_t big = meta_slot_capacity(sb) + 1;
		char *p = calloc(1, big);

		ck_assert_int_eq(store_ops.meta_save(s, p, big), -E2BIG);
		ck_assert_int_eq(store_ops.meta_save(s, p, big - 1), 0);
		ck_assert_int_eq(store_ops.meta_save(s, "", 0), 0);
		ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), 0);
		ck_assert_uint_eq(len, 0);
		free(p);
	}
	brmr_store_close(s);
}
END_TEST

START_TEST(test_meta_torn_save)
{
	static const size_t cuts[] = { 1, 30, 63, 64, 70, 64 + 2999 };
	struct meta_hdr_disk h;
	struct brmr_store *s;
	uint8_t rec[META_HDR_SIZE + 3000];
	char buf[4096];
	size_t len;
	const struct superblock *sb;

	format_store(SMALL_POOL);
	s = open_ok();
	sb = store_superblock(s);

	/* A torn very first save leaves "no blob", which is the old state. */
	memset(rec, 0x77, sizeof(rec));
	meta_hdr_encode(sb, 1, rec + META_HDR_SIZE, 3000, &h);
	memcpy(rec, &h, sizeof(h));
	write_at(rec, 100, (off_t)meta_slot_offset(sb, 1));
	ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), 0);
	ck_assert_uint_eq(len, 0);

	ck_assert_int_eq(store_ops.meta_save(s, "first", 5), 0);  /* seq 1, slot 1 */
	ck_assert_int_eq(store_ops.meta_save(s, "second", 6), 0); /* seq 2, slot 0 */
	/* Save 3 goes to slot 1; cut it at several points. */
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		memset(rec + META_HDR_SIZE, (int)i + 1, 3000);
		meta_hdr_encode(sb, 3, rec + META_HDR_SIZE, 3000, &h);
		memcpy(rec, &h, sizeof(h));
		write_at(rec, cuts[i], (off_t)meta_slot_offset(sb, 1));
		ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), 0);
		ck_assert_msg(len == 6 && !memcmp(buf, "second", 6), "cut %zu", cuts[i]);
	}
	/* The complete write wins. */
	write_at(rec, sizeof(rec), (off_t)meta_slot_offset(sb, 1));
	ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), 0);
	ck_assert_uint_eq(len, 3000);

	/* The next save goes over the older slot, never the newest. */
	ck_assert_int_eq(store_ops.meta_save(s, "fourth", 6), 0);
	ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), 0);
	ck_assert_mem_eq(buf, "fourth", 6);

	/* Both slots unreadable after saves happened: refuse, do not forget. */
	memset(rec, 0xee, 64);
	write_at(rec, 64, (off_t)meta_slot_offset(sb, 0) + 10);
	write_at(rec, 64, (off_t)meta_slot_offset(sb, 1) + 10);
	ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), -EBADMSG);

	/* A blob of another pool (left by an old format) is not ours. */
	{
		struct superblock other = *sb;

		other.pool_uuid.b[3] ^= 1;
		meta_hdr_encode(&other, 2, "x", 1, &h);
		memcpy(rec, &h, sizeof(h));
		rec[META_HDR_SIZE] = 'x';
		write_at(rec, META_HDR_SIZE + 1, (off_t)meta_slot_offset(sb, 0));
		ck_assert_int_eq(meta_load(s, buf, sizeof(buf), &len), -EBADMSG);
	}
	brmr_store_close(s);
}
END_TEST

/* Lay out @p pool_size at @p chunk with @p meta_max; the result must pass the decoder's rules. */
static struct superblock layout(uint64_t pool_size, uint32_t chunk, size_t meta_max)
{
	struct superblock sb = {
		.version = SB_VERSION, .pool_name = "x", .member_id = 1, .sequence = 1,
		.chunk_size = chunk, .pool_size = pool_size,
	};
	char why[256] = "";

	sb.pool_uuid.b[0] = 1;
	ck_assert_int_eq(superblock_layout(&sb, meta_max), 0);
	ck_assert_msg(superblock_check(&sb, UINT64_MAX, why, sizeof(why)) == 0, "%s", why);
	return sb;
}

START_TEST(test_layout_sizes)
{
	struct superblock sb;

	/* A small blob: the 1 MiB slot floor. 16 GiB: 16 KiB per member id's
	 * bitmap (63 of them), then the two 32 KiB activity log records. */
	sb = layout(16 * GiB, CHUNK, 4096);
	ck_assert_uint_eq(sb.meta_offset, 8192);
	ck_assert_uint_eq(sb.meta_size, 2 * MiB);
	ck_assert_uint_eq(sb.map_offset, 8192 + 2 * MiB);
	ck_assert_uint_eq(sb.map_size, 63 * 16 * 1024 + 64 * 1024);
	ck_assert_uint_eq(sb.data_offset, 4 * MiB);
	/* 2 TiB: 2 MiB bitmaps, 126 MiB of maps; the metadata slots do not grow with the pool. */
	sb = layout(2 * TiB, CHUNK, 4096);
	ck_assert_uint_eq(sb.meta_size, 2 * MiB);
	ck_assert_uint_eq(sb.map_offset, 8192 + 2 * MiB);
	ck_assert_uint_eq(sb.map_size, 126 * MiB + 64 * 1024);
	ck_assert_uint_eq(sb.data_offset, 129 * MiB);

	/* The examples of docs/disk-format.md, with meta_max = 4 MiB. */
	sb = layout(SMALL_POOL, CHUNK, 4 * MiB);
	ck_assert_uint_eq(sb.meta_size, 2 * (4 * MiB + 4096));
	ck_assert_uint_eq(sb.map_offset, 8404992);
	ck_assert_uint_eq(sb.map_size, 63 * 4096 + 64 * 1024);
	ck_assert_uint_eq(sb.data_offset, 9 * MiB);
	sb = layout(16 * GiB, CHUNK, 4 * MiB);
	ck_assert_uint_eq(sb.map_size, 63 * 16 * 1024 + 64 * 1024);
	ck_assert_uint_eq(sb.data_offset, 10 * MiB);
	sb = layout(2 * TiB, CHUNK, 4 * MiB);
	ck_assert_uint_eq(sb.map_size, 126 * MiB + 64 * 1024);
	ck_assert_uint_eq(sb.data_offset, 135 * MiB);
	sb = layout(2 * TiB, 1024 * 1024, 4 * MiB);
	ck_assert_uint_eq(sb.map_size, 63 * 256 * 1024 + 64 * 1024);
	ck_assert_uint_eq(sb.data_offset, 24 * MiB);
	sb = layout(64 * TiB, CHUNK, 4 * MiB); /* 2^29 chunks: the most librmr tracks */
	ck_assert_uint_eq(sb.map_size, 63 * 64 * MiB + 64 * 1024);
	ck_assert_uint_eq(sb.data_offset, 4041 * MiB);

	/* An odd chunk count rounds each bitmap up to 4 KiB. */
	sb = layout(4096ull * 8 * CHUNK + CHUNK, CHUNK, 4096); /* 32769 chunks */
	ck_assert_uint_eq(sb.map_size, 63 * 8192 + 64 * 1024);
	ck_assert_uint_eq(sb.map_size, rmr_server_map_area_size(sb.pool_size, CHUNK));

	/* One chunk more than the dirty maps cover: no layout. */
	sb = (struct superblock){ .chunk_size = CHUNK, .pool_size = 64 * TiB + CHUNK };
	ck_assert_int_eq(superblock_layout(&sb, 4096), -EINVAL);
	sb = (struct superblock){ .chunk_size = CHUNK, .pool_size = UINT64_MAX - 4095 };
	ck_assert_int_eq(superblock_layout(&sb, 4096), -EINVAL);
}
END_TEST

/* A map area with more room than the pool needs, and gaps between the areas, decode. */
START_TEST(test_layout_roomier_accepted)
{
	struct superblock sb, back;
	struct sb_disk d;
	char why[256] = "";

	format_store(SMALL_POOL);
	read_slot(0, &d);
	ck_assert_int_eq(superblock_decode(&d, UINT64_MAX, &sb, NULL, 0), 0);
	sb.map_offset += 8192;        /* a gap after the metadata */
	sb.map_size += 3 * 4096;      /* and more than 16 bitmaps */
	ck_assert_uint_le(sb.map_offset + sb.map_size, sb.data_offset);
	superblock_encode(&sb, &d);
	ck_assert_msg(superblock_decode(&d, UINT64_MAX, &back, why, sizeof(why)) == 0, "%s", why);
	ck_assert_uint_eq(back.map_offset, sb.map_offset);
	ck_assert_uint_eq(back.map_size, sb.map_size);
}
END_TEST

static int map_read(struct brmr_store *s, uint64_t off, void *buf, size_t len)
{
	return store_ops.map_read(s, off, buf, len);
}

static int map_write(struct brmr_store *s, uint64_t off, const void *buf, size_t len)
{
	return store_ops.map_write(s, off, buf, len);
}

START_TEST(test_map_area)
{
	struct brmr_store_info info = { .size = sizeof(info) };
	static uint8_t buf[128 * 1024], back[320 * 1024];
	struct brmr_store *s;
	uint64_t size;
	char blob[16];
	size_t len;
	int fd;

	format_store(SMALL_POOL);
	s = open_ok();
	ck_assert_int_eq(brmr_store_info(s, &info), 0);
	size = info.map_size;
	ck_assert_uint_eq(size, 63 * 4096 + 64 * 1024);
	ck_assert_ptr_nonnull(store_ops.map_read);
	ck_assert_ptr_nonnull(store_ops.map_write);

	/* A new store's area reads as zeroes. */
	memset(back, 0xee, sizeof(back));
	ck_assert_int_eq(map_read(s, 0, back, size), 0);
	ck_assert(is_zero(back, size));

	/* Blocks at the start, in the middle, at the end; several at once. */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13 + 1);
	ck_assert_int_eq(map_write(s, 0, buf, 4096), 0);
	ck_assert_int_eq(map_write(s, 5 * 4096, buf + 4096, 2 * 4096), 0);
	ck_assert_int_eq(map_write(s, size - 4096, buf + 3 * 4096, 4096), 0);

	/* Range checks: misaligned, partial, empty, outside, overflowing, NULL. */
	ck_assert_int_eq(map_write(s, 512, buf, 4096), -EINVAL);
	ck_assert_int_eq(map_write(s, 4096, buf, 100), -EINVAL);
	ck_assert_int_eq(map_write(s, 4096, buf, 4096 + 512), -EINVAL);
	ck_assert_int_eq(map_write(s, 4096, buf, 0), -EINVAL);
	ck_assert_int_eq(map_write(s, size, buf, 4096), -EINVAL);
	ck_assert_int_eq(map_write(s, size - 4096, buf, 8192), -EINVAL);
	ck_assert_int_eq(map_write(s, UINT64_MAX - 4095, buf, 4096), -EINVAL);
	ck_assert_int_eq(map_write(s, 4096, NULL, 4096), -EINVAL);
	ck_assert_int_eq(map_read(s, size, back, 1), -EINVAL);
	ck_assert_int_eq(map_read(s, size - 10, back, 11), -EINVAL);
	ck_assert_int_eq(map_read(s, UINT64_MAX - 10, back, 20), -EINVAL);
	ck_assert_int_eq(map_read(s, 0, back, 0), -EINVAL);
	ck_assert_int_eq(map_read(s, 0, NULL, 4096), -EINVAL);
	/* Reads need no alignment. */
	ck_assert_int_eq(map_read(s, 5 * 4096 + 100, back, 10), 0);
	ck_assert(!memcmp(back, buf + 4096 + 100, 10));
	ck_assert_int_eq(map_read(s, size - 10, back, 10), 0);
	ck_assert(!memcmp(back, buf + 4 * 4096 - 10, 10));

	/* Fault injection is for data I/O only: the maps keep working. */
	brmr_store_inject_fault(s, true);
	ck_assert_int_eq(map_write(s, 4096, buf + 8 * 4096, 4096), 0);
	ck_assert_int_eq(map_read(s, 4096, back, 4096), 0);
	ck_assert(!memcmp(back, buf + 8 * 4096, 4096));
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, 0, 4096, back), -EIO);
	brmr_store_inject_fault(s, false);

	/* Neither data nor metadata were touched by the map writes. */
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, 0, 4096, back), 0);
	ck_assert(is_zero(back, 4096));
	ck_assert_int_eq(do_io(s, BRMR_OP_READ, 0, SMALL_POOL - 4096, 4096, back), 0);
	ck_assert(is_zero(back, 4096));
	ck_assert_int_eq(meta_load(s, blob, sizeof(blob), &len), 0);
	ck_assert_uint_eq(len, 0);
	/* And map writes do not bleed into data or metadata in the other direction. */
	memset(back, 0x5a, 4096);
	ck_assert_int_eq(do_io(s, BRMR_OP_WRITE, 0, 0, 4096, back), 0);
	ck_assert_int_eq(store_ops.meta_save(s, "meta", 4), 0);
	brmr_store_close(s);

	/* Everything survives a reopen, at map_offset in the file as the format says. */
	s = open_ok();
	ck_assert_int_eq(map_read(s, 0, back, size), 0);
	ck_assert(!memcmp(back, buf, 4096));
	ck_assert(!memcmp(back + 4096, buf + 8 * 4096, 4096));
	ck_assert(is_zero(back + 2 * 4096, 3 * 4096));
	ck_assert(!memcmp(back + 5 * 4096, buf + 4096, 2 * 4096));
	ck_assert(is_zero(back + 7 * 4096, size - 8 * 4096));
	ck_assert(!memcmp(back + size - 4096, buf + 3 * 4096, 4096));
	brmr_store_close(s);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, back, 8192, (off_t)info.map_offset), 8192);
	ck_assert(!memcmp(back, buf, 4096));
	ck_assert(!memcmp(back + 4096, buf + 8 * 4096, 4096));
	ck_assert_int_eq(pread(fd, back, 4096, (off_t)(info.map_offset + size - 4096)), 4096);
	ck_assert(!memcmp(back, buf + 3 * 4096, 4096));
	/* The bytes before and after the area are not the map's. */
	ck_assert_int_eq(pread(fd, back, 4096, (off_t)(info.map_offset + size)), 4096);
	ck_assert(is_zero(back, 4096));
	close(fd);

	/* A forced re-format over the old file starts with a zero map area again. */
	{
		struct brmr_format_params p = params(SMALL_POOL, 2);
		char why[256] = "";

		p.force = true;
		ck_assert_msg(brmr_store_format_pool(path, &p, test_members, 3, 0, why,
						     sizeof(why)) == 0, "%s", why);
	}
	s = open_ok();
	memset(back, 0xee, sizeof(back));
	ck_assert_int_eq(map_read(s, 0, back, size), 0);
	ck_assert(is_zero(back, size));
	brmr_store_close(s);
}
END_TEST

START_TEST(test_serve_params)
{
	struct rmr_peer peers[RMR_MAX_MEMBERS];
	struct rmr_pool_params pp;
	struct brmr_serve_opts opts = {
		.size = sizeof(opts), .sync_queue_depth = 7, .resync_rate = 5 * MiB,
	};
	struct brmr_format_params p = params(SMALL_POOL, 5);
	struct brmr_store *s;
	char why[256] = "";

	format_store(SMALL_POOL); /* member 2 of 1, 2, 5 */
	s = open_ok();
	ck_assert_int_eq(store_pool_params(s, &opts, &pp, peers), 0);
	ck_assert_uint_eq(pp.size, sizeof(pp));
	ck_assert_str_eq(pp.name, "vol-1");
	ck_assert_mem_eq(pp.uuid.b, p.pool_uuid.b, RMR_UUID_LEN);
	ck_assert_uint_eq(pp.pool_size, SMALL_POOL);
	ck_assert_uint_eq(pp.chunk_size, CHUNK);
	ck_assert_uint_eq(pp.member_id, 2);
	ck_assert_uint_eq(pp.members_mask, (1u << 1) | (1u << 2) | (1u << 5));
	/* Every listed member but this one, in list order, with its address. */
	ck_assert_uint_eq(pp.npeers, 2);
	ck_assert_ptr_eq(pp.peers, peers);
	ck_assert_uint_eq(peers[0].member_id, 1);
	ck_assert_str_eq(peers[0].addr, "127.0.0.1:7001");
	ck_assert_uint_eq(peers[1].member_id, 5);
	ck_assert_str_eq(peers[1].addr, "[::1]:7005");
	ck_assert_uint_eq(pp.sync_queue_depth, 7);
	ck_assert_uint_eq(pp.resync_rate, 5 * MiB);
	/* This boot of the host: the same each time, known on Linux. */
	{
		uint64_t boot = pp.boot_id;

		ck_assert_uint_ne(boot, 0);
		ck_assert_int_eq(store_pool_params(s, &opts, &pp, peers), 0);
		ck_assert_uint_eq(pp.boot_id, boot);
	}

	/* NULL options: librmr's defaults (zero). */
	ck_assert_int_eq(store_pool_params(s, NULL, &pp, peers), 0);
	ck_assert_uint_eq(pp.sync_queue_depth, 0);
	ck_assert_uint_eq(pp.resync_rate, 0);
	ck_assert_uint_eq(pp.npeers, 2);
	/* An older, shorter options struct: what it lacks is default. */
	opts.size = offsetof(struct brmr_serve_opts, resync_rate);
	ck_assert_int_eq(store_pool_params(s, &opts, &pp, peers), 0);
	ck_assert_uint_eq(pp.sync_queue_depth, 7);
	ck_assert_uint_eq(pp.resync_rate, 0);
	/* Too short to hold even its size: refused, by brmr_store_serve() too. */
	opts.size = 1;
	ck_assert_int_eq(store_pool_params(s, &opts, &pp, peers), -EINVAL);
	brmr_store_close(s);

	/* The last member of the list: its peers are the two before it. */
	p.force = true;
	ck_assert_msg(brmr_store_format_pool(path, &p, test_members, 3, 0, why, sizeof(why)) == 0,
		      "%s", why);
	s = open_ok();
	ck_assert_int_eq(store_pool_params(s, NULL, &pp, peers), 0);
	ck_assert_uint_eq(pp.member_id, 5);
	ck_assert_uint_eq(pp.npeers, 2);
	ck_assert_uint_eq(peers[0].member_id, 1);
	ck_assert_uint_eq(peers[1].member_id, 2);
	ck_assert_str_eq(peers[1].addr, "127.0.0.1:7002");
	brmr_store_close(s);

	/* Formatted without a list: only itself, no peers. */
	ck_assert_int_eq(brmr_store_format(path, &p), 0);
	s = open_ok();
	ck_assert_int_eq(store_pool_params(s, NULL, &pp, peers), 0);
	ck_assert_uint_eq(pp.members_mask, 1u << 5);
	ck_assert_uint_eq(pp.npeers, 0);
	ck_assert_ptr_null(pp.peers);
	brmr_store_close(s);
}
END_TEST

/* brmr_store_serve() on an in-process server: arguments, the lock, the pool it adds. */
START_TEST(test_serve)
{
	struct rmr_server_opts so = { .size = sizeof(so), .transport = "mem",
				      .listen_addr = "sb-serve" };
	struct brmr_serve_opts opts = { .size = sizeof(opts), .sync_queue_depth = 7 };
	struct rmr_server_status *st = calloc(1, sizeof(*st));
	struct rmr_server_pool *pool = NULL;
	struct brmr_store *s, *again;
	struct rmr_server *srv;
	char why[256] = "";

	ck_assert_ptr_nonnull(st);
	rmr_log_set_sink(NULL, NULL, RMR_LOG_ERR); /* the peers are not there: quiet */
	format_store(SMALL_POOL);
	ck_assert_int_eq(brmr_store_open(path, &s, why, sizeof(why)), 0);
	ck_assert_int_eq(rmr_server_create(&so, &srv), 0);

	ck_assert_int_eq(brmr_store_serve(NULL, srv, &opts, &pool), -EINVAL);
	ck_assert_int_eq(brmr_store_serve(s, NULL, &opts, &pool), -EINVAL);
	ck_assert_int_eq(brmr_store_serve(s, srv, &opts, NULL), -EINVAL);
	opts.size = 1;
	ck_assert_int_eq(brmr_store_serve(s, srv, &opts, &pool), -EINVAL);
	opts.size = sizeof(opts);
	/* librmr's limit on the queue depth reaches the caller, and nothing stays locked. */
	opts.sync_queue_depth = 257;
	ck_assert_int_eq(brmr_store_serve(s, srv, &opts, &pool), -EINVAL);
	ck_assert_ptr_null(pool);
	opts.sync_queue_depth = 7;

	ck_assert_int_eq(brmr_store_serve(s, srv, &opts, &pool), 0);
	ck_assert_ptr_nonnull(pool);
	st->size = sizeof(*st);
	ck_assert_int_eq(rmr_server_status(srv, st), 0);
	ck_assert_uint_eq(st->npools, 1);
	ck_assert_str_eq(st->pools[0].name, "vol-1");
	ck_assert_uint_eq(st->pools[0].member_id, 2);
	ck_assert_uint_eq(st->pools[0].pool_size, SMALL_POOL);

	/* A second handle on the same store cannot serve it: one server per store. */
	ck_assert_int_eq(brmr_store_open(path, &again, why, sizeof(why)), 0);
	ck_assert_int_eq(brmr_store_serve(again, srv, NULL, &pool), -EBUSY);
	brmr_store_close(again);

	rmr_server_remove_pool(pool);
	rmr_server_destroy(srv);
	brmr_store_close(s);
	free(st);
}
END_TEST

static Suite *superblock_suite(void)
{
	Suite *s = suite_create("superblock");
	TCase *tc = tcase_create("store");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_crc32c_vectors);
	tcase_add_test(tc, test_crc32c_paths_agree);
	tcase_add_test(tc, test_round_trip);
	tcase_add_loop_test(tc, test_single_field_corruption, 0,
			    (int)(sizeof(corruptions) / sizeof(corruptions[0])));
	tcase_add_test(tc, test_decode_random_mutations);
	tcase_add_test(tc, test_crc_mismatch);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_foreign_random);
	tcase_add_test(tc, test_foreign_ext4);
	tcase_add_test(tc, test_foreign_late_signature);
	tcase_add_test(tc, test_foreign_other_types);
	tcase_add_test(tc, test_ab_selection);
	tcase_add_test(tc, test_ab_conflicts);
	tcase_add_test(tc, test_format_refuses_without_force);
	tcase_add_test(tc, test_format_bad_params);
	tcase_add_test(tc, test_large_store_io);
	tcase_add_test(tc, test_disk_reads_on_workers);
	tcase_add_test(tc, test_writeback_failure_is_sticky);
	tcase_add_test(tc, test_short_last_chunk);
	tcase_add_test(tc, test_meta_round_trip);
	tcase_add_test(tc, test_meta_torn_save);
	tcase_add_test(tc, test_layout_sizes);
	tcase_add_test(tc, test_layout_roomier_accepted);
	tcase_add_test(tc, test_map_area);
	tcase_add_test(tc, test_serve_params);
	tcase_add_test(tc, test_serve);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(superblock_suite());
}
