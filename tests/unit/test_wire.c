/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Wire codec: round trips, and every malformed field is refused with a reason. */
#include "unit.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
static void reserved(struct rmr_wire_hdr *h, size_t *l) { (void)l; h->reserved = cpu_to_le32(1); }
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
	ck_assert_int_eq(corrupt_and_decode(reserved), -EBADMSG);
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
	((struct rmr_wire_hdr *)buf)->version = cpu_to_le16(2);
	ck_assert_int_eq(rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr), &d, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(why, "version 2"));
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

START_TEST(hello_rsp_checks_identity)
{
	struct rmr_hello_rsp h = { .member_id = 2, .chunk_size = 131072, .pool_size = 1 << 30,
				   .map_ver = 3, .members = 0xe, .queue_depth = 64,
				   .max_io_size = 131072 }, hd;
	struct rmr_msg m = sample(RMR_MSG_HELLO_RSP, sizeof(struct rmr_wire_hello_rsp)), d;
	struct rmr_wire_hello_rsp *w = (void *)(buf + sizeof(struct rmr_wire_hdr));
	size_t len = sizeof(struct rmr_wire_hdr) + sizeof(*w);
	char why[128];

	m.len = 0;
	strcpy(h.pool_name, "vol1");
	rmr_wire_encode((struct rmr_wire_hdr *)buf, &m);
	rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_int_eq(decode(len, &d), 0);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), 0);
	ck_assert_uint_eq(hd.members, 0xe);

	h.members = 0x8; /* member 2 not in its own pool */
	rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), -EBADMSG);
	h.members = 0xe;
	h.chunk_size = 100000;
	rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), -EBADMSG);
	h.chunk_size = 131072;
	h.member_id = 0;
	rmr_wire_encode_hello_rsp(w, &h);
	ck_assert_int_eq(rmr_wire_decode_hello_rsp(&d, &hd, why, sizeof(why)), -EBADMSG);
}
END_TEST

/* Random bytes never crash the decoder and are (almost always) refused. */
/* Encode @m (header only; the payload already sits behind it in buf) and decode. */
static int round_trip(struct rmr_msg *m, struct rmr_msg *d, char *why, size_t whylen)
{
	rmr_wire_encode((struct rmr_wire_hdr *)buf, m);
	return rmr_wire_decode(buf, sizeof(struct rmr_wire_hdr) + m->payload_len, d, why, whylen);
}

/* @m must be refused, with a reason. */
static void refused(struct rmr_msg m, const char *what)
{
	struct rmr_msg d;
	char why[160] = "";

	ck_assert_msg(round_trip(&m, &d, why, sizeof(why)) == -EBADMSG, "%s was accepted", what);
	ck_assert_msg(why[0], "%s refused without a reason", what);
}

START_TEST(recovery_messages_round_trip)
{
	static const unsigned types[] = {
		RMR_MSG_MAP_PULL, RMR_MSG_MAP_PULL_RSP, RMR_MSG_MAP_GET, RMR_MSG_MAP_GET_RSP,
		RMR_MSG_SYNC_READ, RMR_MSG_SYNC_READ_RSP, RMR_MSG_MAP_CLEAR, RMR_MSG_MAP_CLEAR_RSP,
	};

	for (unsigned i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct rmr_msg m = sample(types[i], 0), d;
		char why[160];

		m.op = 2;
		m.op_flags = types[i] == RMR_MSG_MAP_GET_RSP ? RMR_MAP_GET_LAST : 0;
		m.len = types[i] == RMR_MSG_MAP_CLEAR ? 1u << 29 : 4096; /* a whole big pool */
		if (types[i] == RMR_MSG_SYNC_READ_RSP)
			m.payload_len = 4096;
		ck_assert_msg(round_trip(&m, &d, why, sizeof(why)) == 0, "%s: %s",
			      rmr_msg_type_name(types[i]), why);
		ck_assert_uint_eq(d.type, types[i]);
		ck_assert_uint_eq(d.op, 2);
		ck_assert_uint_eq(d.len, m.len);
		ck_assert_uint_eq(d.map_ver, m.map_ver);
		ck_assert_str_ne(rmr_msg_type_name(types[i]), "UNKNOWN");
	}
}
END_TEST

START_TEST(recovery_messages_refuse_bad_fields)
{
	struct rmr_msg m;

	m = sample(RMR_MSG_MAP_PULL, 0);
	m.op = 0;
	refused(m, "MAP_PULL from member 0");
	m.op = RMR_MAX_MEMBER_ID + 1;
	refused(m, "MAP_PULL from member 64");
	m = sample(RMR_MSG_MAP_PULL, 16);
	refused(m, "MAP_PULL with a payload");
	m = sample(RMR_MSG_MAP_PULL, 0);
	m.missed = 1u << 2;
	refused(m, "MAP_PULL with a missed mask");
	m = sample(RMR_MSG_MAP_PULL, 0);
	m.status = -EIO;
	refused(m, "MAP_PULL with a status");
	m = sample(RMR_MSG_MAP_GET, 16);
	refused(m, "MAP_GET with a payload");
	m = sample(RMR_MSG_MAP_CLEAR, 16);
	refused(m, "MAP_CLEAR with a payload");
	m = sample(RMR_MSG_MAP_CLEAR_RSP, 0);
	m.status = 5;
	refused(m, "MAP_CLEAR_RSP with a positive status");
	m = sample(RMR_MSG_MAP_GET_RSP, 24);
	refused(m, "MAP_GET_RSP with 1.5 ranges");
	m = sample(RMR_MSG_MAP_GET_RSP, 16);
	m.status = -EIO;
	refused(m, "MAP_GET_RSP error with ranges");
	m = sample(RMR_MSG_MAP_GET_RSP, 0);
	m.op_flags = 2;
	refused(m, "MAP_GET_RSP with an unknown flag");
	m = sample(RMR_MSG_SYNC_READ, 4096);
	refused(m, "SYNC_READ with a payload");
	m = sample(RMR_MSG_SYNC_READ, 0);
	m.len = 0;
	refused(m, "SYNC_READ of nothing");
	m = sample(RMR_MSG_SYNC_READ, 0);
	m.len = RMR_WIRE_MAX_PAYLOAD + 1;
	refused(m, "SYNC_READ above the largest payload");
	m = sample(RMR_MSG_SYNC_READ_RSP, 4096);
	m.len = 8192;
	refused(m, "SYNC_READ_RSP shorter than asked");
	m = sample(RMR_MSG_SYNC_READ_RSP, 4096);
	m.status = -EAGAIN;
	refused(m, "SYNC_READ_RSP error with data");
}
END_TEST

START_TEST(map_ranges_round_trip_and_checks)
{
	struct rmr_wire_map_range *w = (struct rmr_wire_map_range *)(buf + sizeof(struct rmr_wire_hdr));
	struct rmr_map_range in[3] = {
		{ .member_id = 1, .count = 1, .first = 0 },
		{ .member_id = 63, .count = UINT32_MAX, .first = 1ull << 40 },
		{ .member_id = 7, .count = 3, .first = 12 },
	}, out;
	struct rmr_msg m = sample(RMR_MSG_MAP_GET_RSP, sizeof(in) / sizeof(in[0]) * 16), d;
	char why[160];

	for (unsigned i = 0; i < 3; i++)
		rmr_wire_encode_map_range(&w[i], &in[i]);
	m.op_flags = 0;
	ck_assert_int_eq(round_trip(&m, &d, why, sizeof(why)), 0);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_int_eq(rmr_wire_decode_map_range(&d, i, &out, why, sizeof(why)), 0);
		ck_assert_uint_eq(out.member_id, in[i].member_id);
		ck_assert_uint_eq(out.count, in[i].count);
		ck_assert_uint_eq(out.first, in[i].first);
	}
	/* Beyond the payload, or in another message type. */
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 3, &out, why, sizeof(why)), -EBADMSG);
	d.type = RMR_MSG_READ_RSP;
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), -EBADMSG);
	d.type = RMR_MSG_MAP_GET_RSP;
	/* Each bad field of an entry. */
	w[0].member_id = cpu_to_le16(0);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), -EBADMSG);
	w[0].member_id = cpu_to_le16(RMR_MAX_MEMBER_ID + 1);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), -EBADMSG);
	w[0].member_id = cpu_to_le16(1);
	w[0].reserved = cpu_to_le16(1);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), -EBADMSG);
	w[0].reserved = cpu_to_le16(0);
	w[0].count = cpu_to_le32(0);
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), -EBADMSG);
	w[0].count = cpu_to_le32(2);
	w[0].first = cpu_to_le64(UINT64_MAX);
	why[0] = '\0';
	ck_assert_int_eq(rmr_wire_decode_map_range(&d, 0, &out, why, sizeof(why)), -EBADMSG);
	ck_assert(why[0]);
}
END_TEST

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

	tcase_add_test(tc, header_round_trip);
	tcase_add_test(tc, negative_status_survives);
	tcase_add_test(tc, malformed_headers_are_refused);
	tcase_add_test(tc, other_version_is_not_supported);
	tcase_add_test(tc, hello_round_trip_and_checks);
	tcase_add_test(tc, hello_rsp_checks_identity);
	tcase_add_test(tc, recovery_messages_round_trip);
	tcase_add_test(tc, recovery_messages_refuse_bad_fields);
	tcase_add_test(tc, map_ranges_round_trip_and_checks);
	tcase_add_test(tc, random_bytes_never_crash);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
