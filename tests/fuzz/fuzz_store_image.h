/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The store image of fuzz_store, shared with the corpus generator so that
 * seeds address the same places.
 *
 * The image is a small formatted store (a 4 MiB pool of 128 KiB chunks,
 * members 1..3, this store member 1) in a memfd, opened by brmr_store_open()
 * as /proc/self/fd/N like any file. Formatting leaves it all zero but
 * superblock slot A, so an input is applied to a truncated (zeroed) memfd
 * and costs little. An input is:
 *
 *   byte 0         FZ_* flags: checksum fix-ups to apply after the patches,
 *                  and whether to serve the store
 *   patch, ...     region (1 byte, mod FZ_NREGIONS), offset (4 bytes LE,
 *                  mod the region's size), length (2 bytes LE), then that
 *                  many bytes (fewer if the input ends first)
 *
 * The regions are windows of the pristine layout: the two superblock slots,
 * the first 4 KiB of each metadata slot, and the dirty-map area whose end
 * holds the two activity-log records. A patched superblock may move the
 * geometry elsewhere; the windows stay where the pristine store has them.
 */
#ifndef FUZZ_STORE_IMAGE_H
#define FUZZ_STORE_IMAGE_H

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rmr/brmr.h>

#include "activity_log.h"
#include "crc32c.h"
#include "superblock.h"

#define FZ_SEAL_SB_A 0x01u  /* seal superblock slot A with its CRC */
#define FZ_SEAL_SB_B 0x02u  /* and slot B */
#define FZ_SEAL_META0 0x04u /* metadata slot 0: CRC over header and blob */
#define FZ_SEAL_META1 0x08u /* metadata slot 1 */
#define FZ_SEAL_AL_A 0x10u  /* activity-log record A */
#define FZ_SEAL_AL_B 0x20u  /* activity-log record B */
#define FZ_SERVE 0x40u      /* serve the store on an in-process server */
#define FZ_REPLACE 0x80u    /* ... as a blank replacement (brmr_serve_opts.replace) */

enum { FZ_SB, FZ_META0, FZ_META1, FZ_MAPS, FZ_NREGIONS };

#define FZ_POOL_SIZE (4ull << 20)
#define FZ_CHUNK_SIZE (128u << 10)
#define FZ_META_WINDOW 4096u
#define FZ_MAP_WINDOW_MAX (1u << 20)
#define FZ_PATCH_HDR 7u

/* Activity-log record fields the seal needs (see activity_log.c). */
#define FZ_AL_COUNT_OFF 32
#define FZ_AL_CRC_OFF 36

struct fz_image {
	int fd;
	char path[64];
	struct superblock sb;          /* the pristine superblock */
	uint64_t size;                 /* bytes of the image */
	uint64_t off[FZ_NREGIONS];     /* where each window starts */
	uint32_t len[FZ_NREGIONS];     /* and its bytes */
	uint64_t al_off;               /* record A in the map window */
	_Alignas(8) uint8_t slot_a[SB_SLOT_SIZE]; /* pristine superblock slot A */
	uint8_t *win[FZ_NREGIONS];     /* the windows of the current input */
	bool dirty[FZ_NREGIONS];       /* window differs from zero */
};

/* Format the pristine store. @return 0, or -1 with a message on stderr. */
static inline int fz_image_init(struct fz_image *im)
{
	static const struct brmr_member members[] = {
		{ .id = 1, .addr = "fuzz-m1" }, { .id = 2, .addr = "fuzz-m2" },
		{ .id = 3, .addr = "fuzz-m3" },
	};
	struct brmr_format_params p = {
		.size = sizeof(p), .pool_name = "fuzz-pool", .pool_size = FZ_POOL_SIZE,
		.chunk_size = FZ_CHUNK_SIZE, .member_id = 1,
	};
	char why[256] = "";
	uint64_t bitmap;

	memset(im, 0, sizeof(*im));
	memcpy(p.pool_uuid.b, "fuzz-pool-uuid-1", 16);
	im->fd = memfd_create("fuzz-store", MFD_CLOEXEC);
	if (im->fd < 0) {
		perror("memfd_create");
		return -1;
	}
	snprintf(im->path, sizeof(im->path), "/proc/self/fd/%d", im->fd);
	if (brmr_store_format_pool(im->path, &p, members, 3, 0, why, sizeof(why)) < 0 ||
	    pread(im->fd, im->slot_a, sizeof(im->slot_a), 0) != (ssize_t)sizeof(im->slot_a) ||
	    superblock_decode((const struct sb_disk *)im->slot_a, UINT64_MAX, &im->sb, why,
			      sizeof(why)) < 0) {
		fprintf(stderr, "fuzz store image: %s\n", why[0] ? why : "cannot format");
		return -1;
	}
	/* Room past the pool, so that a patched geometry may grow a little. */
	im->size = im->sb.data_offset + im->sb.pool_size + (1u << 20);
	im->off[FZ_SB] = 0;
	im->len[FZ_SB] = SB_AREA_SIZE;
	im->off[FZ_META0] = meta_slot_offset(&im->sb, 0);
	im->off[FZ_META1] = meta_slot_offset(&im->sb, 1);
	im->len[FZ_META0] = im->len[FZ_META1] = FZ_META_WINDOW;
	im->off[FZ_MAPS] = im->sb.map_offset;
	im->len[FZ_MAPS] = (uint32_t)im->sb.map_size;
	/* librmr's map area: a bitmap per possible member id, then the two records. */
	bitmap = ((im->sb.pool_size / im->sb.chunk_size + 7) / 8 + 4095) / 4096 * 4096;
	im->al_off = RMR_MAX_MEMBER_ID * bitmap;
	if (im->sb.map_size > FZ_MAP_WINDOW_MAX ||
	    im->al_off + 2 * AL_RECORD_BYTES > im->sb.map_size) {
		fprintf(stderr, "fuzz store image: unexpected map area of %llu bytes\n",
			(unsigned long long)im->sb.map_size);
		return -1;
	}
	for (unsigned r = 0; r < FZ_NREGIONS; r++) {
		im->win[r] = calloc(1, im->len[r]);
		if (!im->win[r])
			return -1;
	}
	return 0;
}

/* Append a patch to @p buf (at @p *pos, which grows); the generator's side. */
static inline void fz_patch_put(uint8_t *buf, size_t *pos, unsigned region, uint32_t off,
				const void *bytes, uint16_t len)
{
	uint32_t o = htole32(off);
	uint16_t l = htole16(len);

	buf[(*pos)++] = (uint8_t)region;
	memcpy(buf + *pos, &o, 4);
	memcpy(buf + *pos + 4, &l, 2);
	memcpy(buf + *pos + 6, bytes, len);
	*pos += 6 + len;
}

/* CRC of a metadata slot whose blob fits in its window. */
static inline void fz_seal_meta(uint8_t *w)
{
	struct meta_hdr_disk *h = (struct meta_hdr_disk *)w;
	uint64_t len = sb_le64_to_cpu(h->length);

	if (len > FZ_META_WINDOW - META_HDR_SIZE)
		return;
	h->crc = sb_cpu_to_le32(0);
	h->crc = sb_cpu_to_le32(crc32c(crc32c(0, h, sizeof(*h)), w + META_HDR_SIZE, len));
}

static inline void fz_seal_al(uint8_t *rec)
{
	uint32_t count, crc;

	memcpy(&count, rec + FZ_AL_COUNT_OFF, 4);
	count = le32toh(count);
	if (count > AL_MAX_ENTRIES)
		return;
	memset(rec + FZ_AL_CRC_OFF, 0, 4);
	crc = htole32(crc32c(0, rec, AL_HEADER_BYTES + (size_t)count * AL_ENTRY_BYTES));
	memcpy(rec + FZ_AL_CRC_OFF, &crc, 4);
}

/*
 * Make the image the pristine store with @p data applied.
 * @return the FZ_* flags of the input, or -1 if the memfd failed.
 */
static inline int fz_image_load(struct fz_image *im, const uint8_t *data, size_t size)
{
	unsigned flags = size ? data[0] : 0;
	size_t pos = 1;

	for (unsigned r = 0; r < FZ_NREGIONS; r++)
		if (im->dirty[r]) {
			memset(im->win[r], 0, im->len[r]);
			im->dirty[r] = false;
		}
	memcpy(im->win[FZ_SB], im->slot_a, sizeof(im->slot_a));
	im->dirty[FZ_SB] = true;
	while (pos + FZ_PATCH_HDR <= size) {
		unsigned r = data[pos] % FZ_NREGIONS;
		uint32_t off;
		uint16_t len;

		memcpy(&off, data + pos + 1, 4);
		memcpy(&len, data + pos + 5, 2);
		off = le32toh(off) % im->len[r];
		len = le16toh(len);
		pos += FZ_PATCH_HDR;
		if (len > size - pos)
			len = (uint16_t)(size - pos);
		if (len > im->len[r] - off)
			len = (uint16_t)(im->len[r] - off);
		memcpy(im->win[r] + off, data + pos, len);
		im->dirty[r] = true;
		pos += len;
	}
	if (flags & FZ_SEAL_SB_A)
		superblock_seal((struct sb_disk *)im->win[FZ_SB]);
	if (flags & FZ_SEAL_SB_B)
		superblock_seal((struct sb_disk *)(im->win[FZ_SB] + SB_SLOT_SIZE));
	if (flags & FZ_SEAL_META0)
		fz_seal_meta(im->win[FZ_META0]);
	if (flags & FZ_SEAL_META1)
		fz_seal_meta(im->win[FZ_META1]);
	if (flags & FZ_SEAL_AL_A)
		fz_seal_al(im->win[FZ_MAPS] + im->al_off);
	if (flags & FZ_SEAL_AL_B)
		fz_seal_al(im->win[FZ_MAPS] + im->al_off + AL_RECORD_BYTES);

	/* Truncating drops whatever the last input (or a serve) wrote. */
	if (ftruncate(im->fd, 0) < 0 || ftruncate(im->fd, (off_t)im->size) < 0)
		return -1;
	for (unsigned r = 0; r < FZ_NREGIONS; r++)
		if (im->dirty[r] &&
		    pwrite(im->fd, im->win[r], im->len[r], (off_t)im->off[r]) != (ssize_t)im->len[r])
			return -1;
	return (int)flags;
}

#endif
