/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nbd_handshake.c: the fixed newstyle handshake (option haggling).
 *
 * Supported: NBD_OPT_GO and NBD_OPT_INFO (NBD_INFO_EXPORT always,
 * NBD_INFO_NAME, NBD_INFO_DESCRIPTION and NBD_INFO_BLOCK_SIZE when asked),
 * NBD_OPT_LIST, NBD_OPT_ABORT and the legacy NBD_OPT_EXPORT_NAME. Every
 * other option, including STARTTLS and STRUCTURED_REPLY (we send simple
 * replies only), is answered NBD_REP_ERR_UNSUP and haggling goes on.
 *
 * The handshake reads exactly what the client sent and nothing more, so
 * requests a client pipelines right after NBD_OPT_GO stay in the socket
 * for the transmission phase.
 */
#include "nbdb.h"
#include "nbd_proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

/* Largest option payload we read. The biggest legal one is NBD_OPT_GO with
 * a 4096-byte name and a few info requests; anything far above it is not a
 * client we can talk to, and we drop it instead of reading gigabytes. */
#define HS_OPT_MAX (NBD_MAX_STRING + 4096)

/* Options one connection may send before we give up on it: stops a client
 * from keeping a thread busy forever with an endless option stream. */
#define HS_OPT_COUNT_MAX 1024

/* A client silent (or not reading) for this long while haggling is
 * dropped, so connections that never finish the handshake do not pile up. Transmission has no such
 * limit: an idle but negotiated client is legitimate. */
#define HS_TIMEOUT_S 30

struct hs {
	int fd;
	const struct nbdb_export *ex;
	unsigned long id;
	bool fixed;     /* client speaks fixed newstyle */
	bool no_zeroes; /* client asked to skip the EXPORT_NAME padding */
	const atomic_bool *stopping;
	uint8_t data[HS_OPT_MAX];
};

static const char *opt_name(uint32_t opt)
{
	switch (opt) {
	case NBD_OPT_EXPORT_NAME: return "EXPORT_NAME";
	case NBD_OPT_ABORT: return "ABORT";
	case NBD_OPT_LIST: return "LIST";
	case NBD_OPT_STARTTLS: return "STARTTLS";
	case NBD_OPT_INFO: return "INFO";
	case NBD_OPT_GO: return "GO";
	case NBD_OPT_STRUCTURED_REPLY: return "STRUCTURED_REPLY";
	case NBD_OPT_LIST_META_CONTEXT: return "LIST_META_CONTEXT";
	case NBD_OPT_SET_META_CONTEXT: return "SET_META_CONTEXT";
	case NBD_OPT_EXTENDED_HEADERS: return "EXTENDED_HEADERS";
	default: return "unknown";
	}
}

/* Send one option reply: header plus up to two pieces of payload. */
static int hs_reply(struct hs *h, uint32_t opt, uint32_t type, const void *a,
		    size_t alen, const void *b, size_t blen)
{
	struct nbd_opt_reply r = {
		.magic = nbd_to_be64(NBD_REP_MAGIC),
		.option = nbd_to_be32(opt),
		.type = nbd_to_be32(type),
		.len = nbd_to_be32((uint32_t)(alen + blen)),
	};
	struct iovec iov[3] = {
		{ .iov_base = &r, .iov_len = sizeof(r) },
		{ .iov_base = (void *)a, .iov_len = alen },
		{ .iov_base = (void *)b, .iov_len = blen },
	};

	return nbdb_writev_full(h->fd, iov, 3);
}

/* An error reply with a message for humans (the spec allows one). */
static int hs_error(struct hs *h, uint32_t opt, uint32_t type, const char *msg)
{
	nbdb_log(NBDB_DEBUG, "conn %lu: option %s (%u): %s", h->id, opt_name(opt), opt,
		 msg);
	return hs_reply(h, opt, type, msg, strlen(msg), NULL, 0);
}

static bool name_matches(const struct hs *h, const uint8_t *name, uint32_t len)
{
	size_t elen = strlen(h->ex->name);

	if (len == 0)
		return true; /* the default export */
	return len == elen && memcmp(name, h->ex->name, elen) == 0;
}

static int send_info_export(struct hs *h, uint32_t opt)
{
	struct nbd_info_export ie = {
		.info = nbd_to_be16(NBD_INFO_EXPORT),
		.size = nbd_to_be64(h->ex->size),
		.tflags = nbd_to_be16(h->ex->tflags),
	};

	return hs_reply(h, opt, NBD_REP_INFO, &ie, sizeof(ie), NULL, 0);
}

static int send_info_string(struct hs *h, uint32_t opt, uint16_t info, const char *s)
{
	uint16_t be = nbd_to_be16(info);
	size_t len = strlen(s);

	if (len > NBD_MAX_STRING)
		len = NBD_MAX_STRING;
	return hs_reply(h, opt, NBD_REP_INFO, &be, sizeof(be), s, len);
}

static int send_info_block_size(struct hs *h, uint32_t opt)
{
	struct nbd_info_block_size bs = {
		.info = nbd_to_be16(NBD_INFO_BLOCK_SIZE),
		.minimum = nbd_to_be32(NBDB_BLOCK_MIN),
		.preferred = nbd_to_be32(NBDB_BLOCK_PREFERRED),
		.maximum = nbd_to_be32(NBDB_MAX_PAYLOAD),
	};

	return hs_reply(h, opt, NBD_REP_INFO, &bs, sizeof(bs), NULL, 0);
}

/*
 * NBD_OPT_INFO / NBD_OPT_GO. Data: 32-bit name length, name, 16-bit number
 * of info requests, that many 16-bit info types.
 * @return 1 to enter transmission (GO acknowledged), 0 to go on, <0 error.
 */
static int opt_info_go(struct hs *h, uint32_t opt, uint32_t len)
{
	const uint8_t *d = h->data;
	uint32_t namelen;
	uint16_t nreq;
	bool want_name = false, want_desc = false, want_bs = false;
	int rc;

	if (len < 6)
		return hs_error(h, opt, NBD_REP_ERR_INVALID, "option data too short");
	namelen = nbd_get_be32(d);
	if (namelen > len - 6)
		return hs_error(h, opt, NBD_REP_ERR_INVALID, "name length beyond option data");
	nreq = nbd_get_be16(d + 4 + namelen);
	if ((uint64_t)len != 4ull + namelen + 2 + 2ull * nreq)
		return hs_error(h, opt, NBD_REP_ERR_INVALID,
				"option length does not match its info requests");
	if (!name_matches(h, d + 4, namelen))
		return hs_error(h, opt, NBD_REP_ERR_UNKNOWN, "unknown export name");
	if (atomic_load(h->stopping))
		return hs_error(h, opt, NBD_REP_ERR_SHUTDOWN, "server is shutting down");

	for (unsigned i = 0; i < nreq; i++) {
		switch (nbd_get_be16(d + 4 + namelen + 2 + 2 * i)) {
		case NBD_INFO_NAME:
			want_name = true;
			break;
		case NBD_INFO_DESCRIPTION:
			want_desc = true;
			break;
		case NBD_INFO_BLOCK_SIZE:
			want_bs = true;
			break;
		default:
			/* NBD_INFO_EXPORT is always sent; unknown types are
			 * ignored, as the spec asks. */
			break;
		}
	}

	rc = send_info_export(h, opt);
	if (rc == 0 && want_name)
		rc = send_info_string(h, opt, NBD_INFO_NAME, h->ex->name);
	if (rc == 0 && want_desc)
		rc = send_info_string(h, opt, NBD_INFO_DESCRIPTION, h->ex->description);
	if (rc == 0 && want_bs)
		rc = send_info_block_size(h, opt);
	if (rc == 0)
		rc = hs_reply(h, opt, NBD_REP_ACK, NULL, 0, NULL, 0);
	if (rc < 0)
		return rc;
	return opt == NBD_OPT_GO ? 1 : 0;
}

/* NBD_OPT_LIST: one NBD_REP_SERVER per export, then ACK. */
static int opt_list(struct hs *h, uint32_t len)
{
	uint32_t namelen = (uint32_t)strlen(h->ex->name);
	uint32_t be = nbd_to_be32(namelen);
	int rc;

	if (len != 0)
		return hs_error(h, NBD_OPT_LIST, NBD_REP_ERR_INVALID, "LIST takes no data");
	rc = hs_reply(h, NBD_OPT_LIST, NBD_REP_SERVER, &be, sizeof(be), h->ex->name, namelen);
	if (rc == 0)
		rc = hs_reply(h, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0, NULL, 0);
	return rc;
}

/* NBD_OPT_EXPORT_NAME: no error path in the protocol, so a wrong name or a
 * server shutting down can only drop the connection.
 * @return 1 to transmit, <0 to drop. */
static int opt_export_name(struct hs *h, uint32_t len)
{
	static const uint8_t zeroes[NBD_EXPORT_NAME_PAD];
	struct nbd_export_name_reply r = {
		.size = nbd_to_be64(h->ex->size),
		.tflags = nbd_to_be16(h->ex->tflags),
	};
	struct iovec iov[2] = {
		{ .iov_base = &r, .iov_len = sizeof(r) },
		{ .iov_base = (void *)zeroes, .iov_len = h->no_zeroes ? 0 : sizeof(zeroes) },
	};
	int rc;

	if (!name_matches(h, h->data, len)) {
		nbdb_log(NBDB_INFO, "conn %lu: EXPORT_NAME: unknown export name, closing",
			 h->id);
		return -ENOENT;
	}
	if (atomic_load(h->stopping))
		return -ESHUTDOWN;
	rc = nbdb_writev_full(h->fd, iov, 2);
	return rc < 0 ? rc : 1;
}

static void log_read_error(const struct hs *h, int rc)
{
	/* A client that hangs up while haggling (nbdinfo --list may) is not
	 * worth a log line; one that stalls is. */
	if (rc == -EAGAIN) /* SO_RCVTIMEO expired */
		nbdb_log(NBDB_INFO, "conn %lu: handshake stalled for %d s, closing", h->id,
			 HS_TIMEOUT_S);
	else if (rc != -EPIPE)
		nbdb_log(NBDB_DEBUG, "conn %lu: handshake receive failed: %s", h->id,
			 strerror(-rc));
}

/* Bound every handshake read and write (a client that sends options but
 * never reads the replies fills the socket buffer); 0 removes the bound. */
static void set_timeouts(int fd, int seconds)
{
	struct timeval tv = { .tv_sec = seconds };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

enum nbdb_hs_result nbdb_handshake(int fd, const struct nbdb_export *ex,
				   unsigned long id, const atomic_bool *stopping)
{
	struct nbd_greeting g = {
		.magic = nbd_to_be64(NBD_MAGIC),
		.ihaveopt = nbd_to_be64(NBD_IHAVEOPT),
		.flags = nbd_to_be16(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES),
	};
	struct hs *h;
	uint32_t cflags;
	enum nbdb_hs_result res = NBDB_HS_ERROR;
	int rc;

	/* 8 KiB of option data: on the heap, not on the thread's stack. */
	h = calloc(1, sizeof(*h));
	if (!h) {
		nbdb_log(NBDB_ERR, "conn %lu: out of memory in handshake", id);
		return NBDB_HS_ERROR;
	}
	h->fd = fd;
	h->ex = ex;
	h->id = id;
	h->stopping = stopping;

	set_timeouts(fd, HS_TIMEOUT_S);
	rc = nbdb_write_full(fd, &g, sizeof(g));
	if (rc == 0)
		rc = nbdb_read_full(fd, &cflags, sizeof(cflags));
	if (rc < 0) {
		log_read_error(h, rc);
		res = rc == -EPIPE ? NBDB_HS_CLOSE : NBDB_HS_ERROR;
		goto out;
	}
	cflags = nbd_be32(cflags);
	if (cflags & ~NBD_FLAG_C_KNOWN) {
		/* The spec: the server MUST drop a client with unknown flags. */
		nbdb_log(NBDB_INFO, "conn %lu: unknown client flags 0x%x, closing", id,
			 cflags);
		goto out;
	}
	h->fixed = cflags & NBD_FLAG_C_FIXED_NEWSTYLE;
	h->no_zeroes = cflags & NBD_FLAG_C_NO_ZEROES;

	for (unsigned n = 0;; n++) {
		struct nbd_opt_hdr oh;
		uint32_t opt, len;

		if (n == HS_OPT_COUNT_MAX) {
			nbdb_log(NBDB_INFO, "conn %lu: too many options, closing", id);
			goto out;
		}
		rc = nbdb_read_full(fd, &oh, sizeof(oh));
		if (rc < 0) {
			log_read_error(h, rc);
			res = rc == -EPIPE ? NBDB_HS_CLOSE : NBDB_HS_ERROR;
			goto out;
		}
		if (nbd_be64(oh.magic) != NBD_IHAVEOPT) {
			nbdb_log(NBDB_INFO, "conn %lu: bad option magic, closing", id);
			goto out;
		}
		opt = nbd_be32(oh.option);
		len = nbd_be32(oh.len);
		if (len > HS_OPT_MAX) {
			nbdb_log(NBDB_INFO, "conn %lu: option %s (%u) with %u bytes of data, closing",
				 id, opt_name(opt), opt, len);
			goto out;
		}
		rc = nbdb_read_full(fd, h->data, len);
		if (rc < 0) {
			log_read_error(h, rc);
			goto out;
		}
		nbdb_log(NBDB_DEBUG, "conn %lu: option %s (%u), %u bytes", id, opt_name(opt),
			 opt, len);

		if (!h->fixed && opt != NBD_OPT_EXPORT_NAME) {
			/* Plain newstyle has no error replies: all we can do for
			 * anything but EXPORT_NAME is to hang up. */
			nbdb_log(NBDB_INFO, "conn %lu: option %s from a non-fixed-newstyle client, closing",
				 id, opt_name(opt));
			goto out;
		}

		switch (opt) {
		case NBD_OPT_EXPORT_NAME:
			rc = opt_export_name(h, len);
			if (rc == 1)
				res = NBDB_HS_TRANSMIT;
			goto out;
		case NBD_OPT_ABORT:
			/* Best effort: the client may already be gone. */
			(void)hs_reply(h, opt, NBD_REP_ACK, NULL, 0, NULL, 0);
			res = NBDB_HS_CLOSE;
			goto out;
		case NBD_OPT_LIST:
			rc = opt_list(h, len);
			break;
		case NBD_OPT_INFO:
		case NBD_OPT_GO:
			rc = opt_info_go(h, opt, len);
			if (rc == 1) {
				res = NBDB_HS_TRANSMIT;
				goto out;
			}
			break;
		case NBD_OPT_STARTTLS:
			rc = hs_error(h, opt, NBD_REP_ERR_UNSUP, "TLS is not supported");
			break;
		case NBD_OPT_STRUCTURED_REPLY:
			rc = hs_error(h, opt, NBD_REP_ERR_UNSUP,
				      "only simple replies are supported");
			break;
		default:
			rc = hs_error(h, opt, NBD_REP_ERR_UNSUP, "option not supported");
			break;
		}
		if (rc < 0)
			goto out;
	}
out:
	if (res == NBDB_HS_TRANSMIT)
		set_timeouts(fd, 0);
	free(h);
	return res;
}
