/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "server_pool.h"
#include "membership.h"
#include "peer.h"
#include "server_internal.h"
#include "verify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>


#include "compiler.h"
#include "log.h"
#include "wire.h"

/*
 * librmr's metadata blob: what a member must remember across restarts. The
 * header, then (version 2 on) the pool's membership as on the wire
 * (rmr_wire_members and its entries). A version 1 blob has no membership:
 * the one the store was formatted with holds. Version 3 gives the field
 * that versions 1 and 2 kept zero a meaning: pulled_ver.
 */
#define META_MAGIC 0x4d524d52u /* "RMRM" */
#define META_VERSION 5
struct meta_hdr {
	rmr_le32 magic;
	rmr_le32 version;
	rmr_le64 map_ver;   /* highest map version seen */
	rmr_le64 missed;    /* member ids known to have missed writes */
	rmr_le64 pulled_ver; /* the client's map version at the last map pull taken; 0: none */
};
_Static_assert(sizeof(struct meta_hdr) == 32, "meta blob header size");
/*
 * Version 4: after the header, the records of the members' maps (chunks a
 * member may have lost to a power loss of its host; RECORD_BIT): a count,
 * then that many ranges. The dirty bitmaps hold misses only, so without
 * these a restart would lose the records. At most META_RECORDS ranges: more
 * are covered by fewer, larger ones (a record of a chunk the member holds
 * only makes it a holder of last resort for it).
 */
struct meta_records {
	rmr_le32 count;
	rmr_le32 reserved;  /* zero */
};
struct meta_record {
	rmr_le16 member_id;
	rmr_le16 flags;     /* version 5: META_RECORD_OLD; before: zero */
	rmr_le32 count;     /* chunks, >= 1 */
	rmr_le64 first;
};
/* Records of an older boot than the boots section's for that member: never void. */
#define META_RECORD_OLD 1u
_Static_assert(sizeof(struct meta_record) == 16, "meta record size");
#define META_RECORDS 256u
/*
 * Version 5: after the records, the boot of its host each member's records
 * were all made in (p->record_boot; ours: our own map's records, and the
 * chunks we hold that the disk shows as missed): a count, then that many
 * entries, none for a member whose records are of no single known boot.
 */
struct meta_boot {
	rmr_le16 member_id;
	rmr_le16 reserved;  /* zero */
	rmr_le32 reserved2; /* zero */
	rmr_le64 boot;      /* not zero */
};
_Static_assert(sizeof(struct meta_boot) == 16, "meta boot size");
#define META_BLOB_MAX (sizeof(struct meta_hdr) + sizeof(struct meta_records) + \
		       META_RECORDS * sizeof(struct meta_record) + sizeof(struct meta_records) + \
		       RMR_MAX_MEMBER_ID * sizeof(struct meta_boot) + RMR_WIRE_MEMBERS_MAX)
#define META_MAX (4u << 20)
/* The dirty-map area is written in blocks of this size. */
#define MAP_BLOCK 4096u
/* A block of the area: on disk as in memory, or to be written. */
enum { BLOCK_CURRENT = 0, BLOCK_STALE = 1 };
/* Bitmaps in the dirty-map area: one per member id, 1..RMR_MAX_MEMBER_ID. */
#define MAP_SLOTS RMR_MAX_MEMBER_ID

RMR_EXPORT size_t rmr_server_meta_max(void)
{
	return META_MAX;
}

/* Bytes of one member's bitmap in the dirty-map area: a bit per chunk, 4 KiB rounded. */
static uint64_t map_bitmap_bytes(uint64_t nchunks)
{
	return ((nchunks + 7) / 8 + MAP_BLOCK - 1) / MAP_BLOCK * MAP_BLOCK;
}

RMR_EXPORT uint64_t rmr_server_map_area_size(uint64_t pool_size, uint32_t chunk_size)
{
	uint64_t nchunks;

	if (!pool_size || chunk_size < 4096 || (chunk_size & (chunk_size - 1)))
		return 0;
	nchunks = pool_size / chunk_size + (pool_size % chunk_size != 0);
	if (nchunks > DIRTY_MAP_MAX_CHUNKS)
		return 0;
	return MAP_SLOTS * map_bitmap_bytes(nchunks) + 2 * AL_RECORD_BYTES;
}

/*
 * A map whose entries with @bits the blob keeps as records of member @id
 * (@flags: META_RECORD_OLD, records of an older boot than the boots
 * section's).
 */
struct record_src {
	unsigned id;
	const struct dirty_map *m;
	uint8_t bits;
	uint16_t flags;
};

static bool has_old_records(const struct dirty_map *m)
{
	return dirty_map_next(m, 0, RECORD_OLD_BIT) != UINT64_MAX;
}

/*
 * What the blob keeps: the others' records; and of our own map, the misses
 * that were records, and the chunks we hold that the disk still shows as
 * missed (copied in or overwritten whole, no finished flush covering them
 * yet: build_block). After a restart those are misses again, but as
 * records of this boot (*@own_boot): our copy is gone only if our host
 * lost power. Our records of another boot are then saved as older ones.
 */
static unsigned record_sources(const struct srv_pool *p, struct dirty_map *held,
			       struct record_src *src, uint64_t *own_boot)
{
	unsigned self = p->params.member_id, n = 0;
	const struct dirty_map *own = pool_own_map(p);
	bool held_any = false, own_aged;

	/* Not one missed again since (a verify's mark): that is a miss for good. */
	for (unsigned k = 0; held && k < 2; k++) {
		const struct dirty_map *m = k ? p->own_flushing : p->own_cleared;

		for (uint64_t c = dirty_map_next(m, 0, DIRTY_BIT); c != UINT64_MAX;
		     c = dirty_map_next(m, c + 1, DIRTY_BIT))
			if (!(dirty_map_get(own, c) & DIRTY_BIT) && dirty_map_mark(held, c, 1) < 0) {
				dirty_map_clear_all(held); /* no memory: plain misses, the safe side */
				k = 2;
				break;
			}
	}
	held_any = held && dirty_map_count(held);
	own_aged = held_any && dirty_map_records(own) && p->record_boot[self] != p->params.boot_id;
	*own_boot = held_any ? p->params.boot_id : p->record_boot[self];
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		if (!p->maps[id])
			continue;
		src[n++] = (struct record_src){ id, p->maps[id], RECORD_BIT, 0 };
		if (id == self && own_aged)
			src[n++] = (struct record_src){ id, own, RECORD_BIT, META_RECORD_OLD };
		else if (has_old_records(p->maps[id]))
			src[n++] = (struct record_src){ id, p->maps[id], RECORD_OLD_BIT,
							META_RECORD_OLD };
	}
	if (held_any)
		src[n++] = (struct record_src){ self, held, DIRTY_BIT, 0 };
	return n;
}

static uint64_t runs_of(const struct record_src *s)
{
	uint64_t runs = 0, c = dirty_map_next(s->m, 0, s->bits);

	while (c != UINT64_MAX) {
		runs++;
		while (c < s->m->nchunks && (dirty_map_get(s->m, c) & s->bits))
			c++;
		c = c < s->m->nchunks ? dirty_map_next(s->m, c, s->bits) : UINT64_MAX;
	}
	return runs;
}

/*
 * The records into @out (META_RECORDS entries at most): exact if they fit,
 * else each source in its share of ranges, covering more chunks than it
 * holds (a record of a chunk the member holds only makes it a holder of
 * last resort for it). *@own_boot: the boot our own records were made in
 * (but those saved as older). Returns the entries used.
 */
static unsigned records_encode(const struct srv_pool *p, struct meta_record *out,
			       uint64_t *own_boot)
{
	struct record_src src[2 * RMR_MAX_MEMBER_ID + 1];
	struct dirty_range r[META_RECORDS];
	struct dirty_map held;
	bool have_held = dirty_map_init(&held, p->nchunks) == 0;
	unsigned nsrc = record_sources(p, have_held ? &held : NULL, src, own_boot), holders = 0, n = 0;
	uint64_t runs = 0;

	for (unsigned i = 0; i < nsrc; i++) {
		uint64_t k = runs_of(&src[i]);

		runs += k;
		holders += k != 0;
	}
	/*
	 * Ranges wider than the records cover our misses between them, which
	 * come back as records too: of no boot, or after a restart in this
	 * one we would keep chunks we never had.
	 */
	if (runs > META_RECORDS)
		*own_boot = 0;
	for (unsigned i = 0; holders && i < nsrc; i++) {
		unsigned k = dirty_map_cover_bits(src[i].m, src[i].bits,
						  runs <= META_RECORDS ? META_RECORDS
								       : META_RECORDS / holders, r);

		for (unsigned j = 0; j < k; j++)
			out[n++] = (struct meta_record){
				.member_id = cpu_to_le16((uint16_t)src[i].id),
				.flags = cpu_to_le16(src[i].flags),
				.count = cpu_to_le32((uint32_t)RMR_MIN(r[j].count, UINT32_MAX)),
				.first = cpu_to_le64(r[j].first),
			};
	}
	if (have_held)
		dirty_map_destroy(&held);
	return n;
}

int pool_meta_save(struct srv_pool *p)
{
	struct meta_hdr m = {
		.magic = cpu_to_le32(META_MAGIC),
		.version = cpu_to_le32(META_VERSION),
		.map_ver = cpu_to_le64(p->map_ver),
		.missed = cpu_to_le64(p->missed),
		.pulled_ver = cpu_to_le64(p->pull_done_ver),
	};
	struct meta_record rec[META_RECORDS];
	struct meta_boot boots[RMR_MAX_MEMBER_ID];
	struct meta_records rh = { 0 }, bh = { 0 };
	uint8_t blob[META_BLOB_MAX];
	uint64_t own_boot;
	unsigned nrec, nboots = 0;
	size_t len;
	int ret;

	if (!p->ops.meta_save)
		return 0;
	nrec = records_encode(p, rec, &own_boot);
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		uint64_t boot = id == p->params.member_id ? own_boot : p->record_boot[id];

		if (p->maps[id] && boot)
			boots[nboots++] = (struct meta_boot){ .member_id = cpu_to_le16((uint16_t)id),
							      .boot = cpu_to_le64(boot) };
	}
	rh.count = cpu_to_le32(nrec);
	bh.count = cpu_to_le32(nboots);
	memcpy(blob, &m, sizeof(m));
	len = sizeof(m);
	memcpy(blob + len, &rh, sizeof(rh));
	len += sizeof(rh);
	memcpy(blob + len, rec, nrec * sizeof(rec[0]));
	len += nrec * sizeof(rec[0]);
	memcpy(blob + len, &bh, sizeof(bh));
	len += sizeof(bh);
	memcpy(blob + len, boots, nboots * sizeof(boots[0]));
	len += nboots * sizeof(boots[0]);
	len += rmr_wire_encode_members(blob + len, &p->membership);
	ret = p->ops.meta_save(p->store, blob, len);
	if (ret < 0)
		log_err("pool=%s member=%u: saving metadata failed: %s", p->name,
			p->params.member_id, strerror(-ret));
	else
		p->meta_saves++;
	return ret;
}

/*
 * Slot of member @id in the dirty-map area. One slot per possible id, so a
 * membership change never moves a bitmap: a crash while the membership
 * changes leaves every bitmap where the saved membership expects it.
 */
static unsigned map_slot(unsigned id)
{
	return id - 1;
}

static bool have_map_area(const struct srv_pool *p)
{
	return p->ops.map_read && p->ops.map_write;
}

static void add_bits(const struct dirty_map *m, uint64_t first, uint8_t *buf)
{
	uint64_t end = first + MAP_BLOCK * 8;

	for (uint64_t c = dirty_map_next(m, first, DIRTY_BIT); c < end;
	     c = dirty_map_next(m, c + 1, DIRTY_BIT))
		buf[(c - first) / 8] |= (uint8_t)(1u << (c % 8));
}

/*
 * Fill @buf with the bits of block @blk of member @id's bitmap: its dirty
 * chunks, and for this member's own also those clean in memory whose data
 * no finished flush made durable yet (they stay dirty on disk till then).
 */
static void build_block(const struct srv_pool *p, unsigned id, uint64_t blk, uint8_t *buf)
{
	uint64_t first = blk * MAP_BLOCK * 8;

	memset(buf, 0, MAP_BLOCK);
	add_bits(p->maps[id], first, buf);
	if (id == p->params.member_id) {
		add_bits(p->own_cleared, first, buf);
		add_bits(p->own_flushing, first, buf);
	}
}

static int write_block(struct srv_pool *p, unsigned id, uint64_t blk)
{
	uint8_t buf[MAP_BLOCK];
	int ret;

	build_block(p, id, blk, buf);
	ret = p->ops.map_write(p->store, map_slot(id) * p->bitmap_bytes + blk * MAP_BLOCK, buf,
			       MAP_BLOCK);
	if (ret < 0)
		log_err("pool=%s member=%u: writing the dirty map of member %u failed: %s", p->name,
			p->params.member_id, id, strerror(-ret));
	else
		p->map_writes++;
	return ret;
}

static uint8_t *block_stale(struct srv_pool *p, unsigned id, uint64_t blk)
{
	return &p->stale_blocks[map_slot(id) * (p->bitmap_bytes / MAP_BLOCK) + blk];
}

/* Does the disk lag memory for any block holding chunks [first, last] of @id? */
static bool blocks_stale(struct srv_pool *p, unsigned id, uint64_t first, uint64_t last)
{
	if (!have_map_area(p))
		return false;
	for (uint64_t blk = first / (MAP_BLOCK * 8); blk <= last / (MAP_BLOCK * 8); blk++)
		if (*block_stale(p, id, blk))
			return true;
	return false;
}

static void mark_blocks_stale(struct srv_pool *p, unsigned id, uint64_t first, uint64_t last)
{
	if (!have_map_area(p))
		return;
	for (uint64_t blk = first / (MAP_BLOCK * 8); blk <= last / (MAP_BLOCK * 8); blk++)
		*block_stale(p, id, blk) = BLOCK_STALE;
	p->clears_pending = true;
}

/* Durably write the blocks holding chunks [first, last] of member @id. */
static int write_blocks(struct srv_pool *p, unsigned id, uint64_t first, uint64_t last)
{
	if (!have_map_area(p))
		return 0;
	for (uint64_t blk = first / (MAP_BLOCK * 8); blk <= last / (MAP_BLOCK * 8); blk++) {
		int ret = write_block(p, id, blk);

		if (ret < 0)
			return ret;
		*block_stale(p, id, blk) = 0;
	}
	return 0;
}

static int load_maps(struct srv_pool *p)
{
	uint8_t *buf;
	int ret = 0;

	if (!have_map_area(p)) {
		/* Only the coarse record survives: a member that missed anything missed everything. */
		for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
			if ((p->missed & (1ull << id)) && p->maps[id])
				ret = ret ?: dirty_map_mark(p->maps[id], 0, p->nchunks);
		return ret;
	}
	buf = malloc(MAP_BLOCK);
	if (!buf)
		return -ENOMEM;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID && ret == 0; id++) {
		if (!p->maps[id])
			continue;
		for (uint64_t blk = 0; blk < p->bitmap_bytes / MAP_BLOCK && ret == 0; blk++) {
			uint64_t base = blk * MAP_BLOCK * 8;

			ret = p->ops.map_read(p->store, map_slot(id) * p->bitmap_bytes +
					      blk * MAP_BLOCK, buf, MAP_BLOCK);
			for (unsigned i = 0; ret == 0 && i < MAP_BLOCK * 8; i++) {
				if (!(buf[i / 8] & (1u << (i % 8))))
					continue;
				if (base + i >= p->nchunks) {
					log_err("pool=%s member=%u: dirty map of member %u marks chunk %llu beyond the pool",
						p->name, p->params.member_id, id,
						(unsigned long long)(base + i));
					ret = -EBADMSG;
					break;
				}
				ret = dirty_map_set(p->maps[id], base + i, DIRTY_BIT);
			}
		}
		if (ret == 0 && dirty_map_count(p->maps[id]))
			log_notice("pool=%s member=%u: member %u has %llu dirty chunks on record",
				   p->name, p->params.member_id, id,
				   (unsigned long long)dirty_map_count(p->maps[id]));
	}
	free(buf);
	return ret;
}

/*
 * The header of a section at @blob (@len bytes) of at most @max entries of
 * @entry bytes: their count in *@n. Returns the section's size, or -EBADMSG.
 */
static ssize_t section_decode(const uint8_t *blob, size_t len, uint32_t max, size_t entry,
			      uint32_t *n)
{
	struct meta_records h;
	size_t size;

	if (len < sizeof(h))
		return -EBADMSG;
	memcpy(&h, blob, sizeof(h));
	*n = le32_to_cpu(h.count);
	if (*n > max || le32_to_cpu(h.reserved))
		return -EBADMSG;
	size = sizeof(h) + *n * entry;
	return len < size ? -EBADMSG : (ssize_t)size;
}

/*
 * The records section of a blob of @version (4 on) at @blob (@len bytes):
 * checked, kept for load_records(). Returns its size, or -EBADMSG.
 */
static ssize_t records_decode(struct srv_pool *p, uint32_t version, const uint8_t *blob,
			      size_t len)
{
	uint16_t flags = version >= 5 ? META_RECORD_OLD : 0;
	uint32_t n = 0;
	ssize_t size = section_decode(blob, len, META_RECORDS, sizeof(struct meta_record), &n);

	if (size < 0)
		return size;
	p->nrecords_loaded = n;
	if (p->nrecords_loaded) {
		p->records_loaded = malloc(p->nrecords_loaded * sizeof(struct meta_record));
		if (!p->records_loaded)
			return -ENOMEM;
		memcpy(p->records_loaded, blob + sizeof(struct meta_records),
		       p->nrecords_loaded * sizeof(struct meta_record));
	}
	for (unsigned i = 0; i < p->nrecords_loaded; i++) {
		const struct meta_record *r = (const struct meta_record *)p->records_loaded + i;
		uint16_t id = le16_to_cpu(r->member_id);
		uint64_t first = le64_to_cpu(r->first), count = le32_to_cpu(r->count);

		if (id == 0 || id > RMR_MAX_MEMBER_ID || (le16_to_cpu(r->flags) & ~flags) || count == 0 ||
		    first >= p->nchunks || count > p->nchunks - first)
			return -EBADMSG;
	}
	return size;
}

/*
 * The boots section of a version 5 blob at @blob (@len bytes), into
 * p->record_boot. Returns its size, or -EBADMSG.
 */
static ssize_t boots_decode(struct srv_pool *p, const uint8_t *blob, size_t len)
{
	uint32_t n = 0;
	ssize_t size = section_decode(blob, len, RMR_MAX_MEMBER_ID, sizeof(struct meta_boot), &n);

	for (unsigned i = 0; size >= 0 && i < n; i++) {
		struct meta_boot b;
		uint16_t id;

		memcpy(&b, blob + sizeof(struct meta_records) + i * sizeof(b), sizeof(b));
		id = le16_to_cpu(b.member_id);
		if (id == 0 || id > RMR_MAX_MEMBER_ID || le16_to_cpu(b.reserved) ||
		    le32_to_cpu(b.reserved2) || !le64_to_cpu(b.boot) || p->record_boot[id])
			return -EBADMSG;
		p->record_boot[id] = le64_to_cpu(b.boot);
	}
	return size;
}

/* The sections of a blob of @version between header and membership; their size. */
static ssize_t records_sections_decode(struct srv_pool *p, uint32_t version, const uint8_t *blob,
				       size_t len)
{
	ssize_t rec = 0, boots = 0;

	if (version >= 4)
		rec = records_decode(p, version, blob, len);
	if (rec >= 0 && version >= 5)
		boots = boots_decode(p, blob + rec, len - (size_t)rec);
	return rec < 0 ? rec : boots < 0 ? boots : rec + boots;
}

/*
 * The records the blob held, into the maps loaded from the bitmaps: the
 * others' where the bitmap shows no miss (a miss stays one); our own where
 * the bitmap does show one (what is clean needs no copy).
 */
static int load_records(struct srv_pool *p)
{
	struct dirty_map *own = pool_own_map(p);
	unsigned n = p->nrecords_loaded;
	int ret = 0;

	/* Every entry a record first, then those of an older boot aged. */
	for (unsigned i = 0; i < 2 * n && ret == 0; i++) {
		const struct meta_record *r = (const struct meta_record *)p->records_loaded + i % n;
		uint16_t id = le16_to_cpu(r->member_id);
		uint64_t first = le64_to_cpu(r->first), end = first + le32_to_cpu(r->count);
		bool old = le16_to_cpu(r->flags) & META_RECORD_OLD;

		if (!p->maps[id] || (i >= n && !old))
			continue;
		if (i >= n) {
			ret = dirty_map_age(p->maps[id], first, end - first);
			continue;
		}
		if (id != p->params.member_id) {
			ret = dirty_map_record(p->maps[id], first, end - first);
			continue;
		}
		for (uint64_t c = dirty_map_next(own, first, DIRTY_BIT); ret == 0 && c < end;
		     c = dirty_map_next(own, c + 1, DIRTY_BIT))
			ret = dirty_map_set(own, c, dirty_map_get(own, c) | RECORD_BIT);
	}
	free(p->records_loaded);
	p->records_loaded = NULL;
	p->nrecords_loaded = 0;
	return ret;
}

/* Load the blob; the membership stays the formatted one unless the blob has one. */
static int pool_meta_load(struct srv_pool *p)
{
	uint8_t blob[META_BLOB_MAX];
	struct rmr_membership ms;
	struct meta_hdr m;
	const char *bad = NULL;
	size_t len = 0, off = sizeof(m);
	ssize_t rec = 0;
	char why[160];
	int ret;

	p->map_ver = 1;
	p->missed = 0;
	if (!p->ops.meta_load)
		return 0;
	ret = p->ops.meta_load(p->store, blob, sizeof(blob), &len);
	if (ret < 0)
		return ret;
	if (len == 0) {
		p->fresh = true; /* never saved: a new store */
		return 0;
	}
	memcpy(&m, blob, RMR_MIN(len, sizeof(m)));
	if (len < sizeof(m) || le32_to_cpu(m.magic) != META_MAGIC ||
	    le32_to_cpu(m.version) < 1 || le32_to_cpu(m.version) > META_VERSION ||
	    (le32_to_cpu(m.version) == 1 && len != sizeof(m)) ||
	    (le32_to_cpu(m.version) < 3 && le64_to_cpu(m.pulled_ver) != 0) ||
	    le64_to_cpu(m.pulled_ver) > le64_to_cpu(m.map_ver) || (le64_to_cpu(m.missed) & 1)) {
		log_err("pool=%s member=%u: metadata blob is corrupt or of an unknown version",
			p->name, p->params.member_id);
		return -EBADMSG;
	}
	p->map_ver = le64_to_cpu(m.map_ver);
	p->missed = le64_to_cpu(m.missed);
	p->pull_done_ver = le64_to_cpu(m.pulled_ver);
	if (le32_to_cpu(m.version) == 1)
		return 0;
	rec = records_sections_decode(p, le32_to_cpu(m.version), blob + off, len - off);
	if (rec == -ENOMEM)
		return -ENOMEM;
	if (rec < 0) {
		log_err("pool=%s member=%u: the records in the metadata blob are corrupt", p->name,
			p->params.member_id);
		return -EBADMSG;
	}
	off += (size_t)rec;
	if (rmr_wire_decode_members(blob + off, len - off, &ms, why, sizeof(why)) < 0 ||
	    (bad = membership_invalid(p, &ms)) != NULL) {
		log_err("pool=%s member=%u: the membership in the metadata blob is unusable: %s",
			p->name, p->params.member_id, bad ? bad : why);
		return -EBADMSG;
	}
	if (rmr_membership_ids(&ms) != rmr_membership_ids(&p->membership))
		log_notice("pool=%s member=%u: membership version %llu (members 0x%llx) replaces the formatted list (0x%llx)",
			   p->name, p->params.member_id, (unsigned long long)ms.version,
			   (unsigned long long)rmr_membership_ids(&ms),
			   (unsigned long long)rmr_membership_ids(&p->membership));
	p->membership = ms;
	p->params.members_mask = rmr_membership_ids(&ms);
	p->missed &= p->params.members_mask;
	return 0;
}

/*
 * Record what a message says about the pool (who missed writes, the map
 * version) before acting on it. Returns 0, or -errno if it could not be made
 * durable.
 */
int pool_note(struct srv_pool *p, uint64_t map_ver, uint64_t missed)
{
	/* A member never records itself: it only gets writes while it is current. */
	missed &= p->params.members_mask & ~(1ull << p->params.member_id);
	if (map_ver <= p->map_ver && !(missed & ~p->missed))
		return 0;
	if (missed & ~p->missed)
		log_notice("pool=%s member=%u: recording members 0x%llx as having missed writes",
			   p->name, p->params.member_id, (unsigned long long)(missed & ~p->missed));
	p->map_ver = RMR_MAX(p->map_ver, map_ver);
	p->missed |= missed;
	return pool_meta_save(p);
}

uint32_t pool_chunk_len(const struct srv_pool *p, uint64_t chunk)
{
	uint64_t start = chunk << p->chunk_shift;

	return (uint32_t)RMR_MIN((uint64_t)p->params.chunk_size, p->params.pool_size - start);
}

int pool_mark_chunks(struct srv_pool *p, unsigned id, uint64_t first, uint64_t count)
{
	uint64_t before;
	bool records;
	int ret;

	if (!count || !p->maps[id])
		return 0;
	before = dirty_map_count(p->maps[id]);
	/* A record the mark turns into a miss changes no count, yet the disk must learn it. */
	records = dirty_map_next(p->maps[id], first, RECORD_BIT) < first + count;
	ret = dirty_map_mark(p->maps[id], first, count);
	if (ret < 0) {
		log_err("pool=%s member=%u: cannot record chunks missed by member %u: %s", p->name,
			p->params.member_id, id, strerror(-ret));
		return ret;
	}
	/* All on record already, the common case while degraded; unless a block
	 * holding them could not be written (then it is stale, and tried again). */
	if (dirty_map_count(p->maps[id]) == before && !records &&
	    !blocks_stale(p, id, first, first + count - 1))
		return 0;
	log_debug("pool=%s member=%u: member %u missed chunks %llu..%llu (mark version %llu)", p->name,
		  p->params.member_id, id, (unsigned long long)first,
		  (unsigned long long)(first + count - 1), (unsigned long long)p->mark_ver[id]);
	if (before == 0)
		server_event_dirty(p, (uint16_t)id, true);
	ret = write_blocks(p, id, first, first + count - 1);
	if (ret < 0) {
		/* The bits stay set in memory (a later write must not take them as
		 * recorded); resync_tick writes the stale blocks again. */
		mark_blocks_stale(p, id, first, first + count - 1);
		return ret;
	}
	/* The blob may say we hold some of them (records_encode): not any more. */
	if (id == p->params.member_id)
		ret = pool_meta_save(p);
	return ret;
}

/* Mark chunks [@first, @first + @count) for every member in @missed. */
static int mark_members(struct srv_pool *p, uint64_t missed, uint64_t map_ver, uint64_t first,
			uint64_t count)
{
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		int ret;

		if (!(missed & (1ull << id)))
			continue;
		p->mark_ver[id] = RMR_MAX(p->mark_ver[id], map_ver);
		ret = pool_mark_chunks(p, id, first, count);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int pool_mark(struct srv_pool *p, uint64_t missed, uint64_t map_ver, uint64_t addr,
	      uint64_t len)
{
	uint64_t first;

	missed &= p->params.members_mask & ~(1ull << p->params.member_id);
	if (!missed || !len)
		return 0;
	first = pool_first_chunk(p, addr);
	return mark_members(p, missed, map_ver, first, pool_last_chunk(p, addr, len) - first + 1);
}

uint64_t pool_member_boot(const struct srv_pool *p, unsigned id)
{
	return id == p->params.member_id ? p->params.boot_id : peer_boot(p->peers[id]);
}

bool pool_holds(const struct srv_pool *p, unsigned id, uint64_t chunk)
{
	uint8_t e = p->maps[id] ? dirty_map_get(p->maps[id], chunk) : 0;
	uint64_t boot = pool_member_boot(p, id);

	if (!(e & (DIRTY_BIT | RECORD_BIT)))
		return true;
	/* Our own map: dirty with a record is a record we absorbed, not a miss. */
	return (e & RECORD_BIT) && !(e & RECORD_OLD_BIT) && boot && p->record_boot[id] == boot;
}

int pool_records_add(struct dirty_map *dst, uint64_t *dst_boot, const struct dirty_map *src,
		     uint64_t src_boot, uint64_t current, bool absorb)
{
	bool had = dirty_map_records(dst) != 0, age_src = false;
	int ret;

	if (dirty_map_records(src) && had && src_boot != *dst_boot) {
		if (current && src_boot == current) {
			ret = dirty_map_age(dst, 0, dst->nchunks);
			if (ret < 0)
				return ret;
			*dst_boot = src_boot;
		} else {
			age_src = true;
		}
	} else if (dirty_map_records(src) && !had) {
		*dst_boot = src_boot;
	}
	return dirty_map_merge_records(dst, src, absorb, age_src);
}

int pool_record(struct srv_pool *p, uint64_t ids, uint64_t map_ver, uint64_t addr,
		uint64_t len, uint64_t boot)
{
	uint64_t first, count;

	ids &= p->params.members_mask & ~(1ull << p->params.member_id);
	if (!ids || !len)
		return 0;
	first = pool_first_chunk(p, addr);
	count = pool_last_chunk(p, addr, len) - first + 1;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		uint64_t before;
		int ret;

		if (!(ids & (1ull << id)) || !p->maps[id])
			continue;
		p->mark_ver[id] = RMR_MAX(p->mark_ver[id], map_ver);
		before = dirty_map_count(p->maps[id]);
		/* The newest record's boot is the map's: older ones are of an older boot. */
		ret = 0;
		if (dirty_map_records(p->maps[id]) && p->record_boot[id] != boot)
			ret = dirty_map_age(p->maps[id], 0, p->nchunks);
		p->record_boot[id] = boot;
		if (ret == 0)
			ret = dirty_map_record(p->maps[id], first, count);
		if (ret < 0) {
			log_err("pool=%s member=%u: cannot record chunks member %u may have lost: %s",
				p->name, p->params.member_id, id, strerror(-ret));
			return ret;
		}
		log_debug("pool=%s member=%u: member %u may have lost chunks %llu..%llu (mark version %llu)",
			  p->name, p->params.member_id, id, (unsigned long long)first,
			  (unsigned long long)(first + count - 1), (unsigned long long)p->mark_ver[id]);
		if (before == 0 && dirty_map_count(p->maps[id]))
			server_event_dirty(p, (uint16_t)id, true);
	}
	/* Durable before the answer: the bitmaps hold misses only. */
	return pool_meta_save(p);
}

/* Does a member outside @ids hold @chunk, as far as this member knows? */
static bool held_outside(const struct srv_pool *p, uint64_t ids, uint64_t chunk)
{
	uint64_t others = p->params.members_mask & ~ids;

	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if ((others & (1ull << id)) &&
		    (!p->maps[id] || !(dirty_map_get(p->maps[id], chunk) & DIRTY_BIT)))
			return true;
	return false;
}

int pool_mark_held(struct srv_pool *p, uint64_t missed, uint64_t map_ver, uint64_t addr,
		   uint64_t len)
{
	uint64_t first, last, run = UINT64_MAX;

	missed &= p->params.members_mask & ~(1ull << p->params.member_id);
	if (!missed || !len)
		return 0;
	first = pool_first_chunk(p, addr);
	last = pool_last_chunk(p, addr, len);
	/* The usual case: this member holds the whole range itself. */
	if (dirty_map_next(pool_own_map(p), first, DIRTY_BIT) > last)
		return mark_members(p, missed, map_ver, first, last - first + 1);
	for (uint64_t c = first; c <= last + 1; c++) {
		bool mark = c <= last && held_outside(p, missed, c);
		int ret;

		if (mark && run == UINT64_MAX)
			run = c;
		if (mark || run == UINT64_MAX)
			continue;
		ret = mark_members(p, missed, map_ver, run, c - run);
		if (ret < 0)
			return ret;
		run = UINT64_MAX;
	}
	return 0;
}

int pool_clear_chunk(struct srv_pool *p, unsigned id, uint64_t chunk)
{
	uint8_t v = p->maps[id] ? dirty_map_get(p->maps[id], chunk) : 0;

	if (!(v & (DIRTY_BIT | RECORD_BIT)))
		return 0;
	/* A record only: the disk holds none of it (the blob drops it at its next save). */
	if (!(v & DIRTY_BIT)) {
		dirty_map_set(p->maps[id], chunk, 0);
		if (dirty_map_count(p->maps[id]) == 0)
			server_event_dirty(p, (uint16_t)id, false);
		p->clears_pending = true;
		return 0;
	}
	/* Our own stays dirty on disk until a flush made its copy durable. */
	if (id == p->params.member_id && dirty_map_set(p->own_cleared, chunk, DIRTY_BIT) < 0)
		return -ENOMEM;
	log_debug("pool=%s member=%u: member %u holds chunk %llu", p->name, p->params.member_id, id,
		  (unsigned long long)chunk);
	dirty_map_set(p->maps[id], chunk, 0);
	if (dirty_map_count(p->maps[id]) == 0)
		server_event_dirty(p, (uint16_t)id, false);
	if (have_map_area(p) && id != p->params.member_id)
		*block_stale(p, id, chunk / (MAP_BLOCK * 8)) = BLOCK_STALE;
	p->clears_pending = true;
	return 0;
}

/* The flush under way finished: its chunks may show clean in the blocks holding them. */
static void own_flushing_covered(struct srv_pool *p)
{
	struct dirty_map *m = p->own_flushing;

	for (uint64_t c = dirty_map_next(m, 0, DIRTY_BIT); c != UINT64_MAX;
	     c = dirty_map_next(m, (c / (MAP_BLOCK * 8) + 1) * MAP_BLOCK * 8, DIRTY_BIT))
		if (have_map_area(p))
			*block_stale(p, p->params.member_id, c / (MAP_BLOCK * 8)) = BLOCK_STALE;
	dirty_map_clear_all(m);
	p->nclean_covered = p->nclean_flushing;
}

/* The flush of own_flushing's chunks finished with @status. */
static int own_flush_done(struct srv_pool *p, int status)
{
	if (status == 0) {
		own_flushing_covered(p);
		return 0;
	}
	/*
	 * Not durable: they wait for the next flush with the newer ones. Taking
	 * one out of own_flushing never allocates; one that finds no room in
	 * own_cleared stays where it is (the next flush start swaps it over).
	 */
	for (uint64_t c = dirty_map_next(p->own_flushing, 0, DIRTY_BIT); c != UINT64_MAX;
	     c = dirty_map_next(p->own_flushing, c + 1, DIRTY_BIT))
		if (dirty_map_set(p->own_cleared, c, DIRTY_BIT) == 0)
			dirty_map_set(p->own_flushing, c, 0);
	p->nclean_flushing = p->nclean_covered;
	return status;
}

/* Own chunks clean in memory that no finished flush covered, none under way for them. */
static bool own_uncovered_idle(const struct srv_pool *p)
{
	return !flusher_busy(&p->flusher) &&
	       (dirty_map_count(p->own_cleared) || dirty_map_count(p->own_flushing));
}

/*
 * A flush for the own chunks cleared so far, off the loop. (What a failed
 * flush left in own_flushing goes to own_cleared: the next one covers it.)
 */
static int own_flush_start(struct srv_pool *p)
{
	struct dirty_map *t = p->own_flushing;
	int status;

	p->own_flushing = p->own_cleared;
	p->own_cleared = t;
	p->nclean_flushing = p->nclean_pending;
	if (!p->ops.flush)
		return own_flush_done(p, 0);
	flusher_start(&p->flusher);
	/* One that ran on the loop and shows its end at once goes down in this turn. */
	if (flusher_done(&p->flusher, &status))
		return own_flush_done(p, status);
	return 0;
}

uint64_t pool_missed_ids(const struct srv_pool *p)
{
	uint64_t ids = 0;

	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if (id != p->params.member_id && p->maps[id] && dirty_map_count(p->maps[id]))
			ids |= 1ull << id;
	return ids;
}

int pool_flush_clears(struct srv_pool *p)
{
	uint64_t per_member = p->bitmap_bytes / MAP_BLOCK;
	uint64_t missed;
	int ret, status;

	if (flusher_done(&p->flusher, &status)) {
		ret = own_flush_done(p, status);
		if (ret < 0)
			return ret;
	}
	if (!p->clears_pending)
		return 0;
	if (own_uncovered_idle(p)) {
		ret = own_flush_start(p);
		/* Until that flush ends the disk shows them missed: the blob says we hold them. */
		if (ret == 0 && dirty_map_count(p->own_flushing))
			ret = pool_meta_save(p);
		if (ret < 0)
			return ret;
	}
	for (uint64_t b = 0; have_map_area(p) && b < p->nblocks; b++) {
		unsigned id = (unsigned)(b / per_member) + 1;

		if (p->stale_blocks[b] != BLOCK_STALE)
			continue;
		/* A member removed meanwhile: its bitmap is no one's any more. */
		if (!p->maps[id]) {
			p->stale_blocks[b] = BLOCK_CURRENT;
			continue;
		}
		ret = write_block(p, id, b % per_member);
		if (ret < 0)
			return ret;
		p->stale_blocks[b] = BLOCK_CURRENT;
	}
	/* Our own bits on disk show what a finished flush covered: peers may hear of it. */
	p->nclean_durable = p->nclean_covered;
	p->clears_pending = flusher_busy(&p->flusher) || dirty_map_count(p->own_cleared) ||
			    dirty_map_count(p->own_flushing);
	/* The coarse record follows the maps down, once they are on disk. */
	missed = pool_missed_ids(p);
	if (missed != p->missed && !(missed & ~p->missed)) {
		p->missed = missed;
		return pool_meta_save(p);
	}
	return 0;
}

int pool_save_all_maps(struct srv_pool *p)
{
	int ret;

	/*
	 * No flush here, on the loop: own chunks copied in that no finished
	 * flush covered yet go down dirty (build_block), and clean once one
	 * covers them (pool_flush_clears), as at any other time.
	 */
	if (!have_map_area(p)) {
		p->nclean_durable = p->nclean_covered;
		p->missed = pool_missed_ids(p);
		return pool_meta_save(p);
	}
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++) {
		if (!p->maps[id])
			continue;
		ret = write_blocks(p, id, 0, p->nchunks - 1);
		if (ret < 0) {
			/* This one and the rest go down at a later tick (pool_flush_clears). */
			for (; id <= RMR_MAX_MEMBER_ID; id++)
				if (p->maps[id])
					mark_blocks_stale(p, id, 0, p->nchunks - 1);
			return ret;
		}
	}
	p->nclean_durable = p->nclean_covered;
	p->missed = pool_missed_ids(p);
	return pool_meta_save(p);
}

/*
 * A blank store under an existing member id: every chunk is dirty for it,
 * durably, before it serves anything; the resync then copies the pool in
 * from the peers, and I/O to a chunk not copied yet waits for its copy. The
 * metadata blob is saved, so that a restart resumes instead of starting over.
 */
static int pool_replace(struct srv_pool *p)
{
	int ret;

	if (!p->fresh || !have_map_area(p)) {
		log_err("pool=%s member=%u: refusing to replace: %s", p->name, p->params.member_id,
			!p->fresh ? "the store has served the pool before"
				  : "the store keeps no dirty map");
		return p->fresh ? -EINVAL : -EEXIST;
	}
	ret = dirty_map_mark(pool_own_map(p), 0, p->nchunks);
	if (ret == 0)
		ret = pool_save_all_maps(p);
	if (ret < 0)
		return ret;
	/*
	 * The copies start once the client admits it (first I/O, or the maps
	 * taken if it missed writes meanwhile): a copy begun before a map pull
	 * would be done again after it.
	 */
	server_event_dirty(p, p->params.member_id, true);
	log_notice("pool=%s member=%u: blank replacement: all %llu chunks are copied in from the peers",
		   p->name, p->params.member_id, (unsigned long long)p->nchunks);
	return 0;
}

/* --- activity log ---------------------------------------------------------- */

/*
 * Take the newer valid record of the two. A torn write leaves the other one,
 * which is safe: the data write of a range goes to the store only after its
 * record is durable. Two corrupt records cannot come from one torn write:
 * the member refuses to start rather than guess where it may differ.
 */
static int al_load_records(struct srv_pool *p)
{
	struct al_record best = { 0 }, r;
	int found = -1, corrupt = 0;
	char why[128];

	if (!have_map_area(p))
		return 0;
	for (int i = 0; i < 2; i++) {
		int ret = p->ops.map_read(p->store, p->al_offset + (uint64_t)i * AL_RECORD_BYTES,
					  p->al_buf, AL_RECORD_BYTES);

		if (ret < 0)
			return ret;
		if (((const uint32_t *)p->al_buf)[0] == 0)
			continue; /* never written */
		if (al_decode(p->al_buf, AL_RECORD_BYTES, p->nchunks, &r, why, sizeof(why)) < 0) {
			log_warn("pool=%s member=%u: activity log record %c unusable: %s", p->name,
				 p->params.member_id, 'A' + i, why);
			corrupt++;
			continue;
		}
		if (found < 0 || r.seq > best.seq) {
			best = r;
			found = i;
		}
	}
	if (found < 0 && corrupt == 2) {
		log_err("pool=%s member=%u: both activity log records are corrupt", p->name,
			p->params.member_id);
		return -EBADMSG;
	}
	if (found < 0)
		return 0;
	p->ops.map_read(p->store, p->al_offset + (uint64_t)found * AL_RECORD_BYTES, p->al_buf,
			AL_RECORD_BYTES);
	al_load(p->al, p->al_buf, &best);
	if (best.count)
		log_notice("pool=%s member=%u: activity log holds %u ranges of writer %016llx",
			   p->name, p->params.member_id, best.count,
			   (unsigned long long)best.writer);
	return 0;
}

/* Write the next record, into the slot that does not hold the newest one. */
int pool_al_save(struct srv_pool *p)
{
	size_t len;
	int ret;

	if (!have_map_area(p))
		return 0;
	len = al_encode(p->al, p->al_buf);
	ret = p->ops.map_write(p->store, p->al_offset + ((p->al->seq + 1) % 2) * AL_RECORD_BYTES,
			       p->al_buf, len);
	if (ret < 0) {
		log_err("pool=%s member=%u: writing the activity log failed: %s", p->name,
			p->params.member_id, strerror(-ret));
		return ret;
	}
	p->al->seq++;
	p->al->records++;
	return 0;
}

bool pool_al_stale(const struct srv_pool *p, uint64_t writer)
{
	return p->al->n && p->al->writer != writer && p->al_reconciled_for != writer;
}

int pool_al_note(struct srv_pool *p, uint64_t writer, uint32_t slot, uint64_t addr,
		 uint64_t len)
{
	uint64_t first, count;
	int ret;

	if (p->params.no_activity_log)
		return 0; /* measurement only: see rmr_pool_params */
	if (p->al->writer != writer) {
		if (p->al->n && p->al_reconciled_for != writer) {
			log_err("pool=%s member=%u: refusing a write: the activity log of writer %016llx was never reconciled",
				p->name, p->params.member_id, (unsigned long long)p->al->writer);
			return -EIO;
		}
		al_reset(p->al, writer); /* the old entries are on record as dirty */
	}
	if (!len)
		return 0;
	count = al_extent_cover(pool_first_chunk(p, addr), pool_last_chunk(p, addr, len),
				p->al_extent_chunks, p->nchunks, &first);
	ret = al_note(p->al, slot, first, (uint32_t)RMR_MIN(count, (uint64_t)UINT32_MAX));
	if (ret <= 0)
		return ret;
	return pool_al_save(p);
}

struct al_mark_ctx {
	struct srv_pool *p;
	uint64_t ids;
	int ret;
};

static void al_mark_range(void *arg, uint64_t first, uint32_t count)
{
	struct al_mark_ctx *x = arg;

	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID && x->ret == 0; id++)
		if (x->ids & (1ull << id))
			x->ret = pool_mark_chunks(x->p, id, first, count);
}

int pool_al_reconcile(struct srv_pool *p, uint64_t writer, bool own, uint64_t map_ver)
{
	uint64_t ver = RMR_MAX(p->map_ver, map_ver) + 1;
	uint64_t others = p->params.members_mask & ~(1ull << p->params.member_id);
	struct al_mark_ctx x = { .p = p, .ids = others };
	bool stale = pool_al_stale(p, writer);
	int ret;

	if (!stale && !(own && p->al->n))
		return 0;
	if (stale)
		log_notice("pool=%s member=%u: writer %016llx exited uncleanly: %u ranges of its activity log become dirty for the other members",
			   p->name, p->params.member_id, (unsigned long long)p->al->writer, p->al->n);
	else
		log_notice("pool=%s member=%u: writes of unknown outcome: %u ranges of the activity log become dirty for the other members",
			   p->name, p->params.member_id, p->al->n);
	/*
	 * The source of writes of unknown outcome holds, by decree, what the
	 * others converge on: a mark for it made until now (for a write that
	 * failed everywhere) names nothing it lacks (seed 113), as if it had
	 * taken the maps at this version. Newer than the client's: marks made
	 * with its version while this member was away count too (seed 5661).
	 */
	if (own)
		p->pull_done_ver = ver;
	/* The coarse record and the version first: a crash in between over-marks. */
	ret = pool_note(p, ver, others);
	if (ret < 0)
		return ret;
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		if (others & (1ull << id))
			p->mark_ver[id] = p->map_ver;
	al_for_each(p->al, al_mark_range, &x);
	if (x.ret == 0 && stale)
		p->al_reconciled_for = writer;
	return x.ret;
}

static void al_mark_own(void *arg, uint64_t first, uint32_t count)
{
	struct al_mark_ctx *x = arg;

	if (x->ret == 0)
		x->ret = dirty_map_mark(pool_own_map(x->p), first, count);
}

struct al_dirty_ctx {
	const struct dirty_map *map;
	bool found;
};

static void al_range_dirty(void *arg, uint64_t first, uint32_t count)
{
	struct al_dirty_ctx *x = arg;

	if (dirty_map_next(x->map, first, DIRTY_BIT) < first + count)
		x->found = true;
}

bool pool_al_absorb_lacked(struct srv_pool *p, uint64_t writer, bool own,
			   const struct dirty_map *source)
{
	struct al_dirty_ctx x = { .map = source };

	if ((pool_al_stale(p, writer) || (own && p->al->n)) && dirty_map_count(source))
		al_for_each(p->al, al_range_dirty, &x);
	return x.found;
}

int pool_al_absorb(struct srv_pool *p, uint64_t writer, bool own)
{
	struct al_mark_ctx x = { .p = p };

	if (!pool_al_stale(p, writer) && !(own && p->al->n))
		return 0;
	log_notice("pool=%s member=%u: %u ranges of the activity log of writer %016llx become dirty here",
		   p->name, p->params.member_id, p->al->n, (unsigned long long)p->al->writer);
	al_for_each(p->al, al_mark_own, &x);
	return x.ret;
}

int pool_al_clear(struct srv_pool *p)
{
	if (!p->al->n && !p->al->writer)
		return 0;
	al_reset(p->al, 0);
	return pool_al_save(p);
}

void pool_free(struct srv_pool *p)
{
	for (unsigned id = 0; id <= RMR_MAX_MEMBER_ID; id++) {
		if (p->maps[id])
			dirty_map_destroy(p->maps[id]);
		free(p->maps[id]);
		if (p->pull_maps[id])
			dirty_map_destroy(p->pull_maps[id]);
		free(p->pull_maps[id]);
	}
	free(p->records_loaded);
	flusher_destroy(&p->flusher);
	flusher_destroy(&p->prober);
	dirty_map_destroy(&p->own_sets[0]);
	dirty_map_destroy(&p->own_sets[1]);
	map_transfer_free(p);
	sync_index_destroy(&p->syncing);
	verify_free(p);
	free(p->stale_blocks);
	free(p->al);
	free(p->al_buf);
	free(p->clean_pending);
	free((void *)p->params.peers);
	sodium_memzero(p->key, sizeof(p->key));
	free(p);
}

/*
 * Chunks tracked at once: the background copies, one request's worth of
 * whole-chunk claims (a request that finds no room waits holding none, so
 * the largest must fit alone), and room for the rest to go on in parallel.
 */
static uint32_t sync_capacity(const struct srv_pool *p)
{
	uint32_t per_request = p->srv->opts.max_io_size / p->params.chunk_size + 2;

	return p->params.sync_queue_depth + per_request + 1024;
}

int pool_new(struct rmr_server *s, const struct rmr_pool_params *params,
	     const struct rmr_store_ops *ops, void *store, struct srv_pool **out)
{
	static const rmr_uuid zero;
	struct rmr_pool_params pp;
	struct rmr_peer *peers;
	struct srv_pool *p;
	int ret;

	/* A caller built against the header before the key: its pool is open. */
	if (!params || params->size < offsetof(struct rmr_pool_params, key))
		return -EINVAL;
	memset(&pp, 0, sizeof(pp));
	memcpy(&pp, params, RMR_MIN(params->size, sizeof(pp)));
	pp.size = sizeof(pp);
	params = &pp;
	/* A store built before @c health was added leaves it out (NULL). */
	if (!ops || ops->size < offsetof(struct rmr_store_ops, health) ||
	    !ops->io || !ops->chunk_export || !ops->chunk_import ||
	    !ops->map_read != !ops->map_write)
		return -EINVAL;
	if (!params->name || !*params->name || strlen(params->name) > RMR_NAME_MAX ||
	    !memcmp(&params->uuid, &zero, sizeof(zero)) || params->pool_size == 0 ||
	    params->chunk_size < 4096 || (params->chunk_size & (params->chunk_size - 1)) ||
	    params->member_id == 0 || params->member_id > RMR_MAX_MEMBER_ID ||
	    !(params->members_mask & (1ull << params->member_id)) || (params->members_mask & 1) ||
	    __builtin_popcountll(params->members_mask) > RMR_MAX_MEMBERS ||
	    params->sync_queue_depth > 256 || params->npeers >= RMR_MAX_MEMBERS ||
	    (params->npeers && !params->peers))
		return -EINVAL;
	if (params->al_extent_size &&
	    ((params->al_extent_size & (params->al_extent_size - 1)) ||
	     params->al_extent_size < params->chunk_size || params->al_extent_size > AL_EXTENT_MAX))
		return -EINVAL;
	for (unsigned i = 0; i < params->npeers; i++) {
		const struct rmr_peer *pe = &params->peers[i];

		if (pe->member_id == 0 || pe->member_id > RMR_MAX_MEMBER_ID ||
		    pe->member_id == params->member_id ||
		    !(params->members_mask & (1ull << pe->member_id)) || !pe->addr || !*pe->addr ||
		    strlen(pe->addr) > RMR_ADDR_MAX)
			return -EINVAL;
		for (unsigned j = 0; j < i; j++)
			if (params->peers[j].member_id == pe->member_id)
				return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->srv = s;
	p->params = *params;
	snprintf(p->name, sizeof(p->name), "%s", params->name);
	p->params.name = p->name;
	if (params->key) {
		memcpy(p->key, params->key, RMR_KEY_LEN);
		p->keyed = true;
	}
	p->params.key = NULL; /* the caller's bytes are not ours to keep */
	/* Addresses are copied by peer.c; keep only the ids here. */
	peers = calloc(params->npeers + 1, sizeof(*peers));
	if (!peers) {
		free(p);
		return -ENOMEM;
	}
	memcpy(peers, params->peers, params->npeers * sizeof(*peers));
	for (unsigned i = 0; i < params->npeers; i++)
		peers[i].addr = NULL;
	p->params.peers = peers;
	if (!p->params.sync_queue_depth)
		p->params.sync_queue_depth = 32;
	memcpy(&p->ops, ops, RMR_MIN(ops->size, sizeof(p->ops)));
	p->store = store;
	flusher_init(&p->flusher, p->ops.flush, store);
	flusher_init(&p->prober, p->ops.flush, store);
	p->own_cleared = &p->own_sets[0];
	p->own_flushing = &p->own_sets[1];
	p->chunk_shift = (uint32_t)__builtin_ctz(params->chunk_size);
	p->nchunks = (params->pool_size + params->chunk_size - 1) / params->chunk_size;
	if (!p->params.al_extent_size)
		p->params.al_extent_size = RMR_MAX(AL_EXTENT_BYTES, params->chunk_size);
	p->al_extent_chunks = p->params.al_extent_size >> p->chunk_shift;
	if (p->nchunks > DIRTY_MAP_MAX_CHUNKS) {
		log_err("pool=%s: %llu chunks, more than dirty tracking covers", p->name,
			(unsigned long long)p->nchunks);
		pool_free(p);
		return -EINVAL;
	}
	p->bitmap_bytes = map_bitmap_bytes(p->nchunks);
	dirty_map_init(p->own_cleared, p->nchunks);
	dirty_map_init(p->own_flushing, p->nchunks);
	p->nblocks = MAP_SLOTS * (p->bitmap_bytes / MAP_BLOCK);
	p->al_offset = MAP_SLOTS * p->bitmap_bytes;
	p->stale_blocks = calloc(p->nblocks, 1);
	p->al = malloc(sizeof(*p->al));
	p->al_buf = malloc(AL_RECORD_BYTES);
	if (!p->stale_blocks || !p->al || !p->al_buf ||
	    sync_index_init(&p->syncing, sync_capacity(p)) < 0) {
		pool_free(p);
		return -ENOMEM;
	}
	al_init(p->al);
	membership_from_params(p, params);
	ret = pool_meta_load(p);
	/* A map for every member of the (possibly changed) membership. */
	for (unsigned id = 1; ret == 0 && id <= RMR_MAX_MEMBER_ID; id++) {
		if (!(p->params.members_mask & (1ull << id)))
			continue;
		p->maps[id] = calloc(1, sizeof(*p->maps[id]));
		if (!p->maps[id] || dirty_map_init(p->maps[id], p->nchunks) < 0)
			ret = -ENOMEM;
	}
	if (ret == 0)
		ret = load_maps(p);
	if (ret == 0)
		ret = load_records(p);
	if (ret == 0)
		ret = al_load_records(p);
	if (ret < 0) {
		pool_free(p);
		return ret;
	}
	for (unsigned id = 1; id <= RMR_MAX_MEMBER_ID; id++)
		p->mark_ver[id] = p->map_ver; /* unknown after a restart: assume the newest */
	if (params->replace) {
		ret = pool_replace(p);
		if (ret < 0) {
			pool_free(p);
			return ret;
		}
	}
	*out = p;
	return 0;
}
