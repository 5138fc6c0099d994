/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Encoding, decoding and selection of brmr superblocks and metadata slot
 * headers. See superblock.h and docs/disk-format.md.
 *
 * The decoder trusts nothing: every byte of a slot is either checked against
 * its rules or required to be zero, so no on-disk content can make the store
 * code compute a wrong offset, and a later format version can give reserved
 * bytes a meaning.
 */
#include "brmr_internal.h"
#include "superblock.h"

#include "crc32c.h"

#include <rmr/server.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


static bool all_zero(const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i])
			return false;
	return true;
}

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

static uint64_t round_up(uint64_t x, uint64_t align)
{
	return (x + align - 1) / align * align;
}

bool superblock_name_valid(const char *name)
{
	size_t n = strnlen(name, RMR_NAME_MAX + 1);

	if (n == 0 || n > RMR_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* Member addresses: printable ASCII without spaces (they go on log lines). */
static bool addr_valid(const char *addr)
{
	size_t n = strnlen(addr, RMR_ADDR_MAX + 1);

	if (n == 0 || n > RMR_ADDR_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (addr[i] <= ' ' || addr[i] > '~')
			return false;
	return true;
}

int superblock_layout(struct superblock *sb, size_t meta_max)
{
	uint64_t slot, map_size, map_end;

	if (!sb->chunk_size || !sb->pool_size || meta_max > (1ull << 40) ||
	    sb->pool_size > UINT64_MAX / 2)
		return -EINVAL;
	/*
	 * Each metadata slot holds librmr's blob, at least 1 MiB so that small
	 * pools still have room to grow. The dirty maps have an area of their
	 * own after the metadata: one bit per chunk for every possible member,
	 * each member's bitmap 4 KiB rounded (librmr decides its size; a pool
	 * of more chunks than its dirty maps allow has no size and is refused).
	 */
	slot = round_up(META_HDR_SIZE + meta_max, SB_META_ALIGN);
	if (slot < SB_META_SLOT_MIN)
		slot = SB_META_SLOT_MIN;
	map_size = rmr_server_map_area_size(sb->pool_size, sb->chunk_size);
	if (!map_size || map_size % SB_MAP_ALIGN)
		return -EINVAL;
	sb->meta_offset = SB_AREA_SIZE;
	sb->meta_size = 2 * slot;
	sb->map_offset = sb->meta_offset + sb->meta_size;
	sb->map_size = map_size;
	map_end = sb->map_offset + sb->map_size;
	if (map_end < sb->map_offset || map_end > UINT64_MAX - SB_DATA_ALIGN)
		return -EINVAL;
	sb->data_offset = round_up(map_end, SB_DATA_ALIGN);
	if (sb->data_offset + sb->pool_size < sb->data_offset)
		return -EINVAL;
	return 0;
}

static int members_check(const struct superblock *sb, char *why, size_t whylen)
{
	uint64_t seen = 0;
	bool self = false;

	if (sb->nmembers > RMR_MAX_MEMBERS)
		return fail(-EBADMSG, why, whylen, "member list has %u entries (most %u)",
			    sb->nmembers, RMR_MAX_MEMBERS);
	for (unsigned i = 0; i < sb->nmembers; i++) {
		const struct sb_member *m = &sb->members[i];

		if (m->id < 1 || m->id > RMR_MAX_MEMBER_ID)
			return fail(-EBADMSG, why, whylen,
				    "member list entry %u: id %u out of range 1..%u", i,
				    m->id, RMR_MAX_MEMBER_ID);
		if (seen & (1ull << m->id))
			return fail(-EBADMSG, why, whylen,
				    "member list entry %u: id %u listed twice", i, m->id);
		seen |= 1ull << m->id;
		if (!addr_valid(m->addr))
			return fail(-EBADMSG, why, whylen,
				    "member list entry %u (id %u): bad address", i, m->id);
		self |= m->id == sb->member_id;
	}
	if (sb->nmembers && !self)
		return fail(-EBADMSG, why, whylen,
			    "member id %u is not in the store's own member list",
			    sb->member_id);
	return 0;
}

int superblock_check(const struct superblock *sb, uint64_t dev_size, char *why,
		     size_t whylen)
{
	uint64_t meta_end, map_need, map_end, data_end;

	if (sb->version != SB_VERSION)
		return fail(-EPROTONOSUPPORT, why, whylen,
			    "format version %" PRIu32 " not supported (this build reads %u)",
			    sb->version, SB_VERSION);
	if (sb->flags & ~(uint64_t)SB_F_KNOWN)
		return fail(-EPROTONOSUPPORT, why, whylen,
			    "unknown flags 0x%" PRIx64 " (written by a newer version?)",
			    sb->flags & ~(uint64_t)SB_F_KNOWN);
	if (all_zero(sb->pool_uuid.b, sizeof(sb->pool_uuid.b)))
		return fail(-EBADMSG, why, whylen, "pool uuid is all zero");
	if (!superblock_name_valid(sb->pool_name))
		return fail(-EBADMSG, why, whylen,
			    "bad pool name (1..%u characters of [A-Za-z0-9._-])",
			    RMR_NAME_MAX);
	if (sb->member_id < 1 || sb->member_id > RMR_MAX_MEMBER_ID)
		return fail(-EBADMSG, why, whylen, "member id %u out of range 1..%u",
			    sb->member_id, RMR_MAX_MEMBER_ID);
	if (!is_pow2(sb->chunk_size) || sb->chunk_size < (128u << 10) ||
	    sb->chunk_size > (1u << 20))
		return fail(-EBADMSG, why, whylen,
			    "chunk size %" PRIu32 " is not a power of two in 128K..1M",
			    sb->chunk_size);
	if (!sb->pool_size || sb->pool_size % 4096)
		return fail(-EBADMSG, why, whylen,
			    "pool size %" PRIu64 " is not a positive multiple of 4096",
			    sb->pool_size);
	if (sb->sequence == 0)
		return fail(-EBADMSG, why, whylen, "sequence is zero");
	/* Geometry: superblocks < metadata < dirty maps < data, aligned, no overflow. */
	if (sb->meta_offset < SB_AREA_SIZE || sb->meta_offset % SB_META_ALIGN)
		return fail(-EBADMSG, why, whylen,
			    "metadata offset %" PRIu64 " overlaps the superblocks or is not 4K aligned",
			    sb->meta_offset);
	if (sb->meta_size < 2 * (uint64_t)SB_META_ALIGN ||
	    sb->meta_size % (2 * SB_META_ALIGN))
		return fail(-EBADMSG, why, whylen,
			    "metadata size %" PRIu64 " is not two 4K-aligned slots",
			    sb->meta_size);
	meta_end = sb->meta_offset + sb->meta_size;
	if (meta_end < sb->meta_offset)
		return fail(-EBADMSG, why, whylen, "metadata area overflows");
	if (sb->map_offset % SB_MAP_ALIGN)
		return fail(-EBADMSG, why, whylen,
			    "dirty-map offset %" PRIu64 " is not 4K aligned", sb->map_offset);
	if (sb->map_offset < meta_end)
		return fail(-EBADMSG, why, whylen,
			    "dirty-map offset %" PRIu64 " overlaps the metadata area (ends at %" PRIu64 ")",
			    sb->map_offset, meta_end);
	map_need = rmr_server_map_area_size(sb->pool_size, sb->chunk_size);
	if (!map_need)
		return fail(-EBADMSG, why, whylen,
			    "pool size %" PRIu64 " has more %" PRIu32
			    "-byte chunks than the dirty maps allow",
			    sb->pool_size, sb->chunk_size);
	if (sb->map_size % SB_MAP_ALIGN)
		return fail(-EBADMSG, why, whylen,
			    "dirty-map size %" PRIu64 " is not a multiple of 4096", sb->map_size);
	if (sb->map_size < map_need)
		return fail(-EBADMSG, why, whylen,
			    "dirty-map size %" PRIu64 " is smaller than the pool's maps (%" PRIu64 " bytes)",
			    sb->map_size, map_need);
	map_end = sb->map_offset + sb->map_size;
	if (map_end < sb->map_offset)
		return fail(-EBADMSG, why, whylen, "dirty-map area overflows");
	if (sb->data_offset % SB_DATA_ALIGN)
		return fail(-EBADMSG, why, whylen,
			    "data offset %" PRIu64 " is not 1 MiB aligned", sb->data_offset);
	if (sb->data_offset < map_end)
		return fail(-EBADMSG, why, whylen,
			    "data offset %" PRIu64 " overlaps the dirty-map area (ends at %" PRIu64 ")",
			    sb->data_offset, map_end);
	data_end = sb->data_offset + sb->pool_size;
	if (data_end < sb->data_offset)
		return fail(-EBADMSG, why, whylen, "data area overflows 64 bits");
	if (data_end > dev_size)
		return fail(-EBADMSG, why, whylen,
			    "truncated store: %" PRIu64 " bytes, the superblock needs %" PRIu64,
			    dev_size, data_end);
	return members_check(sb, why, whylen);
}

void superblock_seal(struct sb_disk *d)
{
	d->crc = sb_cpu_to_le32(0);
	d->crc = sb_cpu_to_le32(crc32c(0, d, sizeof(*d)));
}

void superblock_encode(const struct superblock *sb, struct sb_disk *d)
{
	memset(d, 0, sizeof(*d));
	memcpy(d->magic, SB_MAGIC, sizeof(d->magic));
	d->version = sb_cpu_to_le32(sb->version);
	d->header_size = sb_cpu_to_le32(SB_SLOT_SIZE);
	memcpy(d->pool_uuid, sb->pool_uuid.b, sizeof(d->pool_uuid));
	/* The slot was zeroed: copying the bytes leaves the NUL and padding. */
	memcpy(d->pool_name, sb->pool_name, strnlen(sb->pool_name, sizeof(d->pool_name) - 1));
	d->member_id = sb_cpu_to_le16(sb->member_id);
	d->nmembers = sb_cpu_to_le16(sb->nmembers);
	d->chunk_size = sb_cpu_to_le32(sb->chunk_size);
	d->pool_size = sb_cpu_to_le64(sb->pool_size);
	d->data_offset = sb_cpu_to_le64(sb->data_offset);
	d->meta_offset = sb_cpu_to_le64(sb->meta_offset);
	d->meta_size = sb_cpu_to_le64(sb->meta_size);
	d->map_offset = sb_cpu_to_le64(sb->map_offset);
	d->map_size = sb_cpu_to_le64(sb->map_size);
	d->sequence = sb_cpu_to_le64(sb->sequence);
	d->flags = sb_cpu_to_le64(sb->flags);
	for (unsigned i = 0; i < sb->nmembers && i < RMR_MAX_MEMBERS; i++) {
		d->members[i].id = sb_cpu_to_le16(sb->members[i].id);
		memcpy(d->members[i].addr, sb->members[i].addr,
		       strnlen(sb->members[i].addr, sizeof(d->members[i].addr) - 1));
	}
	superblock_seal(d);
}

bool superblock_has_magic(const struct sb_disk *d)
{
	return memcmp(d->magic, SB_MAGIC, sizeof(d->magic)) == 0;
}

/* A fixed-size string field: NUL-terminated, and zero after the NUL. */
static bool field_string_ok(const char *f, size_t size)
{
	size_t n = strnlen(f, size);

	return n < size && all_zero(f + n, size - n);
}

int superblock_decode(const struct sb_disk *d, uint64_t dev_size, struct superblock *out,
		      char *why, size_t whylen)
{
	struct superblock sb;
	uint32_t crc, want;
	unsigned nmembers;

	if (all_zero(d, sizeof(*d)))
		return fail(-ENODATA, why, whylen, "no superblock (all zero)");
	if (!superblock_has_magic(d))
		return fail(-EBADMSG, why, whylen, "no brmr superblock (bad magic)");
	/*
	 * The version decides the layout, so it is checked before the crc: a
	 * newer store is "unsupported", not "corrupt".
	 */
	if (sb_le32_to_cpu(d->version) != SB_VERSION)
		return fail(-EPROTONOSUPPORT, why, whylen,
			    "format version %" PRIu32 " not supported (this build reads %u)",
			    sb_le32_to_cpu(d->version), SB_VERSION);
	if (sb_le32_to_cpu(d->header_size) != SB_SLOT_SIZE)
		return fail(-EBADMSG, why, whylen, "header size %" PRIu32 " (expected %u)",
			    sb_le32_to_cpu(d->header_size), SB_SLOT_SIZE);
	{
		struct sb_disk tmp = *d;

		want = sb_le32_to_cpu(d->crc);
		tmp.crc = sb_cpu_to_le32(0);
		crc = crc32c(0, &tmp, sizeof(tmp));
	}
	if (crc != want)
		return fail(-EBADMSG, why, whylen,
			    "checksum mismatch (stored 0x%08" PRIx32 ", computed 0x%08" PRIx32 ")",
			    want, crc);
	/* The crc proves the bytes are what a writer wrote; now the rules. */
	if (!field_string_ok(d->pool_name, sizeof(d->pool_name)))
		return fail(-EBADMSG, why, whylen, "pool name is not NUL-terminated and zero-padded");
	if (!all_zero(d->reserved1, sizeof(d->reserved1)) ||
	    !all_zero(d->reserved2, sizeof(d->reserved2)))
		return fail(-EBADMSG, why, whylen, "reserved bytes are not zero");
	nmembers = sb_le16_to_cpu(d->nmembers);
	if (nmembers > RMR_MAX_MEMBERS)
		return fail(-EBADMSG, why, whylen, "member list has %u entries (most %u)",
			    nmembers, RMR_MAX_MEMBERS);
	for (unsigned i = 0; i < RMR_MAX_MEMBERS; i++) {
		const struct sb_member_disk *m = &d->members[i];

		if (i >= nmembers) {
			if (!all_zero(m, sizeof(*m)))
				return fail(-EBADMSG, why, whylen,
					    "unused member list entry %u is not zero", i);
			continue;
		}
		if (!field_string_ok(m->addr, sizeof(m->addr)) ||
		    !all_zero(m->pad, sizeof(m->pad)))
			return fail(-EBADMSG, why, whylen,
				    "member list entry %u: address not NUL-terminated and zero-padded",
				    i);
	}

	memset(&sb, 0, sizeof(sb));
	sb.version = sb_le32_to_cpu(d->version);
	memcpy(sb.pool_uuid.b, d->pool_uuid, sizeof(sb.pool_uuid.b));
	memcpy(sb.pool_name, d->pool_name, sizeof(sb.pool_name));
	sb.member_id = sb_le16_to_cpu(d->member_id);
	sb.chunk_size = sb_le32_to_cpu(d->chunk_size);
	sb.pool_size = sb_le64_to_cpu(d->pool_size);
	sb.data_offset = sb_le64_to_cpu(d->data_offset);
	sb.meta_offset = sb_le64_to_cpu(d->meta_offset);
	sb.meta_size = sb_le64_to_cpu(d->meta_size);
	sb.map_offset = sb_le64_to_cpu(d->map_offset);
	sb.map_size = sb_le64_to_cpu(d->map_size);
	sb.sequence = sb_le64_to_cpu(d->sequence);
	sb.flags = sb_le64_to_cpu(d->flags);
	sb.nmembers = (uint16_t)nmembers;
	for (unsigned i = 0; i < nmembers; i++) {
		sb.members[i].id = sb_le16_to_cpu(d->members[i].id);
		memcpy(sb.members[i].addr, d->members[i].addr, sizeof(sb.members[i].addr));
	}
	int ret = superblock_check(&sb, dev_size, why, whylen);
	if (ret < 0)
		return ret;
	*out = sb;
	return 0;
}

/*
 * Read slot @p idx. A store too short to hold the slot reads as a slot of
 * zeroes past its end, which the decoder then refuses.
 */
static int slot_read(int fd, unsigned idx, struct sb_disk *d)
{
	size_t done = 0;

	memset(d, 0, sizeof(*d));
	while (done < sizeof(*d)) {
		ssize_t n = pread(fd, (char *)d + done, sizeof(*d) - done,
				  (off_t)idx * SB_SLOT_SIZE + (off_t)done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return 0;
}

int superblock_load(int fd, uint64_t dev_size, struct superblock *out, unsigned *slot,
		    char *why, size_t whylen)
{
	struct superblock sb[SB_NSLOTS];
	char reason[SB_NSLOTS][160];
	int ret[SB_NSLOTS];
	bool magic[SB_NSLOTS];
	struct sb_disk d;
	int best = -1;

	if (dev_size < SB_AREA_SIZE)
		return fail(-EBADMSG, why, whylen,
			    "truncated store: %" PRIu64 " bytes, too small for a superblock",
			    dev_size);
	for (unsigned i = 0; i < SB_NSLOTS; i++) {
		int r = slot_read(fd, i, &d);

		if (r < 0)
			return fail(r, why, whylen, "reading superblock slot %c: %s",
				    'A' + i, strerror(-r));
		magic[i] = superblock_has_magic(&d);
		ret[i] = superblock_decode(&d, dev_size, &sb[i], reason[i], sizeof(reason[i]));
		/*
		 * A slot of a newer format poisons the store for this build: it
		 * must not fall back to an older slot and then write metadata
		 * in a layout the newer writer does not expect.
		 */
		if (ret[i] == -EPROTONOSUPPORT)
			return fail(ret[i], why, whylen, "superblock slot %c: %s", 'A' + i,
				    reason[i]);
	}
	for (unsigned i = 0; i < SB_NSLOTS; i++)
		if (ret[i] == 0 && (best < 0 || sb[i].sequence > sb[best].sequence))
			best = (int)i;
	if (best < 0) {
		if (ret[0] == -ENODATA && ret[1] == -ENODATA)
			return fail(-EBADMSG, why, whylen, "no brmr superblock (slots A and B are zero)");
		if (!magic[0] && !magic[1])
			return fail(-EBADMSG, why, whylen,
				    "no brmr superblock (foreign data, not a brmr store)");
		return fail(-EBADMSG, why, whylen, "superblock slot A: %s; slot B: %s", reason[0],
			    reason[1]);
	}
	if (ret[0] == 0 && ret[1] == 0) {
		if (memcmp(&sb[0].pool_uuid, &sb[1].pool_uuid, sizeof(sb[0].pool_uuid)))
			return fail(-EBADMSG, why, whylen,
				    "superblock slots A and B belong to different pools");
		if (sb[0].sequence == sb[1].sequence)
			return fail(-EBADMSG, why, whylen,
				    "superblock slots A and B have the same sequence %" PRIu64,
				    sb[0].sequence);
	}
	*out = sb[best];
	if (slot)
		*slot = (unsigned)best;
	return 0;
}

void meta_hdr_encode(const struct superblock *sb, uint64_t sequence, const void *blob,
		     uint64_t len, struct meta_hdr_disk *h)
{
	uint32_t crc;

	memset(h, 0, sizeof(*h));
	memcpy(h->magic, META_MAGIC, sizeof(h->magic));
	h->version = sb_cpu_to_le32(META_VERSION);
	h->header_size = sb_cpu_to_le32(META_HDR_SIZE);
	h->sequence = sb_cpu_to_le64(sequence);
	h->length = sb_cpu_to_le64(len);
	memcpy(h->pool_uuid, sb->pool_uuid.b, sizeof(h->pool_uuid));
	crc = crc32c(0, h, sizeof(*h));
	crc = crc32c(crc, blob, len);
	h->crc = sb_cpu_to_le32(crc);
}

int meta_hdr_decode(const struct superblock *sb, unsigned idx,
		    const struct meta_hdr_disk *h, uint64_t *sequence, uint64_t *len,
		    char *why, size_t whylen)
{
	uint64_t seq, l;

	if (all_zero(h, sizeof(*h)))
		return fail(-ENODATA, why, whylen, "metadata slot %u never written", idx);
	if (memcmp(h->magic, META_MAGIC, sizeof(h->magic)))
		return fail(-EBADMSG, why, whylen, "metadata slot %u: bad magic", idx);
	if (sb_le32_to_cpu(h->version) != META_VERSION ||
	    sb_le32_to_cpu(h->header_size) != META_HDR_SIZE)
		return fail(-EBADMSG, why, whylen,
			    "metadata slot %u: unknown version %" PRIu32 " or header size %" PRIu32,
			    idx, sb_le32_to_cpu(h->version), sb_le32_to_cpu(h->header_size));
	seq = sb_le64_to_cpu(h->sequence);
	l = sb_le64_to_cpu(h->length);
	/* Saves alternate slots by sequence parity; a mismatch is not ours. */
	if (seq == 0 || (seq & 1) != idx)
		return fail(-EBADMSG, why, whylen,
			    "metadata slot %u: sequence %" PRIu64 " does not belong in it", idx, seq);
	if (l > meta_slot_capacity(sb))
		return fail(-EBADMSG, why, whylen,
			    "metadata slot %u: length %" PRIu64 " exceeds the slot (%" PRIu64 ")",
			    idx, l, meta_slot_capacity(sb));
	if (memcmp(h->pool_uuid, sb->pool_uuid.b, sizeof(h->pool_uuid)))
		return fail(-EBADMSG, why, whylen, "metadata slot %u: belongs to another pool", idx);
	if (!all_zero(h->reserved, sizeof(h->reserved)))
		return fail(-EBADMSG, why, whylen, "metadata slot %u: reserved bytes not zero", idx);
	*sequence = seq;
	*len = l;
	return 0;
}

bool meta_hdr_crc_ok(const struct meta_hdr_disk *h, const void *blob)
{
	struct meta_hdr_disk tmp = *h;
	uint32_t crc;

	tmp.crc = sb_cpu_to_le32(0);
	crc = crc32c(0, &tmp, sizeof(tmp));
	crc = crc32c(crc, blob, sb_le64_to_cpu(h->length));
	return crc == sb_le32_to_cpu(h->crc);
}
