/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_superblock: one superblock slot and one metadata slot header as read
 * from a store, through superblock_decode(), meta_hdr_decode() and
 * meta_hdr_crc_ok(). fuzz_store drives the same code through whole files;
 * this target is the fast one.
 *
 * Input: 1 flag byte, the 4096-byte slot (zero-padded if short), the 64-byte
 * metadata header, the blob. Flags: bit 0 seals the slot with a correct CRC,
 * bit 1 the metadata header (so the fuzzer also gets past the checksums),
 * bit 2 checks against a 16 MiB store instead of an unbounded one, bit 3
 * reads the header as slot 1's.
 *
 * Besides "no crash": every byte of an accepted slot is checked or must be
 * zero, so it encodes back to the same bytes; its geometry holds together
 * (checked here independently of superblock_check()); an accepted header
 * with a matching CRC encodes back to the same bytes.
 */
#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "superblock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DEV_SIZE (16ull << 20)

/* The layout rules of docs/disk-format.md, restated without the decoder's code. */
static void check_geometry(const struct superblock *sb, uint64_t dev_size)
{
	unsigned __int128 meta_end = (unsigned __int128)sb->meta_offset + sb->meta_size;
	unsigned __int128 map_end = (unsigned __int128)sb->map_offset + sb->map_size;
	unsigned __int128 data_end = (unsigned __int128)sb->data_offset + sb->pool_size;

	if (sb->meta_offset < SB_AREA_SIZE || meta_end > sb->map_offset ||
	    map_end > sb->data_offset || data_end > dev_size || !sb->pool_size ||
	    sb->meta_size / 2 <= META_HDR_SIZE || sb->data_offset % SB_DATA_ALIGN ||
	    sb->nmembers > RMR_MAX_MEMBERS || !sb->member_id ||
	    sb->member_id > RMR_MAX_MEMBER_ID || sb->chunk_size < 4096 ||
	    (sb->chunk_size & (sb->chunk_size - 1)))
		abort();
	for (unsigned i = 0; i < sb->nmembers; i++)
		if (!sb->members[i].id || sb->members[i].id > RMR_MAX_MEMBER_ID ||
		    strnlen(sb->members[i].addr, sizeof(sb->members[i].addr)) > RMR_ADDR_MAX)
			abort();
}

static void seal_meta(struct meta_hdr_disk *h, const uint8_t *blob, size_t avail)
{
	uint64_t len = sb_le64_to_cpu(h->length);
	uint32_t crc;

	if (len > avail)
		return;
	h->crc = sb_cpu_to_le32(0);
	crc = crc32c(crc32c(0, h, sizeof(*h)), blob, len);
	h->crc = sb_cpu_to_le32(crc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct superblock sb;
	struct sb_disk d, d2;
	struct meta_hdr_disk h, h2;
	uint64_t dev_size, seq, len;
	unsigned flags, idx;
	char why[256] = "";
	size_t n, avail;
	uint8_t *blob;
	int ret;

	if (size < 1)
		return 0;
	flags = data[0];
	data++;
	size--;
	memset(&d, 0, sizeof(d));
	n = size < sizeof(d) ? size : sizeof(d);
	memcpy(&d, data, n);
	data += n;
	size -= n;
	if (flags & 1)
		superblock_seal(&d);
	dev_size = flags & 4 ? DEV_SIZE : UINT64_MAX;

	ret = superblock_decode(&d, dev_size, &sb, why, sizeof(why));
	if (ret < 0) {
		if (!why[0])
			abort();
		return 0;
	}
	check_geometry(&sb, dev_size);
	superblock_encode(&sb, &d2);
	if (memcmp(&d, &d2, sizeof(d)))
		abort();
	if (superblock_check(&sb, dev_size, NULL, 0) != 0)
		abort();

	/* The metadata slot header, checked against this superblock. */
	memset(&h, 0, sizeof(h));
	n = size < sizeof(h) ? size : sizeof(h);
	memcpy(&h, data, n);
	data += n;
	size -= n;
	avail = size;
	/* An exact-size copy: ASan sees a read past the blob. */
	blob = malloc(avail ? avail : 1);
	if (!blob)
		return 0;
	memcpy(blob, data, avail);
	if (flags & 2)
		seal_meta(&h, blob, avail);
	idx = (flags >> 3) & 1;
	why[0] = '\0';
	ret = meta_hdr_decode(&sb, idx, &h, &seq, &len, why, sizeof(why));
	if (ret < 0) {
		if (!why[0])
			abort();
	} else {
		if (!seq || (seq & 1) != idx || len > meta_slot_capacity(&sb))
			abort();
		if (len <= avail && meta_hdr_crc_ok(&h, blob)) {
			meta_hdr_encode(&sb, seq, blob, len, &h2);
			if (memcmp(&h, &h2, sizeof(h)))
				abort();
		}
	}
	free(blob);
	return 0;
}
