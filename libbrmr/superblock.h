/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The on-disk format of a brmr store, version 1: the only code that touches
 * the raw bytes of the superblock and of the metadata slot headers.
 *
 *   0        superblock slot A (4 KiB)
 *   4096     superblock slot B (4 KiB)
 *   8192     metadata area: two equal slots, each a 64-byte header + blob
 *   map_offset (4 KiB aligned): the dirty-map area, librmr's bitmaps
 *   data_offset (1 MiB aligned): the pool's bytes, pool_size of them
 *
 * docs/disk-format.md describes every byte and the crash-consistency rules.
 * Everything on disk is little-endian, wrapped in types that do not convert
 * silently; every structure has explicit padding and static size checks.
 * Decoding checks every field before anyone uses it and explains a refusal
 * in one line.
 */
#ifndef BRMR_SUPERBLOCK_H
#define BRMR_SUPERBLOCK_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rmr/rmr.h>

typedef struct { uint16_t v; } sb_le16;
typedef struct { uint32_t v; } sb_le32;
typedef struct { uint64_t v; } sb_le64;

static inline sb_le16 sb_cpu_to_le16(uint16_t x) { return (sb_le16){ htole16(x) }; }
static inline sb_le32 sb_cpu_to_le32(uint32_t x) { return (sb_le32){ htole32(x) }; }
static inline sb_le64 sb_cpu_to_le64(uint64_t x) { return (sb_le64){ htole64(x) }; }
static inline uint16_t sb_le16_to_cpu(sb_le16 x) { return le16toh(x.v); }
static inline uint32_t sb_le32_to_cpu(sb_le32 x) { return le32toh(x.v); }
static inline uint64_t sb_le64_to_cpu(sb_le64 x) { return le64toh(x.v); }

#define SB_MAGIC "BRMRSTOR"            /* 8 bytes, no NUL on disk */
#define SB_VERSION 1u
#define SB_SLOT_SIZE 4096u             /* one superblock slot */
#define SB_NSLOTS 2u                   /* A at 0, B at 4096 */
#define SB_AREA_SIZE (SB_NSLOTS * SB_SLOT_SIZE)
#define SB_DATA_ALIGN (1u << 20)       /* data_offset alignment */
#define SB_META_ALIGN 4096u            /* meta offset and slot alignment */
#define SB_META_SLOT_MIN (1u << 20)    /* smallest metadata slot (see format) */
#define SB_MAP_ALIGN 4096u             /* map offset and size alignment */

/*
 * Superblock flags. SB_F_DATA_LOST: a write-back to the store failed, so
 * bytes it acknowledged may be gone without a trace (the kernel reports
 * such a failure once and then marks the pages clean): it is never served
 * again; a replacement (brmr-server --replace) copies every chunk.
 */
#define SB_F_DATA_LOST 1u
#define SB_F_KNOWN SB_F_DATA_LOST

#define META_MAGIC "BRMRMETA"
#define META_VERSION 1u
#define META_HDR_SIZE 64u

/* One member of the pool as listed in the superblock. */
struct sb_member_disk {
	sb_le16 id;                        /* 1..RMR_MAX_MEMBER_ID */
	char addr[RMR_ADDR_MAX + 1];       /* NUL-terminated, zero-padded */
	uint8_t pad[2];                    /* zero */
};

/* A superblock slot exactly as on disk. */
struct sb_disk {
	char magic[8];                     /*    0 SB_MAGIC */
	sb_le32 version;                   /*    8 SB_VERSION */
	sb_le32 header_size;               /*   12 SB_SLOT_SIZE: bytes under the crc */
	uint8_t pool_uuid[RMR_UUID_LEN];   /*   16 not all zero */
	char pool_name[RMR_NAME_MAX + 1];  /*   32 NUL-terminated, zero-padded */
	sb_le16 member_id;                 /*   96 this store's member id */
	sb_le16 nmembers;                  /*   98 entries used in members[] */
	sb_le32 chunk_size;                /*  100 power of two, 128 KiB..1 MiB */
	sb_le64 pool_size;                 /*  104 bytes, 4 KiB multiple, > 0 */
	sb_le64 data_offset;               /*  112 1 MiB aligned */
	sb_le64 meta_offset;               /*  120 4 KiB aligned, >= 8192 */
	sb_le64 meta_size;                 /*  128 two equal slots */
	sb_le64 sequence;                  /*  136 >= 1; the higher slot wins */
	sb_le64 flags;                     /*  144 SB_F_* */
	sb_le64 map_offset;                /*  152 4 KiB aligned, after the metadata */
	sb_le64 map_size;                  /*  160 4 KiB multiple, >= the pool's map area */
	uint8_t reserved1[88];             /*  168 zero */
	struct sb_member_disk members[RMR_MAX_MEMBERS]; /* 256, 112 bytes each */
	uint8_t reserved2[2044];           /* 2048 zero */
	sb_le32 crc;                       /* 4092 crc32c of the slot with this field zero */
};

_Static_assert(sizeof(struct sb_member_disk) == 112, "sb_member_disk size");
_Static_assert(offsetof(struct sb_member_disk, addr) == 2, "sb_member_disk.addr");
_Static_assert(offsetof(struct sb_disk, version) == 8, "sb.version");
_Static_assert(offsetof(struct sb_disk, pool_uuid) == 16, "sb.pool_uuid");
_Static_assert(offsetof(struct sb_disk, pool_name) == 32, "sb.pool_name");
_Static_assert(offsetof(struct sb_disk, member_id) == 96, "sb.member_id");
_Static_assert(offsetof(struct sb_disk, nmembers) == 98, "sb.nmembers");
_Static_assert(offsetof(struct sb_disk, chunk_size) == 100, "sb.chunk_size");
_Static_assert(offsetof(struct sb_disk, pool_size) == 104, "sb.pool_size");
_Static_assert(offsetof(struct sb_disk, data_offset) == 112, "sb.data_offset");
_Static_assert(offsetof(struct sb_disk, meta_offset) == 120, "sb.meta_offset");
_Static_assert(offsetof(struct sb_disk, meta_size) == 128, "sb.meta_size");
_Static_assert(offsetof(struct sb_disk, sequence) == 136, "sb.sequence");
_Static_assert(offsetof(struct sb_disk, flags) == 144, "sb.flags");
_Static_assert(offsetof(struct sb_disk, map_offset) == 152, "sb.map_offset");
_Static_assert(offsetof(struct sb_disk, map_size) == 160, "sb.map_size");
_Static_assert(offsetof(struct sb_disk, reserved1) == 168, "sb.reserved1");
_Static_assert(sizeof(((struct sb_disk *)0)->reserved1) == 88, "sb.reserved1 size");
_Static_assert(offsetof(struct sb_disk, members) == 256, "sb.members");
_Static_assert(offsetof(struct sb_disk, reserved2) == 2048, "sb.reserved2");
_Static_assert(offsetof(struct sb_disk, crc) == 4092, "sb.crc");
_Static_assert(sizeof(struct sb_disk) == SB_SLOT_SIZE, "sb_disk size");

/* The header at the start of each metadata slot; the blob follows it. */
struct meta_hdr_disk {
	char magic[8];                     /*  0 META_MAGIC */
	sb_le32 version;                   /*  8 META_VERSION */
	sb_le32 header_size;               /* 12 META_HDR_SIZE */
	sb_le64 sequence;                  /* 16 >= 1; slot index = sequence & 1 */
	sb_le64 length;                    /* 24 blob bytes after the header */
	uint8_t pool_uuid[RMR_UUID_LEN];   /* 32 the pool the blob belongs to */
	sb_le32 crc;                       /* 48 crc32c of header (crc zero) + blob */
	uint8_t reserved[12];              /* 52 zero */
};

_Static_assert(offsetof(struct meta_hdr_disk, sequence) == 16, "meta.sequence");
_Static_assert(offsetof(struct meta_hdr_disk, pool_uuid) == 32, "meta.pool_uuid");
_Static_assert(offsetof(struct meta_hdr_disk, crc) == 48, "meta.crc");
_Static_assert(sizeof(struct meta_hdr_disk) == META_HDR_SIZE, "meta_hdr_disk size");

/* A member entry in host form. */
struct sb_member {
	uint16_t id;
	char addr[RMR_ADDR_MAX + 1];
};

/* A decoded superblock, in host order. */
struct superblock {
	uint32_t version;
	rmr_uuid pool_uuid;
	char pool_name[RMR_NAME_MAX + 1];
	uint16_t member_id;
	uint32_t chunk_size;
	uint64_t pool_size;
	uint64_t data_offset;
	uint64_t meta_offset;
	uint64_t meta_size;
	uint64_t map_offset;
	uint64_t map_size;
	uint64_t sequence;
	uint64_t flags;
	uint16_t nmembers;
	struct sb_member members[RMR_MAX_MEMBERS];
};

/* Pool names: 1..RMR_NAME_MAX bytes of [A-Za-z0-9._-]. */
bool superblock_name_valid(const char *name);

/*
 * Lay out a new store: sets meta_offset, meta_size, map_offset, map_size and
 * data_offset from pool_size and chunk_size (which must be valid). @p meta_max
 * is the largest blob the server saves (rmr_server_meta_max()); the map area
 * is rmr_server_map_area_size() bytes.
 * @return 0, or -EINVAL if the layout does not fit in 64 bits or the pool has
 *         more chunks than librmr's dirty maps allow.
 */
int superblock_layout(struct superblock *sb, size_t meta_max);

/*
 * Check every field of @p sb (identity, geometry, member list) as the decoder
 * does, against a store of @p dev_size bytes (UINT64_MAX: no size check).
 * @return 0; -EBADMSG, -EPROTONOSUPPORT (version, flags) with a reason.
 */
int superblock_check(const struct superblock *sb, uint64_t dev_size, char *why,
		     size_t whylen);

/* Encode @p sb into a slot and seal it with its crc. @p sb must be valid. */
void superblock_encode(const struct superblock *sb, struct sb_disk *d);

/* Recompute the crc of a raw slot (tests use it to forge valid slots). */
void superblock_seal(struct sb_disk *d);

/* True if @p d starts with the superblock magic. */
bool superblock_has_magic(const struct sb_disk *d);

/*
 * Decode and check one raw slot.
 * @return 0; -ENODATA if the slot is all zero; -EBADMSG (foreign, corrupt);
 *         -EPROTONOSUPPORT (newer version or flags); each with a reason.
 */
int superblock_decode(const struct sb_disk *d, uint64_t dev_size, struct superblock *out,
		      char *why, size_t whylen);

/*
 * Read both slots of the store @p fd (@p dev_size bytes) and pick the valid
 * one with the highest sequence. Writes nothing.
 * @return 0 with the slot index (0 = A, 1 = B) in @p slot; -EBADMSG if no
 *         slot is valid (or they disagree on the pool); -EPROTONOSUPPORT if a
 *         slot is of a newer version; -errno from pread. A reason in @p why.
 */
int superblock_load(int fd, uint64_t dev_size, struct superblock *out, unsigned *slot,
		    char *why, size_t whylen);

/* Bytes of the blob a metadata slot can hold. */
static inline uint64_t meta_slot_capacity(const struct superblock *sb)
{
	return sb->meta_size / 2 - META_HDR_SIZE;
}

/* Byte offset of metadata slot @p idx (0 or 1). */
static inline uint64_t meta_slot_offset(const struct superblock *sb, unsigned idx)
{
	return sb->meta_offset + idx * (sb->meta_size / 2);
}

/* Fill a metadata header for @p len blob bytes and seal it over @p blob. */
void meta_hdr_encode(const struct superblock *sb, uint64_t sequence, const void *blob,
		     uint64_t len, struct meta_hdr_disk *h);

/*
 * Check a metadata header read from slot @p idx (not its crc, which needs the
 * blob: see meta_hdr_crc_ok()). Sets @p len and @p sequence.
 * @return 0; -ENODATA if the header is all zero; -EBADMSG with a reason.
 */
int meta_hdr_decode(const struct superblock *sb, unsigned idx,
		    const struct meta_hdr_disk *h, uint64_t *sequence, uint64_t *len,
		    char *why, size_t whylen);

/* True if the crc of header @p h matches it and @p blob (h->length bytes). */
bool meta_hdr_crc_ok(const struct meta_hdr_disk *h, const void *blob);

#endif
