/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_wire: one received message, as the transports hand it to the core,
 * through rmr_wire_decode() and the payload decoders (HELLO, HELLO_RSP,
 * CHALLENGE, AUTH, MAP_GET_RSP ranges, CHUNK_SUM_RSP entries).
 *
 * Besides "no crash": whatever the decoders accept must encode back to the
 * very same bytes. Every field is checked or must be zero, so a message that
 * decodes but re-encodes differently is one the decoder should have refused.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A refusal must say why: the reason ends up in the member's log. */
static void check_reason(int ret, const char *why)
{
	if (ret < 0 && !why[0])
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rmr_msg m;
	char why[256] = "";
	int ret;

	/* Decoded straight from the fuzzer's buffer: ASan sees any read past it. */
	ret = rmr_wire_decode(data, size, &m, why, sizeof(why));
	check_reason(ret, why);
	if (ret < 0)
		return 0;
	if (m.payload != data + sizeof(struct rmr_wire_hdr) ||
	    m.payload_len != size - sizeof(struct rmr_wire_hdr))
		abort();
	{
		struct rmr_wire_hdr h;

		rmr_wire_encode(&h, &m);
		if (memcmp(&h, data, sizeof(h)))
			abort();
	}
	(void)rmr_msg_type_name(m.type);

	if (m.type == RMR_MSG_CHALLENGE || m.type == RMR_MSG_AUTH) {
		struct rmr_auth a;
		struct rmr_wire_auth w;

		why[0] = '\0';
		ret = rmr_wire_decode_auth(&m, &a, why, sizeof(why));
		check_reason(ret, why);
		if (ret == 0) {
			rmr_wire_encode_auth(&w, &a);
			if (memcmp(&w, m.payload, sizeof(w)))
				abort();
		}
	}
	if (m.type == RMR_MSG_HELLO) {
		struct rmr_hello hello;
		struct rmr_wire_hello w;

		why[0] = '\0';
		ret = rmr_wire_decode_hello(&m, &hello, why, sizeof(why));
		check_reason(ret, why);
		if (ret == 0) {
			if (strlen(hello.pool_name) > RMR_NAME_MAX)
				abort();
			rmr_wire_encode_hello(&w, &hello);
			if (memcmp(&w, m.payload, sizeof(w)))
				abort();
		}
	} else if (m.type == RMR_MSG_HELLO_RSP && m.payload_len) {
		struct rmr_hello_rsp rsp;
		/* The fixed part, then the membership. */
		_Alignas(8) uint8_t w[sizeof(struct rmr_wire_hello_rsp) + RMR_WIRE_MEMBERS_MAX];

		why[0] = '\0';
		ret = rmr_wire_decode_hello_rsp(&m, &rsp, why, sizeof(why));
		check_reason(ret, why);
		if (ret == 0) {
			if (strlen(rsp.pool_name) > RMR_NAME_MAX || !rsp.member_id ||
			    rsp.member_id > RMR_MAX_MEMBER_ID)
				abort();
			size_t n = rmr_wire_encode_hello_rsp(w, &rsp);

			if (n != m.payload_len || memcmp(w, m.payload, n))
				abort();
		}
	} else if (m.type == RMR_MSG_CHUNK_SUM_RSP) {
		size_t n = m.payload_len / sizeof(struct rmr_wire_chunk_sum);

		for (size_t i = 0; i <= n; i++) {
			struct rmr_wire_chunk_sum w;
			uint32_t crc, flags;

			why[0] = '\0';
			ret = rmr_wire_decode_chunk_sum(&m, i, &crc, &flags, why, sizeof(why));
			check_reason(ret, why);
			if (i == n && ret == 0)
				abort();
			if (ret < 0)
				continue;
			rmr_wire_encode_chunk_sum(&w, crc, flags);
			if (memcmp(&w, (const uint8_t *)m.payload + i * sizeof(w), sizeof(w)))
				abort();
		}
	} else if (m.type == RMR_MSG_MAP_GET_RSP) {
		size_t n = m.payload_len / sizeof(struct rmr_wire_map_range);

		/* One past the last entry is refused, not read. */
		for (size_t i = 0; i <= n; i++) {
			struct rmr_map_range r;
			struct rmr_wire_map_range w;

			why[0] = '\0';
			ret = rmr_wire_decode_map_range(&m, i, &r, why, sizeof(why));
			check_reason(ret, why);
			if (i == n && ret == 0)
				abort();
			if (ret < 0)
				continue;
			rmr_wire_encode_map_range(&w, &r);
			if (memcmp(&w, (const uint8_t *)m.payload + i * sizeof(w), sizeof(w)))
				abort();
		}
	}
	return 0;
}
