/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nbd_proto.h: NBD wire constants and message layouts (fixed newstyle
 * handshake, simple replies). Source: NetworkBlockDevice/nbd doc/proto.md.
 *
 * Every integer on the wire is big-endian. The structs below are the exact
 * wire layouts (packed, sizes checked) and hold raw big-endian fields: fill
 * and read them only through the nbd_be*() helpers, never by plain access.
 * Only this header, nbd_handshake.c and nbd_conn.c know about raw bytes.
 */
#ifndef NBD_BRMR_NBD_PROTO_H
#define NBD_BRMR_NBD_PROTO_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

/* ---- handshake ---------------------------------------------------- */

#define NBD_MAGIC 0x4e42444d41474943ull     /* "NBDMAGIC" */
#define NBD_IHAVEOPT 0x49484156454f5054ull  /* "IHAVEOPT" */
#define NBD_REP_MAGIC 0x0003e889045565a9ull /* option reply magic */

/* Handshake flags (server, 16 bit). */
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)

/* Client flags (32 bit). Any other bit set: the server drops the client. */
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_KNOWN (NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)

/* Options. */
#define NBD_OPT_EXPORT_NAME 1
#define NBD_OPT_ABORT 2
#define NBD_OPT_LIST 3
#define NBD_OPT_STARTTLS 5
#define NBD_OPT_INFO 6
#define NBD_OPT_GO 7
#define NBD_OPT_STRUCTURED_REPLY 8
#define NBD_OPT_LIST_META_CONTEXT 9
#define NBD_OPT_SET_META_CONTEXT 10
#define NBD_OPT_EXTENDED_HEADERS 11

/* Option reply types. */
#define NBD_REP_ACK 1
#define NBD_REP_SERVER 2
#define NBD_REP_INFO 3
#define NBD_REP_ERR(n) ((1u << 31) + (n))
#define NBD_REP_ERR_UNSUP NBD_REP_ERR(1)
#define NBD_REP_ERR_POLICY NBD_REP_ERR(2)
#define NBD_REP_ERR_INVALID NBD_REP_ERR(3)
#define NBD_REP_ERR_PLATFORM NBD_REP_ERR(4)
#define NBD_REP_ERR_TLS_REQD NBD_REP_ERR(5)
#define NBD_REP_ERR_UNKNOWN NBD_REP_ERR(6)
#define NBD_REP_ERR_SHUTDOWN NBD_REP_ERR(7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD NBD_REP_ERR(8)
#define NBD_REP_ERR_TOO_BIG NBD_REP_ERR(9)

/* Information types of NBD_OPT_INFO / NBD_OPT_GO. */
#define NBD_INFO_EXPORT 0
#define NBD_INFO_NAME 1
#define NBD_INFO_DESCRIPTION 2
#define NBD_INFO_BLOCK_SIZE 3

/* Transmission flags (16 bit). */
#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_ROTATIONAL (1u << 4)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)

/* Longest string the spec allows (export names, messages). */
#define NBD_MAX_STRING 4096

/* ---- transmission ------------------------------------------------- */

#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u

/* Commands. */
#define NBD_CMD_READ 0
#define NBD_CMD_WRITE 1
#define NBD_CMD_DISC 2
#define NBD_CMD_FLUSH 3
#define NBD_CMD_TRIM 4
#define NBD_CMD_CACHE 5
#define NBD_CMD_WRITE_ZEROES 6
#define NBD_CMD_BLOCK_STATUS 7

/* Command flags (16 bit). */
#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_DF (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)

/* Error values of a reply: fixed by the spec, not the host's errno. */
#define NBD_SUCCESS 0
#define NBD_EPERM 1
#define NBD_EIO 5
#define NBD_ENOMEM 12
#define NBD_EINVAL 22
#define NBD_ENOSPC 28
#define NBD_EOVERFLOW 75
#define NBD_ENOTSUP 95
#define NBD_ESHUTDOWN 108

/* ---- wire layouts -------------------------------------------------- */

/* S: greeting of the fixed newstyle handshake. */
struct nbd_greeting {
	uint64_t magic;    /* NBD_MAGIC */
	uint64_t ihaveopt; /* NBD_IHAVEOPT */
	uint16_t flags;    /* NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES */
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_greeting) == 18, "nbd_greeting");

/* C: header of one option; followed by @c len bytes of data. */
struct nbd_opt_hdr {
	uint64_t magic; /* NBD_IHAVEOPT */
	uint32_t option;
	uint32_t len;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_opt_hdr) == 16, "nbd_opt_hdr");

/* S: header of one option reply; followed by @c len bytes of data. */
struct nbd_opt_reply {
	uint64_t magic; /* NBD_REP_MAGIC */
	uint32_t option;
	uint32_t type;
	uint32_t len;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_opt_reply) == 20, "nbd_opt_reply");

/* S: reply to NBD_OPT_EXPORT_NAME (then 124 zero bytes unless NO_ZEROES). */
struct nbd_export_name_reply {
	uint64_t size;
	uint16_t tflags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_export_name_reply) == 10, "nbd_export_name_reply");
#define NBD_EXPORT_NAME_PAD 124

/* S: payload of NBD_REP_INFO / NBD_INFO_EXPORT. */
struct nbd_info_export {
	uint16_t info; /* NBD_INFO_EXPORT */
	uint64_t size;
	uint16_t tflags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_info_export) == 12, "nbd_info_export");

/* S: payload of NBD_REP_INFO / NBD_INFO_BLOCK_SIZE. */
struct nbd_info_block_size {
	uint16_t info; /* NBD_INFO_BLOCK_SIZE */
	uint32_t minimum;
	uint32_t preferred;
	uint32_t maximum;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_info_block_size) == 14, "nbd_info_block_size");

/* C: request header; a WRITE is followed by @c len bytes of payload. */
struct nbd_request {
	uint32_t magic; /* NBD_REQUEST_MAGIC */
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint32_t len;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_request) == 28, "nbd_request");

/* S: simple reply; a successful READ is followed by the data. */
struct nbd_simple_reply {
	uint32_t magic; /* NBD_SIMPLE_REPLY_MAGIC */
	uint32_t error; /* NBD_E* */
	uint64_t cookie;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_simple_reply) == 16, "nbd_simple_reply");

/* ---- big-endian helpers --------------------------------------------
 * Members of the packed structs may be unaligned; the compiler handles
 * access to them, so convert whole fields with nbd_be*() / nbd_to_be*().
 * nbd_get_be*() read from a plain byte buffer (option data).
 */
static inline uint16_t nbd_be16(uint16_t v) { return be16toh(v); }
static inline uint32_t nbd_be32(uint32_t v) { return be32toh(v); }
static inline uint64_t nbd_be64(uint64_t v) { return be64toh(v); }
static inline uint16_t nbd_to_be16(uint16_t v) { return htobe16(v); }
static inline uint32_t nbd_to_be32(uint32_t v) { return htobe32(v); }
static inline uint64_t nbd_to_be64(uint64_t v) { return htobe64(v); }

/* Read a big-endian integer from an unaligned byte buffer. */
static inline uint16_t nbd_get_be16(const void *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static inline uint32_t nbd_get_be32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

#endif /* NBD_BRMR_NBD_PROTO_H */
