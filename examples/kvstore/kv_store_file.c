/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The member's store file: superblock, librmr's metadata slots and dirty-map
 * area, and the bucket pages; creating, opening and loading it, and writing
 * changes back. See kv_store.h for the layout and docs/kvstore.md for every
 * byte.
 */
#include "kv_crc32c.h"
#include "kv_log.h"
#include "kv_store.h"
#include "kv_util.h"
#include "kv_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SB_SIZE 4096u
#define SB_MAGIC "KVSTORE1"
#define SB_VERSION 1u
#define META_MAGIC "KVMETA01"
#define META_HDR 64u
#define ALIGN_4K(x) (((x) + 4095) & ~(uint64_t)4095)
#define DATA_ALIGN (1u << 20)
/* The pages live in memory: refuse geometries no member could hold. */
#define MAX_POOL_SIZE (64ull << 30)

/* Superblock field offsets (little-endian). */
#define SB_F_MAGIC 0
#define SB_F_VERSION 8
#define SB_F_CRC 12
#define SB_F_UUID 16
#define SB_F_NAME 32
#define SB_F_MEMBER 96
#define SB_F_BUCKET_SIZE 100
#define SB_F_NBUCKETS 104
#define SB_F_META_OFFSET 112
#define SB_F_META_SLOT 120
#define SB_F_MAP_OFFSET 128
#define SB_F_MAP_SIZE 136
#define SB_F_DATA_OFFSET 144
#define SB_F_END 152

/* Meta slot header field offsets. */
#define MH_MAGIC 0
#define MH_SEQ 8
#define MH_LEN 16
#define MH_CRC 20

static int __attribute__((format(printf, 4, 5))) fail(int err, char *why, size_t whylen,
						      const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return err;
}

bool kv_store_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > RMR_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
			return false;
	return true;
}

static bool uuid_is_zero(const rmr_uuid *u)
{
	for (unsigned i = 0; i < RMR_UUID_LEN; i++)
		if (u->b[i])
			return false;
	return true;
}

/* Fill the layout fields of @s from its geometry; -EINVAL with a reason if it is bad. */
static int layout(struct kv_store *s, char *why, size_t whylen)
{
	uint32_t bs = s->bucket_size;

	if (bs < KV_STORE_MIN_BUCKET || bs > KV_STORE_MAX_BUCKET || (bs & (bs - 1)))
		return fail(-EINVAL, why, whylen,
			    "bucket size %" PRIu32 " is not a power of two in 4K..4M", bs);
	if (s->nbuckets == 0 || s->nbuckets > MAX_POOL_SIZE / bs)
		return fail(-EINVAL, why, whylen,
			    "%" PRIu64 " buckets of %" PRIu32 " bytes: need 1 or more, and at most %llu GiB in all",
			    s->nbuckets, bs, MAX_POOL_SIZE >> 30);
	s->pool_size = s->nbuckets * bs;
	s->map_size = rmr_server_map_area_size(s->pool_size, bs);
	if (!s->map_size)
		return fail(-EINVAL, why, whylen, "librmr refuses the geometry (too many buckets)");
	s->meta_offset = SB_SIZE;
	s->meta_slot_size = ALIGN_4K(META_HDR + rmr_server_meta_max());
	s->map_offset = s->meta_offset + 2 * s->meta_slot_size;
	s->data_offset = (s->map_offset + s->map_size + DATA_ALIGN - 1) & ~(uint64_t)(DATA_ALIGN - 1);
	return 0;
}

static void sb_encode(const struct kv_store *s, uint8_t sb[SB_SIZE])
{
	memset(sb, 0, SB_SIZE);
	memcpy(sb + SB_F_MAGIC, SB_MAGIC, 8);
	kv_put_le32(sb + SB_F_VERSION, SB_VERSION);
	memcpy(sb + SB_F_UUID, s->uuid.b, RMR_UUID_LEN);
	memcpy(sb + SB_F_NAME, s->pool_name, strlen(s->pool_name));
	sb[SB_F_MEMBER] = (uint8_t)s->member_id;
	sb[SB_F_MEMBER + 1] = (uint8_t)(s->member_id >> 8);
	kv_put_le32(sb + SB_F_BUCKET_SIZE, s->bucket_size);
	kv_put_le64(sb + SB_F_NBUCKETS, s->nbuckets);
	kv_put_le64(sb + SB_F_META_OFFSET, s->meta_offset);
	kv_put_le64(sb + SB_F_META_SLOT, s->meta_slot_size);
	kv_put_le64(sb + SB_F_MAP_OFFSET, s->map_offset);
	kv_put_le64(sb + SB_F_MAP_SIZE, s->map_size);
	kv_put_le64(sb + SB_F_DATA_OFFSET, s->data_offset);
	kv_put_le32(sb + SB_F_CRC, kv_crc32c(0, sb, SB_SIZE));
}

/* Decode and check a superblock into @s. @return 0 or -EBADMSG / -EINVAL with a reason. */
static int sb_decode(struct kv_store *s, uint8_t sb[SB_SIZE], uint64_t file_size, char *why,
		     size_t whylen)
{
	uint32_t crc = kv_get_le32(sb + SB_F_CRC);
	struct kv_store want;
	int ret;

	if (memcmp(sb + SB_F_MAGIC, SB_MAGIC, 8))
		return fail(-EBADMSG, why, whylen, "not a kvstore store (no superblock magic)");
	kv_put_le32(sb + SB_F_CRC, 0);
	if (kv_crc32c(0, sb, SB_SIZE) != crc)
		return fail(-EBADMSG, why, whylen, "superblock checksum mismatch");
	if (kv_get_le32(sb + SB_F_VERSION) != SB_VERSION)
		return fail(-EBADMSG, why, whylen, "superblock version %" PRIu32 " (this build reads %u)",
			    kv_get_le32(sb + SB_F_VERSION), SB_VERSION);
	for (unsigned i = SB_F_END; i < SB_SIZE; i++)
		if (sb[i] || (i == SB_F_END && (sb[SB_F_MEMBER + 2] || sb[SB_F_MEMBER + 3])))
			return fail(-EBADMSG, why, whylen, "superblock: reserved bytes are not zero");
	memcpy(s->uuid.b, sb + SB_F_UUID, RMR_UUID_LEN);
	if (sb[SB_F_NAME + RMR_NAME_MAX])
		return fail(-EBADMSG, why, whylen, "superblock: pool name not terminated");
	memcpy(s->pool_name, sb + SB_F_NAME, RMR_NAME_MAX);
	s->pool_name[RMR_NAME_MAX] = '\0';
	s->member_id = (uint16_t)(sb[SB_F_MEMBER] | sb[SB_F_MEMBER + 1] << 8);
	s->bucket_size = kv_get_le32(sb + SB_F_BUCKET_SIZE);
	s->nbuckets = kv_get_le64(sb + SB_F_NBUCKETS);
	if (!kv_store_name_valid(s->pool_name) || uuid_is_zero(&s->uuid) || !s->member_id ||
	    s->member_id > RMR_MAX_MEMBER_ID)
		return fail(-EBADMSG, why, whylen, "superblock: bad pool name, UUID or member id");
	ret = layout(s, why, whylen);
	if (ret < 0)
		return -EBADMSG;
	/* This build's layout is the only one: the recorded offsets must be it. */
	want = *s;
	if (kv_get_le64(sb + SB_F_META_OFFSET) != want.meta_offset ||
	    kv_get_le64(sb + SB_F_META_SLOT) != want.meta_slot_size ||
	    kv_get_le64(sb + SB_F_MAP_OFFSET) != want.map_offset ||
	    kv_get_le64(sb + SB_F_MAP_SIZE) != want.map_size ||
	    kv_get_le64(sb + SB_F_DATA_OFFSET) != want.data_offset)
		return fail(-EBADMSG, why, whylen,
			    "superblock: area offsets differ from this build's layout (made by another version?)");
	if (file_size < s->data_offset + s->pool_size)
		return fail(-EBADMSG, why, whylen,
			    "file has %" PRIu64 " bytes, its geometry needs %" PRIu64 " (truncated?)",
			    file_size, s->data_offset + s->pool_size);
	return 0;
}

/* fsync the directory of a new file so that the file itself survives a crash. */
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

int kv_store_create(const char *path, const struct kv_store_params *p, bool force, char *why,
		    size_t whylen)
{
	struct kv_store s = { .fd = -1 };
	uint8_t sb[SB_SIZE];
	int fd, ret;

	if (!p->pool_name || !kv_store_name_valid(p->pool_name))
		return fail(-EINVAL, why, whylen,
			    "bad pool name (1..%d characters of [A-Za-z0-9._-])", RMR_NAME_MAX);
	if (!p->member_id || p->member_id > RMR_MAX_MEMBER_ID)
		return fail(-EINVAL, why, whylen, "member id %u is not in 1..%d", p->member_id,
			    RMR_MAX_MEMBER_ID);
	if (uuid_is_zero(&p->uuid))
		return fail(-EINVAL, why, whylen, "the pool UUID is all zero");
	snprintf(s.pool_name, sizeof(s.pool_name), "%s", p->pool_name);
	s.uuid = p->uuid;
	s.member_id = p->member_id;
	s.nbuckets = p->nbuckets;
	s.bucket_size = p->bucket_size;
	ret = layout(&s, why, whylen);
	if (ret < 0)
		return ret;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (force ? 0 : O_EXCL), 0600);
	if (fd < 0)
		return fail(-errno, why, whylen, "cannot create %s: %s%s", path, strerror(errno),
			    errno == EEXIST ? " (use --force to overwrite it)" : "");
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ret = fail(errno == EWOULDBLOCK ? -EBUSY : -errno, why, whylen,
			   "%s is in use by a running member", path);
		close(fd);
		return ret;
	}
	/* Sparse: dropping every old block is the fastest way to zero a re-created store. */
	sb_encode(&s, sb);
	if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)(s.data_offset + s.pool_size)) < 0)
		ret = -errno;
	else
		ret = kv_pwrite_full(fd, sb, sizeof(sb), 0, true);
	if (ret == 0 && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (ret < 0) {
		unlink(path);
		return fail(ret, why, whylen, "writing %s: %s", path, strerror(-ret));
	}
	fsync_parent(path);
	return 0;
}

/*
 * Check every page; a bad one is kept damaged. Read with pread, not
 * through the mapping: a disk that fails a read fails the open with the
 * reason instead of killing the process with SIGBUS.
 */
static int load_pages(struct kv_store *s, char *why, size_t whylen)
{
	uint8_t *scratch = malloc(s->bucket_size);
	int ret = 0;

	if (!scratch)
		return fail(-ENOMEM, why, whylen, "out of memory");
	for (uint64_t b = 0; b < s->nbuckets; b++) {
		ret = kv_pread_full(s->fd, scratch, s->bucket_size,
				    s->data_offset + b * s->bucket_size);
		if (ret < 0) {
			fail(ret, why, whylen, "reading bucket %" PRIu64 ": %s", b, strerror(-ret));
			break;
		}
		if (kv_bucket_check(scratch, b, &s->geom, NULL, 0) < 0) {
			s->damaged[b] = 1;
			s->ndamaged++;
			continue;
		}
		s->keys += kv_bucket_count(scratch);
	}
	free(scratch);
	return ret;
}

int kv_store_open(const char *path, bool serve, struct kv_store **out, char *why, size_t whylen)
{
	struct kv_store *s = calloc(1, sizeof(*s));
	uint8_t sb[SB_SIZE];
	struct stat st;
	int ret;

	if (!s)
		return fail(-ENOMEM, why, whylen, "out of memory");
	s->fd = -1;
	s->pages = MAP_FAILED;
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->fd = open(path, (serve ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (s->fd < 0) {
		ret = fail(-errno, why, whylen, "cannot open %s: %s", path, strerror(errno));
		goto err;
	}
	/* Served: exclusive. Inspected: shared, so never under a running member. */
	if (flock(s->fd, (serve ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
		ret = fail(errno == EWOULDBLOCK ? -EBUSY : -errno, why, whylen,
			   "%s is in use by a running member", path);
		goto err;
	}
	if (fstat(s->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		ret = fail(-EINVAL, why, whylen, "%s is not a regular file", path);
		goto err;
	}
	ret = kv_pread_full(s->fd, sb, sizeof(sb), 0);
	if (ret < 0) {
		fail(ret, why, whylen, "%s: cannot read the superblock: %s", path,
		     ret == -EIO ? "file too short" : strerror(-ret));
		goto err;
	}
	ret = sb_decode(s, sb, (uint64_t)st.st_size, why, whylen);
	if (ret < 0)
		goto err;
	s->geom.size = s->bucket_size;
	s->geom.nbuckets = s->nbuckets;
	memcpy(s->geom.uuid, s->uuid.b, KV_UUID_LEN);
	/* The pages are the file's, shared: a change is in the page cache once made. */
	s->pages = mmap(NULL, s->pool_size, serve ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
			s->fd, (off_t)s->data_offset);
	if (s->pages == MAP_FAILED) {
		ret = fail(-errno, why, whylen, "cannot map the %" PRIu64 " bytes of pages: %s",
			   s->pool_size, strerror(errno));
		goto err;
	}
	s->damaged = calloc(s->nbuckets, 1);
	s->scratch = malloc(s->bucket_size);
	s->index = calloc(s->nbuckets, sizeof(*s->index));
	atomic_init(&s->own_dirty, true);
	if (!s->damaged || !s->scratch || !s->index) {
		ret = fail(-ENOMEM, why, whylen, "out of memory");
		goto err;
	}
	ret = load_pages(s, why, whylen);
	if (ret < 0)
		goto err;
	*out = s;
	return 0;
err:
	kv_store_close(s);
	return ret;
}

void kv_store_report_damaged(const struct kv_store *s)
{
	char reason[160];

	for (uint64_t b = 0; b < s->nbuckets && s->ndamaged; b++)
		if (s->damaged[b] &&
		    kv_bucket_check(kv_store_page(s, b), b, &s->geom, reason, sizeof(reason)) < 0)
			kv_log(KV_LOG_WARN, "bucket %" PRIu64 " is damaged: %s; it answers errors until a peer's copy replaces it",
			       b, reason);
}

void kv_store_close(struct kv_store *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd); /* also drops the lock */
	if (s->pages != MAP_FAILED && s->pages)
		munmap(s->pages, s->pool_size);
	free(s->damaged);
	free(s->scratch);
	for (uint64_t b = 0; s->index && b < s->nbuckets; b++)
		kv_index_drop(&s->index[b]);
	free(s->index);
	free(s);
}

/* --- writing pages back ----------------------------------------------------- */

/* msync the pages of [@off, @off + @len) of the data area. */
static int sync_range(struct kv_store *s, uint64_t off, uint64_t len)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), lo = off & ~(pg - 1);

	return msync(s->pages + lo, off + len - lo, MS_SYNC) < 0 ? -errno : 0;
}

int kv_store_persist(struct kv_store *s, uint64_t b, const struct kv_change *ch, unsigned n)
{
	uint64_t base = b * s->bucket_size;
	bool hdr = false;
	int ret = 0;

	/* In the file already (a shared mapping); durable now only if asked. */
	if (!s->sync_writes)
		return 0;
	for (unsigned i = 0; i < n && ret == 0; i++) {
		if (ch[i].hi > ch[i].lo)
			ret = sync_range(s, base + ch[i].lo, ch[i].hi - ch[i].lo);
		hdr |= ch[i].hdr;
	}
	if (ret == 0 && hdr)
		ret = sync_range(s, base, KV_BUCKET_HDR);
	return ret;
}

int kv_store_persist_page(struct kv_store *s, uint64_t b)
{
	return s->sync_writes ? sync_range(s, b * s->bucket_size, s->bucket_size) : 0;
}

int kv_store_flush(struct kv_store *s)
{
	return fdatasync(s->fd) < 0 ? -errno : 0;
}

/* --- librmr's metadata blob: two slots, the valid one with the higher sequence wins --- */

static uint64_t slot_offset(const struct kv_store *s, unsigned i)
{
	return s->meta_offset + i * s->meta_slot_size;
}

static uint32_t meta_crc(const uint8_t hdr[META_HDR], const void *blob, size_t len)
{
	uint8_t h[META_HDR];

	memcpy(h, hdr, META_HDR);
	kv_put_le32(h + MH_CRC, 0);
	return kv_crc32c(kv_crc32c(0, h, META_HDR), blob, len);
}

static bool zeroed(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * Find the newest valid blob: *@idx (-1 if none), its sequence and length.
 * A torn save fails its crc and the other slot, with the previous blob,
 * wins. Nothing valid is a fresh store when nothing was ever saved, or when
 * the only header is the very first save (sequence 1, slot 1), torn;
 * anything else lost a blob that was durably saved: -EBADMSG.
 */
static int meta_scan(struct kv_store *s, int *idx, uint64_t *seq, uint32_t *len)
{
	uint8_t h[2][META_HDR];
	bool valid[2] = { false, false };
	uint64_t cap = s->meta_slot_size - META_HDR;

	*idx = -1;
	*seq = 0;
	*len = 0;
	for (unsigned i = 0; i < 2; i++) {
		uint32_t l;
		void *blob;
		int ret = kv_pread_full(s->fd, h[i], META_HDR, slot_offset(s, i));

		if (ret < 0)
			return ret;
		l = kv_get_le32(h[i] + MH_LEN);
		if (memcmp(h[i] + MH_MAGIC, META_MAGIC, 8) || l > cap ||
		    !zeroed(h[i] + MH_CRC + 4, META_HDR - MH_CRC - 4))
			continue;
		blob = malloc(l ? l : 1);
		if (!blob)
			return -ENOMEM;
		ret = kv_pread_full(s->fd, blob, l, slot_offset(s, i) + META_HDR);
		valid[i] = ret == 0 && meta_crc(h[i], blob, l) == kv_get_le32(h[i] + MH_CRC);
		free(blob);
		if (ret < 0)
			return ret;
		if (valid[i] && (*idx < 0 || kv_get_le64(h[i] + MH_SEQ) > *seq)) {
			*idx = (int)i;
			*seq = kv_get_le64(h[i] + MH_SEQ);
			*len = l;
		}
	}
	if (*idx >= 0)
		return 0;
	if (zeroed(h[0], META_HDR) &&
	    (zeroed(h[1], META_HDR) ||
	     (!memcmp(h[1] + MH_MAGIC, META_MAGIC, 8) && kv_get_le64(h[1] + MH_SEQ) == 1)))
		return 0;
	return -EBADMSG;
}

int kv_store_meta_load(struct kv_store *s, void *buf, size_t cap, size_t *len)
{
	uint64_t seq;
	uint32_t l;
	int idx, ret = meta_scan(s, &idx, &seq, &l);

	if (ret == -EBADMSG)
		kv_log(KV_LOG_ERR, "%s: both metadata slots are unreadable; librmr's state is lost (re-create the store and serve it with --replace)",
		       s->path);
	if (ret < 0)
		return ret;
	if (idx >= 0 && l > cap)
		return -EOVERFLOW;
	if (idx >= 0)
		ret = kv_pread_full(s->fd, buf, l, slot_offset(s, (unsigned)idx) + META_HDR);
	if (ret == 0) {
		*len = idx >= 0 ? l : 0;
		s->meta_seq = seq;
		s->meta_known = true;
	}
	return ret;
}

int kv_store_meta_save(struct kv_store *s, const void *buf, size_t len)
{
	uint8_t *rec;
	uint64_t seq;
	int ret;

	if (len > s->meta_slot_size - META_HDR)
		return -E2BIG;
	if (len && !buf)
		return -EINVAL;
	if (!s->meta_known) {
		uint32_t l;
		int idx;

		/* A corrupt area is overwritten only by a deliberate save. */
		s->meta_seq = meta_scan(s, &idx, &seq, &l) == 0 ? seq : 0;
		s->meta_known = true;
	}
	seq = s->meta_seq + 1;
	rec = calloc(1, META_HDR + len);
	if (!rec)
		return -ENOMEM;
	memcpy(rec + MH_MAGIC, META_MAGIC, 8);
	kv_put_le64(rec + MH_SEQ, seq);
	kv_put_le32(rec + MH_LEN, (uint32_t)len);
	if (len)
		memcpy(rec + META_HDR, buf, len);
	kv_put_le32(rec + MH_CRC, meta_crc(rec, rec + META_HDR, len));
	/* The slot not holding the newest blob: a torn save leaves that one. */
	ret = kv_pwrite_full(s->fd, rec, META_HDR + len, slot_offset(s, seq & 1), true);
	free(rec);
	if (ret == 0)
		s->meta_seq = seq;
	return ret;
}

/* --- librmr's dirty-map area -------------------------------------------------- */

int kv_store_map_read(struct kv_store *s, uint64_t off, void *buf, size_t len)
{
	if (!buf || !len || off > s->map_size || len > s->map_size - off)
		return -EINVAL;
	return kv_pread_full(s->fd, buf, len, s->map_offset + off);
}

/* Durable on return: a mark must be on disk before the write that needed it is acknowledged. */
int kv_store_map_write(struct kv_store *s, uint64_t off, const void *buf, size_t len)
{
	if (!buf || !len || off % 4096 || len % 4096 || off > s->map_size ||
	    len > s->map_size - off)
		return -EINVAL;
	return kv_pwrite_full(s->fd, buf, len, s->map_offset + off, true);
}
