/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Wire codec: round trips, and every malformed field is refused with a reason. */
#include "unit.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "wire.h"

static uint8_t buf[sizeof(struct rmr_wire_hdr) + 4096];

static struct rmr_msg sample(unsigned type, uint32_t payload_len)
{
	struct rmr_msg m = {
		.type = type, .sender_id = 3, .op = 2, .op_flags = 1, .slot = 17, .seq = 99,
		.map_ver = 0x1122334455667788ull, .addr = 5ull << 32, .len = payload_len,
		.payload_len = payload_len,
	};

	memset(m.pool_uuid.b, 0xab, sizeof(m.pool_uuid.b));
	return m;
}

static int decode(size_t len, struct rmr_msg *out)
{
	char why[128];

	return rmr_wire_decode(buf, len, out, why, sizeof(why));
}

START_TEST(header_round_trip)
{
	struct rmr_msg m = sample(RMR_MSG_WRITE, 512), d;

	m.missed = 1ull << 5 | 1ull << 63;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr) + 512, &d), 0);
	ck_assert_uint_eq(d.type, RMR_MSG_WRITE);
	ck_assert_uint_eq(d.sender_id, 3);
	ck_assert_uint_eq(d.slot, 17);
	ck_assert_uint_eq(d.seq, 99);
	ck_assert_uint_eq(d.map_ver, m.map_ver);
	ck_assert_uint_eq(d.addr, 5ull << 32);
	ck_assert_uint_eq(d.missed, m.missed);
	ck_assert_mem_eq(d.pool_uuid.b, m.pool_uuid.b, 16);
	ck_assert_ptr_eq(d.payload, buf + sizeof(struct rmr_wire_hdr));
	/* Little-endian on the wire whatever the host. */
	ck_assert_uint_eq(buf[0], 'R');
	ck_assert_uint_eq(buf[40], 0x88);
}
END_TEST

/* A patch write: a change of any length inside a range of any length, never empty. */
START_TEST(patch_write_carries_a_change_of_its_own_length)
{
	struct rmr_msg m = sample(RMR_MSG_WRITE, 100), d;
	char why[128];

	m.len = 64u << 20; /* many chunks, far beyond any payload */
	m.flags = RMR_WIRE_WRITE_PATCH;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr) + 100, &d), 0);
	ck_assert_uint_eq(d.flags, RMR_WIRE_WRITE_PATCH);
	ck_assert_uint_eq(d.len, 64u << 20);
	ck_assert_uint_eq(d.payload_len, 100);

	/* Without the flag, the same message is a write whose payload lies. */
	m.flags = 0;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr) + 100, &d), -EBADMSG);

	m.flags = RMR_WIRE_WRITE_PATCH;
	m.payload_len = 0;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr), &d, why, sizeof(why)),
			 -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "patch of 0 bytes"));

	m.payload_len = 100;
	m.len = 0;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr) + 100, &d), -EBADMSG);

	m.len = 4096;
	m.flags = 2;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr) + 100, &d, why,
					 sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "unknown flags 0x2"));

	/* Its answer and its MAP_ADD's echo the range, however long. */
	m = sample(RMR_MSG_WRITE_RSP, 0);
	m.len = 64u << 20;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr), &d), 0);
	ck_assert_uint_eq(d.len, 64u << 20);
	m.type = RMR_MSG_MAP_ADD_RSP;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr), &d), 0);
	/* A READ_RSP's is bounded. */
	m.type = RMR_MSG_READ_RSP;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr), &d), -EBADMSG);

	/* The answer carries no flags. */
	m = sample(RMR_MSG_WRITE_RSP, 0);
	m.flags = RMR_WIRE_WRITE_PATCH;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr), &d), -EBADMSG);
	m.type = RMR_MSG_MAP_ADD_RSP;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr), &d), -EBADMSG);

	/* A MAP_ADD may be a record, which carries the boot it was made in; no other flag. */
	m = sample(RMR_MSG_MAP_ADD, 0);
	m.len = 4096;
	m.missed = 1u << 2;
	m.flags = RMR_WIRE_MAP_ADD_RECORD;
	m.payload_len = sizeof(struct rmr_wire_record);
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	memcpy(buf + sizeof(struct rmr_wire_hdr),
	       &(struct rmr_wire_record){ .boot = cpu_to_le64(0x1234567890abcdefull) },
	       sizeof(struct rmr_wire_record));
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr) + sizeof(struct rmr_wire_record), &d), 0);
	ck_assert_uint_eq(d.flags, RMR_WIRE_MAP_ADD_RECORD);
	ck_assert_uint_eq(rmr_wire_decode_record(&d), 0x1234567890abcdefull);
	/* Without it, or with more, it is refused; a MAP_ADD of misses carries none. */
	for (unsigned extra = 0; extra < 2; extra++) {
		m.payload_len = extra ? 2 * sizeof(struct rmr_wire_record) : 0;
		rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
		ck_assert_int_eq(rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr) + m.payload_len,
						 &d, why, sizeof(why)), -EBADMSG);
		ck_assert_ptr_nonnull(strstr(why, "MAP_ADD: record with a payload"));
	}
	m.flags = 0;
	m.payload_len = sizeof(struct rmr_wire_record);
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr) + m.payload_len, &d, why,
					 sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "MAP_ADD: carries a payload"));
	m.flags = 2;
	m.payload_len = 0;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr), &d, why, sizeof(why)),
			 -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "MAP_ADD: unknown flags 0x2"));
}
END_TEST

START_TEST(negative_status_survives)
{
	struct rmr_msg m = sample(RMR_MSG_WRITE_RSP, 0), d;

	m.len = 0;
	m.status = -EIO;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr), &d), 0);
	ck_assert_int_eq(d.status, -EIO);
}
END_TEST

/* Encode a valid READ, corrupt one thing, expect a refusal. */
static int corrupt_and_decode(void (*corrupt)(struct rmr_wire_hdr *h, size_t *len))
{
	struct rmr_msg m = sample(RMR_MSG_READ, 0), d;
	size_t len = sizeof(struct rmr_wire_hdr);

	m.len = 4096;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(len, &d), 0);
	corrupt((struct rmr_wire_hdr *)buf, &len);
	return decode(len, &d);
}

static void bad_magic(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->magic = cpu_to_le32(1); }
static void bad_type(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->type = cpu_to_le16(77); }
static void zero_type(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->type = cpu_to_le16(0); }
static void flags_on_read(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->flags = cpu_to_le32(1); }
static void sender(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->sender_id = cpu_to_le16(64); }
static void short_msg(struct rmr_wire_hdr *h, size_t *l) { (void)h; *l = 79; }
static void extra_bytes(struct rmr_wire_hdr *h, size_t *l) { (void)h; *l += 8; }
static void payload_lie(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->payload_len = cpu_to_le32(8); }
static void zero_len(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->len = cpu_to_le32(0); }
static void wraps(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->addr = cpu_to_le64(UINT64_MAX - 10); }
static void huge_len(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->len = cpu_to_le32(UINT32_MAX); }
static void status_in_req(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->status = cpu_to_le32((uint32_t)-5); }
static void missed_on_read(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->missed = cpu_to_le64(4); }

START_TEST(malformed_headers_are_refused)
{
	ck_assert_int_eq(corrupt_and_decode(bad_magic), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(bad_type), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(zero_type), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(flags_on_read), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(sender), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(short_msg), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(extra_bytes), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(payload_lie), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(zero_len), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(wraps), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(huge_len), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(status_in_req), -EBADMSG);
	ck_assert_int_eq(corrupt_and_decode(missed_on_read), -EBADMSG);
}
END_TEST

START_TEST(other_version_is_not_supported)
{
	struct rmr_msg m = sample(RMR_MSG_HEARTBEAT, 0), d;
	char why[128];

	m.len = 0;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	((struct rmr_wire_hdr *)buf)->version = cpu_to_le16(1);
	ck_assert_int_eq(rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr), &d, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(why, "version 1"));
}
END_TEST

START_TEST(heartbeat_carries_the_peers_up)
{
	struct rmr_msg m = sample(RMR_MSG_HEARTBEAT, 0), d;
	char why[128];

	m.len = 0;
	m.missed = 1ull << 2;
	m.addr = (1ull << 1) | (1ull << 3) | (1ull << 63);
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr), &d), 0);
	ck_assert_uint_eq(d.addr, m.addr);
	ck_assert_uint_eq(d.missed, m.missed);

	m.addr |= 1; /* id 0 is nobody */
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr), &d, why, sizeof(why)),
			 -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "HEARTBEAT"));
}
END_TEST

START_TEST(hello_round_trip_and_checks)
{
	struct rmr_hello h = { .role = RMR_ROLE_CLIENT, .queue_depth = 128, .max_io_size = 131072,
			       .heartbeat_ms = 250, .incarnation = 42 }, hd;
	struct rmr_msg m = sample(RMR_MSG_HELLO, sizeof(struct rmr_wire_hello)), d;
	struct rmr_wire_hello *w = (void *)(buf + sizeof(struct rmr_wire_hdr));
	size_t len = sizeof(struct rmr_wire_hdr) + sizeof(*w);
	char why[128];

	m.len = 0;
	strcpy(h.pool_name, "vol1");
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	rmr_wire_encode_hello(w, &h);
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), 0);
	ck_assert_str_eq(hd.pool_name, "vol1");
	ck_assert_uint_eq(hd.incarnation, 42);
	ck_assert_uint_eq(hd.flags, 0);
	ck_assert_uint_eq(hd.writer_epoch, 0);

	/* Writer fields: a takeover with an epoch round-trips; unknown flags,
	 * a reserved field and writer fields from a member are refused. */
	h.flags = RMR_HELLO_TAKEOVER;
	h.writer_epoch = 7;
	rmr_wire_encode_hello(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), 0);
	ck_assert_uint_eq(hd.flags, RMR_HELLO_TAKEOVER);
	ck_assert_uint_eq(hd.writer_epoch, 7);
	w->flags = cpu_to_le32(2);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), -EBADMSG);
	rmr_wire_encode_hello(w, &h);
	w->reserved = cpu_to_le32(1);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), -EBADMSG);
	h.role = RMR_ROLE_PEER;
	rmr_wire_encode_hello(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "writer fields"));
	h.role = RMR_ROLE_CLIENT;
	h.flags = 0;
	h.writer_epoch = 0;
	rmr_wire_encode_hello(w, &h);

	memset(w->pool_name, 'x', sizeof(w->pool_name)); /* no terminator */
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), -EBADMSG);
	rmr_wire_encode_hello(w, &h);
	w->role = cpu_to_le32(9);
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), -EBADMSG);
	rmr_wire_encode_hello(w, &h);
	w->max_io_size = cpu_to_le32(RMR_WIRE_MAX_PAYLOAD + 1);
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), -EBADMSG);
	/* A HELLO of the wrong size never reaches the payload decoder. */
	ck_assert_int_eq(decode(len - 1, &d), -EBADMSG);
}
END_TEST

/* A membership of ids 1..3 (mask 0xe) with loopback addresses. */
static void three_members(struct rmr_membership *ms)
{
	memset(ms, 0, sizeof(*ms));
	ms->version = 5;
	ms->n = 3;
	for (unsigned i = 0; i < 3; i++) {
		ms->m[i].id = (uint16_t)(i + 1);
		snprintf(ms->m[i].addr, sizeof(ms->m[i].addr), "127.0.0.1:%u", 7000 + i);
	}
}

START_TEST(hello_rsp_checks_identity)
{
	struct rmr_hello_rsp h = { .member_id = 2, .chunk_size = 131072, .pool_size = 1 << 30,
				   .map_ver = 3, .members = 0xe, .queue_depth = 64,
				   .max_io_size = 131072, .incarnation = 77,
				   .boot_id = 0x0123456789abcdefull }, hd;
	struct rmr_msg m = sample(RMR_MSG_HELLO_RSP, 0), d;
	uint8_t *w = buf + sizeof(struct rmr_wire_hdr);
	char why[128];
	size_t plen;

	m.len = 0;
	strcpy(h.pool_name, "vol1");
	three_members(&h.membership);
	plen = rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_uint_eq(plen, sizeof(struct rmr_wire_hello_rsp) + sizeof(struct rmr_wire_members) +
					3 * sizeof(struct rmr_wire_member));
	m.payload_len = (uint32_t)plen;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	ck_assert_int_eq(decode(sizeof(struct rmr_wire_hdr) + plen, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), 0);
	ck_assert_uint_eq(hd.members, 0xe);
	ck_assert_uint_eq(hd.flags, 0);
	ck_assert_uint_eq(hd.incarnation, 77);
	ck_assert_uint_eq(hd.boot_id, 0x0123456789abcdefull);
	ck_assert_uint_eq(hd.membership.version, 5);
	ck_assert_uint_eq(hd.membership.n, 3);
	ck_assert_str_eq(hd.membership.m[2].addr, "127.0.0.1:7002");

	h.flags = RMR_HELLO_RSP_STALE_AL;
	h.writer_epoch = 9;
	rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), 0);
	ck_assert_uint_eq(hd.flags, RMR_HELLO_RSP_STALE_AL);
	ck_assert_uint_eq(hd.writer_epoch, 9);
	((struct rmr_wire_hello_rsp *)w)->flags = cpu_to_le16(4);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), -EBADMSG);
	h.flags = 0;

	h.members = 0x8; /* member 2 not in its own pool */
	rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), -EBADMSG);
	h.members = 0x6; /* the mask and the membership disagree */
	rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "disagree"));
	h.members = 0xe;
	h.chunk_size = 100000;
	rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), -EBADMSG);
	h.chunk_size = 131072;
	h.member_id = 0;
	rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), -EBADMSG);
	h.member_id = 2;
	d.payload_len = sizeof(struct rmr_wire_hello_rsp); /* no membership */
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), -EBADMSG);
}
END_TEST

/* The membership codec: round trip, and every malformed field refused. */
START_TEST(membership_codec)
{
	static uint8_t mb[RMR_WIRE_MEMBERS_MAX];
	struct rmr_membership ms, d;
	struct rmr_wire_members *hdr = (void *)mb;
	struct rmr_wire_member *e = (void *)(mb + sizeof(*hdr));
	char why[160];
	size_t len;

	three_members(&ms);
	ms.m[1].detached = true;
	len = rmr_wire_encode_members(mb, &ms);
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), 0);
	ck_assert_uint_eq(d.version, 5);
	ck_assert_uint_eq(rmr_membership_ids(&d), 0xe);
	ck_assert(rmr_membership_find(&d, 2)->detached);
	ck_assert(!rmr_membership_find(&d, 3)->detached);
	ck_assert_ptr_null(rmr_membership_find(&d, 4));

	/* The largest membership: RMR_MAX_MEMBERS entries. */
	memset(&ms, 0, sizeof(ms));
	ms.n = RMR_MAX_MEMBERS;
	for (unsigned i = 0; i < RMR_MAX_MEMBERS; i++) {
		ms.m[i].id = (uint16_t)(RMR_MAX_MEMBER_ID - i);
		snprintf(ms.m[i].addr, sizeof(ms.m[i].addr), "host%u:1", i);
	}
	len = rmr_wire_encode_members(mb, &ms);
	ck_assert_uint_eq(len, RMR_WIRE_MEMBERS_MAX);
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), 0);
	ck_assert_uint_eq(d.n, RMR_MAX_MEMBERS);

	three_members(&ms);
	len = rmr_wire_encode_members(mb, &ms);
	ck_assert_int_eq(rmr_wire_decode_members(mb, len - 1, &d, why, sizeof(why)), -EBADMSG);
	ck_assert_int_eq(rmr_wire_decode_members(mb, 8, &d, why, sizeof(why)), -EBADMSG);
	hdr->count = cpu_to_le32(0);
	ck_assert_int_eq(rmr_wire_decode_members(mb, sizeof(*hdr), &d, why, sizeof(why)), -EBADMSG);
	hdr->count = cpu_to_le32(3);
	hdr->reserved = cpu_to_le32(1);
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), -EBADMSG);
	hdr->reserved = cpu_to_le32(0);
	e[1].id = cpu_to_le16(1); /* twice */
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), -EBADMSG);
	e[1].id = cpu_to_le16(0);
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), -EBADMSG);
	e[1].id = cpu_to_le16(RMR_MAX_MEMBER_ID + 1);
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), -EBADMSG);
	e[1].id = cpu_to_le16(2);
	e[1].flags = cpu_to_le16(2);
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), -EBADMSG);
	e[1].flags = cpu_to_le16(0);
	e[1].reserved2 = cpu_to_le32(1);
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), -EBADMSG);
	e[1].reserved2 = cpu_to_le32(0);
	memset(e[1].addr, 0, sizeof(e[1].addr));
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), -EBADMSG);
	memset(e[1].addr, 'x', sizeof(e[1].addr)); /* not terminated */
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), -EBADMSG);
	strcpy(e[1].addr, "h:2");
	memset(e[1].addr + 4, 0, sizeof(e[1].addr) - 4);
	ck_assert_int_eq(rmr_wire_decode_members(mb, len, &d, why, sizeof(why)), 0);
}
END_TEST

/* --- recovery messages (11..18) and map ranges ----------------------------- */

/* Encode @m (header only; the payload already sits behind it in buf) and decode. */
static int round_trip(struct rmr_msg *m, struct rmr_msg *d, char *why, size_t whylen)
{
	rmr_wire_encode((struct rmr_wire_hdr *)buf, m);
	return rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr) + m->payload_len, d, why, whylen);
}

/* @m must be accepted. */
static void accepted(struct rmr_msg m, const char *what)
{
	struct rmr_msg d;
	char why[160] = "";

	ck_assert_msg(round_trip(&m, &d, why, sizeof(why)) == 0, "%s was refused: %s", what, why);
}

/*
 * @m, encoded and then changed by @poke (if any), must be refused with a
 * reason that names the message type.
 */
static void refused_poked(struct rmr_msg m, void (*poke)(struct rmr_wire_hdr *h),
			  const char *what)
{
	struct rmr_msg d;
	char why[160] = "";
	int ret;

	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	if (poke)
		poke((struct rmr_wire_hdr *)buf);
	ret = rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr) + m.payload_len, &d, why,
			      sizeof(why));
	ck_assert_msg(ret == -EBADMSG, "%s: %s was accepted (%d)", rmr_msg_type_name(m.type), what,
		      ret);
	ck_assert_msg(why[0], "%s: %s refused without a reason", rmr_msg_type_name(m.type), what);
	ck_assert_msg(strstr(why, rmr_msg_type_name(m.type)), "%s: %s: reason '%s' names no type",
		      rmr_msg_type_name(m.type), what, why);
}

/* @m must be refused, with a reason. */
static void refused(struct rmr_msg m, const char *what)
{
	refused_poked(m, NULL, what);
}

static void poke_flags(struct rmr_wire_hdr *h)
{
	h->flags = cpu_to_le32(1u << 31);
}

static void poke_payload_len(struct rmr_wire_hdr *h)
{
	h->payload_len = cpu_to_le32(le32_to_cpu(h->payload_len) + 16);
}

/* A valid message of each recovery type, as the core sends it. */
struct recovery_case {
	unsigned type;
	bool request;
	uint16_t op;
	uint32_t op_flags;
	uint64_t addr;
	uint32_t len, payload_len;
};

static const struct recovery_case recovery_cases[] = {
	/* client -> member: take the maps from member 2 */
	{ RMR_MSG_MAP_PULL, true, 2, 0, 0, 0, 0 },
	{ RMR_MSG_MAP_PULL_RSP, false, 0, 0, 0, 0, 0 },
	/* cursor: member 3, chunk 12345 */
	{ RMR_MSG_MAP_GET, true, 3, 0, 12345, 0, 0 },
	/* two ranges; the next cursor is member 5, chunk 99 */
	{ RMR_MSG_MAP_GET_RSP, false, 5, 0, 99, 0, 2 * sizeof(struct rmr_wire_map_range) },
	/* 4 KiB of the chunk at byte 5 << 32 */
	{ RMR_MSG_SYNC_READ, true, 0, 0, 5ull << 32, 4096, 0 },
	{ RMR_MSG_SYNC_READ_RSP, false, 0, 0, 5ull << 32, 4096, 4096 },
	/* chunks 7 .. 7 + 2^29: far more than 4 MiB, yet legal */
	{ RMR_MSG_MAP_CLEAR, true, 0, 0, 7, 1u << 29, 0 },
	{ RMR_MSG_MAP_CLEAR_RSP, false, 0, 0, 7, 1u << 29, 0 },
	/* client -> member: the last writer exited uncleanly */
	{ RMR_MSG_RECONCILE, true, 0, 0, 0, 0, 0 },
};
#define NCASES (sizeof(recovery_cases) / sizeof(recovery_cases[0]))

static struct rmr_msg recovery_msg(const struct recovery_case *c)
{
	struct rmr_msg m = sample(c->type, c->payload_len);

	m.sender_id = c->type == RMR_MSG_MAP_PULL ? 0 : 3; /* a client has no member id */
	m.op = c->op;
	m.op_flags = c->op_flags;
	m.addr = c->addr;
	m.len = c->len;
	return m;
}

/* A READ may carry its argument; its answer may hold fewer bytes than asked, never more. */
START_TEST(read_argument_and_short_answer)
{
	struct rmr_msg m = sample(RMR_MSG_READ, 16);

	m.len = 4096;
	accepted(m, "a READ with a 16-byte argument");
	m.len = 0;
	refused(m, "a READ of zero length with an argument");
	m = sample(RMR_MSG_READ_RSP, 100);
	m.len = 4096;
	accepted(m, "a READ_RSP of 100 bytes for 4096 asked");
	m.payload_len = 0;
	accepted(m, "an empty READ_RSP");
	m.payload_len = 4096;
	accepted(m, "a full READ_RSP");
	m.len = 4095;
	refused(m, "a READ_RSP longer than asked");
	m.status = -EIO;
	m.len = 4096;
	refused(m, "an error READ_RSP with data");
}
END_TEST

/* HELLO's nonce: set with RMR_HELLO_AUTH, zero without; both roles may hold a key. */
START_TEST(hello_auth_fields)
{
	struct rmr_hello h = { .role = RMR_ROLE_PEER, .queue_depth = 8, .max_io_size = 131072,
			       .heartbeat_ms = 250, .incarnation = 42, .flags = RMR_HELLO_AUTH },
			 hd;
	struct rmr_msg m = sample(RMR_MSG_HELLO, sizeof(struct rmr_wire_hello)), d;
	struct rmr_wire_hello *w = (void *)(buf + sizeof(struct rmr_wire_hdr));
	size_t len = sizeof(struct rmr_wire_hdr) + sizeof(*w);
	char why[128];

	ck_assert_uint_eq(sizeof(struct rmr_wire_hello), 136);
	m.len = 0;
	strcpy(h.pool_name, "vol1");
	rmr_auth_nonce(h.nonce);
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	rmr_wire_encode_hello(w, &h);
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), 0);
	ck_assert_uint_eq(hd.flags, RMR_HELLO_AUTH);
	ck_assert_mem_eq(hd.nonce, h.nonce, RMR_NONCE_LEN);
	/* A key but no nonce. */
	memset(w->nonce, 0, sizeof(w->nonce));
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "nonce"));
	/* A nonce but no key. */
	h.flags = 0;
	rmr_wire_encode_hello(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "nonce"));
	/* Neither: an open hello. */
	memset(h.nonce, 0, sizeof(h.nonce));
	rmr_wire_encode_hello(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), 0);
	/* A member still may not take over. */
	h.flags = RMR_HELLO_TAKEOVER;
	rmr_wire_encode_hello(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello(&d, &hd, why, sizeof(why)), -EBADMSG);
}
END_TEST

static size_t put_auth(unsigned type, const struct rmr_auth *a, int status)
{
	struct rmr_msg m = sample(type, sizeof(struct rmr_wire_auth));

	m.op = 0;
	m.op_flags = 0;
	m.slot = 0;
	m.seq = 0;
	m.addr = 0;
	m.len = 0;
	m.status = status;
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	rmr_wire_encode_auth((void *)(buf + sizeof(struct rmr_wire_hdr)), a);
	return sizeof(struct rmr_wire_hdr) + sizeof(struct rmr_wire_auth);
}

/* CHALLENGE and AUTH: exactly one rmr_wire_auth, every other field checked. */
START_TEST(auth_messages)
{
	struct rmr_auth a, ad;
	struct rmr_msg d;
	struct rmr_wire_hdr *hdr = (void *)buf;
	size_t len;
	char why[128];

	ck_assert_uint_eq(sizeof(struct rmr_wire_auth), 64);
	rmr_auth_nonce(a.nonce);
	memset(a.proof, 0x5a, sizeof(a.proof));
	len = put_auth(RMR_MSG_CHALLENGE, &a, 0);
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_auth(&d, &ad, why, sizeof(why)), 0);
	ck_assert_mem_eq(ad.nonce, a.nonce, RMR_NONCE_LEN);
	ck_assert_mem_eq(ad.proof, a.proof, RMR_PROOF_LEN);
	/* A challenge is never a refusal, nor short, nor with a range or slot. */
	put_auth(RMR_MSG_CHALLENGE, &a, -EACCES);
	ck_assert_int_eq(decode(len, &d), -EBADMSG);
	put_auth(RMR_MSG_CHALLENGE, &a, 0);
	ck_assert_int_eq(decode(len - 1, &d), -EBADMSG);
	hdr->slot = cpu_to_le32(1);
	ck_assert_int_eq(decode(len, &d), -EBADMSG);
	put_auth(RMR_MSG_CHALLENGE, &a, 0);
	hdr->len = cpu_to_le32(1);
	ck_assert_int_eq(decode(len, &d), -EBADMSG);
	/* ... nor without a nonce. */
	memset(a.nonce, 0, sizeof(a.nonce));
	put_auth(RMR_MSG_CHALLENGE, &a, 0);
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_auth(&d, &ad, why, sizeof(why)), -EBADMSG);

	/* AUTH: the proof, its nonce field zero. */
	put_auth(RMR_MSG_AUTH, &a, 0);
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_auth(&d, &ad, why, sizeof(why)), 0);
	ck_assert_mem_eq(ad.proof, a.proof, RMR_PROOF_LEN);
	a.nonce[3] = 1;
	put_auth(RMR_MSG_AUTH, &a, 0);
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_auth(&d, &ad, why, sizeof(why)), -EBADMSG);
	put_auth(RMR_MSG_AUTH, &a, -1);
	ck_assert_int_eq(decode(len, &d), -EBADMSG); /* a request carries no status */
	put_auth(RMR_MSG_AUTH, &a, -EACCES);
	ck_assert_int_eq(decode(len, &d), 0); /* but an AUTH refusing the member's proof */
	ck_assert_int_eq(d.status, -EACCES);
	put_auth(RMR_MSG_AUTH, &a, -EPERM);
	ck_assert_int_eq(decode(len, &d), -EBADMSG);
	memset(a.nonce, 0, sizeof(a.nonce));
	put_auth(RMR_MSG_AUTH, &a, 0);
	ck_assert_int_eq(decode(len + 1, &d), -EBADMSG);
	hdr->op = cpu_to_le16(1);
	ck_assert_int_eq(decode(len, &d), -EBADMSG);
	/* Only CHALLENGE and AUTH carry one. */
	put_auth(RMR_MSG_AUTH, &a, 0);
	ck_assert_int_eq(decode(len, &d), 0);
	d.type = RMR_MSG_HELLO;
	ck_assert_int_eq(rmr_wire_decode_auth(&d, &ad, why, sizeof(why)), -EBADMSG);
}
END_TEST

/* A proof checks only under its key, for its side and everything it binds. */
START_TEST(auth_proofs_bind_everything)
{
	uint8_t key[RMR_KEY_LEN], other[RMR_KEY_LEN], proof[RMR_PROOF_LEN];
	struct rmr_auth_ctx ctx, x;

	ck_assert_int_eq(rmr_auth_init(), 0);
	memset(key, 7, sizeof(key));
	memcpy(other, key, sizeof(other));
	other[31] ^= 1;
	memset(&ctx, 0, sizeof(ctx));
	rmr_auth_nonce(ctx.initiator_nonce);
	rmr_auth_nonce(ctx.member_nonce);
	memset(ctx.pool_uuid.b, 0xab, sizeof(ctx.pool_uuid.b));
	ctx.role = RMR_ROLE_PEER;
	ctx.initiator_id = 2;
	ctx.member_id = 1;

	rmr_auth_proof(key, RMR_AUTH_MEMBER, &ctx, proof);
	ck_assert(rmr_auth_check(key, RMR_AUTH_MEMBER, &ctx, proof));
	ck_assert(!rmr_auth_check(other, RMR_AUTH_MEMBER, &ctx, proof));
	/* Not reflected as the other side's proof. */
	ck_assert(!rmr_auth_check(key, RMR_AUTH_INITIATOR, &ctx, proof));
	x = ctx;
	x.initiator_nonce[0] ^= 1;
	ck_assert(!rmr_auth_check(key, RMR_AUTH_MEMBER, &x, proof));
	x = ctx;
	x.member_nonce[31] ^= 1;
	ck_assert(!rmr_auth_check(key, RMR_AUTH_MEMBER, &x, proof));
	x = ctx;
	x.pool_uuid.b[5] ^= 1;
	ck_assert(!rmr_auth_check(key, RMR_AUTH_MEMBER, &x, proof));
	x = ctx;
	x.role = RMR_ROLE_CLIENT;
	ck_assert(!rmr_auth_check(key, RMR_AUTH_MEMBER, &x, proof));
	x = ctx;
	x.initiator_id = 3;
	ck_assert(!rmr_auth_check(key, RMR_AUTH_MEMBER, &x, proof));
	x = ctx;
	x.member_id = 3;
	ck_assert(!rmr_auth_check(key, RMR_AUTH_MEMBER, &x, proof));
	/* The initiator's proof differs from the member's. */
	{
		uint8_t ip[RMR_PROOF_LEN];

		rmr_auth_proof(key, RMR_AUTH_INITIATOR, &ctx, ip);
		ck_assert(memcmp(ip, proof, sizeof(ip)) != 0);
		ck_assert(rmr_auth_check(key, RMR_AUTH_INITIATOR, &ctx, ip));
	}
	/* Nonces are fresh. */
	memcpy(x.initiator_nonce, ctx.initiator_nonce, RMR_NONCE_LEN);
	rmr_auth_nonce(x.initiator_nonce);
	ck_assert(memcmp(x.initiator_nonce, ctx.initiator_nonce, RMR_NONCE_LEN) != 0);
}
END_TEST

START_TEST(recovery_message_names)
{
	ck_assert_str_eq(rmr_msg_type_name(11), "MAP_PULL");
	ck_assert_str_eq(rmr_msg_type_name(12), "MAP_PULL_RSP");
	ck_assert_str_eq(rmr_msg_type_name(13), "MAP_GET");
	ck_assert_str_eq(rmr_msg_type_name(14), "MAP_GET_RSP");
	ck_assert_str_eq(rmr_msg_type_name(15), "SYNC_READ");
	ck_assert_str_eq(rmr_msg_type_name(16), "SYNC_READ_RSP");
	ck_assert_str_eq(rmr_msg_type_name(17), "MAP_CLEAR");
	ck_assert_str_eq(rmr_msg_type_name(18), "MAP_CLEAR_RSP");
	ck_assert_str_eq(rmr_msg_type_name(19), "RECONCILE");
	ck_assert_str_eq(rmr_msg_type_name(20), "RECONCILE_RSP");
	ck_assert_str_eq(rmr_msg_type_name(21), "CHUNK_SUM");
	ck_assert_str_eq(rmr_msg_type_name(22), "CHUNK_SUM_RSP");
	ck_assert_str_eq(rmr_msg_type_name(23), "MAP_MARK");
	ck_assert_str_eq(rmr_msg_type_name(24), "MAP_MARK_RSP");
	ck_assert_str_eq(rmr_msg_type_name(25), "MEMBERSHIP");
	ck_assert_str_eq(rmr_msg_type_name(26), "MEMBERSHIP_RSP");
	ck_assert_str_eq(rmr_msg_type_name(27), "CHALLENGE");
	ck_assert_str_eq(rmr_msg_type_name(28), "AUTH");
	ck_assert_str_eq(rmr_msg_type_name(29), "UNKNOWN");
}
END_TEST

/* Online verify: checksums of a chunk range, and marks for the members that differ. */
START_TEST(verify_messages)
{
	struct rmr_msg m = sample(RMR_MSG_CHUNK_SUM, 0), d;
	struct rmr_wire_chunk_sum *e = (void *)(buf + sizeof(struct rmr_wire_hdr));
	uint32_t crc, flags;
	char why[160];

	m.addr = 1000;
	m.len = 16;
	accepted(m, "a CHUNK_SUM of 16 chunks");
	m.len = 0;
	refused(m, "a CHUNK_SUM of no chunks");
	m = sample(RMR_MSG_CHUNK_SUM, 8);
	refused(m, "a CHUNK_SUM with a payload");

	m = sample(RMR_MSG_CHUNK_SUM_RSP, 3 * sizeof(*e));
	m.len = 3;
	rmr_wire_encode_chunk_sum(&e[0], 0xdeadbeef, 0);
	rmr_wire_encode_chunk_sum(&e[1], 0, RMR_SUM_DIRTY);
	rmr_wire_encode_chunk_sum(&e[2], 7, 4);
	accepted(m, "a CHUNK_SUM_RSP of 3 entries");
	ck_assert_int_eq(round_trip(&m, &d, why, sizeof(why)), 0);
	ck_assert_int_eq(rmr_wire_decode_chunk_sum(&d, 0, &crc, &flags, why, sizeof(why)), 0);
	ck_assert_uint_eq(crc, 0xdeadbeef);
	ck_assert_uint_eq(flags, 0);
	ck_assert_int_eq(rmr_wire_decode_chunk_sum(&d, 1, &crc, &flags, why, sizeof(why)), 0);
	ck_assert_uint_eq(flags, RMR_SUM_DIRTY);
	ck_assert_int_eq(rmr_wire_decode_chunk_sum(&d, 2, &crc, &flags, why, sizeof(why)), -EBADMSG);
	ck_assert_int_eq(rmr_wire_decode_chunk_sum(&d, 3, &crc, &flags, why, sizeof(why)), -EBADMSG);
	m.len = 4;
	refused(m, "a CHUNK_SUM_RSP with fewer entries than chunks");
	m.len = 3;
	m.status = -EIO;
	refused(m, "an error CHUNK_SUM_RSP with entries");

	m = sample(RMR_MSG_MAP_MARK, 0);
	m.addr = 5;
	m.len = 1;
	m.missed = 0x6;
	accepted(m, "a MAP_MARK of chunk 5 for members 1 and 2");
	m.len = UINT32_MAX;
	m.addr = 0;
	accepted(m, "a MAP_MARK of 2^32-1 chunks");
	m.missed = 0;
	refused(m, "a MAP_MARK for no member");
	m.missed = 1;
	refused(m, "a MAP_MARK for member 0");
	m = sample(RMR_MSG_MAP_MARK_RSP, 0);
	m.missed = 2;
	refused(m, "a MAP_MARK_RSP with a missed mask");
}
END_TEST

START_TEST(recovery_messages_round_trip)
{
	uint8_t *payload = buf + sizeof(struct rmr_wire_hdr);

	for (unsigned i = 0; i < NCASES; i++) {
		const struct recovery_case *c = &recovery_cases[i];
		struct rmr_msg m = recovery_msg(c), d;
		const char *name = rmr_msg_type_name(c->type);
		char why[160] = "";

		for (uint32_t k = 0; k < c->payload_len; k++)
			payload[k] = (uint8_t)(k * 7 + i);
		ck_assert_msg(round_trip(&m, &d, why, sizeof(why)) == 0, "%s: %s", name, why);
		ck_assert_uint_eq(d.type, c->type);
		ck_assert_mem_eq(d.pool_uuid.b, m.pool_uuid.b, 16);
		ck_assert_uint_eq(d.sender_id, m.sender_id);
		ck_assert_uint_eq(d.op, c->op);
		ck_assert_uint_eq(d.op_flags, c->op_flags);
		ck_assert_uint_eq(d.slot, 17);
		ck_assert_uint_eq(d.seq, 99);
		ck_assert_uint_eq(d.map_ver, m.map_ver);
		ck_assert_uint_eq(d.addr, c->addr);
		ck_assert_uint_eq(d.len, c->len);
		ck_assert_uint_eq(d.payload_len, c->payload_len);
		ck_assert_uint_eq(d.missed, 0);
		ck_assert_int_eq(d.status, 0);
		ck_assert_ptr_eq(d.payload, payload);
		for (uint32_t k = 0; k < c->payload_len; k++)
			ck_assert_uint_eq(((const uint8_t *)d.payload)[k], (uint8_t)(k * 7 + i));
		/* An answer without a payload carries any errno. */
		if (!c->request && c->type != RMR_MSG_SYNC_READ_RSP && c->type != RMR_MSG_MAP_GET_RSP) {
			m.status = -4095;
			ck_assert_msg(round_trip(&m, &d, why, sizeof(why)) == 0, "%s: %s", name, why);
			ck_assert_int_eq(d.status, -4095);
		}
	}
}
END_TEST

/* What else the decoder lets through: limits, errors, last pages. */
START_TEST(recovery_messages_edge_cases_accepted)
{
	struct rmr_msg m;

	m = recovery_msg(&recovery_cases[0]);
	m.op = 1;
	accepted(m, "MAP_PULL from member 1");
	m.op = RMR_MAX_MEMBER_ID;
	accepted(m, "MAP_PULL from member 63");
	m = recovery_msg(&recovery_cases[1]);
	m.status = -ENOTCONN;
	m.map_ver = 0;
	accepted(m, "MAP_PULL_RSP refusal without a session to the source");
	m = recovery_msg(&recovery_cases[2]);
	m.op = 0;
	m.addr = 0;
	accepted(m, "MAP_GET from the start (member 0 means 1)");
	m = recovery_msg(&recovery_cases[3]);
	m.op_flags = RMR_MAP_GET_LAST;
	accepted(m, "MAP_GET_RSP last page with ranges");
	m.payload_len = 0;
	accepted(m, "MAP_GET_RSP last page, no ranges (no member misses anything)");
	m.op_flags = 0;
	m.status = -ETIMEDOUT;
	accepted(m, "MAP_GET_RSP error without ranges");
	m = recovery_msg(&recovery_cases[4]);
	m.len = RMR_WIRE_MAX_PAYLOAD;
	accepted(m, "SYNC_READ of the largest payload");
	m = recovery_msg(&recovery_cases[5]);
	m.payload_len = 0;
	m.status = -EAGAIN;
	accepted(m, "SYNC_READ_RSP -EAGAIN without data");
	m = recovery_msg(&recovery_cases[6]);
	m.addr = 0;
	m.len = UINT32_MAX;
	accepted(m, "MAP_CLEAR of 2^32-1 chunks (the pool check is the core's)");
	m = recovery_msg(&recovery_cases[7]);
	m.status = -EIO;
	accepted(m, "MAP_CLEAR_RSP error echoing a long range");
}
END_TEST

/* The header rules every message obeys, applied to each recovery type. */
START_TEST(recovery_messages_refuse_bad_headers)
{
	for (unsigned i = 0; i < NCASES; i++) {
		const struct recovery_case *c = &recovery_cases[i];
		struct rmr_msg m;

		m = recovery_msg(c);
		/* MAP_PULL names the unsettled members there (tested with it). */
		if (c->type != RMR_MSG_MAP_PULL) {
			m.missed = 1ull << 2;
			refused(m, "a missed-member mask");
			m.missed = 1ull << 63;
			refused(m, "a missed-member mask naming member 63");
		}
		m.missed = 1;
		refused(m, "a missed-member mask naming id 0");
		m = recovery_msg(c);
		m.sender_id = RMR_MAX_MEMBER_ID + 1;
		refused(m, "sender id 64");
		refused_poked(recovery_msg(c), poke_flags, "flags");
		refused_poked(recovery_msg(c), poke_payload_len, "payload_len beyond the message");
		m = recovery_msg(c);
		m.addr = UINT64_MAX - m.len / 2;
		m.len = m.len ? m.len : 1;
		refused(m, "a range that wraps");
		if (c->type != RMR_MSG_MAP_CLEAR && c->type != RMR_MSG_MAP_CLEAR_RSP) {
			m = recovery_msg(c);
			m.len = RMR_WIRE_MAX_PAYLOAD + 1;
			m.payload_len = 0;
			refused(m, "a length above the largest payload");
		}
		m = recovery_msg(c);
		if (c->request) {
			m.status = -EIO;
			refused(m, "a status in a request");
			m.status = 1;
			refused(m, "a positive status in a request");
		} else {
			m.payload_len = 0;
			m.status = 1;
			refused(m, "a positive status");
			m.status = -4096;
			refused(m, "a status that is not an errno");
			m.status = INT32_MIN;
			refused(m, "status INT32_MIN");
		}
	}
}
END_TEST

/* The rules of each recovery type. */
START_TEST(recovery_messages_refuse_bad_fields)
{
	struct rmr_msg m;

	/* RECONCILE_RSP carries the member's missed mask; neither carries a payload. */
	m = sample(RMR_MSG_RECONCILE_RSP, 0);
	m.len = 0;
	m.missed = 0x6;
	accepted(m, "the member's missed mask");
	m.missed = 1;
	refused(m, "a missed mask naming id 0");
	m = sample(RMR_MSG_RECONCILE, 16);
	m.len = 0;
	refused(m, "a payload");

	/* MAP_PULL: source member 1..63, no payload. */
	m = recovery_msg(&recovery_cases[0]);
	m.op = 0;
	refused(m, "source member 0");
	m.op = RMR_MAX_MEMBER_ID + 1;
	refused(m, "source member 64");
	m.op = UINT16_MAX;
	refused(m, "source member 65535");
	m = recovery_msg(&recovery_cases[0]);
	m.payload_len = 16;
	refused(m, "a payload");
	m.payload_len = 1;
	refused(m, "a 1-byte payload");
	/* RMR_MAP_PULL_ALL: from every member, so no source (op 0); unsettled members in missed. */
	m = recovery_msg(&recovery_cases[0]);
	m.op_flags = RMR_MAP_PULL_ALL;
	refused(m, "a source member with RMR_MAP_PULL_ALL");
	m.op = 0;
	accepted(m, "MAP_PULL from every member");
	m.op_flags = RMR_MAP_PULL_ALL | RMR_MAP_PULL_ABSORB;
	m.missed = 0x6;
	accepted(m, "MAP_PULL from every member, absorbing, two members unsettled");
	m.op_flags = 4;
	m.op = 1;
	refused(m, "an unknown MAP_PULL flag");
	m.op_flags = 0;
	m.missed = 1;
	refused(m, "a MAP_PULL whose unsettled mask names id 0");

	/* MAP_PULL_RSP, MAP_GET, MAP_CLEAR, MAP_CLEAR_RSP: no payload. */
	for (unsigned i = 0; i < NCASES; i++) {
		const struct recovery_case *c = &recovery_cases[i];

		if (c->type != RMR_MSG_MAP_PULL_RSP && c->type != RMR_MSG_MAP_GET &&
		    c->type != RMR_MSG_MAP_CLEAR && c->type != RMR_MSG_MAP_CLEAR_RSP)
			continue;
		m = recovery_msg(c);
		m.payload_len = 16;
		refused(m, "a payload");
		m.payload_len = 4096;
		refused(m, "a 4 KiB payload");
	}
	m = recovery_msg(&recovery_cases[1]);
	m.status = -EIO;
	m.payload_len = 8;
	refused(m, "a refusal with a payload");

	/* MAP_GET_RSP: whole 16-byte ranges, none with an error, only the LAST flag. */
	m = recovery_msg(&recovery_cases[3]);
	m.payload_len = 8;
	refused(m, "half a range");
	m.payload_len = 17;
	refused(m, "a range and a byte");
	m.payload_len = 24;
	refused(m, "1.5 ranges");
	m = recovery_msg(&recovery_cases[3]);
	m.status = -EIO;
	refused(m, "an error with ranges");
	m.op_flags = RMR_MAP_GET_LAST;
	refused(m, "an error with ranges on the last page");
	m = recovery_msg(&recovery_cases[3]);
	m.op_flags = 2;
	refused(m, "unknown flag 2");
	m.op_flags = RMR_MAP_GET_LAST | 2;
	refused(m, "LAST with an unknown flag");
	m.op_flags = 1u << 31;
	refused(m, "unknown flag bit 31");

	/* SYNC_READ: no payload, a length > 0, op 0 or a last resort. */
	m = recovery_msg(&recovery_cases[4]);
	m.op = RMR_SYNC_READ_LAST_RESORT;
	accepted(m, "SYNC_READ of a last resort");
	m.op = 2;
	refused(m, "op 2");
	m = recovery_msg(&recovery_cases[4]);
	m.payload_len = 4096;
	refused(m, "a payload");
	m = recovery_msg(&recovery_cases[4]);
	m.len = 0;
	refused(m, "zero length");
	m.addr = 0;
	refused(m, "zero length at byte 0");

	/* SYNC_READ_RSP: exactly len bytes on success, none on an error. */
	m = recovery_msg(&recovery_cases[5]);
	m.len = 8192;
	refused(m, "fewer bytes than asked");
	m.len = 2048;
	refused(m, "more bytes than asked");
	m = recovery_msg(&recovery_cases[5]);
	m.payload_len = 0;
	refused(m, "success without data");
	m = recovery_msg(&recovery_cases[5]);
	m.status = -EAGAIN;
	refused(m, "-EAGAIN with data");
	m.status = -EIO;
	refused(m, "-EIO with data");

	/* MAP_CLEAR: a chunk range that does not wrap. */
	m = recovery_msg(&recovery_cases[6]);
	m.addr = UINT64_MAX;
	m.len = 1;
	refused(m, "a chunk range that wraps");
}
END_TEST

/* Entry @i of @d must be refused, with a reason. */
static void range_refused(const struct rmr_msg *d, size_t i, const char *what)
{
	struct rmr_map_range r;
	char why[160] = "";

	ck_assert_msg(rmr_wire_decode_map_range(d, i, &r, why, sizeof(why)) == -EBADMSG,
		      "map range with %s was accepted", what);
	ck_assert_msg(why[0], "map range with %s refused without a reason", what);
}

START_TEST(map_ranges_round_trip_and_checks)
{
	struct rmr_wire_map_range *w = (struct rmr_wire_map_range *)(buf + sizeof(struct rmr_wire_hdr));
	const uint8_t *raw = (const uint8_t *)w;
	struct rmr_map_range in[3] = {
		{ .member_id = 1, .count = 1, .first = 0 },
		{ .member_id = 63, .count = UINT32_MAX, .first = 1ull << 40 },
		{ .member_id = 7, .count = 3, .first = 12 },
	}, out;
	struct rmr_msg m = sample(RMR_MSG_MAP_GET_RSP, sizeof(in) / sizeof(in[0]) * 16), d, err;
	char why[160];

	for (unsigned i = 0; i < 3; i++)
		rmr_wire_encode_map_range(&w[i], &in[i]);
	/* Little-endian: id at 0, reserved zero at 2, count at 4, first at 8. */
	ck_assert_uint_eq(raw[32], 7);
	ck_assert_uint_eq(raw[33], 0);
	ck_assert_uint_eq(raw[34] | raw[35], 0);
	ck_assert_uint_eq(raw[36], 3);
	ck_assert_uint_eq(raw[40], 12);
	ck_assert_uint_eq(raw[16 + 8 + 5], 1); /* 1 << 40 */
	m.op_flags = 0;
	ck_assert_int_eq(round_trip(&m, &d, why, sizeof(why)), 0);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_int_eq(rmr_wire_decode_map_range(&d, i, &out, why, sizeof(why)), 0);
		ck_assert_uint_eq(out.member_id, in[i].member_id);
		ck_assert_uint_eq(out.count, in[i].count);
		ck_assert_uint_eq(out.first, in[i].first);
	}

	/* Beyond the payload (also where (i + 1) * 16 overflows), or in another message. */
	range_refused(&d, 3, "index 3 of 3");
	range_refused(&d, (size_t)1 << 60, "index 2^60");
	range_refused(&d, SIZE_MAX / 16, "index SIZE_MAX / 16");
	range_refused(&d, SIZE_MAX, "index SIZE_MAX");
	err = d;
	err.payload_len = 0;
	err.status = -EIO;
	range_refused(&err, 0, "an index in an error answer");
	d.type = RMR_MSG_READ_RSP;
	range_refused(&d, 0, "a READ_RSP");
	d.type = RMR_MSG_MAP_GET;
	range_refused(&d, 0, "a MAP_GET");
	d.type = RMR_MSG_MAP_GET_RSP;

	/* Each bad field of an entry. */
	w[0].member_id = cpu_to_le16(0);
	range_refused(&d, 0, "member 0");
	w[0].member_id = cpu_to_le16(RMR_MAX_MEMBER_ID + 1);
	range_refused(&d, 0, "member 64");
	w[0].member_id = cpu_to_le16(UINT16_MAX);
	range_refused(&d, 0, "member 65535");
	w[0].member_id = cpu_to_le16(1);
	w[0].flags = cpu_to_le16(32);
	range_refused(&d, 0, "an unknown flag");
	/* Records of an older boot: records only. */
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_RECORD_OLD);
	range_refused(&d, 0, "an older boot's range that is no record");
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_RECORD_OLD | RMR_MAP_RANGE_RECORD_BOOT);
	range_refused(&d, 0, "an older boot's record boot");
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_RECORD_OLD | RMR_MAP_RANGE_RECORD);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), 0);
	ck_assert_uint_eq(out.flags, RMR_MAP_RANGE_RECORD_OLD | RMR_MAP_RANGE_RECORD);
	/* The boot the sender's records of a member were made in: a value, no count. */
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_RECORD_BOOT);
	range_refused(&d, 0, "a record boot with a count");
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_RECORD_BOOT | RMR_MAP_RANGE_RECORD);
	range_refused(&d, 0, "a record boot that is a record");
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_RECORD_BOOT | RMR_MAP_RANGE_MARK_VER);
	range_refused(&d, 0, "a record boot that is a version");
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_RECORD_BOOT);
	w[0].count = cpu_to_le32(0);
	w[0].first = cpu_to_le64(0xfeedfacecafebeefull);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), 0);
	ck_assert_uint_eq(out.flags, RMR_MAP_RANGE_RECORD_BOOT);
	ck_assert_uint_eq(out.first, 0xfeedfacecafebeefull);
	w[0].count = cpu_to_le32(1);
	w[0].first = cpu_to_le64(0);
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_MARK_VER | RMR_MAP_RANGE_PULLED_VER);
	range_refused(&d, 0, "two versions in one entry");
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_MARK_VER | RMR_MAP_RANGE_RECORD);
	range_refused(&d, 0, "a version that is a record");
	/* A range of records: a range like any other. */
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_RECORD);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), 0);
	ck_assert_uint_eq(out.flags, RMR_MAP_RANGE_RECORD);
	ck_assert_uint_eq(out.count, 1);
	w[0].count = cpu_to_le32(0);
	range_refused(&d, 0, "an empty range of records");
	w[0].count = cpu_to_le32(1);
	/* The version up to which the sender's own map is complete: no count. */
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_PULLED_VER);
	range_refused(&d, 0, "a pulled version with a count");
	w[0].count = cpu_to_le32(0);
	w[0].first = cpu_to_le64(1ull << 40);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), 0);
	ck_assert_uint_eq(out.flags, RMR_MAP_RANGE_PULLED_VER);
	ck_assert_uint_eq(out.first, 1ull << 40);
	w[0].count = cpu_to_le32(1);
	w[0].flags = cpu_to_le16(0x8000);
	range_refused(&d, 0, "flag bit 15");
	/* A mark version: no count, any version. */
	w[0].flags = cpu_to_le16(RMR_MAP_RANGE_MARK_VER);
	range_refused(&d, 0, "a mark version with a count");
	w[0].count = cpu_to_le32(0);
	w[0].first = cpu_to_le64(UINT64_MAX);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), 0);
	ck_assert_uint_eq(out.flags, RMR_MAP_RANGE_MARK_VER);
	ck_assert_uint_eq(out.first, UINT64_MAX);
	w[0].flags = cpu_to_le16(0);
	range_refused(&d, 0, "count 0");
	w[0].count = cpu_to_le32(2);
	w[0].first = cpu_to_le64(UINT64_MAX);
	range_refused(&d, 0, "a range that wraps");
	w[0].first = cpu_to_le64(UINT64_MAX - 1);
	range_refused(&d, 0, "a range that ends exactly at 2^64");
	w[0].count = cpu_to_le32(UINT32_MAX);
	w[0].first = cpu_to_le64(UINT64_MAX - UINT32_MAX + 1);
	range_refused(&d, 0, "the largest count wrapping");
	/* The last range that does not wrap; and one bad entry spoils only itself. */
	w[0].count = cpu_to_le32(2);
	w[0].first = cpu_to_le64(UINT64_MAX - 2);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), 0);
	ck_assert_uint_eq(out.first + out.count, UINT64_MAX);
	w[1].count = cpu_to_le32(0);
	range_refused(&d, 1, "count 0 in the middle");
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 2, &out, why, sizeof(why)), 0);
	ck_assert_uint_eq(out.member_id, 7);
}
END_TEST

/* Random bytes never crash the decoder and are (almost always) refused. */
START_TEST(random_bytes_never_crash)
{
	struct rmr_msg d;
	char why[128];
	unsigned accepted = 0;

	srand(1);
	for (int n = 0; n < 100000; n++) {
		size_t len = (size_t)rand() % sizeof(buf);

		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rand();
		if (n & 1) { /* valid magic and version: reach the deeper checks */
			struct rmr_wire_hdr *h = (void *)buf;

			if (len >= sizeof(*h)) {
				h->magic = cpu_to_le32(RMR_WIRE_MAGIC);
				h->version = cpu_to_le16(RMR_WIRE_VERSION);
			}
		}
		accepted += rmr_wire_decode(buf, len, &d, why, sizeof(why)) == 0;
	}
	ck_assert_uint_lt(accepted, 10);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("codec");
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, header_round_trip);
	tcase_add_test(tc, negative_status_survives);
	tcase_add_test(tc, patch_write_carries_a_change_of_its_own_length);
	tcase_add_test(tc, malformed_headers_are_refused);
	tcase_add_test(tc, other_version_is_not_supported);
	tcase_add_test(tc, heartbeat_carries_the_peers_up);
	tcase_add_test(tc, hello_round_trip_and_checks);
	tcase_add_test(tc, hello_rsp_checks_identity);
	tcase_add_test(tc, membership_codec);
	tcase_add_test(tc, read_argument_and_short_answer);
	tcase_add_test(tc, verify_messages);
	tcase_add_test(tc, recovery_message_names);
	tcase_add_test(tc, hello_auth_fields);
	tcase_add_test(tc, auth_messages);
	tcase_add_test(tc, auth_proofs_bind_everything);
	tcase_add_test(tc, recovery_messages_round_trip);
	tcase_add_test(tc, recovery_messages_edge_cases_accepted);
	tcase_add_test(tc, recovery_messages_refuse_bad_headers);
	tcase_add_test(tc, recovery_messages_refuse_bad_fields);
	tcase_add_test(tc, map_ranges_round_trip_and_checks);
	tcase_add_test(tc, random_bytes_never_crash);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
