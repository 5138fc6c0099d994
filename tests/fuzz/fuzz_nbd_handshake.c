/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_nbd_handshake: nbd-brmr's option haggling (nbd_handshake.c) on a
 * socket that carries the input as everything a client sends after the
 * server's greeting.
 *
 * Input: 1 flag byte, then the client's bytes (client flags, options).
 * Flag bit 0: the server is shutting down; bit 1: the export is named ""
 * rather than "fuzz".
 *
 * Besides "no crash": the handshake ends (the input ends with a half-close,
 * which it must take as the end), with one of its three results, and what
 * the server sent parses: the greeting, whole option replies, and only at
 * the end of a handshake that enters transmission an EXPORT_NAME reply.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_nbd.h"
#include "nbd_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fz_client client;
static uint8_t replies[1u << 20];

/*
 * What the server sent is the greeting, then whole option replies, then
 * (only when it ends in transmission) possibly the EXPORT_NAME reply.
 */
static void check_replies(const uint8_t *r, size_t n, enum nbdb_hs_result res,
			  bool no_zeroes)
{
	struct nbd_greeting g;
	size_t pos = sizeof(g);

	if (n < sizeof(g))
		abort();
	memcpy(&g, r, sizeof(g));
	if (nbd_be64(g.magic) != NBD_MAGIC || nbd_be64(g.ihaveopt) != NBD_IHAVEOPT)
		abort();
	while (pos < n) {
		struct nbd_opt_reply h;

		if (n - pos >= sizeof(h)) {
			memcpy(&h, r + pos, sizeof(h));
			if (nbd_be64(h.magic) == NBD_REP_MAGIC) {
				if (nbd_be32(h.len) > n - pos - sizeof(h))
					abort();
				pos += sizeof(h) + nbd_be32(h.len);
				continue;
			}
		}
		if (res != NBDB_HS_TRANSMIT ||
		    n - pos != sizeof(struct nbd_export_name_reply) +
				       (no_zeroes ? 0 : NBD_EXPORT_NAME_PAD))
			abort();
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nbdb_export ex = {
		.size = 1u << 20,
		.description = "fuzzed export",
		.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA,
		.queue_depth = 4,
	};
	enum nbdb_hs_result res;
	atomic_bool stopping;
	int fd;

	if (size < 1)
		return 0;
	atomic_init(&stopping, data[0] & 1);
	ex.name = data[0] & 2 ? "" : "fuzz";
	client.got = replies;
	client.got_cap = sizeof(replies);
	fd = fz_client_start(&client, NULL, 0, data + 1, size - 1);
	res = nbdb_handshake(fd, &ex, 1, &stopping);
	close(fd);
	fz_client_wait(&client);
	if (res != NBDB_HS_TRANSMIT && res != NBDB_HS_CLOSE && res != NBDB_HS_ERROR)
		abort();
	if (client.got_all)
		check_replies(replies, client.got_len, res,
			      size >= 5 && (data[4] & NBD_FLAG_C_NO_ZEROES));
	return 0;
}
