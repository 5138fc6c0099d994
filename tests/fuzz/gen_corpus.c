/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_gen_corpus DIR: write the seed corpora, DIR/<target>/seed-*, from the
 * real encoders, so that they follow the formats as the code has them.
 * `scripts/fuzz --gen-corpus` runs it over tests/fuzz/corpus; the output is
 * the same on every run. Seeds are valid inputs and a few near-valid ones;
 * regress-* files (inputs that once crashed) are not touched.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rmr/server.h>

#include "activity_log.h"
#include "fuzz_store_image.h"
#include "nbd_proto.h"
#include "superblock.h"
#include "wire.h"

static const char *outdir;
static uint8_t buf[256 * 1024];

static void put(const char *target, const char *name, const void *data, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, target);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/seed-%s", outdir, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* --- wire --------------------------------------------------------------------- */

static void wire_msg(const char *name, struct rmr_msg m, const void *payload)
{
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	if (m.payload_len)
		memcpy(buf + sizeof(struct rmr_wire_hdr), payload, m.payload_len);
	put("wire", name, buf, sizeof(struct rmr_wire_hdr) + m.payload_len);
}

static void gen_wire(void)
{
	struct rmr_msg base = { .slot = 7, .seq = 3, .map_ver = 12, .sender_id = 0 };
	struct rmr_hello h = { .role = RMR_ROLE_CLIENT, .queue_depth = 128,
			       .max_io_size = 128 << 10, .heartbeat_ms = 250,
			       .incarnation = 0x1122334455667788ull, .pool_name = "vol-1" };
	struct rmr_hello_rsp hr = { .member_id = 2, .chunk_size = 1 << 20,
				    .pool_size = 1ull << 30, .map_ver = 12, .missed = 1u << 3,
				    .members = (1u << 1) | (1u << 2) | (1u << 3),
				    .queue_depth = 128, .max_io_size = 128 << 10,
				    .incarnation = 99, .pool_name = "vol-1", .writer_epoch = 4 };
	struct rmr_wire_hello wh;
	/* A HELLO_RSP carries the member's membership after its fixed part. */
	_Alignas(8) uint8_t whr[sizeof(struct rmr_wire_hello_rsp) + RMR_WIRE_MEMBERS_MAX];
	struct rmr_wire_map_range wr[3];
	_Alignas(8) uint8_t data[256];
	struct rmr_msg m;

	memcpy(base.pool_uuid.b, "wire-pool-uuid-1", 16);
	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)i;

	m = base;
	m.type = RMR_MSG_HELLO;
	m.payload_len = sizeof(wh);
	rmr_wire_encode_hello(&wh, &h);
	wire_msg("hello-client", m, &wh);
	h.role = RMR_ROLE_PEER;
	h.flags = 0;
	rmr_wire_encode_hello(&wh, &h);
	m.sender_id = 3;
	wire_msg("hello-peer", m, &wh);
	h.role = RMR_ROLE_CLIENT;
	h.flags = RMR_HELLO_TAKEOVER;
	h.writer_epoch = 5;
	rmr_wire_encode_hello(&wh, &h);
	m.sender_id = 0;
	wire_msg("hello-takeover", m, &wh);
	/* A keyed pool: the hello's nonce, the member's CHALLENGE, the AUTH. */
	h.flags = RMR_HELLO_AUTH;
	h.writer_epoch = 0;
	for (unsigned i = 0; i < RMR_NONCE_LEN; i++)
		h.nonce[i] = (uint8_t)(0xa0 + i);
	rmr_wire_encode_hello(&wh, &h);
	wire_msg("hello-auth", m, &wh);
	{
		struct rmr_auth a;
		struct rmr_wire_auth wa;

		for (unsigned i = 0; i < RMR_NONCE_LEN; i++) {
			a.nonce[i] = (uint8_t)(0x30 + i);
			a.proof[i] = (uint8_t)(0xc0 + i);
		}
		m = base;
		m.slot = m.seq = 0;
		m.type = RMR_MSG_CHALLENGE;
		m.sender_id = 2;
		m.payload_len = sizeof(wa);
		rmr_wire_encode_auth(&wa, &a);
		wire_msg("challenge", m, &wa);
		memset(a.nonce, 0, sizeof(a.nonce));
		m.type = RMR_MSG_AUTH;
		m.sender_id = 3;
		rmr_wire_encode_auth(&wa, &a);
		wire_msg("auth", m, &wa);
	}

	m = base;
	m.type = RMR_MSG_HELLO_RSP;
	m.sender_id = 2;
	hr.membership.version = 2;
	hr.membership.n = 3;
	for (unsigned i = 0; i < 3; i++) {
		hr.membership.m[i].id = (uint16_t)(i + 1);
		snprintf(hr.membership.m[i].addr, sizeof(hr.membership.m[i].addr),
			 "10.0.0.%u:7000", i + 1);
	}
	m.payload_len = (uint32_t)rmr_wire_encode_hello_rsp(whr, &hr);
	wire_msg("hello-rsp", m, whr);
	hr.flags = RMR_HELLO_RSP_STALE_AL;
	m.payload_len = (uint32_t)rmr_wire_encode_hello_rsp(whr, &hr);
	wire_msg("hello-rsp-stale-al", m, whr);
	m.payload_len = 0;
	m.status = -EPROTONOSUPPORT;
	wire_msg("hello-rsp-refused", m, NULL);

	m = base;
	m.type = RMR_MSG_HEARTBEAT;
	wire_msg("heartbeat", m, NULL);
	m.type = RMR_MSG_GOODBYE;
	m.status = -ESHUTDOWN;
	wire_msg("goodbye", m, NULL);

	m = base;
	m.type = RMR_MSG_READ;
	m.addr = 1 << 20;
	m.len = 4096;
	wire_msg("read", m, NULL);
	m.payload_len = 16; /* a read-like request's argument, a key say */
	wire_msg("read-argument", m, "key-of-16-bytes!");
	m.type = RMR_MSG_READ_RSP;
	m.len = 256;
	m.payload_len = 200;
	wire_msg("read-rsp-short", m, data);
	m.payload_len = 0;
	m.status = -EIO;
	wire_msg("read-rsp-error", m, NULL);

	m = base;
	m.type = RMR_MSG_WRITE;
	m.addr = 8192;
	m.len = m.payload_len = 256;
	m.op = 2;
	m.op_flags = 1;
	m.missed = 1u << 3;
	wire_msg("write", m, data);
	m.len = 64u << 20; /* a trim: no payload, a large range */
	m.payload_len = 0;
	m.op = 4;
	m.op_flags = 0;
	wire_msg("write-trim", m, NULL);
	m.payload_len = 100; /* a patch: a change inside a large range */
	m.op = 7;
	m.flags = RMR_WIRE_WRITE_PATCH;
	wire_msg("write-patch", m, data);
	m = base;
	m.type = RMR_MSG_WRITE_RSP;
	wire_msg("write-rsp", m, NULL);

	m = base;
	m.type = RMR_MSG_MAP_ADD;
	m.addr = 0;
	m.len = 16u << 20;
	m.missed = (1ull << 2) | (1ull << 63);
	wire_msg("map-add", m, NULL);
	m.type = RMR_MSG_MAP_ADD_RSP;
	m.missed = 0;
	m.len = 0;
	wire_msg("map-add-rsp", m, NULL);

	m = base;
	m.type = RMR_MSG_MAP_PULL;
	m.op = 3;
	wire_msg("map-pull", m, NULL);
	m.type = RMR_MSG_MAP_PULL_RSP;
	m.op = 0;
	wire_msg("map-pull-rsp", m, NULL);

	m = base;
	m.type = RMR_MSG_MAP_GET;
	m.sender_id = 2;
	m.op = 1;
	m.addr = 100;
	wire_msg("map-get", m, NULL);
	m.type = RMR_MSG_MAP_GET_RSP;
	m.op_flags = RMR_MAP_GET_LAST;
	for (unsigned i = 0; i < 3; i++)
		rmr_wire_encode_map_range(&wr[i], &(struct rmr_map_range){
			.member_id = (uint16_t)(1 + i), .count = 10 + i, .first = 1000 * i });
	m.payload_len = sizeof(wr);
	wire_msg("map-get-rsp", m, wr);

	m = base;
	m.type = RMR_MSG_SYNC_READ;
	m.sender_id = 3;
	m.addr = 1 << 20;
	m.len = 256;
	wire_msg("sync-read", m, NULL);
	m.type = RMR_MSG_SYNC_READ_RSP;
	m.payload_len = 256;
	wire_msg("sync-read-rsp", m, data);

	m = base;
	m.type = RMR_MSG_MAP_CLEAR;
	m.sender_id = 3;
	m.addr = 0;
	m.len = 64u << 20;
	wire_msg("map-clear", m, NULL);
	m.type = RMR_MSG_MAP_CLEAR_RSP;
	wire_msg("map-clear-rsp", m, NULL);

	m = base;
	m.type = RMR_MSG_RECONCILE;
	wire_msg("reconcile", m, NULL);
	m.type = RMR_MSG_RECONCILE_RSP;
	m.missed = 1u << 2;
	wire_msg("reconcile-rsp", m, NULL);

	m = base;
	m.type = RMR_MSG_CHUNK_SUM;
	m.sender_id = 3;
	m.addr = 64; /* first chunk */
	m.len = 4;   /* chunks */
	wire_msg("chunk-sum", m, NULL);
	m.type = RMR_MSG_CHUNK_SUM_RSP;
	for (unsigned i = 0; i < 4; i++)
		rmr_wire_encode_chunk_sum((struct rmr_wire_chunk_sum *)data + i,
					  0x10203040u * (i + 1), i == 2 ? RMR_SUM_DIRTY : 0);
	m.payload_len = 4 * sizeof(struct rmr_wire_chunk_sum);
	wire_msg("chunk-sum-rsp", m, data);

	m = base;
	m.type = RMR_MSG_MAP_MARK;
	m.sender_id = 2;
	m.addr = 1 << 20;
	m.len = 8u << 20;
	m.missed = 1u << 3;
	wire_msg("map-mark", m, NULL);
	m.type = RMR_MSG_MAP_MARK_RSP;
	m.missed = 0;
	wire_msg("map-mark-rsp", m, NULL);

	/* Near misses: another protocol version, flags where none belong. */
	m = base;
	m.type = RMR_MSG_HEARTBEAT;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	buf[4] = RMR_WIRE_VERSION + 1;
	put("wire", "bad-version", buf, sizeof(struct rmr_wire_hdr));
	buf[4] = RMR_WIRE_VERSION;
	buf[79] = 1;
	put("wire", "bad-flags", buf, sizeof(struct rmr_wire_hdr));
}

/* --- activity log --------------------------------------------------------------- */

static void al_seed(const char *name, uint8_t flags, uint32_t nchunks,
		    const struct activity_log *al, bool corrupt)
{
	static uint8_t rec[AL_RECORD_BYTES];
	uint32_t nc = htole32(nchunks);
	size_t len = al_encode(al, rec);

	if (corrupt)
		rec[AL_HEADER_BYTES + 3] ^= 0x40;
	buf[0] = flags;
	memcpy(buf + 1, &nc, 4);
	memcpy(buf + 5, rec, len);
	put("activity_log", name, buf, 5 + len);
}

static void gen_activity_log(void)
{
	static struct activity_log al;

	al_init(&al);
	al_seed("empty", 0, 32, &al, false);
	al.seq = 41;
	al_reset(&al, 0xfeedull);
	al.writer_epoch = 3;
	al.holder = 0xfeedull;
	al_note(&al, 0, 0, 1);
	al_note(&al, 1, 5, 3);
	al_note(&al, 2, 31, 1);
	al_seed("three-ranges", 0, 32, &al, false);
	al_seed("three-ranges-sealed", 1, 32, &al, true);
	al_seed("three-ranges-corrupt", 0, 32, &al, true);
	al_seed("outside-pool", 0, 16, &al, false);
	al_reset(&al, 0xbeefull);
	for (uint32_t i = 0; i < 300; i++)
		al_note(&al, i, (uint64_t)i * 7, 1 + i % 5);
	al_seed("300-ranges", 0, 1u << 20, &al, false);
}

/* --- superblock ------------------------------------------------------------------- */

/* librmr's metadata blob, version 1 (server_pool.c struct meta_v1). */
static size_t rmr_meta_blob(uint8_t *b, uint64_t map_ver, uint64_t missed)
{
	uint32_t magic = htole32(0x4d524d52u), version = htole32(1);
	uint64_t mv = htole64(map_ver), mi = htole64(missed);

	memset(b, 0, 32);
	memcpy(b, &magic, 4);
	memcpy(b + 4, &version, 4);
	memcpy(b + 8, &mv, 8);
	memcpy(b + 16, &mi, 8);
	return 32;
}

static void sb_seed(const char *name, uint8_t flags, const struct superblock *sb,
		    uint64_t meta_seq, bool sealed)
{
	struct sb_disk d;
	struct meta_hdr_disk h;
	uint8_t blob[32];
	size_t blen = rmr_meta_blob(blob, 9, 1u << 2);

	superblock_encode(sb, &d);
	if (!sealed)
		d.crc = sb_cpu_to_le32(0x12345678);
	meta_hdr_encode(sb, meta_seq, blob, blen, &h);
	buf[0] = flags;
	memcpy(buf + 1, &d, sizeof(d));
	memcpy(buf + 1 + sizeof(d), &h, sizeof(h));
	memcpy(buf + 1 + sizeof(d) + sizeof(h), blob, blen);
	put("superblock", name, buf, 1 + sizeof(d) + META_HDR_SIZE + blen);
}

static void gen_superblock(const struct fz_image *im)
{
	struct superblock sb = im->sb;

	sb_seed("store", 0, &sb, 1, true);
	sb_seed("store-meta-slot0", 8, &sb, 2, true);
	sb_seed("store-16m", 4, &sb, 1, true);
	sb_seed("store-unsealed", 1 | 2, &sb, 1, false);
	sb.nmembers = RMR_MAX_MEMBERS;
	for (unsigned i = 0; i < RMR_MAX_MEMBERS; i++) {
		sb.members[i].id = (uint16_t)(1 + 4 * i);
		memset(sb.members[i].addr, 0, sizeof(sb.members[i].addr));
		snprintf(sb.members[i].addr, sizeof(sb.members[i].addr),
			 "host-%u.example:%u", i, 7000 + i);
	}
	sb.member_id = 5;
	sb.sequence = 77;
	memset(sb.pool_name, 0, sizeof(sb.pool_name));
	memset(sb.pool_name, 'p', RMR_NAME_MAX);
	sb_seed("sixteen-members", 0, &sb, 3, true);
	sb = im->sb;
	sb.chunk_size = 1u << 20;
	if (superblock_layout(&sb, rmr_server_meta_max()) == 0)
		sb_seed("chunk-1m", 0, &sb, 1, true);
	sb = im->sb;
	sb.flags = 1;
	sb_seed("newer-flags", 1, &sb, 1, true);
}

/* --- store ---------------------------------------------------------------------- */

static void gen_store(const struct fz_image *im)
{
	static struct activity_log al;
	static uint8_t rec[AL_RECORD_BYTES];
	struct superblock sb = im->sb;
	struct sb_disk d;
	_Alignas(8) uint8_t meta[META_HDR_SIZE + 32];
	uint8_t bits[8] = { 0 };
	size_t pos, blen, alen;

	buf[0] = 0;
	put("store", "pristine", buf, 1);
	buf[0] = FZ_SERVE;
	put("store", "pristine-serve", buf, 1);
	buf[0] = FZ_SERVE | FZ_REPLACE;
	put("store", "pristine-replace", buf, 1);

	/* Slot B newer than A: B wins. */
	sb.sequence = 2;
	superblock_encode(&sb, &d);
	pos = 1;
	buf[0] = FZ_SERVE;
	fz_patch_put(buf, &pos, FZ_SB, SB_SLOT_SIZE, &d, sizeof(d));
	put("store", "slot-b-newer", buf, pos);
	/* The same sequence twice: refused. */
	sb.sequence = 1;
	superblock_encode(&sb, &d);
	pos = 1;
	fz_patch_put(buf, &pos, FZ_SB, SB_SLOT_SIZE, &d, sizeof(d));
	put("store", "slot-b-same-sequence", buf, pos);
	/* A torn slot A, sealed by the harness after a patch of its pool size. */
	pos = 1;
	buf[0] = FZ_SEAL_SB_A;
	fz_patch_put(buf, &pos, FZ_SB, 104, "\x00\x00\x30\x00\x00\x00\x00\x00", 8);
	put("store", "slot-a-pool-size", buf, pos);

	/*
	 * A store that served: metadata blob in slot 1 (map version 9, member 2
	 * missed writes), member 2's bitmap with chunks 0, 9 and 31 dirty, an
	 * activity-log record with three ranges.
	 */
	blen = rmr_meta_blob(meta + META_HDR_SIZE, 9, 1u << 2);
	meta_hdr_encode(&im->sb, 1, meta + META_HDR_SIZE, blen, (struct meta_hdr_disk *)meta);
	bits[0] = 0x01;
	bits[1] = 0x02;
	bits[3] = 0x80;
	al_init(&al);
	al_reset(&al, 0xabcdull);
	al.writer_epoch = 2;
	al.holder = 0xabcdull;
	al_note(&al, 0, 0, 1);
	al_note(&al, 1, 9, 2);
	al_note(&al, 2, 30, 2);
	alen = al_encode(&al, rec);
	pos = 1;
	buf[0] = FZ_SERVE;
	fz_patch_put(buf, &pos, FZ_META1, 0, meta, (uint16_t)(META_HDR_SIZE + blen));
	/* One bitmap per member id: member 2's is the second. */
	fz_patch_put(buf, &pos, FZ_MAPS, 4096, bits, sizeof(bits));
	fz_patch_put(buf, &pos, FZ_MAPS, (uint32_t)im->al_off, rec, (uint16_t)alen);
	put("store", "served", buf, pos);

	/* The same with broken checksums that the harness seals again. */
	((struct meta_hdr_disk *)meta)->crc = sb_cpu_to_le32(0);
	rec[FZ_AL_CRC_OFF] ^= 0xff;
	pos = 1;
	buf[0] = FZ_SERVE | FZ_SEAL_META1 | FZ_SEAL_AL_A;
	fz_patch_put(buf, &pos, FZ_META1, 0, meta, (uint16_t)(META_HDR_SIZE + blen));
	fz_patch_put(buf, &pos, FZ_MAPS, 4096, bits, sizeof(bits));
	fz_patch_put(buf, &pos, FZ_MAPS, (uint32_t)im->al_off, rec, (uint16_t)alen);
	put("store", "served-sealed", buf, pos);

	/* Near misses: a bit beyond the pool's 32 chunks; both records corrupt. */
	bits[4] = 0x01;
	pos = 1;
	buf[0] = FZ_SERVE;
	fz_patch_put(buf, &pos, FZ_MAPS, 4096, bits, sizeof(bits));
	put("store", "bit-beyond-pool", buf, pos);
	pos = 1;
	fz_patch_put(buf, &pos, FZ_MAPS, (uint32_t)im->al_off, rec, (uint16_t)alen);
	fz_patch_put(buf, &pos, FZ_MAPS, (uint32_t)(im->al_off + AL_RECORD_BYTES), rec,
		     (uint16_t)alen);
	put("store", "al-both-corrupt", buf, pos);
}

/* --- NBD ------------------------------------------------------------------------- */

static size_t be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
	return 4;
}

static size_t be16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, 2);
	return 2;
}

static size_t be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
	return 8;
}

static size_t nbd_opt(uint8_t *p, uint32_t opt, const void *data, uint32_t len)
{
	size_t n = be64(p, NBD_IHAVEOPT);

	n += be32(p + n, opt);
	n += be32(p + n, len);
	if (len)
		memcpy(p + n, data, len);
	return n + len;
}

/* NBD_OPT_INFO / NBD_OPT_GO data: name, then info requests. */
static size_t nbd_go(uint8_t *p, uint32_t opt, const char *name, const uint16_t *req,
		     unsigned nreq)
{
	uint8_t d[256];
	size_t n = be32(d, (uint32_t)strlen(name));

	memcpy(d + n, name, strlen(name));
	n += strlen(name);
	n += be16(d + n, (uint16_t)nreq);
	for (unsigned i = 0; i < nreq; i++)
		n += be16(d + n, req[i]);
	return nbd_opt(p, opt, d, (uint32_t)n);
}

static void gen_nbd_handshake(void)
{
	static const uint16_t all[] = { NBD_INFO_NAME, NBD_INFO_DESCRIPTION, NBD_INFO_BLOCK_SIZE,
					NBD_INFO_EXPORT, 77 };
	size_t n;

	n = 1;
	buf[0] = 0;
	n += be32(buf + n, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	n += nbd_go(buf + n, NBD_OPT_GO, "", all, 5);
	put("nbd_handshake", "go-all-info", buf, n);

	n = 1;
	n += be32(buf + n, NBD_FLAG_C_FIXED_NEWSTYLE);
	n += nbd_go(buf + n, NBD_OPT_INFO, "fuzz", all, 2);
	n += nbd_go(buf + n, NBD_OPT_GO, "fuzz", NULL, 0);
	put("nbd_handshake", "info-then-go", buf, n);

	n = 1;
	n += be32(buf + n, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	n += nbd_opt(buf + n, NBD_OPT_LIST, NULL, 0);
	n += nbd_opt(buf + n, NBD_OPT_STARTTLS, NULL, 0);
	n += nbd_opt(buf + n, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	n += nbd_opt(buf + n, NBD_OPT_SET_META_CONTEXT, "\0\0\0\0\0\0\0\0", 8);
	n += nbd_opt(buf + n, NBD_OPT_LIST, "x", 1);
	n += nbd_go(buf + n, NBD_OPT_GO, "other", NULL, 0);
	n += nbd_opt(buf + n, NBD_OPT_ABORT, NULL, 0);
	put("nbd_handshake", "haggle-then-abort", buf, n);

	n = 1;
	n += be32(buf + n, NBD_FLAG_C_FIXED_NEWSTYLE);
	n += nbd_opt(buf + n, NBD_OPT_EXPORT_NAME, "fuzz", 4);
	put("nbd_handshake", "export-name", buf, n);

	n = 1;
	buf[0] = 2; /* export "" */
	n += be32(buf + n, 0); /* plain newstyle: EXPORT_NAME only */
	n += nbd_opt(buf + n, NBD_OPT_EXPORT_NAME, NULL, 0);
	put("nbd_handshake", "not-fixed-export-name", buf, n);

	n = 1;
	buf[0] = 1; /* shutting down */
	n += be32(buf + n, NBD_FLAG_C_FIXED_NEWSTYLE);
	n += nbd_go(buf + n, NBD_OPT_GO, "", NULL, 0);
	put("nbd_handshake", "go-while-stopping", buf, n);

	/* Near misses: unknown client flags, a bad length, a huge option. */
	n = 1;
	buf[0] = 0;
	n += be32(buf + n, 0x80000001u);
	put("nbd_handshake", "unknown-client-flags", buf, n);
	n = 1;
	n += be32(buf + n, NBD_FLAG_C_FIXED_NEWSTYLE);
	n += nbd_go(buf + n, NBD_OPT_GO, "fuzz", all, 1);
	buf[n - 1] = 9; /* nreq beyond the data */
	buf[n - 2] = 0;
	put("nbd_handshake", "go-bad-length", buf, n);
	n = 1;
	n += be32(buf + n, NBD_FLAG_C_FIXED_NEWSTYLE);
	n += be64(buf + n, NBD_IHAVEOPT);
	n += be32(buf + n, NBD_OPT_GO);
	n += be32(buf + n, 1u << 20);
	put("nbd_handshake", "option-too-long", buf, n);
}

static size_t nbd_req(uint8_t *p, uint16_t flags, uint16_t type, uint64_t cookie,
		      uint64_t off, uint32_t len)
{
	size_t n = be32(p, NBD_REQUEST_MAGIC);

	n += be16(p + n, flags);
	n += be16(p + n, type);
	n += be64(p + n, cookie);
	n += be64(p + n, off);
	n += be32(p + n, len);
	return n;
}

static void gen_nbd_request(void)
{
	size_t n;

	/* Every command, with each of the fake device's answers (offset / 512 % 4). */
	n = 1;
	buf[0] = 2; /* queue depth 8 */
	n += nbd_req(buf + n, 0, NBD_CMD_READ, 1, 0, 4096);
	n += nbd_req(buf + n, 0, NBD_CMD_WRITE, 2, 512, 600);
	memset(buf + n, 0x5a, 600);
	n += 600;
	n += nbd_req(buf + n, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 3, 8192, 16);
	memset(buf + n, 0x11, 16);
	n += 16;
	n += nbd_req(buf + n, 0, NBD_CMD_FLUSH, 4, 0, 0);
	n += nbd_req(buf + n, NBD_CMD_FLAG_FUA, NBD_CMD_TRIM, 5, 1024, 65536);
	n += nbd_req(buf + n, NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FUA, NBD_CMD_WRITE_ZEROES, 6,
		     1536, 4096);
	n += nbd_req(buf + n, 0, NBD_CMD_READ, 7, 1536, 512);
	n += nbd_req(buf + n, 0, NBD_CMD_DISC, 8, 0, 0);
	put("nbd_request", "every-command", buf, n);

	buf[0] = 0; /* queue depth 1 */
	put("nbd_request", "every-command-depth-1", buf, n);
	buf[0] = 4 | 3; /* shutting down: every request refused */
	put("nbd_request", "every-command-stopping", buf, n);

	/* Refusals: out of range, unknown command and flags, FLUSH with a range,
	 * zero length, a WRITE above the payload limit (payload skipped), too big
	 * a READ, then a bad magic. */
	n = 1;
	buf[0] = 3;
	n += nbd_req(buf + n, 0, NBD_CMD_READ, 1, (1u << 20) - 512, 1024);
	n += nbd_req(buf + n, 0, NBD_CMD_WRITE, 2, 1u << 20, 8);
	memset(buf + n, 0, 8);
	n += 8;
	n += nbd_req(buf + n, 0, NBD_CMD_BLOCK_STATUS, 3, 0, 512);
	n += nbd_req(buf + n, NBD_CMD_FLAG_DF, NBD_CMD_READ, 4, 0, 512);
	n += nbd_req(buf + n, 0, NBD_CMD_FLUSH, 5, 4096, 0);
	n += nbd_req(buf + n, 0, NBD_CMD_READ, 6, 4096, 0);
	n += nbd_req(buf + n, 0, NBD_CMD_CACHE, 7, 0, 4096);
	n += nbd_req(buf + n, 0, NBD_CMD_READ, 8, 0, (32u << 20) + 1);
	n += nbd_req(buf + n, 0, NBD_CMD_WRITE, 9, 0, (32u << 20) + 1);
	memset(buf + n, 0x77, 100);
	n += 100;
	put("nbd_request", "refusals", buf, n);

	n = 1;
	buf[0] = 0;
	n += nbd_req(buf + n, 0, NBD_CMD_WRITE, 1, 0, 4096);
	memset(buf + n, 0x33, 4096);
	n += 4096;
	n += nbd_req(buf + n, 0, NBD_CMD_READ, 2, 0, 4096);
	be32(buf + n, 0x12345678);
	n += 28;
	put("nbd_request", "bad-magic", buf, n);

	n = 1;
	n += nbd_req(buf + n, 0, NBD_CMD_WRITE, 1, 0, 70u << 20);
	put("nbd_request", "write-beyond-discard", buf, n);
}

int main(int argc, char **argv)
{
	static struct fz_image im;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	outdir = argv[1];
	if (mkdir(outdir, 0755) < 0 && errno != EEXIST) {
		perror(outdir);
		return 1;
	}
	if (fz_image_init(&im) < 0)
		return 1;
	gen_wire();
	gen_activity_log();
	gen_superblock(&im);
	gen_store(&im);
	gen_nbd_handshake();
	gen_nbd_request();
	return 0;
}
